"""rank0_first: rank 0 builds, the others wait and read; rank 0's failure reaches them within seconds."""

import time
from pathlib import Path

import pytest

from detect.runtime import dist
from tests.support.distributed import run_distributed


def _build_then_read(rank, world_size, folder):
    target = Path(folder) / "built.txt"
    with dist.rank0_first():
        entered = time.monotonic()
        if rank == 0:
            time.sleep(1.0)  # long enough that a rank not waiting would find no file
            target.write_text("made by rank 0")
        content = target.read_text()
        left = time.monotonic()
    return content, entered, left


@pytest.mark.slow  # two spawned processes importing torch: seconds each on a loaded machine
def test_rank1_reads_what_rank0_built(tmp_path):
    (content0, _, left0), (content1, entered1, _) = run_distributed(_build_then_read, 2, (str(tmp_path),))
    assert content0 == content1 == "made by rank 0"
    assert entered1 >= left0  # rank 1's body started only after rank 0's body ended (monotonic is system-wide)


def _rank0_fails(rank, world_size):
    start = time.monotonic()
    try:
        with dist.rank0_first():
            if rank == 0:
                raise ValueError("label file broken at line 3")
            return ("rank 1 ran its body", 0.0)
    except dist.RemoteRankError as e:
        return (str(e), time.monotonic() - start)
    except ValueError as e:
        return (f"own: {e}", time.monotonic() - start)


@pytest.mark.slow
def test_rank0_failure_reaches_rank1_within_seconds():
    (msg0, _), (msg1, waited) = run_distributed(_rank0_fails, 2, ())
    assert msg0 == "own: label file broken at line 3"
    assert "rank 0 failed" in msg1 and "ValueError: label file broken at line 3" in msg1
    assert waited < 5.0


def test_single_process_without_a_group_runs_the_body_and_raises_its_errors(tmp_path):
    assert not dist.is_initialized()
    with dist.rank0_first():
        (tmp_path / "x").write_text("1")
    assert (tmp_path / "x").read_text() == "1"
    with pytest.raises(KeyError), dist.rank0_first():
        raise KeyError("boom")
