"""Which rank failed the group: a heartbeat and a progress mark per rank in the process group's key-value store.

A collective that times out (a rank hangs) or whose peer's connection drops (a rank or its whole node is gone)
raises on the ranks that did arrive, but gloo's message names an address, not a rank. Each rank therefore keeps
two keys in the group's store (the TCPStore every rank already talks to):
- `alive/<rank>`: a counter a daemon thread bumps every `HEARTBEAT_S`; it stops moving when the process dies.
- `at/<rank>`: the position the training loop reached before the last collective it entered, and how long the
  rank took to get there from the one before (`Beacon.post` records both; the same thread writes them, so the
  training step itself makes no network round trip).
`Beacon.explain()` reads both after a failure: a counter that no longer moves is a lost process (or node), a
live rank whose position is behind is one that hangs. Counters and local durations, not clock times: nodes' clocks
may differ. Which side notices first depends on timing (the waiting rank's own timeout, or the late rank's
collective meeting a closed connection), so the late rank also judges itself: a gap between two of its own
collectives longer than the group's timeout means the others gave up waiting for it, even when the store (and
with it every other clue) is already gone.
This module does not import torch.distributed; `detect.runtime.dist` hands it the store.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

HEARTBEAT_S = 1.0
# how long `explain` watches the counters: several beats, so that a live rank's counter surely moves
WATCH_S = 3.5 * HEARTBEAT_S
PREFIX = "detect/beacon"


@dataclass(frozen=True)
class Mark:
    """A position reached (increasing), what it is, and the seconds since the rank's previous mark."""

    position: int
    label: str
    gap_s: float = 0.0

    def encode(self) -> str:
        return f"{self.position} {self.gap_s:.3f} {self.label}"

    @classmethod
    def decode(cls, text: str | None) -> Mark:
        if not text:
            return cls(-1, "nothing yet")
        position, gap, label = text.split(" ", 2)
        return cls(int(position), label, float(gap))


class Beacon:
    """This rank's heartbeat and progress in `store`; `explain()` names the ranks that failed the group.
    The thread writes both (about a second apart): `post` only records the position, so the training step makes
    no network round trip for it. `timeout_s`: the group's collective timeout (None: unknown)."""

    def __init__(self, store, rank: int, world_size: int, node_rank: int, timeout_s: float | None = None):
        self.store, self.rank, self.world_size, self.timeout_s = store, rank, world_size, timeout_s
        self.at = Mark(0, "start")  # replaced whole, read by the thread
        self.before = self.at  # the mark before `at`
        self._posted = time.monotonic()
        self._sent: Mark | None = None
        self._beats = 0
        self._stop = threading.Event()
        self.me = f"node {node_rank}, host {socket.gethostname()}, pid {os.getpid()}"
        store.set(self._key("node", rank), self.me)
        self._beat()
        self._thread = threading.Thread(target=self._run, name="detect-heartbeat", daemon=True)
        self._thread.start()

    def _key(self, kind: str, rank: int) -> str:
        return f"{PREFIX}/{kind}/{rank}"

    def _beat(self) -> None:
        self._beats += 1
        self.store.set(self._key("alive", self.rank), str(self._beats))
        at = self.at
        if at != self._sent:
            self.store.set(self._key("at", self.rank), at.encode())
            self._sent = at

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._beat()
            except Exception:  # the store went away with its host: nothing left to tell
                return

    def post(self, position: int, label: str) -> None:
        """Record that this rank reached `position` (increasing; `label` says what it is, for the message)."""
        now = time.monotonic()
        self.before, self.at = self.at, Mark(position, label, now - self._posted)
        self._posted = now

    def close(self) -> None:
        """Stop the heartbeat; the last position is published first (a peer that explains later reads it)."""
        self._stop.set()
        self._thread.join(timeout=2 * HEARTBEAT_S)
        try:
            if self.at != self._sent:
                self.store.set(self._key("at", self.rank), self.at.encode())
        except Exception:  # the store is gone: nobody is left to read it
            pass

    def _read(self, kind: str, rank: int) -> str | None:
        key = self._key(kind, rank)
        return self.store.get(key).decode() if self.store.check([key]) else None

    def _snapshot(self) -> dict[int, tuple[str | None, str | None, str | None]]:
        return {r: (self._read("node", r), self._read("alive", r), self._read("at", r))
                for r in range(self.world_size) if r != self.rank}

    def _late(self, gap_s: float) -> bool:
        return self.timeout_s is not None and gap_s > self.timeout_s

    def _self_line(self) -> str | None:
        """This rank, when it took longer than the timeout between its last two collectives."""
        if not self._late(self.at.gap_s):
            return None
        return (f"rank {self.rank} ({self.me}; this rank) arrived late: it took {self.at.gap_s:.1f} s from "
                f"{self.before.label} to {self.at.label}, longer than the group's {self.timeout_s:g} s timeout "
                f"(--dist-timeout), so the others stopped waiting for it (a hang or long work on this rank)")

    def explain(self) -> str:
        """One line per rank that failed the group (gone, behind or late, this one included); '' when none is
        found. Takes `WATCH_S`."""
        own = self._self_line()
        try:
            before = self._snapshot()
            time.sleep(WATCH_S)
            after = self._snapshot()
        except Exception as e:
            if own is not None:
                return own
            return (f"the group's store is unreachable ({type(e).__name__}): the node that hosts it (torchrun's "
                    f"node 0 or the rendezvous endpoint) is gone")
        lines = [own] if own is not None else []
        for r, (node, alive, at) in after.items():
            line = self._peer_line(r, node, alive == before[r][1] or alive is None, Mark.decode(at))
            if line is not None:
                lines.append(line)
        return "; ".join(lines)

    def _peer_line(self, r: int, node: str | None, stopped: bool, mark: Mark) -> str | None:
        where = f"rank {r} ({node or 'node unknown'})"
        if stopped:
            return (f"{where} is gone: its heartbeat stopped at {mark.label} (process killed or node lost)")
        if mark.position < self.at.position:
            return (f"{where} is alive but did not arrive: it is at {mark.label}, rank {self.rank} waited at "
                    f"{self.at.label} (a hang on that rank)")
        if mark.position == self.at.position and self._late(mark.gap_s):
            return (f"{where} arrived late at {mark.label}: {mark.gap_s:.1f} s after its previous collective, "
                    f"longer than the group's {self.timeout_s:g} s timeout (a hang or long work on that rank)")
        return None


def start_beacon(store, rank: int, world_size: int, node_rank: int, timeout_s: float | None = None) -> Beacon | None:
    """A running Beacon, or None (with a debug line) where the store cannot be used."""
    try:
        return Beacon(store, rank, world_size, node_rank, timeout_s)
    except Exception as e:
        log.debug("no liveness beacon: %s: %s", type(e).__name__, e)
        return None


def is_peer_failure(exc: BaseException) -> bool:
    """Whether `exc` is a collective that timed out or lost a peer (gloo/NCCL/c10d wording)."""
    text = f"{type(exc).__name__}: {exc}"
    return any(word in text for word in PEER_FAILURE_WORDS)


PEER_FAILURE_WORDS = ("Timed out", "timed out", "timeout", "Connection closed", "Connection reset", "Read error",
                      "Broken pipe", "DistNetworkError", "DistBackendError", "NCCL communicator was aborted",
                      "pair closure")
