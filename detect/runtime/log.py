"""Logging set-up: rank-prefixed records, INFO on rank 0 only, warnings and errors on every rank."""

from __future__ import annotations

import logging
import sys


class _RankFilter(logging.Filter):
    def __init__(self, rank: int, world_size: int):
        super().__init__()
        self.rank = rank
        self.prefix = f"[rank {rank}] " if world_size > 1 else ""

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank_prefix = self.prefix
        return self.rank == 0 or record.levelno >= logging.WARNING


class _StdoutHandler(logging.StreamHandler):
    """Writes to sys.stdout as it is at each record, not as it was at set-up (a caller, or a test's capture,
    may swap it; a stream kept from before could be closed by then)."""

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, value):
        pass


def setup_logging(rank: int = 0, world_size: int = 1, level: int = logging.INFO, logfile=None) -> None:
    """Configure the `detect` logger once per process (idempotent: earlier handlers are replaced)."""
    logger = logging.getLogger("detect")
    for h in list(logger.handlers):
        logger.removeHandler(h)
    fmt = logging.Formatter("%(rank_prefix)s%(message)s")
    handlers = [_StdoutHandler()]
    if logfile is not None:
        handlers.append(logging.FileHandler(logfile))
    for h in handlers:
        h.setFormatter(fmt)
        h.addFilter(_RankFilter(rank, world_size))
        logger.addHandler(h)
    logger.setLevel(level)
    logger.propagate = False
