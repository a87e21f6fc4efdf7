import os

from benchmarks.finetune import parse_args


def test_also_val_takes_several_specs_and_leaves_train_flags_after_the_separator():
    args = parse_args(["--data", "a.yaml", "--also-val", "held.yaml", "other.yaml", "--", "--hyp", "h.yaml"])
    assert args.also_val == ["held.yaml", "other.yaml"] and args.train_args == ["--hyp", "h.yaml"]
    assert parse_args(["--data", "a.yaml"]).also_val == []


def test_best_pt_is_evaluated_on_each_spec_with_detect_val(tmp_path, monkeypatch):
    """The evaluation step of the benchmark runs detect.val as a user would, once per spec, each in its own
    folder: figures equal to detect.val's own on the same files."""
    import json

    from benchmarks.finetune import _evaluate
    from detect.val import main as val_main
    from tests.support.val_data import val_args, write_coco_dataset, write_tiny_checkpoint

    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))
    spec, weights = write_coco_dataset(tmp_path / "data"), write_tiny_checkpoint(tmp_path)
    args = parse_args(["--data", str(spec), "--img-size", "64"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = _evaluate(args, tmp_path / "bench", weights, str(spec), "best", env)
    second = _evaluate(args, tmp_path / "bench", weights, str(spec), "best1", env)
    assert val_main(val_args(spec, weights, tmp_path, "--name", "direct", "--batch", "32")) == 0
    direct = json.loads((tmp_path / "runs" / "direct" / "metrics.json").read_text())
    assert first["num_images"] == second["num_images"] == direct["num_images"] == 3
    assert first["map"] == second["map"] == direct["map"] and first["map50"] == direct["map50"]
