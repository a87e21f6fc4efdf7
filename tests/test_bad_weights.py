"""Files given as weights that are not what they claim: one line naming the file, what it is not and what was
expected (ValueError, which the tools print as `error: ...`, exit 2); never code run from the file."""

import os
import pickle

import numpy as np
import pytest
import torch

from detect.darknet import Darknet
from detect.darknet.load import load_model
from detect.darknet.pt_files import load_checkpoint
from detect.darknet.weights import read_header
from detect.predict import main as predict_main
from tests.support.val_data import TINY_CFG, write_tiny_checkpoint


class _WouldRunCode:
    """Unpickling this calls os.system, which would create `marker`: the loader must refuse before that."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class _CustomClass:
    pass


def _refused(path, match, **kwargs) -> str:
    with pytest.raises(ValueError, match=match) as info:
        load_model(weights=path, exact=True, **kwargs)
    message = str(info.value)
    assert str(path) in message and "\n" not in message and "expect" in message
    return message


def test_random_empty_and_foreign_files_named_pt(tmp_path):
    (tmp_path / "random.pt").write_bytes(np.random.default_rng(0).bytes(1000))
    _refused(tmp_path / "random.pt", "is not a PyTorch checkpoint .neither torch.save's zip nor a pickle")
    (tmp_path / "empty.pt").write_bytes(b"")
    _refused(tmp_path / "empty.pt", r"is empty \(0 bytes\), not a PyTorch checkpoint")
    # a pickle whose opcodes torch's safe unpickler does not know (protocol 4 frames): damaged or foreign
    (tmp_path / "frames.pt").write_bytes(pickle.dumps({"a": 1}, protocol=4))
    _refused(tmp_path / "frames.pt", "its pickled data is damaged or not torch.save's")


@pytest.mark.parametrize("container", ["pickle", "torch.save"])
def test_pickle_that_would_run_code_is_refused_and_not_run(tmp_path, container):
    marker = tmp_path / "code_ran"
    path = tmp_path / "evil.pt"
    if container == "pickle":
        path.write_bytes(pickle.dumps(_WouldRunCode(marker), protocol=2))
    else:
        torch.save({"model": _WouldRunCode(marker)}, path)
    message = _refused(path, r"is not a safe PyTorch checkpoint: it needs Python code to unpickle \(posix.system\)")
    assert "none was run" in message
    assert not marker.exists()


def test_custom_class_and_non_checkpoint_contents(tmp_path):
    torch.save({"model": _CustomClass()}, tmp_path / "custom.pt")
    _refused(tmp_path / "custom.pt", r"Python code to unpickle \(tests.test_bad_weights._CustomClass\)")
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    _refused(tmp_path / "tensor.pt", "holds a Tensor, not a checkpoint")
    torch.save({"model": {"epoch": 3}}, tmp_path / "model_of_ints.pt")
    _refused(tmp_path / "model_of_ints.pt", "holds no weights: its 'model' is a dict of int, not a state dict")
    torch.save({"lr": 0.01}, tmp_path / "plain.pt")
    # training (not exact) refuses it the same way, before any transfer
    with pytest.raises(ValueError, match="plain.pt holds no weights: it is a dict of float"):
        load_model(TINY_CFG, tmp_path / "plain.pt", names=["a", "b", "c"])


def test_good_checkpoints_still_load(tmp_path):
    source = write_tiny_checkpoint(tmp_path)
    renamed = tmp_path / "tiny.weights"  # torch's zip under a Darknet suffix is read as a checkpoint
    renamed.write_bytes(source.read_bytes())
    assert load_checkpoint(renamed)["names"] == ["red", "green", "blue"]
    # the pickle format of torch < 1.6 passes the container check
    torch.save({"model": {"w": torch.ones(2)}}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert torch.equal(load_checkpoint(tmp_path / "legacy.pt")["model"]["w"], torch.ones(2))


def test_bad_darknet_weights(tmp_path):
    for size in (0, 10):
        (tmp_path / "short.weights").write_bytes(b"\0" * size)
        _refused(tmp_path / "short.weights", f"{size} bytes is too short for a Darknet weights header",
                 cfg=TINY_CFG)
    (tmp_path / "random.weights").write_bytes(np.random.default_rng(1).bytes(1004))
    _refused(tmp_path / "random.weights", r"is not a Darknet weights file: its header version .* is not one",
             cfg=TINY_CFG)
    assert read_header(np.array([0, 2, 5, 7, 0], "<i4").tobytes(), "x") == ((0, 2, 5), 7, 20)


def _darknet_file(tmp_path, extra_floats: int) -> tuple:
    model = Darknet(TINY_CFG)
    path = tmp_path / "tiny.weights"
    model.save_darknet_weights(path)
    data = path.read_bytes()
    data = data + b"\0" * 4 * extra_floats if extra_floats >= 0 else data[: 4 * extra_floats]
    path.write_bytes(data)
    return path


def test_darknet_weights_that_do_not_fit_the_cfg(tmp_path):
    # floats: conv 0 = 8 (bias) + 3*8 (BatchNorm) + 8*3*3*3 = 248; conv 1 = 24 + 24*8 = 216
    _refused(_darknet_file(tmp_path, 2), "2 floats are left over after the last layer with weights", cfg=TINY_CFG)
    _refused(_darknet_file(tmp_path, -3), "the file ends inside layer 1", cfg=TINY_CFG)
    # ends exactly after layer 0: a backbone, fine for training, refused where the whole model is needed
    _refused(_darknet_file(tmp_path, -216), r"holds the weights of layers 0..0 only, of 3 \(a partial file",
             cfg=TINY_CFG)
    assert load_model(TINY_CFG, _darknet_file(tmp_path, -216)).report["layers_loaded"] == 1


def test_predict_prints_one_error_line(tmp_path, capsys):
    (tmp_path / "random.pt").write_bytes(np.random.default_rng(2).bytes(500))
    image = tmp_path / "x.png"
    image.write_bytes(b"")
    code = predict_main(["--weights", str(tmp_path / "random.pt"), "--source", str(image), "--device", "cpu",
                         "--project", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and "random.pt" in err[0]
