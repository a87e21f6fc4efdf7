"""Which rank failed the group: a heartbeat and a progress mark per rank in the process group's key-value store.

A collective that times out (a rank hangs) or whose peer's connection drops (a rank or its whole node is gone)
raises on the ranks that did arrive, but gloo's message names an address, not a rank. Each rank therefore keeps
two keys in the group's store (the TCPStore every rank already talks to):
- `alive/<rank>`: a counter a daemon thread bumps every `HEARTBEAT_S`; it stops moving when the process dies.
- `at/<rank>`: the position the training loop reached before the last collective it entered (`Beacon.post`
  records it; the same thread writes it, so the training step itself makes no network round trip).
`Beacon.explain()` reads both after a failure: a counter that no longer moves is a lost process (or node), a
live rank whose position is behind is one that hangs. Counters, not clock times: nodes' clocks may differ.
This module does not import torch.distributed; `detect.dist` hands it the store.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

log = logging.getLogger(__name__)

HEARTBEAT_S = 1.0
# how long `explain` watches the counters: several beats, so that a live rank's counter surely moves
WATCH_S = 3.5 * HEARTBEAT_S
PREFIX = "detect/beacon"


class Beacon:
    """This rank's heartbeat and progress in `store`; `explain()` names the ranks that failed the group.
    The thread writes both (about a second apart): `post` only records the position, so the training step makes
    no network round trip for it."""

    def __init__(self, store, rank: int, world_size: int, node_rank: int):
        self.store, self.rank, self.world_size = store, rank, world_size
        self.at: tuple[int, str] = (0, "start")  # (position, what it is); replaced whole, read by the thread
        self._sent: tuple[int, str] | None = None
        self._beats = 0
        self._stop = threading.Event()
        store.set(self._key("node", rank), f"node {node_rank}, host {socket.gethostname()}, pid {os.getpid()}")
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
            self.store.set(self._key("at", self.rank), f"{at[0]} {at[1]}")
            self._sent = at

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._beat()
            except Exception:  # the store went away with its host: nothing left to tell
                return

    def post(self, position: int, label: str) -> None:
        """Record that this rank reached `position` (increasing; `label` says what it is, for the message)."""
        self.at = (position, label)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * HEARTBEAT_S)

    def _read(self, kind: str, rank: int) -> str | None:
        key = self._key(kind, rank)
        return self.store.get(key).decode() if self.store.check([key]) else None

    def _snapshot(self) -> dict[int, tuple[str | None, str | None, str | None]]:
        return {r: (self._read("node", r), self._read("alive", r), self._read("at", r))
                for r in range(self.world_size) if r != self.rank}

    def explain(self) -> str:
        """One line per rank that failed the group (gone or behind); '' when none is found. Takes `WATCH_S`."""
        try:
            before = self._snapshot()
            time.sleep(WATCH_S)
            after = self._snapshot()
        except Exception as e:
            return (f"the group's store is unreachable ({type(e).__name__}): the node that hosts it (torchrun's "
                    f"node 0 or the rendezvous endpoint) is gone")
        lines = []
        for r, (node, alive, at) in after.items():
            where = f"rank {r} ({node or 'node unknown'})"
            if alive is None or alive == before[r][1]:
                lines.append(f"{where} is gone: its heartbeat stopped (process killed or node lost)")
                continue
            position, _, label = (at or "-1 nothing yet").partition(" ")
            if int(position) < self.at[0]:
                lines.append(f"{where} is alive but did not arrive: it is at {label}, rank {self.rank} waited at "
                             f"{self.at[1]} (a hang on that rank)")
        return "; ".join(lines)


def start_beacon(store, rank: int, world_size: int, node_rank: int) -> Beacon | None:
    """A running Beacon, or None (with a debug line) where the store cannot be used."""
    try:
        return Beacon(store, rank, world_size, node_rank)
    except Exception as e:
        log.debug("no liveness beacon: %s: %s", type(e).__name__, e)
        return None


def is_peer_failure(exc: BaseException) -> bool:
    """Whether `exc` is a collective that timed out or lost a peer (gloo/NCCL/c10d wording)."""
    text = f"{type(exc).__name__}: {exc}"
    return any(word in text for word in PEER_FAILURE_WORDS)


PEER_FAILURE_WORDS = ("Timed out", "timed out", "timeout", "Connection closed", "Connection reset", "Read error",
                      "Broken pipe", "DistNetworkError", "DistBackendError", "NCCL communicator was aborted")
