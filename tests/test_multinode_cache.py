"""The label cache across nodes: 3 gloo processes laid out as node 0 = rank 0, node 1 = ranks 1 and 2.

With a node-local cache folder rank 0 builds node 0's copy and rank 1 (node 1's first process) builds node 1's;
with a shared folder only rank 0 builds it and node 1 finds it. A builder's failure reaches every rank at once.
"""

import time
from pathlib import Path

import numpy as np
import pytest

from detect.data.records.cache import SplitLabels, cached_labels
from detect.data.records.records import BadInputReport, ImageRecord
from detect.runtime import dist
from tests.support.distributed import run_distributed

pytestmark = pytest.mark.slow  # three spawned processes importing torch

NODE_OF_RANK = (0, 1, 1)


def _as_two_nodes(rank: int) -> int:
    """This process's node; LOCAL_RANK set as torchrun would on that node."""
    import os

    node = NODE_OF_RANK[rank]
    os.environ["LOCAL_RANK"] = str(NODE_OF_RANK[:rank].count(node))
    return node


def _labels() -> SplitLabels:
    record = ImageRecord("a.jpg", 10, 10, np.zeros((0, 4), np.float32), np.zeros(0, np.int64), 1)
    return SplitLabels([record], ("thing",), [1], [], BadInputReport())


def _open_labels(rank, folder, shared, fail_on=None):
    node = NODE_OF_RANK[rank]
    cache_dir = Path(folder) / ("shared" if shared else f"node{node}")
    builds = Path(folder) / "builds"
    builds.mkdir(parents=True, exist_ok=True)

    def build():
        if rank == fail_on:
            raise ValueError(f"label file broken (rank {rank})")
        (builds / f"rank{rank}").write_text("")
        time.sleep(0.3)  # a slow build: a rank that did not wait would find nothing
        return _labels()

    start = time.monotonic()
    try:
        labels = cached_labels(cache_dir / "labels" / "x.npz", lambda: "key", build, "x train")
    except (ValueError, dist.RemoteRankError) as e:
        return f"{type(e).__name__}: {e}", time.monotonic() - start
    return [r.path for r in labels.records], sorted(p.name for p in builds.iterdir())


def _three_layouts(rank, world, folder):
    """One process group for the three cases (spawning processes costs more than the cases)."""
    _as_two_nodes(rank)
    local = _open_labels(rank, Path(folder) / "local", shared=False)
    dist.barrier()
    shared = _open_labels(rank, Path(folder) / "shared", shared=True)
    dist.barrier()
    failing = _open_labels(rank, Path(folder) / "failing", shared=False, fail_on=1)
    return local, shared, failing


def test_label_cache_per_node_shared_and_failing(tmp_path):
    local, shared, failing = zip(*run_distributed(_three_layouts, 3, (str(tmp_path),), timeout=180))
    # node-local folders: node 0's and node 1's first processes build; rank 2 only reads
    assert all(paths == ["a.jpg"] for paths, _ in local) and local[2][1] == ["rank0", "rank1"]
    assert all((tmp_path / "local" / f"node{n}" / "labels" / "x.npz").is_file() for n in (0, 1))
    # a shared folder: node 1's first process finds rank 0's file
    assert all(paths == ["a.jpg"] for paths, _ in shared) and shared[2][1] == ["rank0"]
    # node 1's builder fails: rank 0 (done) and rank 2 (waiting) raise at once with its message
    assert failing[1][0] == "ValueError: label file broken (rank 1)"
    for message, seconds in (failing[0], failing[2]):
        assert message.startswith("RemoteRankError") and "label file broken (rank 1)" in message
        assert seconds < 30
