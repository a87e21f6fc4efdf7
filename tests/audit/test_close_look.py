"""A closer look at the small boxes (detect.audit.close_look): which boxes, the crop about each, and how a crop's
detections count for its own box only."""

from pathlib import Path

import numpy as np
import pytest

from detect.audit.close_look import CONTEXT, MAX_UPSCALE, boxes_to_look_at, crop_window, with_looks
from detect.audit.evidence import AuditImage, label_evidence
from detect.audit.likelihood import simulation_plan
from detect.audit.scoring import find_issues
from detect.ops.boxes_np import box_iou
from tests.support.audit_scenes import audit_scene

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
needs_shared = pytest.mark.skipif(not (SHARED / "weights" / "yolov3-tiny.weights").is_file(),
                                  reason="needs ../shared (official weights, coco-tiny)")


def image(boxes, classes, detections=(), difficult=None, side=640):
    boxes = np.array(boxes, float).reshape(-1, 4)
    return AuditImage(0, boxes, np.array(classes, np.int64),
                      np.zeros(len(boxes), bool) if difficult is None else np.array(difficult),
                      np.zeros((0, 4)), np.zeros(0, np.int64), np.array(detections, float).reshape(-1, 6), side)


def test_the_crop_is_three_times_the_box_at_least_a_quarter_of_the_input_and_inside_the_image():
    # a 40 px box: a 120 px square about its centre
    assert crop_window(np.array([300, 200, 340, 230]), 640, 480, 416) == (260, 155, 380, 275)
    # a 10 px box: the crop stays 416 / 4 = 104 px, so no pixel is blown up more than 4 times
    x1, y1, x2, y2 = crop_window(np.array([300, 200, 310, 210]), 640, 480, 416)
    assert (x2 - x1, y2 - y1) == (104, 104) and (x1 + x2) / 2 == 305
    # at the corner: moved inside, not cut
    assert crop_window(np.array([0, 0, 30, 30]), 640, 480, 416) == (0, 0, 104, 104)
    assert crop_window(np.array([620, 460, 640, 480]), 640, 480, 416) == (536, 376, 640, 480)
    # an image smaller than the crop: the whole image
    assert crop_window(np.array([10, 10, 20, 20]), 60, 50, 416) == (0, 0, 60, 50)
    assert CONTEXT == 3.0 and MAX_UPSCALE == 4.0


def test_the_small_labels_and_the_small_simulated_errors_are_looked_at_each_once():
    # on a 640 px image at 416: small is under 20 px at the input, about 31 px in the image
    labels = [[10, 10, 30, 30], [100, 100, 300, 300], [400, 10, 420, 30], [500, 400, 520, 420]]
    im = image(labels, [0, 0, 1, 0], difficult=[False, False, False, True])
    boxes = boxes_to_look_at([im], 2, 416)
    looked = {tuple(b) for b in boxes[0]}
    assert {(10, 10, 30, 30), (400, 10, 420, 30)} <= looked  # the small labels
    assert (100, 100, 300, 300) not in looked and (500, 400, 520, 420) not in looked  # large; difficult
    # every small box the scoring's simulation will judge is there too, the very same numbers
    for change in simulation_plan([im], 2):
        for box in (change.misplaced, change.invented):
            if box is not None and max(box[2] - box[0], box[3] - box[1]) < 25:
                assert tuple(box) in looked
    assert len(looked) == len(boxes[0])


def test_a_crops_detections_count_for_its_own_box_only():
    # two small labels side by side, the model sees neither in the whole image; the crop about the first shows
    # it (and its neighbour), the second had no closer look
    im = image([[100, 100, 120, 120], [125, 100, 145, 120]], [0, 0])
    first_crop = np.array([[101, 100, 121, 120, 0.6, 0], [125, 101, 145, 121, 0.5, 0]])
    looked = with_looks([im], {0: (im.boxes[:1], [first_crop])})[0]
    assert looked.looked.shape == (2, 7) and looked.looked[:, 6].tolist() == [0, 0]
    assert looked.evidence_rows().shape == (2, 6)
    ev = label_evidence(looked, np.array([0.7, 0.65]))
    assert ev.confirm.tolist() == [0.7, 0.0]  # the neighbour's detection in the first's crop is not the second's
    assert ev.seen_conf[1] == 0.0
    # nor is the neighbour's object the first label's true place (it is another label's object)
    assert ev.shifted.tolist() == [0.0, 0.0]
    # the evidence rows point past the image's detections into the crops'
    moved = image([[111, 100, 131, 120]], [0])  # IoU 0.33 with the crop's detection
    ev = label_evidence(with_looks([moved], {0: (moved.boxes, [first_crop[:1]])})[0], np.array([0.7]))
    assert ev.shifted_det.tolist() == [0]


def test_a_small_label_seen_only_closer_is_no_longer_a_label_on_nothing():
    images, errors = audit_scene()
    # image 5's first label made small, and the model's whole-image detection of it taken away
    im = images[5]
    im.boxes[0] = [300.0, 300.0, 316.0, 316.0]
    im.detections = im.detections[1:]
    label = (5, 0)

    def listed(issues):
        return [i.kind for i in issues if (i.image, i.label) == label]

    assert listed(find_issues(images, 3, 416)) == ["spurious"]
    seen_closer = np.array([[300.5, 300, 316, 316.5, 0.8, im.classes[0]]])
    looked = with_looks(images, {5: (im.boxes[:1], [seen_closer])})
    assert listed(find_issues(looked, 3, 416)) == []


@needs_shared
def test_the_model_looks_closer_at_small_coco_objects_in_image_pixels(tmp_path):
    from detect.audit.detections import ModelRun, look_closer, small_boxes
    from detect.data.loader import open_split
    from detect.inference.options import InferenceOptions
    from detect.runtime import dist

    source = open_split("data/coco-tiny.yaml", "val", tmp_path)
    boxes = small_boxes(source, 416)
    picked = sorted(boxes)[:3]
    run = ModelRun(str(SHARED / "weights" / "yolov3-tiny.weights"), str(SHARED / "darknet-cfg" / "yolov3-tiny.cfg"),
                   "data/coco-tiny.yaml", "val", InferenceOptions(img_size=416), 0, tmp_path)
    found = look_closer(run, {source.records[n].image_id: boxes[n] for n in picked}, dist.init_distributed("cpu"))
    assert sorted(found) == sorted(source.records[n].image_id for n in picked)
    seen = 0
    for n in picked:
        record = source.records[n]
        assert len(found[record.image_id]) == len(boxes[n])
        for box, det in zip(boxes[n], found[record.image_id]):
            assert det.shape[1] == 6 and (det[:, 5] >= 0).all()
            # image pixels: every detection lies in (or at the edge of) the crop about its box
            x1, y1, x2, y2 = crop_window(box, record.width, record.height, 416)
            assert (det[:, 0] >= x1 - 2).all() and (det[:, 2] <= x2 + 2).all()
            assert (det[:, 1] >= y1 - 2).all() and (det[:, 3] <= y2 + 2).all()
            labels = np.asarray(record.boxes)
            j = np.abs(labels - box).max(1).argmin()
            if np.abs(labels[j] - box).max() < 1e-6:
                same = det[det[:, 5] == record.classes[j]]
                seen += bool(len(same)) and box_iou(box[None], same[:, :4]).max() >= 0.5
    assert seen >= 3  # small COCO labels found at their place in their crop
