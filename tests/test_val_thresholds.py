"""Per-class thresholds end to end: `detect.val --save-thresholds` stores them with a .pt (and beside a .weights
file), `Detector.load` (its streams too) and detect.predict use them when no conf is given (one log line),
`conf=` / `--conf` overrides them for every class, and the detections are those of one low threshold filtered
class by class."""

import json

import cv2
import numpy as np
import pytest
import torch

from detect.api import Detector
from detect.evaluation.thresholds import SHRINK_K
from detect.export.cli import main as export_main
from detect.inference.class_conf import ClassConf, read_class_conf, save_class_conf, sidecar_path
from detect.predict import main as predict_main
from detect.val import main as val_main
from tests.support.log_lines import log_lines
from tests.support.val_data import write_coco_dataset, write_tiny_checkpoint


def _saved(spec, weights, tmp_path, *extra) -> dict:
    args = ["--weights", str(weights), "--data", str(spec), "--img", "64", "--batch", "2", "--device", "cpu",
            "--workers", "0", "--project", str(tmp_path / "runs"), "--save-thresholds", *extra]
    assert val_main(args) == 0
    return read_class_conf(weights).to_dict()


def test_val_saves_them_into_the_pt_and_the_api_uses_them_unless_conf_is_given(tmp_path, capsys):
    spec, weights = write_coco_dataset(tmp_path / "data"), write_tiny_checkpoint(tmp_path)
    stored = _saved(spec, weights, tmp_path)
    out = capsys.readouterr().out
    assert "per-class confidence thresholds written to" in out and "best-F1" in out
    assert stored == torch.load(weights, weights_only=True)["class_conf"]
    assert len(stored["conf"]) == 3 and stored["instances"] == [1, 1, 4]  # the boxes of write_coco_dataset
    assert stored["shrink"] == SHRINK_K and "the val split of" in stored["chosen_on"]
    assert stored["chosen_on"].endswith("(3 images)")
    with log_lines("detect.inference.class_conf") as lines:
        detector = Detector.load(weights, device="cpu")
    assert detector.settings.class_conf == tuple(stored["conf"]) and detector.settings.conf == min(stored["conf"])
    assert len(lines) == 1 and lines[0].startswith("confidence: tiny.pt's per-class thresholds")
    with log_lines("detect.inference.class_conf") as lines:
        overridden = Detector.load(weights, device="cpu", conf=0.3)
    assert overridden.settings.class_conf is None and overridden.settings.conf == 0.3
    assert lines == ["conf=0.3 for every class (tiny.pt's per-class thresholds are not used)"]
    with pytest.raises(SystemExit) as refused:  # a class-agnostic evaluation has no per-class thresholds to give
        val_main(["--weights", str(weights), "--data", str(spec), "--single-cls", "--save-thresholds"])
    assert refused.value.code == 2 and "leave out --single-cls and --metric darknet" in capsys.readouterr().err


def test_detections_are_one_low_threshold_filtered_class_by_class_in_the_api_and_predict(tmp_path):
    weights = write_tiny_checkpoint(tmp_path)
    image = cv2.imread(str(write_coco_dataset(tmp_path / "data").parent / "images" / "img2.jpg"))
    low = Detector.load(weights, device="cpu", conf=0.3)(image)
    assert 0 < len(low) < 300  # below max_det: the filtered run keeps exactly these rows that pass
    # each class present: its median score (some kept, some dropped); an absent class: 0.9
    thresholds = [float(np.median(low.scores[low.class_ids == k])) if (low.class_ids == k).any() else 0.9
                  for k in range(3)]
    save_class_conf(weights, ClassConf(tuple(thresholds), 0.5, (1, 1, 1), 10.0, "a test"))
    found = Detector.load(weights, device="cpu")(image)
    keep = low.scores >= np.asarray(thresholds)[low.class_ids]
    assert 0 < keep.sum() < len(low)
    np.testing.assert_array_equal(found.class_ids, low.class_ids[keep])
    np.testing.assert_allclose(found.scores, low.scores[keep], rtol=1e-6)
    np.testing.assert_allclose(found.boxes, low.boxes[keep], atol=1e-4)
    video = tmp_path / "clip.avi"  # a stream's frames go through the same detector
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5, (64, 64))
    for _ in range(2):
        writer.write(image)
    writer.release()
    detector = Detector.load(weights, device="cpu")
    with detector.stream(str(video)) as frames:
        streamed = [(frame, found) for frame, found in frames]
    assert len(streamed) == 2 and all(len(found) for _, found in streamed)
    for frame, found in streamed:
        assert (found.scores >= np.asarray(thresholds)[found.class_ids]).all()
        np.testing.assert_array_equal(found.scores, detector(frame).scores)

    cv2.imwrite(str(tmp_path / "img2.png"), image)
    args = ["--weights", str(weights), "--source", str(tmp_path / "img2.png"), "--device", "cpu", "--project",
            str(tmp_path / "pred")]
    with log_lines("detect.inference.class_conf") as lines:
        assert predict_main(args) == 0
    assert len(lines) == 1 and "per-class thresholds" in lines[0] and "--conf X gives every class X" in lines[0]
    predicted = json.loads((tmp_path / "pred" / "exp" / "json" / "img2.json").read_text())["detections"]
    assert len(predicted) == keep.sum()
    with log_lines("detect.inference.class_conf") as lines:
        assert predict_main([*args, "--conf", "0.3"]) == 0
    assert lines == ["--conf 0.3 for every class (tiny.pt's per-class thresholds are not used)"]
    predicted = json.loads((tmp_path / "pred" / "exp2" / "json" / "img2.json").read_text())["detections"]
    assert len(predicted) == len(low)


def test_darknet_weights_keep_them_in_a_json_beside_the_file(tmp_path):
    spec, weights = write_coco_dataset(tmp_path / "data"), write_tiny_checkpoint(tmp_path)
    chosen = ClassConf((0.2, 0.3, 0.4), 0.3, (1, 1, 4), 10.0, "a test")
    save_class_conf(weights, chosen)
    assert export_main(["--weights", str(weights), "--format", "darknet", "--output", str(tmp_path / "dk")]) == 0
    darknet = tmp_path / "dk.weights"
    assert read_class_conf(darknet) == chosen and sidecar_path(darknet).is_file()  # the export copied them
    detector = Detector.load(darknet, tmp_path / "dk.cfg", device="cpu")
    assert detector.settings.class_conf == (0.2, 0.3, 0.4)
    stored = _saved(spec, darknet, tmp_path, "--cfg", str(tmp_path / "dk.cfg"))  # chosen again, beside the file
    beside = json.loads(sidecar_path(darknet).read_text())
    assert beside.pop("weights_sha1") and beside == stored and stored["conf"] != [0.2, 0.3, 0.4]
    # a model without thresholds exported to the same name takes the earlier export's json away with it
    (tmp_path / "plain").mkdir()
    plain = write_tiny_checkpoint(tmp_path / "plain")
    assert export_main(["--weights", str(plain), "--format", "darknet", "--output", str(tmp_path / "dk")]) == 0
    assert not sidecar_path(darknet).exists() and read_class_conf(darknet) is None
