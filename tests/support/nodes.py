"""Simulated nodes: separate torchrun launches on this machine, every address 127.0.0.1.

    port = free_port()
    node0 = launch_node(static_rdzv(2, 0, port), args, log_path)   # torchrun --nnodes 2 --node_rank 0 ...
    node1 = launch_node(c10d_rdzv("1:2", port), args, log_path)    # torchrun --rdzv-backend c10d ...
    kill_node(node1)                                                # the launch and every process it started

Killing a launch takes its workers and their loader workers with it, as a lost machine would; `stop_all` in a test's teardown makes sure nothing outlives the test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOOKS = str(ROOT / "tests" / "support" / "train_hooks.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def static_rdzv(nnodes: int, node_rank: int, port: int) -> list[str]:
    return [f"--nnodes={nnodes}", f"--node_rank={node_rank}", "--master_addr=127.0.0.1", f"--master_port={port}"]


def c10d_rdzv(nnodes: str, port: int, node: int, restarts: int = 0) -> list[str]:
    """The c10d rendezvous, its store hosted by node 0 (`is_host`: on one machine every launch would otherwise take
    itself for the endpoint's host); a short last call and keep-alive so that an elastic group re-forms within
    seconds."""
    conf = f"is_host={int(node == 0)},last_call_timeout=1,join_timeout=60,keep_alive_interval=1,keep_alive_max_attempt=6"
    return [f"--nnodes={nnodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=test",
            f"--rdzv-conf={conf}", f"--max-restarts={restarts}", "--monitor-interval=0.5"]


def launch_node(rdzv: list[str], train_args: list[str], log: Path, nproc: int = 1, env: dict | None = None,
                script: str = HOOKS) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", *rdzv, f"--nproc_per_node={nproc}", script, *train_args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
                "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **(env or {})}
    with open(log, "w") as out:  # the launch has its own copy of the descriptor
        return subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=full_env)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def kill_node(proc: subprocess.Popen) -> None:
    """SIGKILL the launch and every process below it (torchrun puts its workers in sessions of their own): no
    goodbye, as a lost node."""
    for pid in [*descendants(proc.pid), proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


def stop_all(procs: list[subprocess.Popen]) -> None:
    """Test teardown: every launch and what it started, whether it still runs or not."""
    for proc in procs:
        kill_node(proc)


def wait_for(condition, proc: subprocess.Popen, log: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen (launch exit {proc.poll()}):\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def results_rows(run_dir: Path) -> list[list[str]]:
    """results.csv rows without the header (box, obj, cls, ... as written)."""
    path = run_dir / "results.csv"
    return [line.split(",") for line in path.read_text().splitlines()[1:]] if path.exists() else []
