import pytest
import torch

from detect.runtime import precision
from detect.runtime.precision import amp_dtype, autocast, describe_cpu_precision


def test_amp_modes_map_to_dtypes():
    assert amp_dtype("off", torch.device("cuda")) is None
    assert amp_dtype("fp16", torch.device("cuda")) is torch.float16
    assert amp_dtype("bf16", torch.device("cuda", 0)) is torch.bfloat16
    assert amp_dtype("off", "cpu") is None and amp_dtype("bf16", "cpu") is torch.bfloat16
    with pytest.raises(ValueError, match="fp8.*auto, off, fp16, bf16"):
        amp_dtype("fp8", "cpu")
    with pytest.raises(ValueError, match="fp16 is for CUDA"):
        amp_dtype("fp16", "cpu")


@pytest.mark.parametrize("native, default, expected", [(True, True, torch.bfloat16), (False, True, None),
                                                       (True, False, None)])
def test_auto_on_the_cpu_is_bf16_only_where_native_and_chosen(monkeypatch, native, default, expected):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(precision, "CPU_AUTO_BF16", default)
    assert amp_dtype("auto", "cpu") is expected
    line = describe_cpu_precision("auto", expected)
    assert line.startswith("CPU precision: ") and ("bf16 autocast" in line) == (expected is not None)
    if not native:
        assert "no native bf16" in line


def test_cpu_autocast_is_bf16_and_the_weights_stay_float32():
    conv = torch.nn.Conv2d(3, 8, 3)
    x = torch.randn(1, 3, 8, 8)
    with autocast(torch.device("cpu"), torch.bfloat16):
        y = conv(x)
    assert y.dtype is torch.bfloat16 and conv.weight.dtype is torch.float32
    with autocast(torch.device("cpu"), None):
        assert conv(x).dtype is torch.float32
    with autocast(torch.device("cpu"), torch.float16):  # never asked for on the CPU: float32
        assert conv(x).dtype is torch.float32
