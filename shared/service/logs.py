"""Structured logs: one JSON object per line, with whatever context the caller binds (job, kind, replica)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

_RESERVED = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}
# The job a task is working on: every line it logs carries it, including lines from shared code it calls.
current_job: ContextVar[str | None] = ContextVar("current_job", default=None)


@contextlib.contextmanager
def about_job(name: str | None) -> Iterator[None]:
    token = current_job.set(name)
    try:
        yield
    finally:
        current_job.reset(token)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str, replica: str) -> None:
        super().__init__()
        self.base = {"service": service, "replica": replica}

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **self.base,
        }
        job = current_job.get()
        if job:
            entry["job"] = job
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _not_tls_half_close(record: logging.LogRecord) -> bool:
    # nats-py's connection asks to stay half open when the server ends a TLS connection, which asyncio
    # cannot do: it says so at every close of a TLS connection to NATS, and nothing is wrong.
    return record.msg != "returning true from eof_received() has no effect when using ssl"


def quiet_tls_close() -> None:
    """Leave out asyncio's warning that every close of a TLS connection to NATS brings."""
    asyncio_log = logging.getLogger("asyncio")
    if _not_tls_half_close not in asyncio_log.filters:
        asyncio_log.addFilter(_not_tls_half_close)


def setup_logging(service: str, replica: str, level: str = "INFO", *, fmt: str = "json") -> None:
    quiet_tls_close()
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(service, replica))
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {service} %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("urllib3", "kubernetes", "aiohttp.access", "nats"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
