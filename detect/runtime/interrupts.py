"""Ctrl-C that never cuts a group of writes in half (detect.predict: a frame's annotated image, txt and json).

Inside `deferred_interrupt()` a SIGINT is only noted; when the block ends, KeyboardInterrupt is raised as if the
signal had come then. Outside such blocks Ctrl-C interrupts at once, as usual (a long model pass is not waited
for). Only the main thread receives signals, so elsewhere the block defers nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def deferred_interrupt():
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:  # what the signal would have done: Python's handler raises KeyboardInterrupt
        if callable(previous):
            previous(signal.SIGINT, None)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt
