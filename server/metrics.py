"""The Prometheus endpoint: a collector that reads the server's live state at scrape time.

Nothing here runs in the tick. The core already counts what an operator watches (tick times,
rejections by reason, connects and disconnects, detections); the collector reads those counters
when Prometheus scrapes, on the HTTP server's own thread, and the kernel's socket figures come
from ``/proc`` at the same moment. The only work done as things happen is counting sanction
decisions (a dict update per decision, which the pipeline delivers only after a detection).

The collector is registered on a private ``CollectorRegistry`` (one per server, no global state);
the process collector (CPU, memory, open files) and the platform collector go on it too.

Reads from the scrape thread see the core between two of its writes or in the middle of a
tick: counters are copied whole (a dict copy is one step under the GIL), so a scrape is
consistent per metric, though two metrics may be a tick apart.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from anticheat.judgement.sanctions import SanctionDecision, SanctionLevel
from lagcomp.shot import RewindDecision
from server.core import ServerCore
from server.transport import UdpServer

__all__ = ["REWIND_COUNTER_PREFIX", "MetricsConfig", "MetricsServer", "SanctionTally", "ServerCollector"]

log = logging.getLogger(__name__)

REWIND_COUNTER_PREFIX = "rewind_"
"""``core.counters`` keys ``rewind_<decision>`` (a RewindDecision value) count shots by the
rewind policy's decision; the metric shows every decision, 0 where the core has no count."""

_DISCONNECT_PREFIX = "disconnect_"


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """Where the endpoint listens: ``host`` (127.0.0.1: loopback only unless asked), ``port``
    (0: any free one)."""

    host: str = "127.0.0.1"
    port: int = 9464


class SanctionTally:
    """Counts the pipeline's sanction decisions: every decision by its recommended level, and
    each change of a player's recommended level by the level it changed to."""

    def __init__(self) -> None:
        self.decisions: Counter[str] = Counter()
        self.changes: Counter[str] = Counter()
        self._level: dict[str, SanctionLevel] = {}

    def __call__(self, decision: SanctionDecision) -> None:
        level = decision.recommended
        self.decisions[level.name.lower()] += 1
        if self._level.get(decision.player, SanctionLevel.LOG) != level:
            self._level[decision.player] = level
            self.changes[level.name.lower()] += 1


class ServerCollector:
    """A Prometheus collector of one ServerCore (and, when given, its transport).

    Args:
        core: the server. transport: its real-time transport (traffic, skipped ticks, kernel
            drops); None for a core driven otherwise (virtual time). sanctions: the tally
            subscribed to the core's pipeline decisions (None: no sanction metrics).
    """

    def __init__(self, core: ServerCore, transport: UdpServer | None = None,
                 sanctions: SanctionTally | None = None) -> None:
        self.core = core
        self.transport = transport
        self.sanctions = sanctions

    def describe(self) -> Iterable[Metric]:
        # No collection at registration (the registry asks for names to detect clashes).
        return []

    def collect(self) -> Iterator[Metric]:
        """The metrics, read now."""
        yield from self._ticks()
        yield from self._players()
        yield from self._traffic()
        yield from self._anticheat()

    def _ticks(self) -> Iterator[Metric]:
        stats = self.core.tick_stats
        buckets, total_s = stats.histogram()
        yield HistogramMetricFamily(
            "referee_tick_duration_seconds", "Wall time of each server tick's processing (s).",
            buckets=[(_le(bound), float(n)) for bound, n in buckets], sum_value=total_s,
        )
        yield CounterMetricFamily("referee_tick_overruns", "Ticks whose processing took longer than the tick budget.",
                                  value=stats.overruns)
        yield GaugeMetricFamily("referee_tick_budget_seconds", "The tick budget: 1 / tick rate (s).", value=stats.budget_s)
        phases = CounterMetricFamily("referee_tick_phase_seconds", "Wall time spent in each phase of the tick (s).",
                                     labels=["phase"])
        for phase, seconds in stats.phase_totals_s().items():
            phases.add_metric([phase], seconds)
        yield phases
        if self.transport is not None:
            yield CounterMetricFamily("referee_ticks_skipped", "Ticks skipped after a stall (the loop's catch-up limit).",
                                      value=self.transport.skipped_ticks)

    def _players(self) -> Iterator[Metric]:
        core = self.core
        counters = dict(core.counters)
        yield GaugeMetricFamily("referee_players", "Connected players.", value=len(core.by_slot))
        yield CounterMetricFamily("referee_connects", "Players who completed the handshake.",
                                  value=counters.get("connects", 0))
        gone = CounterMetricFamily("referee_disconnects", "Players who left, by reason.", labels=["reason"])
        for key, n in sorted(counters.items()):
            if key.startswith(_DISCONNECT_PREFIX):
                gone.add_metric([key[len(_DISCONNECT_PREFIX):]], n)
        yield gone
        rewinds = CounterMetricFamily("referee_rewind_decisions", "Shots by the lag-compensation rewind decision.",
                                      labels=["decision"])
        for decision in RewindDecision:
            rewinds.add_metric([decision.value], counters.get(REWIND_COUNTER_PREFIX + decision.value, 0))
        yield rewinds
        commands = CounterMetricFamily("referee_commands", "Client commands: applied once (received) or repeated.",
                                       labels=["kind"])
        commands.add_metric(["received"], counters.get("commands_received", 0))
        commands.add_metric(["redundant"], counters.get("commands_redundant", 0))
        yield commands

    def _traffic(self) -> Iterator[Metric]:
        rejected = CounterMetricFamily("referee_datagrams_rejected", "Datagrams (or their commands and shots) refused, "
                                       "by reason (PROTOCOL.md section 8).", labels=["reason"])
        for reason, n in sorted(dict(self.core.rejections).items()):
            rejected.add_metric([reason], n)
        yield rejected
        t = self.transport
        if t is None:
            return
        yield CounterMetricFamily("referee_datagrams_received", "Datagrams read from the socket.",
                                  value=t.datagrams_received)
        yield CounterMetricFamily("referee_received_bytes", "UDP payload bytes read.", value=t.bytes_received)
        yield CounterMetricFamily("referee_datagrams_source_limited", "Datagrams dropped undecoded by the transport's "
                                  "per-source limit.", value=t.source_limited)
        yield CounterMetricFamily("referee_datagrams_sent", "Datagrams handed to the socket.", value=t.datagrams_sent)
        yield CounterMetricFamily("referee_sent_bytes", "UDP payload bytes sent.", value=t.bytes_sent)
        yield CounterMetricFamily("referee_send_errors", "Sends the socket refused.", value=t.send_errors)
        kernel = t.kernel_stats()
        if kernel is not None:
            yield CounterMetricFamily("referee_kernel_receive_drops", "Datagrams the kernel dropped at the server's "
                                      "socket (receive buffer full).", value=kernel.drops)
            yield GaugeMetricFamily("referee_socket_receive_queue_bytes", "Bytes waiting in the socket's receive queue.",
                                    value=kernel.rx_queue_bytes)
            yield GaugeMetricFamily("referee_socket_receive_buffer_bytes", "The socket's receive buffer (SO_RCVBUF).",
                                    value=kernel.rcvbuf_bytes)

    def _anticheat(self) -> Iterator[Metric]:
        pipeline = self.core.pipeline
        if pipeline is None:
            return
        stats = pipeline.stats()
        found = CounterMetricFamily("referee_detections", "Detections by detector and kind.", labels=["detector", "kind"])
        for (detector, kind), n in sorted(stats.detections.items()):
            found.add_metric([detector, kind], n)
        yield found
        errors = CounterMetricFamily("referee_pipeline_errors", "Exceptions in detectors or subscribers, counted and "
                                     "skipped.", labels=["where"])
        for where, n in sorted(stats.errors.items()):
            errors.add_metric([where], n)
        yield errors
        skips = CounterMetricFamily("referee_detector_skips", "Events a detector saw and did not judge, by reason "
                                    "(a bad link, an unknown weapon, a bait shot aimed before the kill...).",
                                    labels=["detector", "reason"])
        for (detector, reason), n in sorted(stats.skips.items()):
            skips.add_metric([detector, reason], n)
        yield skips
        if self.sanctions is None:
            return
        decisions = CounterMetricFamily("referee_sanction_decisions", "Sanction decisions after detections, by the "
                                        "recommended level.", labels=["level"])
        changes = CounterMetricFamily("referee_sanction_recommendations", "Changes of a player's recommended "
                                      "sanction, by the new level.", labels=["level"])
        made, changed = dict(self.sanctions.decisions), dict(self.sanctions.changes)
        for level in SanctionLevel:
            name = level.name.lower()
            decisions.add_metric([name], made.get(name, 0))
            changes.add_metric([name], changed.get(name, 0))
        yield decisions
        yield changes


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


class MetricsServer:
    """The ``/metrics`` endpoint of one server: a private registry and prometheus_client's
    HTTP server on a thread of its own. :meth:`close` stops it and unsubscribes."""

    def __init__(self, core: ServerCore, transport: UdpServer | None, config: MetricsConfig) -> None:
        self.sanctions = SanctionTally()
        self._unsubscribe = core.pipeline.subscribe_decisions(self.sanctions) if core.pipeline is not None else None
        self.registry = CollectorRegistry()
        self.registry.register(ServerCollector(core, transport, self.sanctions if core.pipeline is not None else None))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._httpd: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        try:
            self._httpd, self._thread = start_http_server(config.port, addr=config.host, registry=self.registry)
        except BaseException:
            self._release()
            raise
        log.info("metrics on http://%s:%d/metrics", *self.address)

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port)."""
        if self._httpd is None:
            raise RuntimeError("metrics server closed")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    def close(self) -> None:
        """Stop serving (blocks up to the HTTP server's poll interval, 0.5 s) and unsubscribe."""
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join()
        self._release()

    def _release(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
