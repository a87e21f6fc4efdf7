"""The default COCOeval engine (ultrafast-pycocotools, detect.evaluation.cocoeval_engines) gives pycocotools'
precision and recall arrays bit for bit, hence its 12 numbers and per-class APs, on real detections: the official
yolov3-tiny weights on coco-tiny val and train (crowd regions), the same with many and with total score ties, and a
yolov3-tiny fine-tuned onto the kangaroo VOC set, with and without difficult boxes (whose categories go through
pycocotools, the only engine that can match them by IoU)."""

import numpy as np
import pytest
import torch

from detect.data.loader import build_eval_loader, open_split
from detect.evaluation.coco import class_ap, sort_rows
from detect.evaluation.cocoeval_engines import (
    DEFAULT_BACKEND,
    ULTRAFAST,
    difficult_categories,
    evaluate_categories,
    summary_stats,
)
from detect.evaluation.evaluator import CocoEvaluator, evaluate
from tests.conftest import ROOT, shared_path
from tests.support.coco_oracles import coco_evaluate
from tests.support.difficult_voc import kangaroo_with_difficult_boxes
from tests.support.training import QUIET_HYP


def _rows(model, source, split: str, img_size: int) -> np.ndarray:
    loader = build_eval_loader(source, split, img_size, 8, 0, model.max_stride, 0, 1)
    return evaluate(model, loader, CocoEvaluator(source, backend="pycocotools"), torch.device("cpu")).rows


@pytest.fixture(scope="module")
def coco_tiny(tmp_path_factory):
    """{split: (source, rows)}: the official yolov3-tiny's detections (conf 0.001) on coco-tiny val and train."""
    from detect.darknet.load import for_inference, load_model

    shared_path("data", "coco-tiny")
    cache = tmp_path_factory.mktemp("cache")
    model = for_inference(load_model(shared_path("darknet-cfg/yolov3-tiny.cfg"),
                                     shared_path("weights/yolov3-tiny.weights"), exact=True).model,
                          torch.device("cpu"))
    out = {}
    for split in ("val", "train"):
        source = open_split(ROOT / "data" / "coco-tiny.yaml", split, cache)
        out[split] = source, _rows(model, source, split, 320)
    return out


def assert_exactly_pycocotools(source, rows: np.ndarray) -> None:
    """The default engine's arrays, 12 numbers and per-class APs equal pycocotools' (np.array_equal, ==)."""
    gt = source.coco_ground_truth()
    images, cats = [r.image_id for r in source.records], sorted(source.category_ids)
    rows = sort_rows(rows)
    want = evaluate_categories(gt, rows, images, cats, "pycocotools")
    got = evaluate_categories(gt, rows, images, cats, DEFAULT_BACKEND)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert summary_stats(*got) == summary_stats(*want)
    # and pycocotools run by hand, as a user would: its own summarize() and per-class APs
    summary: list[str] = []
    stats, per_class = coco_evaluate(gt, [dict(image_id=int(r[0]), category_id=int(r[6]), bbox=list(r[1:5]),
                                               score=float(r[5])) for r in rows], images, source.names,
                                     source.category_ids, summary_lines=summary)
    assert [max(s, 0.0) for s in summary_stats(*got)] == stats
    axis = {c: k for k, c in enumerate(cats)}
    by_name = dict(zip(source.names, source.category_ids))
    for c in per_class:
        assert class_ap(got[0], axis[int(by_name[c.name])]) == (c.ap50, c.ap), c.name


def test_the_default_engine_is_ultrafast():
    assert DEFAULT_BACKEND == ULTRAFAST


@pytest.mark.slow
@pytest.mark.parametrize("split", ["val", "train"])
def test_official_weights_on_coco_tiny_give_pycocotools_arrays_exactly(coco_tiny, split):
    source, rows = coco_tiny[split]
    gt = source.coco_ground_truth()
    assert len(rows) > 5000 and len(gt.getAnnIds(iscrowd=True)) > 0  # real detections, crowd regions among them
    assert_exactly_pycocotools(source, rows)


@pytest.mark.slow
@pytest.mark.parametrize("step", [0.05, 1.0])
def test_score_ties_give_pycocotools_arrays_exactly(coco_tiny, step):
    """Scores rounded to 0.05 (most detections tie with others of their image) and all scores equal: COCOeval
    breaks ties by input order, and so must the engine."""
    source, rows = coco_tiny["val"]
    tied = rows.copy()
    tied[:, 5] = np.maximum(np.round(tied[:, 5] / step) * step, step) if step < 1 else 0.5
    assert len(np.unique(tied[:, 5])) <= 21
    assert_exactly_pycocotools(source, tied)


@pytest.mark.slow
def test_difficult_boxes_on_some_categories_route_those_through_pycocotools(coco_tiny, tmp_path):
    """Half of coco-tiny's categories with difficult boxes: those through pycocotools, the rest through ultrafast,
    the arrays put together equal to one pycocotools run over all of them."""
    _, rows = coco_tiny["val"]
    source = open_split(ROOT / "data" / "coco-tiny.yaml", "val", tmp_path)  # its own ground truth to flag
    gt = source.coco_ground_truth()
    flagged = 0
    for a in gt.dataset["annotations"]:
        if a["category_id"] % 2 and not a["iscrowd"] and a["area"] < 1500:  # small boxes of odd categories
            a["iscrowd"], a["difficult"] = 1, 1
            flagged += 1
    gt.createIndex()
    images, cats = [r.image_id for r in source.records], sorted(source.category_ids)
    slow = difficult_categories(gt, images, cats)
    assert flagged > 50 and 5 < len(slow) < len(set(rows[:, 6].astype(int)))
    assert_exactly_pycocotools(source, rows)


@pytest.fixture(scope="module")
def kangaroo_finetuned(tmp_path_factory):
    """yolov3-tiny from the official COCO weights, fine-tuned onto kangaroo (a few steps at 224 px): a model whose
    detections are what a user's VOC fine-tune gives."""
    from detect.darknet.load import for_inference, load_model
    from detect.train import main as train_main

    work = tmp_path_factory.mktemp("kangaroo")
    spec = kangaroo_with_difficult_boxes(work / "voc")
    (work / "hyp.yaml").write_text(QUIET_HYP)
    code = train_main(["--data", str(spec), "--cfg", "yolov3-tiny.cfg", "--weights",
                       str(shared_path("weights/yolov3-tiny.weights")), "--hyp", str(work / "hyp.yaml"),
                       "--img-size", "224", "--batch-size", "8", "--nbs", "8", "--epochs", "1", "--max-batches", "8",
                       "--workers", "0", "--device", "cpu", "--no-plots", "--project", str(work / "runs"), "--name",
                       "ft", "--cache-dir", str(work / "cache")])
    assert code == 0
    model = for_inference(load_model(weights=work / "runs" / "ft" / "last.pt").model, torch.device("cpu"))
    return model, spec, work


@pytest.mark.slow
@pytest.mark.parametrize("difficult", [True, False])
def test_a_voc_finetune_gives_pycocotools_arrays_exactly(kangaroo_finetuned, difficult):
    model, spec, work = kangaroo_finetuned
    if not difficult:  # the same xmls without the flags: the category goes through ultrafast
        for xml in (spec.parent / "annots").glob("*.xml"):
            xml.write_text(xml.read_text().replace("<difficult>1</difficult>", "<difficult>0</difficult>"))
    for split in ("train", "val"):
        source = open_split(spec, split, work / f"cache-{difficult}")
        assert any(r.difficult.any() for r in source.records) == difficult
        rows = _rows(model, source, split, 224)
        assert len(rows) > 100
        assert_exactly_pycocotools(source, rows)
