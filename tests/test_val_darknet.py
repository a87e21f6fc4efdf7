"""detect.val --metric darknet against the real Darknet's `detector map` output for the official yolov3-tiny
weights on coco-tiny train (../shared/darknet-map): the tolerances of the issue, through the ordinary val command
on the project's own COCO spec (so on any data format), with OpenCV's JPEG decoder."""

import json

import pytest

from detect.val import main
from tests.support.darknet_oracles import parse_darknet_map

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("points", [0, 11])
def test_metric_darknet_is_darknets_detector_map(shared, tmp_path, points, capsys):
    reference = parse_darknet_map(shared("darknet-map", f"coco-tiny-train_yolov3-tiny_points{points}.txt")
                                  .read_text())
    args = ["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared("weights", "yolov3-tiny.weights")), "--data", "data/coco-tiny.yaml", "--split", "train",
            "--metric", "darknet", "--points", str(points), "--project", str(tmp_path), "--device", "cpu"]
    assert main(args) == 0
    printed = parse_darknet_map(capsys.readouterr().out)
    got = json.loads((tmp_path / "exp" / "metrics.json").read_text())["darknet"]
    assert printed["map"] == pytest.approx(got["map50"], abs=1e-6)
    assert got["map50"] == pytest.approx(reference["map"], abs=0.003)
    assert len(reference["classes"]) == len(got["per_class"]) == 80
    ours = list(got["per_class"].items())  # COCO's names ("motorcycle" where coco.names says "motorbike")
    for class_id, (name, ap_percent, _, _) in reference["classes"].items():
        assert ours[class_id][1]["ap"] == pytest.approx(ap_percent / 100, abs=0.02), (class_id, name, ours[class_id])
    for key in ("tp", "fp", "fn"):
        assert abs(got[key] - reference[key]) <= 3, key
    assert got["average_iou"] * 100 == pytest.approx(reference["average_iou"], abs=1.0)  # within 1 point


def _split_map(rank, world, cfg, weights, spec, cache):
    import torch

    from detect.darknet.load import load_model
    from detect.data.loader import open_split
    from detect.evaluation.darknet_eval import darknet_split_map

    torch.set_num_threads(1)  # the same convolution arithmetic in every process
    source = open_split(spec, "val", cache)
    model = load_model(cfg, weights, exact=True).model
    result = darknet_split_map(model, source, False, 0, rank, world, batch=1)  # one image a forward pass: the
    # same floats whichever rank runs it (a batch of other images may change the last bits on the CPU)
    return result.map, result.ap.tolist(), result.tp, result.fp, result.average_iou


def test_metric_darknet_on_2_ranks_is_the_single_process_figure(shared, tmp_path):
    """Each rank computes Darknet's entries of its own images and rank 0 takes them in Darknet's list order: every
    figure equals one process's, the float32 average IoU (summed in order) included."""
    from tests.conftest import ROOT
    from tests.support.distributed import run_distributed

    args = (shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights"),
            ROOT / "data" / "coco-tiny.yaml", tmp_path / "cache")
    (one,) = run_distributed(_split_map, 1, args=args, timeout=300)
    assert one[0] > 0.3 and one[2] > 100
    assert run_distributed(_split_map, 2, args=args, timeout=300) == [one, one]
