"""Capture what one logger emits, whatever setup_logging did to propagation (caplog relies on propagation)."""

import contextlib
import logging


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]):
        super().__init__()
        self.lines = lines

    def emit(self, record):
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def log_lines(logger_name: str):
    """`with log_lines("detect.data.records.cache") as lines:` collects the messages of that logger into `lines`."""
    lines: list[str] = []
    handler = _Lines(lines)
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(min(level or logging.INFO, logging.INFO))  # INFO lines whether or not a tool set up logging
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
