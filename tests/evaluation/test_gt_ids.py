"""Ground-truth annotation ids COCOeval can use whatever the json says: both engines record a match by the ground
truth's id and read 0 as "no match", so a box with id 0 (Roboflow, Label Studio) was never matched."""

import numpy as np
import pytest
from pycocotools.coco import COCO

from detect.data.formats.sources import open_source
from detect.evaluation.cocoeval_engines import evaluate_categories
from tests.support.coco_jsons import box, perfect_map, roboflow_json, write_coco
from tests.support.coco_oracles import coco_evaluate
from tests.support.log_lines import log_lines

BACKENDS = ["pycocotools", "faster-coco-eval"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_annotation_ids_from_zero_score_as_ids_from_one(tmp_path, backend):
    images, annotations = roboflow_json(first_id=0)  # image and annotation ids from 0
    with log_lines("detect.data.formats.sources") as lines:
        zero = open_source(write_coco(tmp_path / "zero", images, annotations), "val", tmp_path / "cache")
        gt = zero.coco_ground_truth().dataset["annotations"]
    one = open_source(write_coco(tmp_path / "one", *roboflow_json(first_id=1)), "val", tmp_path / "cache")
    from_zero, from_one = perfect_map(zero, backend), perfect_map(one, backend)
    assert from_zero.map == from_zero.map50 == pytest.approx(1.0)  # the box with id 0 is matched
    np.testing.assert_allclose(from_zero.stats, from_one.stats, rtol=0, atol=1e-12)
    assert [(c.name, c.instances, c.ap50) for c in from_zero.per_class] == \
        [(c.name, c.instances, c.ap50) for c in from_one.per_class]
    # COCOeval sees 1..n (image by image); the json's own id stays with each annotation
    assert [a["id"] for a in gt] == list(range(1, 8))
    assert {a["json_id"]: (a["image_id"], a["bbox"]) for a in gt} == \
        {a["id"]: (a["image_id"], a["bbox"]) for a in annotations}
    assert "json_id" not in one.coco_ground_truth().dataset["annotations"][0]  # ids from 1 are kept as they are
    (line,) = lines
    assert line.endswith("data.json: annotation id(s) 0 below 1 (COCOeval reads id 0 as 'no match', so such a box "
                         "could never be matched); evaluation numbers the 7 annotations it scores 1..7 (`json_id` "
                         "keeps the json's own)")


def test_repeated_annotation_ids_do_not_merge(tmp_path):
    images, annotations = roboflow_json(first_id=1)
    annotations[3]["id"] = annotations[0]["id"] = 5  # two boxes with one id, and that id used again
    annotations.append(box(5, 3, [40, 40, 10, 10], 2))
    source = open_source(write_coco(tmp_path / "ds", images, annotations), "val", tmp_path / "cache")
    gt = source.coco_ground_truth()
    assert len(gt.anns) == len(gt.dataset["annotations"]) == 8
    assert sorted(a["json_id"] for a in gt.dataset["annotations"]) == sorted(a["id"] for a in annotations)
    assert perfect_map(source).map == pytest.approx(1.0)


def _coco(ann_ids):
    gt = COCO()
    gt.dataset = {"images": [{"id": 0, "width": 64, "height": 64}],
                  "annotations": [box(i, 0, [4 + 9 * k, 4, 20, 20]) for k, i in enumerate(ann_ids)],
                  "categories": [{"id": 1, "name": "kangaroo"}]}
    gt.createIndex()
    return gt


@pytest.mark.parametrize("backend", BACKENDS + ["ultrafast-pycocotools"])
def test_engines_refuse_ground_truth_they_would_score_wrongly(backend):
    perfect = [{"image_id": 0, "category_id": 1, "bbox": [4 + 9 * k, 4, 20, 20], "score": 1.0} for k in range(3)]
    rows = np.array([[0, *d["bbox"], 1.0, 1] for d in perfect], dtype=np.float64)
    oracle = backend if backend in BACKENDS else "pycocotools"  # the by-hand run needs a COCO-API engine
    assert coco_evaluate(_coco([1, 2, 3]), perfect, [0], ["kangaroo"], [1], backend=oracle)[0][0] == \
        pytest.approx(1.0)  # image id 0 is fine
    assert evaluate_categories(_coco([1, 2, 3]), rows, [0], [1], backend)[0][0, :, 0, 0, 2].min() == 1.0
    for ids, message in (([0, 1, 2], "annotation id 0: COCOeval could never match that box"),
                         ([4, 4, 5], "1 of the 3 ground-truth annotations share an id with another")):
        with pytest.raises(ValueError, match=message):
            coco_evaluate(_coco(ids), perfect, [0], ["kangaroo"], [1], backend=oracle)
        with pytest.raises(ValueError, match="give every annotation its own id from 1"):
            evaluate_categories(_coco(ids), rows, [0], [1], backend)
