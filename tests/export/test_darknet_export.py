"""`--format darknet`: a training checkpoint back to .cfg / .weights / .names that the project's own reader loads
into a model with identical outputs (the EMA weights, the run's classes, filters and anchors)."""

import pytest
import torch

from detect.darknet.load import for_inference, load_model
from detect.darknet.model import Darknet
from detect.darknet.pt_files import save_pt
from detect.engine.anchor_fitting import read_anchor_layout, rewrite_cfg_anchors
from detect.export.cli import main
from detect.export.darknet_export import export_darknet

NAMES = ["kangaroo", "wallaby", "emu"]


def training_checkpoint(path, cfg="cfg/yolov3-tiny.cfg", size=96):
    """A .pt as training writes it: 3 classes, refitted anchors in cfg_text, EMA weights unlike the model's."""
    torch.manual_seed(0)
    model = Darknet(cfg, img_size=size, num_classes=len(NAMES))
    count = len(model.heads[0].options["anchors"]) // 2
    anchors = torch.arange(1, 2 * count + 1, dtype=torch.float64).view(count, 2) * 7
    model = Darknet(rewrite_cfg_anchors(model.cfg_text, anchors.numpy()), img_size=size)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    ema = {k: v + 0.01 * torch.randn_like(v) if v.is_floating_point() else v for k, v in model.state_dict().items()}
    save_pt(model, path, names=NAMES, ema_state=ema, resize="letterbox")  # as this project trains
    return model


def outputs(cfg, weights, x):
    model = for_inference(load_model(cfg, weights, img_size=tuple(x.shape[2:]), exact=True).model, torch.device("cpu"))
    with torch.no_grad():
        return model(x)


def test_checkpoint_to_darknet_files_gives_identical_outputs(tmp_path, capsys):
    trained = training_checkpoint(tmp_path / "best.pt")
    assert main(["--weights", str(tmp_path / "best.pt"), "--format", "darknet"]) == 0
    assert "Darknet files written" in capsys.readouterr().out
    cfg, weights, names = (tmp_path / f"best.{s}" for s in ("cfg", "weights", "names"))
    assert names.read_text().splitlines() == NAMES
    layout = read_anchor_layout(cfg.read_text())
    assert layout.classes == (3, 3) and layout.anchors[:2].tolist() == [[7, 14], [21, 28]]  # the run's anchors
    # the run's cfg, with letter_box=1: Darknet then letterboxes as the weights were trained
    written = cfg.read_text().splitlines()
    assert written[:2] == ["[net]", "letter_box=1"] and written[2:] == trained.cfg_text.strip().splitlines()[1:]
    assert weights.stat().st_size == 20 + 4 * trained.darknet_float_count()
    x = torch.rand(2, 3, 96, 96, generator=torch.Generator().manual_seed(1))
    from_darknet = outputs(cfg, weights, x)
    assert torch.equal(from_darknet, outputs(None, tmp_path / "best.pt", x))  # the checkpoint's EMA weights
    trained.load_state_dict(torch.load(tmp_path / "best.pt", weights_only=True)["model"])
    with torch.no_grad():
        assert not torch.allclose(from_darknet, for_inference(trained, torch.device("cpu"))(x))


def test_new_coords_cfg_round_trips(tmp_path):
    training_checkpoint(tmp_path / "v7.pt", cfg="cfg/yolov7-tiny.cfg", size=64)
    assert main(["--weights", str(tmp_path / "v7.pt"), "--format", "darknet", "--output", str(tmp_path / "out/m")]) == 0
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    assert torch.equal(outputs(tmp_path / "out/m.cfg", tmp_path / "out/m.weights", x),
                       outputs(None, tmp_path / "v7.pt", x))


def test_darknet_export_errors(tmp_path, capsys):
    model = training_checkpoint(tmp_path / "m.pt", size=64)
    model.save_darknet_weights(tmp_path / "m.weights")
    (tmp_path / "m.cfg").write_text(model.cfg_text)
    argv = ["--cfg", str(tmp_path / "m.cfg"), "--weights", str(tmp_path / "m.weights"), "--format", "darknet",
            "--img", "64"]
    assert main(argv) == 2
    assert "would overwrite --weights" in capsys.readouterr().err
    names = tmp_path / "two.names"
    names.write_text("a\nb\n")
    assert main(argv + ["--names", str(names), "--output", str(tmp_path / "x")]) == 2
    assert "lists 2 classes but the model predicts 3" in capsys.readouterr().err
    with pytest.raises(ValueError, match="fused model"):
        export_darknet(model.fuse(), tmp_path / "fused")
