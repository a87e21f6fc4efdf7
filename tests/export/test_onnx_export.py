"""ONNX export: the graph passes onnx.checker and onnxruntime gives PyTorch's rows (real weights and images,
scale_x_y, new_coords, dynamic shapes, fp16); NMS in the graph gives detect.inference.postprocess's detections."""

import json

import cv2
import numpy as np
import pytest
import torch

from detect.darknet.load import for_inference, load_model
from detect.darknet.model import Darknet
from detect.data.augmentation.augment import letterbox
from detect.export.onnx_export import OnnxExportOptions, export_onnx
from detect.inference.loading import load_model_file
from detect.inference.onnx_metadata import PREPROCESS
from detect.inference.onnx_runtime import load_onnx_model
from detect.inference.optional import INSTALL_HINT, require
from detect.inference.postprocess import non_max_suppression

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

FP32 = {"rtol": 1e-4, "atol": 1e-4}  # boxes are in pixels: 1e-4 relative, probabilities 1e-4 absolute


def real_images(shared, size, count=3) -> torch.Tensor:
    """`count` coco-tiny val images letterboxed square as detect.val does, float [N, 3, size, size]."""
    files = sorted(shared("data", "coco-tiny", "val2017").glob("*.jpg"))[:count]
    batch = [letterbox(cv2.imread(str(f)), (size, size), size)[0][:, :, ::-1].transpose(2, 0, 1) for f in files]
    return torch.from_numpy(np.ascontiguousarray(np.stack(batch))).float() / 255


def random_model(cfg: str, size: int, classes: int) -> Darknet:
    """A seeded random model whose BatchNorm statistics are not the identity (so fusing them is tested)."""
    torch.manual_seed(0)
    model = Darknet(cfg, img_size=size, num_classes=classes)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
    return model.eval()


def reference(model, x):
    with torch.no_grad():
        return for_inference(model, torch.device("cpu"), pack=False)(x)


@pytest.fixture(scope="module")
def yolov3_tiny(tmp_path_factory):
    from tests.conftest import shared_path

    cfg, weights = shared_path("darknet-cfg", "yolov3-tiny.cfg"), shared_path("weights", "yolov3-tiny.weights")
    names = shared_path("darknet-cfg", "coco.names").read_text().split("\n")
    model = for_inference(load_model(cfg, weights, img_size=416, exact=True).model, torch.device("cpu"), pack=False)
    path = tmp_path_factory.mktemp("onnx") / "yolov3-tiny.onnx"
    export_onnx(model, path, OnnxExportOptions(img_size=(416, 416)), [n for n in names if n])
    return model, path


@pytest.mark.slow
def test_yolov3_tiny_real_weights_match_pytorch(yolov3_tiny, shared):
    model, path = yolov3_tiny
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    onnx_model = load_onnx_model(path)
    assert (onnx_model.input_size, onnx_model.batch_size, onnx_model.max_stride) == ((416, 416), 1, 32)
    assert onnx_model.num_classes == 80 and onnx_model.names[:2] == ["person", "bicycle"]
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert json.loads(props["strides"]) == [32, 16] and props["resize"] == "stretch"  # the cfg has no letter_box
    assert json.loads(props["preprocess"]) == PREPROCESS["stretch"]
    x = real_images(shared, 416)  # 3 images through a batch-1 graph: served in chunks
    expected = reference(model, x)
    got = onnx_model(x)
    assert got.shape == (3, 2535, 85)
    torch.testing.assert_close(got, expected, **FP32)
    assert expected[..., 4].max() > 0.5  # real detections, not a blank picture


def test_yolov4_tiny_scale_x_y_matches_pytorch(tmp_path):
    model = random_model("cfg/yolov4-tiny.cfg", 128, 3)
    assert {h.scale_x_y for h in model.heads} == {1.05}
    export_onnx(model, tmp_path / "m.onnx", OnnxExportOptions(img_size=(128, 128), batch=2))
    x = torch.rand(2, 3, 128, 128, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(load_onnx_model(tmp_path / "m.onnx")(x), reference(model, x), **FP32)


def test_new_coords_matches_pytorch(tmp_path):
    model = random_model("cfg/yolov7-tiny.cfg", (96, 128), 2)
    assert all(h.new_coords and h.scale_x_y == 2.0 for h in model.heads)
    export_onnx(model, tmp_path / "m.onnx", OnnxExportOptions(img_size=(96, 128), batch=2))
    onnx_model = load_onnx_model(tmp_path / "m.onnx")
    assert (onnx_model.input_size, onnx_model.batch_size) == ((96, 128), 2)
    x = torch.rand(2, 3, 96, 128, generator=torch.Generator().manual_seed(2))
    got = onnx_model(x)
    assert got.shape == (2, 3 * 21 * 3 * 4, 7)  # 3 anchors; 1 + 4 + 16 cells per 32x32 block (strides 32, 16, 8)
    torch.testing.assert_close(got, reference(model, x), **FP32)


@pytest.mark.slow
def test_dynamic_two_batches_two_rect_sizes(tmp_path):
    model = random_model("cfg/yolov3-tiny.cfg", 128, 2)
    export_onnx(model, tmp_path / "m.onnx", OnnxExportOptions(img_size=(128, 128), dynamic=True))
    onnx_model = load_onnx_model(tmp_path / "m.onnx")
    assert onnx_model.input_size is None and onnx_model.batch_size is None
    dims = onnx.load(str(tmp_path / "m.onnx")).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 3, "height", "width"]
    generator = torch.Generator().manual_seed(2)
    for batch, (h, w) in ((1, (128, 128)), (3, (96, 160))):
        x = torch.rand(batch, 3, h, w, generator=generator)
        got = onnx_model(x)
        assert got.shape == (batch, 3 * 5 * (h // 32) * (w // 32), 7)  # 3 anchors; 1 + 4 cells per 32x32 block
        torch.testing.assert_close(got, reference(model, x), **FP32)
    with pytest.raises(ValueError, match="not a multiple of the stride 32"):
        onnx_model(torch.rand(1, 3, 100, 128))


def test_half_export_loads_and_roughly_matches(tmp_path):
    model = random_model("cfg/yolov4-tiny.cfg", 128, 3)
    x = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(3))
    expected = reference(model, x)
    export_onnx(model, tmp_path / "h.onnx", OnnxExportOptions(img_size=(128, 128), half=True))
    assert next(model.parameters()).dtype == torch.float32  # a copy was converted to fp16
    proto = onnx.load(str(tmp_path / "h.onnx"))
    onnx.checker.check_model(proto, full_check=True)
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    got = load_onnx_model(tmp_path / "h.onnx")(x)  # onnxruntime's CPU runs fp16 convolutions
    assert got.dtype == torch.float32
    torch.testing.assert_close(got[..., 4:], expected[..., 4:], rtol=0, atol=5e-3)
    torch.testing.assert_close(got[..., :4], expected[..., :4], rtol=5e-3, atol=0.5)


@pytest.mark.slow
def test_val_coco_tiny_map_equals_pytorch(yolov3_tiny, shared, tmp_path):
    """A fixed-size export is evaluated at its own size, square: the .weights model at the same protocol."""
    from detect import val

    _, path = yolov3_tiny
    common = ["--data", "data/coco-tiny.yaml", "--img", "416", "--device", "cpu", "--workers", "1",
              "--project", str(tmp_path)]
    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    expected = val.run(val.parse_args(["--cfg", str(cfg), "--weights", str(weights), "--square", *common]))
    got = val.run(val.parse_args(["--weights", str(path), *common]))
    assert expected.map > 0.2
    assert abs(got.map - expected.map) < 1e-3 and abs(got.map50 - expected.map50) < 1e-3


def _assert_same_detections(session, model, x, conf, iou, multi_label, feeds=None):
    detections, counts = session.run(None, {"images": x.numpy(), **(feeds or {})})
    with torch.no_grad():
        expected = non_max_suppression(model(x), conf, iou, 100, multi_label=multi_label)
    assert detections.shape == (len(x), 100, 6)
    assert counts.tolist() == [len(e) for e in expected]
    for image, rows in enumerate(expected):
        got = torch.from_numpy(detections[image, : counts[image]])
        torch.testing.assert_close(got[:, 5], rows[:, 5])  # same classes in the same order (best first)
        torch.testing.assert_close(got[:, :5], rows[:, :5], rtol=1e-4, atol=1e-3)
        assert not detections[image, counts[image]:].any()  # the rest are blank rows
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("multi_label", [False, True], ids=["single-label", "multi-label"])
def test_nms_graph_returns_postprocess_detections(yolov3_tiny, shared, tmp_path, multi_label):
    model, _ = yolov3_tiny
    options = OnnxExportOptions(img_size=(320, 320), batch=4, nms=True, conf=0.25, iou=0.45, max_det=100,
                                multi_label=multi_label)
    export_onnx(model, tmp_path / "nms.onnx", options)
    session = ort.InferenceSession(str(tmp_path / "nms.onnx"), providers=["CPUExecutionProvider"])
    assert sorted(i.name for i in session.get_overridable_initializers()) == ["conf_threshold", "iou_threshold"]
    x = real_images(shared, 320, count=4)
    counts = _assert_same_detections(session, model, x, 0.25, 0.45, multi_label)
    assert counts.sum() >= 5
    # thresholds fed at run time instead of the export's defaults; many candidates, max_det caps
    feeds = {"conf_threshold": np.array([0.01], np.float32), "iou_threshold": np.array([0.6], np.float32)}
    counts = _assert_same_detections(session, model, x, 0.01, 0.6, multi_label, feeds)
    assert counts.max() == 100


def test_runtime_refuses_what_it_cannot_run(tmp_path):
    model = random_model("cfg/yolov3-tiny.cfg", 64, 2)
    with pytest.raises(FileNotFoundError, match="missing.onnx: file not found"):
        load_onnx_model(tmp_path / "missing.onnx")
    export_onnx(model, tmp_path / "nms.onnx", OnnxExportOptions(img_size=(64, 64), nms=True))
    with pytest.raises(ValueError, match="has NMS in its graph"):
        load_onnx_model(tmp_path / "nms.onnx")
    proto = onnx.load(str(tmp_path / "nms.onnx"))
    del proto.metadata_props[:]
    onnx.save(proto, str(tmp_path / "foreign.onnx"))
    with pytest.raises(ValueError, match="not an ONNX model written by detect.export"):
        load_onnx_model(tmp_path / "foreign.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="junk.onnx: onnxruntime cannot load it"):
        load_onnx_model(tmp_path / "junk.onnx")


def test_fixed_size_model_refuses_other_sizes(tmp_path):
    model = random_model("cfg/yolov3-tiny.cfg", 64, 2)
    export_onnx(model, tmp_path / "m.onnx", OnnxExportOptions(img_size=(64, 64)))
    onnx_model = load_onnx_model(tmp_path / "m.onnx")
    assert onnx_model.eval() is onnx_model and onnx_model.to("cpu") is onnx_model
    with pytest.raises(ValueError, match="exported for 64x64 inputs, got 96x64"):
        onnx_model(torch.rand(1, 3, 96, 64))
    handle = load_model_file(tmp_path / "m.onnx", device=torch.device("cpu"))  # rect asked for: its own square
    assert (handle.img_size, handle.input_shape, handle.square) == (64, (64, 64), True)
    assert handle.engine in ("openvino", "onnxruntime") and handle.runner.engine == handle.engine
    with pytest.raises(ValueError, match="takes 64x64 inputs only, but --img-size 416 was given"):
        load_model_file(tmp_path / "m.onnx", device=torch.device("cpu"), img_size=416)


def test_missing_extra_names_the_install_line(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)  # import fails as when not installed
    with pytest.raises(ValueError, match="onnxruntime is not installed") as error:
        require("onnxruntime")
    assert INSTALL_HINT in str(error.value) and "\n" not in str(error.value)


def test_a_model_packed_for_cpu_inference_is_refused_with_the_way_out(tmp_path):
    from detect.darknet.packed import packing_available

    if not packing_available():
        pytest.skip("this torch build cannot pack convolutions")
    packed = for_inference(random_model("cfg/yolov4-tiny.cfg", 64, 2), torch.device("cpu"))
    with pytest.raises(ValueError, match=r"packed for CPU inference .*pack=False"):
        export_onnx(packed, tmp_path / "m.onnx", OnnxExportOptions(img_size=(64, 64)))
    assert not (tmp_path / "m.onnx").exists()
