"""The transport's receive path on 127.0.0.1: the receive buffer it asks for, draining a burst in
few wake-ups, garbage inside a burst, and the per-source limit in front of the core."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

import pytest

from server import protocol as proto
from server.rate_limit import RateLimitConfig, SourceRateLimiter
from server.socket_stats import udp_socket_stats
from server.transport import TransportConfig, UdpServer, size_receive_buffer
from tests.server_harness import make_core

_GARBAGE = b"\xc1 not msgpack"  # 0xc1 is never used by msgpack: counted as not_msgpack


def _sender() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def _connect_datagram(name: str) -> bytes:
    return proto.encode(proto.Connect(nonce=os.urandom(16), name=name))


async def _settle(server: UdpServer, expected: int, rounds: int = 200) -> None:
    """Let the loop run until the server has read ``expected`` datagrams (or give up)."""
    for _ in range(rounds):
        if server.datagrams_received >= expected:
            return
        await asyncio.sleep(0.005)


def test_receive_buffer_is_applied_or_reported_capped(caplog: pytest.LogCaptureFixture) -> None:
    asked = 2 * 1024 * 1024
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, caplog.at_level(logging.INFO, "server.transport"):
        buf = size_receive_buffer(sock, asked)
        assert buf.effective_bytes == sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        if buf.capped:
            assert any(r.levelno == logging.WARNING and "capped" in r.getMessage() for r in caplog.records)
        else:
            assert buf.effective_bytes >= asked
            assert not any(r.levelno == logging.WARNING for r in caplog.records)


def test_default_kept_when_no_size_is_asked() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        default = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        buf = size_receive_buffer(sock, None)
    assert buf.asked_bytes is None and buf.effective_bytes == default and not buf.capped


async def test_server_socket_reports_its_buffer_in_stats() -> None:
    core = make_core()
    async with UdpServer(core, TransportConfig(receive_buffer_bytes=3 * 1024 * 1024, run_ticks=False)) as server:
        assert server.socket is not None
        effective = server.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        stats = server.stats()
    assert stats["rcvbuf_bytes"] == effective
    assert stats["rcvbuf_asked_bytes"] == 3 * 1024 * 1024
    assert stats["rcvbuf_capped"] or effective >= 3 * 1024 * 1024
    assert stats["kernel_drops"] == 0  # kept from the socket's last figures after stop


async def test_a_burst_sent_before_the_loop_reads_is_drained_in_few_wakeups() -> None:
    n, per_wakeup = 1000, 256
    core = make_core()
    config = TransportConfig(run_ticks=False, reads_per_wakeup=per_wakeup, source_rate_factor=None)
    async with UdpServer(core, config) as server:
        tx = _sender()
        # All sent before the loop gets a chance to read: they wait in the kernel's buffer.
        for _ in range(n):
            tx.sendto(_GARBAGE, server.address)
        assert server.socket is not None
        queued = udp_socket_stats(server.socket)
        assert queued is not None and queued.rx_queue_bytes > 0 and queued.drops == 0
        await _settle(server, n)
        tx.close()
        stats = server.stats()
    assert server.datagrams_received == n
    assert core.rejections["not_msgpack"] == n
    # Every wake-up read until the socket was empty or its budget was spent.
    assert server.wakeups == -(-n // per_wakeup)
    assert stats["kernel_drops"] == 0


async def test_default_buffer_drops_a_burst_the_large_one_holds() -> None:
    n = 3000
    received = {}
    for size in (None, 8 * 1024 * 1024):
        core = make_core()
        async with UdpServer(core, TransportConfig(run_ticks=False, receive_buffer_bytes=size,
                                                   source_rate_factor=None)) as server:
            tx = _sender()
            for _ in range(n):
                tx.sendto(_GARBAGE, server.address)
            await _settle(server, n, rounds=40)
            tx.close()
            drops = server.stats()["kernel_drops"]
        assert server.datagrams_received + drops == n  # every datagram either read or dropped by the kernel
        received[size] = server.datagrams_received
    assert received[8 * 1024 * 1024] == n
    assert received[None] < n  # a few hundred small datagrams fill the kernel's default buffer


async def test_garbage_in_a_burst_is_counted_and_does_not_stop_the_drain() -> None:
    core = make_core()
    config = TransportConfig(run_ticks=False, reads_per_wakeup=64, source_rate_factor=None)
    async with UdpServer(core, config) as server:
        tx = _sender()
        tx.setblocking(False)
        garbage = [_GARBAGE, b"", b"\x93\x02\x63\x01", b"\x00" * 1500, b"\x91\x02"]
        sent_garbage = 0
        for i in range(300):
            tx.sendto(garbage[i % len(garbage)], server.address)
            sent_garbage += 1
            if i % 50 == 49:  # a real request among the garbage: it must be answered
                tx.sendto(_connect_datagram(f"c{i}"), server.address)
        await _settle(server, 306)
        challenges = 0
        for _ in range(6):
            for _ in range(50):
                try:
                    data = tx.recv(2048)
                    break
                except BlockingIOError:
                    await asyncio.sleep(0.005)
            else:
                break
            challenges += isinstance(proto.decode_server(data), proto.Challenge)
        tx.close()
    assert server.datagrams_received == 306
    assert challenges == 6
    counted = sum(v for k, v in core.rejections.items())
    assert counted == sent_garbage
    assert core.rejections["not_msgpack"] == 60 + 60  # the 0xc1 ones and the empty ones
    assert core.rejections["too_large"] == 60
    assert "internal_error" not in core.rejections


async def test_one_flooding_source_is_cut_before_the_core_and_others_are_served() -> None:
    n = 2000
    # Tiny per-client limits so that the refill during the test is negligible: the transport
    # allows 2 packets/s with a burst of 20 per source (source_rate_factor 2).
    core = make_core(rate_limit=RateLimitConfig(packets_per_s=1.0, packet_burst=10.0, bytes_per_s=1e6, byte_burst=1e6))
    loop = asyncio.get_running_loop()
    async with UdpServer(core, TransportConfig(run_ticks=False, source_rate_factor=2.0)) as server:
        flooder, honest = _sender(), _sender()
        t0 = loop.time()
        for _ in range(n):
            flooder.sendto(_GARBAGE, server.address)
        honest.sendto(_connect_datagram("honest"), server.address)
        await _settle(server, n + 1)
        elapsed = loop.time() - t0
        honest.settimeout(2.0)
        answer = proto.decode_server(honest.recv(2048))
        flooder.close()
        honest.close()
    assert isinstance(answer, proto.Challenge)  # the other source got through in the same burst
    refill = 2.0 * (elapsed + 1.0)
    assert n - 20 - refill <= server.source_limited <= n - 20
    assert core.rejections["rate_source"] == server.source_limited
    # Only what passed the source limit was decoded.
    assert core.rejections["not_msgpack"] == n - server.source_limited


def test_source_limiter_bucket_refill_and_bounded_table() -> None:
    lim = SourceRateLimiter(packets_per_s=10.0, burst=5.0, max_sources=2)
    a, b, c = ("10.0.0.1", 1), ("10.0.0.2", 1), ("10.0.0.3", 1)
    assert [lim.allow(a, 0.0) for _ in range(7)] == [True] * 5 + [False] * 2
    assert lim.allow(a, 0.1)  # 0.1 s at 10/s earns one packet
    assert not lim.allow(a, 0.1)
    assert lim.allow(b, 0.1)
    assert len(lim) == 2
    # Table full and nobody idle long enough to forget: a new source passes, untracked.
    assert all(lim.allow(c, 0.2) for _ in range(20))
    assert len(lim) == 2
    # 0.5 s idle refills a 5-packet bucket at 10/s: such sources are forgotten to make room.
    assert lim.allow(c, 5.0)
    assert len(lim) == 1
    assert [lim.allow(c, 5.0) for _ in range(5)] == [True] * 4 + [False]
    with pytest.raises(ValueError):
        SourceRateLimiter(packets_per_s=0.0, burst=5.0)
