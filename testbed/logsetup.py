"""Logging for the ``referee`` command: a human format by default, JSON lines with ``--log-json``.

A JSON line holds ``time`` (ISO 8601, UTC, milliseconds), ``level``, ``logger``, ``message``,
every structured field the call passed with ``extra=`` (``server.activity_log`` passes
``event``, ``player``, ``check``...) and ``exc_info`` (the formatted traceback) when there is one.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

__all__ = ["HUMAN_FORMAT", "JsonFormatter", "configure_logging"]

HUMAN_FORMAT = "%(levelname)s %(name)s: %(message)s"
HUMAN_FORMAT_TIMED = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The human format with the time: for a long-running server, whose lines are read later."""

_LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _plain(value: Any) -> Any:
    """A JSON-able form of an ``extra`` value (non-finite floats as strings, others by ``str``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (keys: time, level, logger, message, extras)."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            # Private attributes are other libraries' bookkeeping, not ``extra`` fields: Ray's
            # record factory stamps ``_ray_timestamp_ns`` on every record once it is imported.
            if key not in _RECORD_FIELDS and key not in doc and not key.startswith("_"):
                doc[key] = _plain(value)
        if record.exc_info:
            doc["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["exc_info"] = record.exc_text
        if record.stack_info:
            doc["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(doc, ensure_ascii=False, allow_nan=False)


def configure_logging(verbosity: int, stream: TextIO, *, json_lines: bool = False, timed: bool = False,
                      info_loggers: Iterable[str] = ()) -> None:
    """Log to ``stream``: WARNING and above (``verbosity`` 1: INFO, 2: DEBUG), as JSON lines or
    in the human format (``timed``: with the time). ``info_loggers`` log at INFO even at
    verbosity 0 (``serve``'s activity: what an operator of a server reads).

    Like ``logging.basicConfig`` (which it calls), it leaves a root logger that already has
    handlers as it is (an embedding application's, or pytest's)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(HUMAN_FORMAT_TIMED if timed else HUMAN_FORMAT))
    logging.basicConfig(level=_LEVELS[min(max(verbosity, 0), 2)], handlers=[handler])
    for name in info_loggers:
        # At -vv these stay unset, so they follow the root's DEBUG.
        logging.getLogger(name).setLevel(logging.INFO if verbosity < 2 else logging.NOTSET)
