"""--metric darknet on EXIF-rotated photos: Darknet reads them as stored (sideways) against labels drawn upright,
and says so in one warning; --exif apply reads them upright, which gives the figure of the upright images."""

import json

import cv2
import numpy as np
import pytest
from PIL import Image

from detect.val import main as val_main
from tests.conftest import shared_path
from tests.support.log_lines import log_lines

IMAGES = 8  # coco-tiny val's first, by file name


def _write_split(root, coco, images, rotated: bool):
    """The images as stored JPEGs turned 90 degrees counter-clockwise with EXIF orientation 6 (viewers turn them
    back upright), or as PNGs of exactly the upright pixels OpenCV makes of those JPEGs; one COCO json for both,
    its boxes drawn on the upright images."""
    folder = root / "images"
    folder.mkdir(parents=True)
    entries = []
    for image in images:
        upright = Image.open(shared_path("data", "coco-tiny", "val2017", image["file_name"])).convert("RGB")
        sideways = folder / f"{image['id']}.jpg"
        exif = Image.Exif()
        exif[0x0112] = 6
        upright.transpose(Image.Transpose.ROTATE_90).save(sideways, quality=95, exif=exif.tobytes())
        name = sideways.name
        if not rotated:  # the stored pixels turned clockwise: the very pixels --exif apply reads
            stored = cv2.imread(str(sideways), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
            sideways.unlink()
            name = f"{image['id']}.png"
            cv2.imwrite(str(folder / name), np.ascontiguousarray(np.rot90(stored, -1)))
        entries.append({**image, "file_name": name})
    ids = {image["id"] for image in images}
    annotations = [a for a in coco["annotations"] if a["image_id"] in ids]
    (root / "val.json").write_text(json.dumps({"images": entries, "annotations": annotations,
                                               "categories": coco["categories"]}))
    spec = root / "data.yaml"
    spec.write_text(f"path: {root}\nformat: coco\ntrain: images\nval: images\ntrain_annotations: val.json\n"
                    f"val_annotations: val.json\n")
    return spec


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    coco = json.loads(shared_path("data", "coco-tiny", "annotations", "instances_val2017.json").read_text())
    images = sorted(coco["images"], key=lambda i: i["file_name"])[:IMAGES]
    root = tmp_path_factory.mktemp("exif")
    return {kind: _write_split(root / kind, coco, images, kind == "rotated") for kind in ("upright", "rotated")}


def _darknet_map(spec, tmp_path, monkeypatch, *extra) -> tuple[float, list[str]]:
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))
    name = f"{spec.parent.name}{''.join(extra)}".replace("-", "")
    args = ["--cfg", str(shared_path("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared_path("weights", "yolov3-tiny.weights")), "--data", str(spec), "--metric", "darknet",
            "--device", "cpu", "--project", str(tmp_path / "runs"), "--name", name, *extra]
    with log_lines("detect.val") as lines:
        assert val_main(args) == 0
    return json.loads((tmp_path / "runs" / name / "metrics.json").read_text())["darknet"]["map50"], lines


def test_darknet_reads_rotated_photos_sideways_and_says_so_and_exif_apply_reads_them_upright(
        splits, tmp_path, monkeypatch):
    upright, upright_lines = _darknet_map(splits["upright"], tmp_path, monkeypatch)
    sideways, lines = _darknet_map(splits["rotated"], tmp_path, monkeypatch)
    applied, applied_lines = _darknet_map(splits["rotated"], tmp_path, monkeypatch, "--exif", "apply")
    print(f"mAP@0.50: upright {upright:.4f}, rotated as Darknet reads them {sideways:.4f}, --exif apply {applied:.4f}")
    assert upright > 0.1 and sideways < upright / 10  # 0.134 and 0.0003: the labels miss the sideways objects
    assert applied == pytest.approx(upright, abs=1e-9)  # the same pixels, so the same figure
    warnings = [line for line in lines if "EXIF" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"--metric darknet: {IMAGES} of the {IMAGES} images of the val split carry an "
                                  f"EXIF orientation other than 1 (e.g. ")
    assert "Darknet ignores EXIF, so this figure, as Darknet's own, is computed on their stored pixels" in warnings[0]
    assert warnings[0].endswith("--exif apply gives the figure with the orientation applied")
    assert not [line for line in upright_lines if "EXIF" in line]  # PNGs: nothing rotated, nothing said
    assert [line for line in applied_lines if "EXIF" in line] == [
        line for line in applied_lines if line.startswith(f"--metric darknet --exif apply: {IMAGES} of the")]


def test_exif_goes_with_the_darknet_metric_only(capsys):
    with pytest.raises(SystemExit) as exit_info:
        val_main(["--weights", "w.pt", "--data", "d.yaml", "--exif", "apply"])
    assert exit_info.value.code == 2
    assert "--exif apply goes with --metric darknet" in capsys.readouterr().err


def test_training_with_the_darknet_metric_says_so_too(splits, tmp_path, monkeypatch):
    """train --metric darknet follows Darknet's figure, so it warns as detect.val does, pointing at the flag."""
    from types import SimpleNamespace

    from detect.data.formats.spec import load_data_spec
    from detect.data.loader import open_split
    from detect.engine.fitness import make_evaluator

    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))
    source = open_split(load_data_spec(splits["rotated"]), "val", None)
    ctx = SimpleNamespace(rank=0, world_size=1, device="cpu")
    with log_lines("detect.val") as lines:
        assert make_evaluator(source, 416, 2, 0, 32, ctx, metric="darknet") is not None
    warnings = [line for line in lines if "EXIF" in line]
    assert len(warnings) == 1 and f"{IMAGES} of the {IMAGES} images" in warnings[0]
    assert warnings[0].endswith("`detect.val --metric darknet --exif apply` gives Darknet's figure with the "
                                "orientation applied")
