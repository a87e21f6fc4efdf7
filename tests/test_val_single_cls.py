"""detect.val --single-cls with a model of several classes: evaluated class-agnostically (each box scored by its
best class, NMS across the classes), against the dataset with every class as one."""

import json

import numpy as np
import pytest
import torch
from torchvision.ops import batched_nms

from detect.data.formats.class_selection import SINGLE_CLASS_ID
from detect.data.formats.spec import load_data_spec
from detect.data.loader import build_eval_loader, open_split
from detect.evaluation.coco import rows_to_results, sort_rows
from detect.inference.loading import load_model_file
from detect.inference.postprocess import scale_to_original
from detect.ops.boxes import xywh_to_xyxy
from detect.ops.preprocess import to_model_input
from detect.val import main
from tests.support.coco_oracles import coco_evaluate
from tests.support.log_lines import log_lines
from tests.support.val_data import val_args, write_coco_dataset, write_tiny_checkpoint

FOUR = ["a", "b", "c", "d"]
CONF, IOU, MAX_DET = 0.01, 0.6, 300


@pytest.fixture(autouse=True)
def _label_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))


def _by_hand(spec, weights) -> list[dict]:
    """The detections a one-class model would give: score = objectness x best class probability, one plain NMS
    over all of an image's boxes, in the images' own pixels (the same model and resize mode as detect.val; the
    batch's boxes in one batched_nms call as detect.val makes it, so that equal scores are broken alike)."""
    handle = load_model_file(weights, device=torch.device("cpu"), img_size=64, backend="torch")
    model = handle.runner
    source = open_split(load_data_spec(spec).with_single_cls(), "val")
    loader = build_eval_loader(source, "val", 64, 2, 0, model.max_stride, 0, 1, resize=handle.resize)
    results = []
    with torch.inference_mode():
        for images, _targets, metas in loader:
            pred = model(to_model_input(images, torch.device("cpu")))
            score = pred[..., 4] * pred[..., 5:].max(dim=-1).values
            image, row = (score > CONF).nonzero(as_tuple=True)
            boxes, score = xywh_to_xyxy(pred[image, row, :4]), score[image, row]
            kept = batched_nms(boxes.double(), score.double(), image, IOU)
            for i, meta in enumerate(metas):
                mine = kept[image[kept] == i][:MAX_DET]
                rows = scale_to_original(boxes[mine], meta["ratio"], meta["pad"], meta["orig_size"])
                results += [{"image_id": int(meta["image_id"]), "category_id": SINGLE_CLASS_ID, "score": float(s),
                             "bbox": [x1, y1, x2 - x1, y2 - y1]} for (x1, y1, x2, y2), s in
                            zip(rows.tolist(), score[mine].tolist())]
    return results


def test_single_cls_evaluates_a_four_class_model_class_agnostically(tmp_path, capsys):
    spec = write_coco_dataset(tmp_path / "data")  # 3 classes, 6 boxes in 3 images
    weights = write_tiny_checkpoint(tmp_path, names=FOUR)
    assert main(val_args(spec, weights, tmp_path, "--name", "no")) == 2
    err = capsys.readouterr().err
    assert "class 0 'red' is not a class of" in err and "(a, b, c, d)" in err
    assert "--single-cls to evaluate every class" in err
    with log_lines("detect.val") as lines:
        assert main(val_args(spec, weights, tmp_path, "--single-cls", "--name", "one", "--save-json", "--no-merge",
                              "--conf", str(CONF), "--backend", "torch", "--coco-backend", "pycocotools")) == 0
    assert "--single-cls: the model's 4 classes are evaluated as one (each box scored by its best class, NMS " \
           "across the classes)" in lines
    run_dir = tmp_path / "runs" / "one"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["num_images"] == 3 and metrics["map50"] > 0
    assert [(c["name"], c["instances"]) for c in metrics["per_class"]] == [("object", 6)]
    results = json.loads((run_dir / "results.json").read_text())
    assert {r["category_id"] for r in results} == {SINGLE_CLASS_ID}

    expected = _by_hand(spec, weights)
    assert len(results) == len(expected)
    for image_id in {r["image_id"] for r in expected}:
        got, want = (np.array([[r["score"], *r["bbox"]] for r in rows if r["image_id"] == image_id])
                     for rows in (results, expected))
        assert got.shape == want.shape
        # detect.val rounds scores to 5 decimals and boxes to 1/1000 pixel: each row has its twin within that
        nearest = np.abs(want[:, None, :] - got[None, :, :]).max(axis=2).min(axis=1)
        assert nearest.max() < 2e-3
    # COCOeval of the hand-made detections, rounded and ordered as detect.val hands them over (equal scores)
    rows = sort_rows(np.array([[r["image_id"], *np.round(r["bbox"], 3), round(r["score"], 5), r["category_id"]]
                               for r in expected]))
    source = open_split(load_data_spec(spec).with_single_cls(), "val")
    stats, _ = coco_evaluate(source.coco_ground_truth(), rows_to_results(rows), [r.image_id for r in source.records],
                             source.names, source.category_ids)
    assert list(metrics["stats"].values()) == pytest.approx(stats, abs=1e-4)
