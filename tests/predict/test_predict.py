"""detect.predict on a real coco-tiny image, on a generated video, and its input errors."""

import json
import threading

import cv2
import numpy as np
import pytest
import torch

from detect.data.formats.spec import read_class_names as read_names
from detect.data.records.images import read_image as read_image_file
from detect.inference.predictor import InferenceSettings, Predictor
from detect.predict import main, parse_args
from tests.support.log_lines import log_lines
from tests.support.val_data import NAMES, write_tiny_checkpoint


def test_predict_coco_tiny_image_finds_people(shared, tmp_path, capsys):
    image = shared("data", "coco-tiny", "val2017", "000000005001.jpg")  # a crowd of people
    args = ["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared("weights", "yolov3-tiny.weights")), "--source", str(image),
            "--names", str(shared("darknet-cfg", "coco.names")), "--device", "cpu",
            "--project", str(tmp_path), "--name", "one", "--save-conf"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "image 1/1" in out and "person" in out and " ms)" in out
    run = tmp_path / "one"
    annotated = cv2.imread(str(run / image.name))
    assert annotated.shape == cv2.imread(str(image)).shape
    rows = [line.split() for line in (run / "labels" / f"{image.stem}.txt").read_text().splitlines()]
    assert len(rows) >= 5 and all(len(r) == 6 for r in rows)
    values = np.array(rows, dtype=np.float64)
    assert (values[:, 0] == 0).sum() >= 5  # class 0 = person
    assert ((values[:, 1:5] >= 0) & (values[:, 1:5] <= 1)).all() and (values[:, 5] > 0.25).all()
    record = json.loads((run / "json" / f"{image.stem}.json").read_text())
    assert len(record["detections"]) == len(rows) and record["detections"][0]["name"] == "person"
    h, w = annotated.shape[:2]
    x1, y1, x2, y2 = record["detections"][0]["box_xyxy"]
    assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h


def _write_video(path, frames=4, size=(80, 64)):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 5, size)
    assert writer.isOpened()
    for i in range(frames):
        frame = np.full((size[1], size[0], 3), 114, np.uint8)
        cv2.rectangle(frame, (5 + 8 * i, 10), (35 + 8 * i, 40), (0, 0, 255), -1)
        writer.write(frame)
    writer.release()


def test_predict_generated_video(tmp_path, capsys):
    video = tmp_path / "clip.mp4"
    _write_video(video)
    weights = write_tiny_checkpoint(tmp_path)
    args = ["--weights", str(weights), "--source", str(video), "--img", "64", "--conf", "0.01", "--device", "cpu",
            "--project", str(tmp_path / "runs"), "--name", "vid"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert [f"frame {i}:" in out for i in range(4)] == [True] * 4
    run = tmp_path / "runs" / "vid"
    capture = cv2.VideoCapture(str(run / "clip.mp4"))
    count = 0
    while capture.read()[0]:
        count += 1
    assert count == 4 and capture.get(cv2.CAP_PROP_FRAME_WIDTH) == 80
    for i in range(4):
        record = json.loads((run / "json" / f"clip_{i}.json").read_text())
        assert record["width"] == 80 and record["height"] == 64
        lines = (run / "labels" / f"clip_{i}.txt").read_text().splitlines()
        assert len(lines) == len(record["detections"])
        assert all(d["name"] in NAMES for d in record["detections"])


def test_predict_folder_and_glob(tmp_path, capsys):
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(2):
        cv2.imwrite(str(folder / f"p{i}.png"), np.full((40, 60, 3), 60 * i, np.uint8))
    (folder / "notes.txt").write_text("not an image")
    weights = write_tiny_checkpoint(tmp_path)
    base = ["--weights", str(weights), "--img", "64", "--device", "cpu", "--project", str(tmp_path / "runs")]
    assert main(base + ["--source", str(folder), "--name", "dir"]) == 0
    assert sorted(p.name for p in (tmp_path / "runs" / "dir" / "labels").iterdir()) == ["p0.txt", "p1.txt"]
    assert main(base + ["--source", str(folder / "p1.*"), "--name", "glob"]) == 0
    assert [p.name for p in (tmp_path / "runs" / "glob" / "labels").iterdir()] == ["p1.txt"]
    assert "image 2/2" in capsys.readouterr().out


def test_predict_input_errors(tmp_path, capsys):
    weights = write_tiny_checkpoint(tmp_path)
    names = tmp_path / "two.names"
    names.write_text("a\nb\n")
    assert read_names(names) == ["a", "b"]
    image = tmp_path / "x.png"
    cv2.imwrite(str(image), np.zeros((32, 32, 3), np.uint8))
    base = ["--weights", str(weights), "--img", "64", "--device", "cpu", "--project", str(tmp_path / "runs")]
    assert main(base + ["--source", str(image), "--names", str(names)]) == 2
    assert f"2 class names (--names {names}) but tiny.pt predicts 3 classes" in capsys.readouterr().err
    assert main(base + ["--source", str(tmp_path / "nothing*.jpg")]) == 2
    assert "nothing*.jpg" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="missing.names"):
        read_names(tmp_path / "missing.names")


class _RecordingModel:
    """Stands in for a Darknet model: records its input and detects nothing."""

    max_stride = 32

    def __init__(self):
        self.inputs = []

    def __call__(self, x):
        self.inputs.append(x)
        return torch.zeros((x.shape[0], 10, 6))


def test_predict_letterboxes_like_val():
    """The same canvas as detect.val's rect (or --square) evaluation, with the image at long side --img."""
    from detect.data.sampling.samplers import eval_batches

    image = np.full((300, 500, 3), 200, np.uint8)
    for square, expected in ((False, eval_batches(np.array([[500, 300]]), 1, 200, 32, rect=True)[1][0]),
                             (True, (224, 224))):
        model = _RecordingModel()
        (det,) = Predictor(model, InferenceSettings(200, square=square), "cpu")([image])
        assert det.shape == (0, 6)
        x = model.inputs[0]
        assert tuple(x.shape[2:]) == tuple(expected)
        # the image at long side 200 in the middle, the rest the pad value
        rows = (x[0, 0] * 255).round().eq(200).any(1).nonzero().flatten()
        assert len(rows) == 120 and x.dtype == torch.float32


# --- output names, --recursive, --workers, --amp, the default --img-size and class names (issue: predict items 1-6)

def _run_dir(tmp_path, name):
    return tmp_path / "runs" / name


def _tiny_args(tmp_path, weights, source, name, *extra):
    return ["--weights", str(weights), "--source", str(source), "--conf", "0.01", "--device", "cpu",
            "--project", str(tmp_path / "runs"), "--name", name, *extra]


def _files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_output_names_stay_unique_for_inputs_of_one_stem(tmp_path):
    """a.jpg and a.png each keep their own labels, json and annotated copy; so do an image clip_1.png and the frame 1
    of a video clip.mp4, whose outputs would be labels/clip_1.txt both."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.jpg"), np.full((40, 60, 3), 90, np.uint8))
    cv2.imwrite(str(folder / "a.png"), np.full((50, 30, 3), 200, np.uint8))
    cv2.imwrite(str(folder / "b.png"), np.full((20, 24, 3), 10, np.uint8))
    cv2.imwrite(str(folder / "clip_1.png"), np.full((36, 44, 3), 30, np.uint8))
    _write_video(folder / "clip.mp4", frames=2)
    weights = write_tiny_checkpoint(tmp_path)
    assert main(_tiny_args(tmp_path, weights, folder, "same", "--img-size", "64")) == 0
    run = _run_dir(tmp_path, "same")
    assert _files(run / "labels") == ["a.jpg.txt", "a.png.txt", "b.txt", "clip.mp4_0.txt", "clip.mp4_1.txt",
                                      "clip_1.png.txt"]
    assert _files(run / "json") == [name.replace(".txt", ".json") for name in _files(run / "labels")]
    assert sorted(p.name for p in run.iterdir() if p.is_file()) == ["a.jpg", "a.png", "b.png", "clip.mp4.mp4",
                                                                     "clip_1.png"]
    for name, source, (w, h) in (("a.jpg", "a.jpg", (60, 40)), ("a.png", "a.png", (30, 50)), ("b", "b.png", (24, 20)),
                                 ("clip_1.png", "clip_1.png", (44, 36)), ("clip.mp4_1", "clip.mp4#1", (80, 64))):
        record = json.loads((run / "json" / f"{name}.json").read_text())
        assert (record["source"], record["width"], record["height"]) == (str(folder / source), w, h)
        assert len((run / "labels" / f"{name}.txt").read_text().splitlines()) == len(record["detections"])
    assert cv2.imread(str(run / "a.png")).shape == (50, 30, 3) and cv2.imread(str(run / "a.jpg")).shape == (40, 60, 3)


def test_output_names_rule():
    from detect.predict import output_names

    # the same stem: whole names; a stem equal to such a whole name (a.jpg.png's "a.jpg") then takes its own
    assert output_names(["a.jpg", "a.png", "b.jpg", "a.jpg.png"]) == ["a.jpg", "a.png", "b", "a.jpg.png"]
    # a video's frames are <name>_<n>: an image of such a name renames both; another video does not clash
    assert output_names(["v.mp4", "v_12.jpg", "v_1.avi", "w_3.png"]) == ["v.mp4", "v_12.jpg", "v_1", "w_3"]
    # below --source: sub-paths are part of the names, so x/a and y/a differ; x/a.jpg and x/a.png do not
    assert output_names(["x/a.jpg", "y/a.jpg", "x/a.png"]) == ["x/a.jpg", "y/a", "x/a.png"]


def test_sub_folders_are_searched_with_recursive_only(tmp_path, capsys):
    folder = tmp_path / "tree"
    for sub in ("x", "y/z"):
        (folder / sub).mkdir(parents=True)
    cv2.imwrite(str(folder / "top.png"), np.full((30, 40, 3), 50, np.uint8))
    cv2.imwrite(str(folder / "x" / "a.jpg"), np.full((40, 60, 3), 90, np.uint8))
    cv2.imwrite(str(folder / "y" / "a.jpg"), np.full((50, 30, 3), 150, np.uint8))
    cv2.imwrite(str(folder / "y" / "z" / "deep.png"), np.full((20, 20, 3), 250, np.uint8))
    weights = write_tiny_checkpoint(tmp_path)
    with log_lines("detect.predict") as lines:
        assert main(_tiny_args(tmp_path, weights, folder, "flat", "--img-size", "64")) == 0
    assert f"--source {folder}: 2 sub-folder(s) not searched (--recursive searches them)" in lines
    assert _files(_run_dir(tmp_path, "flat") / "labels") == ["top.txt"]
    assert "image 1/1" in capsys.readouterr().out

    with log_lines("detect.predict") as lines:
        assert main(_tiny_args(tmp_path, weights, folder, "deep", "--img-size", "64", "--recursive")) == 0
    assert not any("not searched" in line for line in lines)
    run = _run_dir(tmp_path, "deep")
    assert _files(run / "labels") == ["top.txt", "x/a.txt", "y/a.txt", "y/z/deep.txt"]
    assert _files(run / "json") == ["top.json", "x/a.json", "y/a.json", "y/z/deep.json"]
    assert _files(run) == sorted(["top.png", "x/a.jpg", "y/a.jpg", "y/z/deep.png", *(f"labels/{p}" for p in _files(
        run / "labels")), *(f"json/{p}" for p in _files(run / "json"))])
    for name, (w, h) in (("x/a", (60, 40)), ("y/a", (30, 50))):
        record = json.loads((run / "json" / f"{name}.json").read_text())
        assert (record["source"], record["width"], record["height"]) == (str(folder / f"{name}.jpg"), w, h)
    assert "image 4/4" in capsys.readouterr().out
    # a glob's outputs mirror the path below its last folder without a wildcard
    assert main(_tiny_args(tmp_path, weights, f"{folder}/*/a.jpg", "glob", "--img-size", "64")) == 0
    assert _files(_run_dir(tmp_path, "glob") / "labels") == ["x/a.txt", "y/a.txt"]


class _Recording:
    """Wraps the loaded model: records each input's shape and the autocast dtype its forward pass ran under."""

    def __init__(self, model):
        self.model, self.max_stride, self.num_classes = model, model.max_stride, model.num_classes
        self.shapes, self.autocast = [], []

    def __call__(self, x):
        self.shapes.append(tuple(x.shape))
        self.autocast.append(torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else None)
        return self.model(x)


@pytest.fixture
def recorded(monkeypatch):
    """The models detect.predict loads in this test, wrapped in _Recording."""
    import dataclasses

    import detect.predict.cli
    from detect.inference.options import load_handle

    models = []

    def load(*args, **kwargs):
        handle = load_handle(*args, **kwargs)
        models.append(_Recording(handle.runner))
        return dataclasses.replace(handle, runner=models[-1])

    monkeypatch.setattr(detect.predict.cli, "load_handle", load)
    return models


def _folder_of_images(tmp_path, count=5):
    folder = tmp_path / "imgs"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i in range(count):
        cv2.imwrite(str(folder / f"p{i}.png"), rng.integers(0, 255, (40 + 4 * i, 60, 3), dtype=np.uint8))
    return folder


def _labels(run):
    return {p.name: p.read_text() for p in sorted((run / "labels").iterdir())}


def test_workers_decode_images_ahead_on_threads(tmp_path, monkeypatch):
    import detect.predict.cli

    folder = _folder_of_images(tmp_path)
    weights = write_tiny_checkpoint(tmp_path)
    threads = []

    def read_image(path):
        threads.append(threading.current_thread().name)
        return read_image_file(path)

    monkeypatch.setattr(detect.predict.cli, "read_image", read_image)
    assert main(_tiny_args(tmp_path, weights, folder, "w0", "--img-size", "64", "--workers", "0")) == 0
    assert threads == ["MainThread"] * 5
    threads.clear()
    assert main(_tiny_args(tmp_path, weights, folder, "w2", "--img-size", "64", "--workers", "2")) == 0
    assert len(threads) == 5 and all(name.startswith("predict-decode") for name in threads)
    assert _labels(_run_dir(tmp_path, "w2")) == _labels(_run_dir(tmp_path, "w0"))
    assert len(_labels(_run_dir(tmp_path, "w0"))) == 5
    with pytest.raises(SystemExit):
        parse_args(["--weights", "w.pt", "--source", "x.jpg", "--workers", "-1"])


def test_amp_is_ignored_on_the_cpu(tmp_path, recorded):
    folder = _folder_of_images(tmp_path, count=2)
    weights = write_tiny_checkpoint(tmp_path)
    assert main(_tiny_args(tmp_path, weights, folder, "fp32", "--img-size", "64")) == 0
    assert main(_tiny_args(tmp_path, weights, folder, "bf16", "--img-size", "64", "--amp", "bf16")) == 0
    assert [m.autocast for m in recorded] == [[None, None], [None, None]]
    assert _labels(_run_dir(tmp_path, "bf16")) == _labels(_run_dir(tmp_path, "fp32"))
    assert parse_args(["--weights", "w.pt", "--source", "x.jpg", "--half"]).amp == "fp16"


@pytest.mark.gpu
def test_amp_autocasts_the_forward_pass_on_cuda(tmp_path, recorded):
    folder = _folder_of_images(tmp_path, count=2)
    weights = write_tiny_checkpoint(tmp_path)
    common = ["--img-size", "64", "--device", "cuda"]
    assert main(_tiny_args(tmp_path, weights, folder, "fp32", *common)) == 0
    assert main(_tiny_args(tmp_path, weights, folder, "fp16", *common, "--half")) == 0
    assert main(_tiny_args(tmp_path, weights, folder, "bf16", *common, "--amp", "bf16")) == 0
    assert [m.autocast for m in recorded] == [[None] * 2, [torch.float16] * 2, [torch.bfloat16] * 2]
    for name in ("fp16", "bf16"):
        for p in (_run_dir(tmp_path, "fp32") / "json").iterdir():
            ours = json.loads((_run_dir(tmp_path, name) / "json" / p.name).read_text())["detections"]
            theirs = json.loads(p.read_text())["detections"]
            assert abs(len(ours) - len(theirs)) <= max(2, len(theirs) // 10)


def _rewrite(path, **entries):
    """The checkpoint at `path` with `entries` set (opts: the training options best.pt and last.pt record)."""
    checkpoint = torch.load(path, weights_only=True)
    checkpoint.update(entries)
    torch.save(checkpoint, path)
    return path


def test_default_img_size_is_the_training_size_else_the_cfgs(tmp_path, recorded):
    folder = _folder_of_images(tmp_path, count=1)  # 40x60: long side 60
    weights = write_tiny_checkpoint(tmp_path)  # [net] 64x64, no training options
    with log_lines("detect.inference") as lines:
        assert main(_tiny_args(tmp_path, weights, folder, "cfg")) == 0
    assert "--img-size 64: the [net] size of the cfg tiny.pt carries (--img-size not given)" in lines
    assert main(_tiny_args(tmp_path, weights, folder, "explicit64", "--img-size", "64")) == 0
    _rewrite(weights, opts={"img_size": 96})
    with log_lines("detect.inference") as lines:
        assert main(_tiny_args(tmp_path, weights, folder, "trained")) == 0
    assert "--img-size 96: the size tiny.pt was trained at (--img-size not given)" in lines
    assert main(_tiny_args(tmp_path, weights, folder, "explicit96", "--img-size", "96")) == 0
    shapes = [m.shapes for m in recorded]
    assert shapes[0] == shapes[1] and shapes[2] == shapes[3] and shapes[0] != shapes[2]
    assert max(shapes[2][0][2:]) >= 96 > max(shapes[0][0][2:])  # the long side at 96, not at 416


def test_img_size_not_a_stride_multiple_is_refused_before_anything_runs(shared, tmp_path, capsys):
    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    image = tmp_path / "x.png"
    cv2.imwrite(str(image), np.zeros((32, 32, 3), np.uint8))
    args = ["--cfg", str(cfg), "--weights", str(weights), "--source", str(image), "--device", "cpu",
            "--project", str(tmp_path / "runs"), "--img-size", "100"]
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == ("error: --img-size 100 must be a multiple of the model's largest "
                                               "stride 32 (and at least 32): try 96 or 128")
    assert not (tmp_path / "runs").exists()


def test_darknet_weights_without_names_are_labelled_with_cocos(shared, tmp_path, capsys):
    image = shared("data", "coco-tiny", "val2017", "000000005001.jpg")  # a crowd of people
    args = ["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared("weights", "yolov3-tiny.weights")), "--source", str(image), "--img-size", "320",
            "--device", "cpu", "--project", str(tmp_path), "--name", "coco"]
    with log_lines("detect.inference") as lines:
        assert main(args) == 0
    assert lines.count("class names: COCO's 80 (yolov3-tiny.weights carries none; --names overrides)") == 1
    detections = json.loads((tmp_path / "coco" / "json" / f"{image.stem}.json").read_text())["detections"]
    assert len(detections) >= 5 and {d["name"] for d in detections} >= {"person"}
    assert "person" in capsys.readouterr().out


def test_other_class_counts_keep_ids_and_say_so(tmp_path):
    weights = _rewrite(write_tiny_checkpoint(tmp_path), names=[])  # 3 classes, no names in the .pt
    folder = _folder_of_images(tmp_path, count=1)
    with log_lines("detect.inference") as lines:
        assert main(_tiny_args(tmp_path, weights, folder, "ids", "--img-size", "64")) == 0
    said = [line for line in lines if line.startswith("class names:")]
    assert said == ["class names: the class ids 0..2 (tiny.pt carries no names and the model has 3 classes, not "
                    "COCO's 80; --names gives them)"]
    record = json.loads((_run_dir(tmp_path, "ids") / "json" / "p0.json").read_text())
    assert record["detections"] and {d["name"] for d in record["detections"]} <= {"0", "1", "2"}


def test_a_box_at_the_right_edge_keeps_its_whole_label_inside_the_image():
    from detect.predict.outputs import class_colour, draw

    image = np.zeros((120, 200, 3), np.uint8)
    det = torch.tensor([[185.0, 40.0, 199.0, 100.0, 0.44, 5.0]])  # a narrow box against the right edge
    out = draw(image, det, [str(k) for k in range(5)] + ["bus"])
    colour = np.array(class_colour(5))
    label_rows = out[:40]  # the label sits above the box's top (y 40)
    filled = np.nonzero((label_rows == colour).all(-1).any(0))[0]
    (tw, _), _ = cv2.getTextSize("bus 0.44", cv2.FONT_HERSHEY_SIMPLEX, 0.35, 1)  # thickness 1: draw_label's scale
    assert filled.max() == 199 and filled.max() - filled.min() + 1 >= tw  # whole width, ending at the edge
    left_side = np.abs(out[45:95, 184:187].astype(int) - colour).sum(-1).min(-1)  # anti-aliased 1-pixel line
    assert (left_side < 60).all()  # the box itself is drawn where it is
