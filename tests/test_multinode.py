"""Two torchrun launches acting as two nodes on this machine (gloo, 127.0.0.1): the static and the c10d rendezvous
give the one-node result; a node lost mid-epoch stops a fixed-size group with a message naming it, and an elastic
group goes on without it and takes it back when it returns; a rank that hangs ends the group after --dist-timeout.
"""

import time

import pytest
import torch

from detect.data.loader import resolve_spec
from detect.engine.options import parse_options
from detect.runtime.liveness import Beacon, Mark, is_peer_failure
from tests.support.nodes import (
    c10d_rdzv,
    free_port,
    kill_node,
    launch_node,
    results_rows,
    static_rdzv,
    stop_all,
    wait_for,
)
from tests.support.training import tiny_options

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")


def train_args(tmp, name: str, epochs: int, node: str = "", workers: int = 0) -> list[str]:
    """The tiny job; `node` gives the launch its own label cache and project folder (a node's own disk)."""
    o = tiny_options(tmp)
    return ["--data", o.data, "--hyp", o.hyp, "--img-size", "64", "--batch-size", "4", "--nbs", "8", "--epochs",
            str(epochs), "--workers", str(workers), "--device", "cpu", "--name", name, "--exist-ok",
            "--project", str(tmp / f"{node}runs"), "--cache-dir", str(tmp / f"{node}cache")]


class DictStore:
    """The three calls of a c10d store the beacon makes, in memory (thread-safe enough for dict operations)."""

    def __init__(self):
        self.data = {}

    def set(self, key, value):
        self.data[key] = value.encode()

    def get(self, key):
        return self.data[key]

    def check(self, keys):
        return all(k in self.data for k in keys)


def test_beacon_tells_a_hung_rank_from_a_lost_one():
    store = DictStore()
    me, hung, lost = (Beacon(store, r, 3, node_rank=r) for r in range(3))
    lost.post(6, "micro-batch 1, before the loss agreement")
    lost.close()  # its heartbeat stops, as when the process or its node dies
    hung.post(7, "micro-batch 2, before the loss agreement")  # alive, but behind
    me.post(9, "micro-batch 3, before its forward")
    try:
        text = me.explain()
    finally:
        me.close()
        hung.close()
    behind, gone = text.split("; ")  # one line per failing rank, in rank order
    assert behind.startswith("rank 1 (node 1, host ") and behind.endswith(
        "is alive but did not arrive: it is at micro-batch 2, before the loss agreement, rank 0 waited at "
        "micro-batch 3, before its forward (a hang on that rank)")
    assert gone.startswith("rank 2 (node 2, host ") and gone.endswith(
        "is gone: its heartbeat stopped at micro-batch 1, before the loss agreement (process killed or node lost)")
    assert is_peer_failure(RuntimeError("[gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:1"))
    assert is_peer_failure(RuntimeError("Application timeout caused pair closure"))
    assert not is_peer_failure(ValueError("--img-size must be a multiple of 32"))


class GoneStore(DictStore):
    """A store whose host went away after the ranks registered (torchrun's agent stopped the group)."""

    gone = False

    def get(self, key):
        if self.gone:
            raise ConnectionError("store host gone")
        return super().get(key)

    check = get


def test_a_late_rank_names_itself_when_the_others_and_the_store_are_gone(monkeypatch):
    """The hung rank wakes after the others gave up: its own collective fails (timeout or closed connection)
    and the store is gone, yet it names itself and where it was, from the gap between its own two marks."""
    clock = iter([100.0, 101.0, 101.5, 131.5])  # start, micro-batch 2, its loss agreement, micro-batch 3
    monkeypatch.setattr("detect.runtime.liveness.time.monotonic", lambda: next(clock))
    store = GoneStore()
    late = Beacon(store, 1, 2, node_rank=0, timeout_s=8)
    try:
        late.post(8, "micro-batch 2, before its forward")
        late.post(9, "micro-batch 2, before the loss agreement")
        late.post(12, "micro-batch 3, before its forward")  # 30 s later: it slept
        store.gone = True
        text = late.explain()
    finally:
        late.close()
    assert text.startswith("rank 1 (node 0, host ") and text.endswith(
        "; this rank) arrived late: it took 30.0 s from micro-batch 2, before the loss agreement to micro-batch 3, "
        "before its forward, longer than the group's 8 s timeout (--dist-timeout), so the others stopped waiting "
        "for it (a hang or long work on this rank)"), text


def test_a_peer_that_arrived_late_is_named_when_its_connection_closed_first(monkeypatch):
    """The waiting rank meets a closed connection (the late rank's own collective failed first) while both
    marks say the same position: the late rank's gap names it."""
    store = DictStore()
    me = Beacon(store, 0, 2, node_rank=0, timeout_s=3)
    late = Beacon(store, 1, 2, node_rank=0, timeout_s=3)
    try:
        me.post(12, "micro-batch 3, before its forward")
        late.at = Mark(12, "micro-batch 3, before its forward", 14.5)
        text = me.explain()
    finally:
        me.close()
        late.close()
    assert text.startswith("rank 1 (node 0, host ") and text.endswith(
        "arrived late at micro-batch 3, before its forward: 14.5 s after its previous collective, longer than the "
        "group's 3 s timeout (a hang or long work on that rank)"), text


def test_dist_timeout_flag():
    assert parse_options(["--dist-timeout", "30"]).dist_timeout == 30.0
    with pytest.raises(ValueError, match="--dist-timeout must be a positive number of seconds, got 0"):
        parse_options(["--dist-timeout", "0"])


@pytest.fixture
def launches():
    procs = []
    yield procs
    stop_all(procs)


def _finish(procs, logs, timeout=240):
    for proc, log in zip(procs, logs):
        assert proc.wait(timeout=timeout) == 0, log.read_text()[-3000:]


@pytest.mark.slow
def test_two_nodes_equal_one_node(tmp_path, launches):
    """The same job on one node with 2 processes, on 2 nodes (static rendezvous) and on 2 nodes (c10d), run side by
    side: identical losses, metrics and weights; the val split is evaluated once across the nodes; node 1 writes
    its own label cache and nothing into its project folder."""
    static, c10d = free_port(), free_port()
    jobs = [  # (run name, log name, rendezvous flags, processes, node folder prefix)
        ("one", "one", ["--standalone"], 2, ""),
        ("static", "static0", static_rdzv(2, 0, static), 1, ""),
        ("static", "static1", static_rdzv(2, 1, static), 1, "node1-"),
        ("c10d", "c10d0", c10d_rdzv("2", c10d, 0), 1, ""),
        ("c10d", "c10d1", c10d_rdzv("2", c10d, 1), 1, "node1-"),
    ]
    logs = {log: tmp_path / f"{log}.log" for _, log, *_ in jobs}
    resolve_spec(tiny_options(tmp_path).data)  # generated once here: five launches start at the same time
    for name, log, rdzv, nproc, node in jobs:
        launches.append(launch_node(rdzv, train_args(tmp_path, name, 2, node), logs[log], nproc=nproc))
        if log.endswith("0"):
            time.sleep(0.5)  # node 0 hosts the c10d store: up first, as on a cluster
    _finish(launches, logs.values())
    runs = tmp_path / "runs"
    one = results_rows(runs / "one")
    assert len(one) == 2
    for name in ("static", "c10d"):
        rows = results_rows(runs / name)
        assert [r[1:7] for r in rows] == [r[1:7] for r in one]  # box, obj, cls, lr, mAP@0.5, mAP@0.5:0.95
        a = torch.load(runs / name / "last.pt", weights_only=True)["model"]
        b = torch.load(runs / "one" / "last.pt", weights_only=True)["model"]
        assert all(torch.equal(a[k], b[k]) for k in b)
        assert "(8 images)" in logs[f"{name}0"].read_text()  # 8 val images once, 4 per node
    labels = sorted(p.name for p in (tmp_path / "node1-cache" / "labels").glob("*.npz"))
    assert labels == sorted(p.name for p in (tmp_path / "cache" / "labels").glob("*.npz")) and len(labels) == 2
    assert not (tmp_path / "node1-runs").exists()  # checkpoints and run files: global rank 0 only


def _kill_node1_in_epoch_2(tmp_path, launches, rdzv, epochs):
    """Nodes 0 and 1 (`rdzv(node)`: the rendezvous flags) train; node 1 is killed inside epoch 2."""
    args = train_args(tmp_path, "lost", epochs, workers=1)
    env = {"DETECT_TEST_STEP_SLEEP": "0.4"}  # 2 micro-batches per epoch: ~1 s epochs, easy to cut into
    logs = [tmp_path / "node0.log", tmp_path / "node1.log"]
    launches.append(launch_node(rdzv(0), args, logs[0], env=env))
    time.sleep(0.5)
    launches.append(launch_node(rdzv(1), args, logs[1], env=env))
    run_dir = tmp_path / "runs" / "lost"
    wait_for(lambda: len(results_rows(run_dir)) >= 1, launches[0], logs[0], 150, "epoch 1")
    time.sleep(0.6)  # inside epoch 2
    kill_node(launches[1])
    return args, env, logs, run_dir


@pytest.mark.slow
def test_lost_node_stops_a_fixed_group_naming_it(tmp_path, launches):
    port = free_port()
    _, _, logs, run_dir = _kill_node1_in_epoch_2(tmp_path, launches, lambda node: static_rdzv(2, node, port), 4)
    assert launches[0].wait(timeout=120) != 0
    text = logs[0].read_text()
    assert "the group broke: rank 1 (node 1," in text and "is gone: its heartbeat stopped" in text, text[-3000:]
    assert f"relaunch the job (every node's torchrun) with --resume {run_dir / 'last.pt'}" in text
    assert torch.load(run_dir / "last.pt", weights_only=True)["epoch"] == 1  # epoch 1's, intact


@pytest.mark.slow
def test_elastic_group_goes_on_without_a_lost_node_and_takes_it_back(tmp_path, launches):
    """torchrun --nnodes 1:2 --max-restarts 3: torchrun restarts the survivor's workers in a group of one; the
    project resumes them from last.pt (any rank restarted: global rank 0 reads the checkpoint and hands it out)
    with the step count of the new world size. The node launched again later joins at the next rendezvous: torchrun
    stops the group (SIGTERM: last.pt is saved mid-epoch), and the group of two resumes and finishes."""
    port = free_port()
    args, env, logs, run_dir = _kill_node1_in_epoch_2(tmp_path, launches, lambda node: c10d_rdzv("1:2", port, node, 3), 12)
    # relaunched once the survivor finished an epoch alone (its last.pt holds one RNG state: a SIGTERM earlier, in
    # its set-up, would end it before it saved anything); the solo epochs left cover the relaunch's start-up
    wait_for(lambda: "this run has 1" in logs[0].read_text() and len(results_rows(run_dir)) >= 2, launches[0], logs[0],
             120, "the survivor's first epoch alone")
    rejoin_log = tmp_path / "node1-again.log"
    launches.append(launch_node(c10d_rdzv("1:2", port, 1, 3), args, rejoin_log, env=env))
    _finish([launches[0], launches[2]], [logs[0], rejoin_log])
    text = logs[0].read_text()
    assert "rank 1 (node 1," in text and "torchrun restarts the group, which resumes from it" in text
    assert "torchrun restarted the group: resuming from" in text
    assert "this run has 1" in text and "this run has 2" in text  # the world went 2 -> 1 -> 2
    assert "[rank 1] checkpoint holds RNG states for 1 processes" in rejoin_log.read_text()
    assert [int(r[0]) for r in results_rows(run_dir)] == list(range(1, 13))
    final = torch.load(run_dir / "last.pt", weights_only=True)
    assert final["epoch"] == 12 and len(final["rng"]) == 2


@pytest.mark.slow
def test_a_hanging_rank_ends_the_group_after_the_timeout_named(tmp_path, launches):
    """Rank 1 sleeps 25 s before micro-batch 3 (alive, not crashed); --dist-timeout 8 ends the group. Both sides
    name rank 1 and where it was, whichever notices first. The timeout leaves room for rank 0's own work between
    collectives on a loaded machine (evaluation, checkpoint); torchrun gives rank 1 30 s after rank 0's exit to
    wake and report before it kills it."""
    log = tmp_path / "hang.log"
    args = train_args(tmp_path, "hang", 4) + ["--dist-timeout", "8", "--no-plots"]
    start = time.monotonic()
    launches.append(launch_node(["--standalone"], args, log, nproc=2, env={"DETECT_TEST_HANG": "1:3:25"}))
    assert launches[0].wait(timeout=150) != 0
    text = log.read_text()
    # a progress bar may share the line: cut each message from its prefix to the end of its line
    waited = text.partition("[rank 0] the group broke: ")[2].partition("\n")[0]
    late = text.partition("[rank 1] the group broke: ")[2].partition("\n")[0]
    # rank 0 waited at micro-batch 3: either it saw rank 1 behind (its own timeout first) or late (rank 1's
    # collective failed first and closed the connection)
    assert "rank 1 (node 0," in waited and "rank 0 waited at micro-batch 3" in waited or (
        "rank 1 (node 0," in waited and "arrived late at micro-batch 3" in waited), text[-4000:]
    assert "micro-batch 2" in waited or "arrived late at micro-batch 3" in waited, waited
    assert "rank 1 (node 0," in late and "this rank) arrived late: it took " in late and (
        "from micro-batch 2, before the loss agreement to micro-batch 3, before its forward" in late), text[-4000:]
    assert time.monotonic() - start < 140
