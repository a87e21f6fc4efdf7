"""detect.evaluation.coco's summary text: pycocotools' own lines, and the same characters re-created from the
12 numbers."""

import contextlib
import io

from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from detect.evaluation.coco import format_summary
from tests.support.coco_oracles import coco_evaluate


def test_summary_lines_are_pycocotools_own():
    gt = COCO()
    gt.dataset = {"images": [{"id": 1, "width": 300, "height": 300}],
                  "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 120, 100],
                                   "area": 12000, "iscrowd": 0}],
                  "categories": [{"id": 1, "name": "cat"}]}
    gt.createIndex()
    results = [{"image_id": 1, "category_id": 1, "bbox": [12, 10, 118, 104], "score": 0.9}]
    lines = []
    coco_evaluate(gt, results, [1], ["cat"], [1], summary_lines=lines)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        evaluator = COCOeval(gt, gt.loadRes(results), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        printed.truncate(0), printed.seek(0)
        evaluator.summarize()
    assert lines == printed.getvalue().splitlines() and len(lines) == 12
    assert lines[0].startswith(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = ")
    assert "-1.000" in lines[3]  # no small object: pycocotools' -1 stays in its own text
    # re-created from the stats (when COCOeval cannot run) in the same characters
    assert format_summary(evaluator.stats) == "\n".join(lines)
