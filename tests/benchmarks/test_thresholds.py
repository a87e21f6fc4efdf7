"""`python -m benchmarks thresholds` on a tiny model and dataset: the table's rows and its totals, which are the
counts of detect.evaluation.thresholds at each setting (the figures themselves are not checked)."""

import numpy as np

from benchmarks import thresholds as bench
from detect.evaluation.thresholds import Counts
from tests.support.val_data import write_coco_dataset, write_tiny_checkpoint


def test_the_table_compares_the_settings_per_class_and_in_total(tmp_path, capsys):
    spec, weights = write_coco_dataset(tmp_path / "data"), write_tiny_checkpoint(tmp_path)
    args = ["--weights", str(weights), "--data", str(spec), "--choose", "val", "--halves", "--workers", "0",
            "--shrink", "0,inf"]
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "alternating halves of val; k=100" in out
    for row in ("per-class", "global best-F1", "conf 0.25", "total", "mean F1", "k=0 ", "k=100 ", "k=inf "):
        assert row in out
    # every box of the 3 images is scored once over the two folds: red 1, green 1, blue 4
    classes = {line.split()[0]: int(line.split()[1]) for line in out.splitlines()
               if line.split() and line.split()[0] in ("red", "green", "blue")}
    assert classes == {"red": 1, "green": 1, "blue": 4}


def test_counts_of_folds_add_up():
    a = Counts(np.array([1, 0]), np.array([2, 1]), np.array([0, 3]))
    total = bench.add(bench.add(None, a), a)
    assert total.tp.tolist() == [2, 0] and total.fp.tolist() == [4, 2] and total.fn.tolist() == [0, 6]
