"""`python -m benchmarks coco_eval` at a small size: every engine alone and the evaluator at 1 and 2 ranks print
a row, and every row's AP@[.50:.95] is the same figure (the engines give pycocotools' numbers)."""

import re

import pytest

from benchmarks.coco_eval import generate, main


def test_generated_rows_are_the_evaluators_rows():
    gt, rows = generate(40, 365, 20, seed=3)
    assert len(gt["images"]) == 40 and len(gt["categories"]) == 365 and rows.shape == (40 * 20, 7)
    assert set(rows[:, 0].astype(int)) <= {image["id"] for image in gt["images"]}
    assert set(rows[:, 6].astype(int)) <= {c["id"] for c in gt["categories"]}
    assert (rows[:-1, 0] <= rows[1:, 0]).all()  # sorted by image, as the evaluator sorts


@pytest.mark.slow
def test_every_row_gives_the_same_ap(capsys):
    assert main(["--sizes", "300x80x40", "--engines", "pycocotools,ultrafast-pycocotools"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and re.search(r"\| 0\.\d{5} \|$", line)]
    names = [row.split("|")[1].strip() for row in rows]
    assert names == ["pycocotools alone, one process", "ultrafast-pycocotools alone, one process",
                     "evaluator, 1 rank: compute()", "evaluator, 1 rank: compute() + matches",
                     "evaluator, 2 ranks: compute()", "evaluator, 2 ranks: compute() + matches"]
    aps = {row.rsplit("|", 2)[1].strip() for row in rows}
    assert len(aps) == 1 and float(aps.pop()) > 0.1
    assert "12,000 detections" in out and "built once per split" in out and "results.json of every rank" in out
