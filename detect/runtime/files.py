"""Atomic file writes: every file the project writes appears whole or not at all; and a lock file for work that
independent processes must not do at once.

The content goes to a temp file in the target's folder (same file system, so the rename is atomic), is
flushed and fsynced, then `os.replace`d over the target: readers never see a partial file, and a write that
fails or is killed leaves the previous file intact and no temp file behind.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object],
                 before_replace: Callable[[Path], object] | None = None) -> None:
    """Call `write(file)` on a binary temp file beside `path`, then put it in place of `path`.
    `before_replace(temp path)` runs once the temp file is complete and synced (to verify it, or to set the old
    file aside); when it raises, the temp file is removed and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    # not tempfile.mkstemp: its files are private (0600); these get the permissions of any new file (umask)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if before_replace is not None:
            before_replace(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | Path, text: str) -> None:
    """`text` encoded as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def exclusive_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (created if missing) for the block: processes that are not one
    torch.distributed group (two searches' trials, two users' jobs) wait for each other. Released when the block
    ends or the process dies; where the platform has no flock (Windows), the block runs unlocked."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
