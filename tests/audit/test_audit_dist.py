"""detect.audit under torchrun: each rank runs the model (and the second opinion) over its own images, rank 0 scores
them all, and the list is the one a single process makes."""

from detect.audit.cli import parse_args, run
from tests.support.distributed import run_distributed
from tests.support.val_data import write_coco_dataset, write_tiny_checkpoint


def _audit(rank, world_size, spec, weights, folder):
    args = parse_args(["--weights", str(weights), "--data", str(spec), "--img", "64", "--batch", "1", "--device",
                       "cpu", "--workers", "0", "--project", str(folder), "--name", f"ws{world_size}",
                       "--cache-dir", str(folder / "cache"), "--min-score", "0", "--top", "4",
                       "--second-opinion", str(folder / "second" / "tiny.pt")])
    rows = run(args)
    return [{k: v for k, v in r.items() if k != "evidence"} for r in rows] if rows is not None else None


def test_two_ranks_list_what_one_process_lists(tmp_path):
    spec = write_coco_dataset(tmp_path / "d", sizes=((48, 64), (64, 40), (64, 64), (40, 56), (64, 48)))
    weights = write_tiny_checkpoint(tmp_path)
    (tmp_path / "second").mkdir()
    write_tiny_checkpoint(tmp_path / "second", names=["cat", "dog", "bird", "fish"])
    alone = _audit(0, 1, spec, weights, tmp_path)
    ranks = run_distributed(_audit, 2, (spec, weights, tmp_path), timeout=240)
    assert ranks[1] is None
    assert ranks[0] == alone and len(alone) > 0
    assert any(r["kind"] == "missing" for r in alone)
