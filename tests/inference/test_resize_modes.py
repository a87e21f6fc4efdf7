"""The resize mode belongs to the model: Darknet's [net] letter_box (0: stretch, its default), what a .pt was
trained with, an ONNX export's metadata; --resize / resize= override it in one log line; boxes map back exactly
in both modes (x and y ratios)."""

import logging

import numpy as np
import pytest
import torch

from detect.darknet import Darknet, save_pt
from detect.darknet.pt_files import trained_resize
from detect.data.augmentation.resize_modes import stretch
from detect.export.darknet_export import with_letter_box
from detect.inference.loading import load_model_file
from detect.inference.onnx_metadata import PREPROCESS, OnnxMetadata
from detect.inference.postprocess import scale_to_original
from detect.inference.predictor import InferenceSettings, model_input

CPU = torch.device("cpu")


def _cfg(tmp_path, letter_box):
    text = open("cfg/yolo-mini.cfg").read()
    if letter_box is not None:
        text = text.replace("[net]\n", f"[net]\nletter_box={letter_box}\n", 1)
    path = tmp_path / f"mini-{letter_box}.cfg"
    path.write_text(text)
    return path


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
def test_boxes_map_back_exactly_in_both_modes(mode):
    image = np.random.default_rng(0).integers(0, 255, (90, 160, 3), np.uint8)  # h, w: not square
    settings = InferenceSettings(64, square=True, resize=mode)
    chw, ratio, pad = model_input(image, settings, 32)
    assert chw.shape == (3, 64, 64)
    if mode == "stretch":
        assert ratio == (64 / 160, 64 / 90) and pad == (0, 0)
        np.testing.assert_array_equal(chw, stretch(image, (64, 64))[0][:, :, ::-1].transpose(2, 0, 1))
    else:
        assert ratio == 64 / 160 and pad == (0, 14)  # 36 rows of image, 28 of border split 14 / 14
    box = np.array([[16.0, 9.0, 144.0, 81.0]])
    rx, ry = (ratio, ratio) if mode == "letterbox" else ratio
    on_canvas = box * [rx, ry, rx, ry] + [pad[0], pad[1], pad[0], pad[1]]
    back = scale_to_original(torch.tensor(on_canvas), ratio, pad, image.shape[:2])
    np.testing.assert_allclose(back.numpy(), box, atol=1e-9)


def test_a_stretched_model_takes_square_canvases_even_without_square():
    image = np.zeros((90, 160, 3), np.uint8)
    chw, _, _ = model_input(image, InferenceSettings(64, resize="stretch"), 32)
    assert chw.shape == (3, 64, 64)
    assert model_input(image, InferenceSettings(64), 32)[0].shape == (3, 64, 96)  # letterbox: rect canvas


def test_the_handle_follows_the_cfgs_letter_box_the_pt_record_and_an_override(tmp_path, caplog):
    modes = {}
    for letter_box in (None, 0, 1):
        cfg = _cfg(tmp_path, letter_box)
        weights = tmp_path / f"mini-{letter_box}.weights"
        Darknet(str(cfg)).save_darknet_weights(weights)
        modes[letter_box] = load_model_file(weights, cfg, device=CPU, img_size=64, backend="torch").resize
    assert modes == {None: "stretch", 0: "stretch", 1: "letterbox"}

    model = Darknet(str(_cfg(tmp_path, None)))
    save_pt(model, tmp_path / "trained.pt", resize="letterbox")  # trained letterboxed from a stretch cfg
    save_pt(model, tmp_path / "plain.pt")  # no mode given: the cfg's
    torch.save({"model": model.state_dict(), "cfg_text": model.cfg_text, "opts": {"img_size": 64}},
               tmp_path / "older.pt")  # from before the record: this project trained letterboxed only
    assert [trained_resize(tmp_path / f"{n}.pt") for n in ("trained", "plain", "older")] == \
        ["letterbox", "stretch", "letterbox"]
    assert trained_resize(tmp_path / "mini-1.weights") is None
    handle = load_model_file(tmp_path / "trained.pt", device=CPU, img_size=64, backend="torch")
    assert handle.resize == "letterbox"

    with caplog.at_level(logging.INFO, logger="detect.inference.loading"):
        handle = load_model_file(tmp_path / "trained.pt", device=CPU, img_size=64, backend="torch", resize="stretch")
    assert handle.resize == "stretch"
    assert any("--resize stretch: overrides the mode trained.pt was made for (letterbox)" in r.getMessage()
               for r in caplog.records)
    with pytest.raises(ValueError, match="--resize 'fill': choose one of letterbox, stretch"):
        load_model_file(tmp_path / "trained.pt", device=CPU, resize="fill")


def test_onnx_metadata_carries_the_mode():
    meta = OnnxMetadata(names=["a"], num_classes=1, strides=[32], max_stride=32, input_size=(64, 64), batch=1,
                        precision="fp32", output="rows", nms=None, resize="stretch")
    props = meta.to_props()
    assert props["resize"] == "stretch" and "no border" in PREPROCESS["stretch"]["resize"]
    assert OnnxMetadata.from_props(props, "m.onnx").resize == "stretch"
    older = {k: v for k, v in props.items() if k != "resize"}  # exports from before the key were letterboxed
    assert OnnxMetadata.from_props(older, "m.onnx").resize == "letterbox"
    with pytest.raises(ValueError, match="damaged detect.export metadata"):
        OnnxMetadata.from_props({**props, "resize": "fill"}, "m.onnx")


def test_a_darknet_export_writes_the_mode_into_the_cfgs_net_section():
    text = "[net]\nwidth=416\nletter_box=0\n\n[convolutional]\nsize=3\n"
    assert with_letter_box(text, "letterbox") == "[net]\nletter_box=1\nwidth=416\n\n[convolutional]\nsize=3\n"
    assert with_letter_box("# c\n[network]\nheight=32\n", "stretch") == "# c\n[network]\nletter_box=0\nheight=32\n"


def test_a_pt_is_read_once_for_its_weights_size_mode_and_thresholds(tmp_path, monkeypatch):
    """load_model_file takes the weights, the trained size, the resize mode and the class thresholds from one
    read of the file (a last.pt with its optimiser state can be hundreds of MB)."""
    model = Darknet(str(_cfg(tmp_path, None)))
    path = tmp_path / "best.pt"
    torch.save({"model": model.state_dict(), "cfg_text": model.cfg_text, "names": ["a", "b", "c", "d"],
                "opts": {"img_size": 96, "resize": "stretch"}, "class_conf": {"conf": [0.3, 0.4, 0.5, 0.6], "global_conf": 0.4, "instances": [5, 5, 5, 5],
                               "shrink": 10.0, "chosen_on": "val"}}, path)
    reads = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: reads.append(a[0]) or real_load(*a, **k))
    handle = load_model_file(path, device=CPU, backend="torch")
    assert len(reads) == 1
    assert (handle.img_size, handle.resize, handle.names) == (96, "stretch", ["a", "b", "c", "d"])
    assert handle.class_conf is not None and handle.class_conf.conf == pytest.approx([0.3, 0.4, 0.5, 0.6])


def test_the_network_canvas_is_the_network_shape_darknet_trained():
    from detect.data.augmentation.resize_modes import network_canvas

    assert network_canvas(416, 32) == network_canvas(416, 32, (416, 416)) == (416, 416)
    assert network_canvas(608, 32, (352, 608)) == (352, 608)  # the cfg's own size: its shape exactly
    assert network_canvas(416, 32, (352, 608)) == (256, 416)  # scaled to the long side, sides on the stride
    assert network_canvas(320, 32, (608, 352)) == (320, 192)  # a tall network


def test_darknet_weights_of_a_non_square_cfg_are_fed_its_shape_and_a_pt_its_square(tmp_path):
    """Darknet stretches every image to its cfg's width x height: predict and val's loader do the same for the
    weights it trained; this project trains square, so its .pt of the same cfg keeps square canvases."""
    from detect.data.formats.spec import load_data_spec
    from detect.data.loader import build_eval_loader
    from tests.support.training import TINY_DATA

    cfg = tmp_path / "wide.cfg"
    cfg.write_text(open("cfg/yolo-mini.cfg").read().replace("[net]\n", "[net]\nwidth=128\nheight=64\n", 1))
    model = Darknet(str(cfg))
    assert model.input_size == (64, 128)
    model.save_darknet_weights(tmp_path / "wide.weights")
    handle = load_model_file(tmp_path / "wide.weights", cfg, device=CPU, backend="torch")
    assert (handle.img_size, handle.resize, handle.net_shape) == (128, "stretch", (64, 128))
    settings = InferenceSettings.for_model(handle)
    image = np.zeros((300, 200, 3), np.uint8)  # tall: still stretched to the wide network
    chw, ratio, pad = model_input(image, settings, handle.max_stride)
    assert chw.shape == (3, 64, 128) and ratio == (128 / 200, 64 / 300) and pad == (0, 0)
    smaller = load_model_file(tmp_path / "wide.weights", cfg, device=CPU, backend="torch", img_size=64)
    assert model_input(image, InferenceSettings.for_model(smaller), 32)[0].shape == (3, 32, 64)  # scaled: 64 long
    # letterboxed (Darknet's letter_box, or --resize letterbox): fitted into the same wide network shape
    boxed = load_model_file(tmp_path / "wide.weights", cfg, device=CPU, backend="torch", resize="letterbox")
    chw, ratio, pad = model_input(image, InferenceSettings.for_model(boxed), boxed.max_stride)
    assert chw.shape == (3, 64, 128) and ratio == pytest.approx(64 / 300) and pad == (42, 0)

    (tmp_path / "tiny.yaml").write_text(TINY_DATA.replace("path: gen", f"path: {tmp_path / 'gen'}"))
    loader = build_eval_loader(load_data_spec(tmp_path / "tiny.yaml"), "val", 128, 4, 0, 32, 0, 1,
                               cache_dir=tmp_path / "cache", resize="stretch", net_shape=handle.net_shape)
    assert {tuple(batch[0].shape[-2:]) for batch in loader} == {(64, 128)}
    loader = build_eval_loader(load_data_spec(tmp_path / "tiny.yaml"), "val", 128, 4, 0, 32, 0, 1,
                               cache_dir=tmp_path / "cache", resize="letterbox", net_shape=handle.net_shape)
    assert {tuple(batch[0].shape[-2:]) for batch in loader} == {(64, 128)}  # not the rect canvases

    save_pt(model, tmp_path / "wide.pt", resize="stretch")
    square = load_model_file(tmp_path / "wide.pt", device=CPU, backend="torch")
    assert square.net_shape is None
    assert model_input(image, InferenceSettings.for_model(square), 32)[0].shape == (3, 128, 128)
