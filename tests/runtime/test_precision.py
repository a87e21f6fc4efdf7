import pytest
import torch

from detect.runtime.precision import amp_dtype, autocast


def test_amp_modes_map_to_dtypes_on_cuda_only():
    assert amp_dtype("auto", torch.device("cpu")) is None and amp_dtype("bf16", "cpu") is None
    assert amp_dtype("off", torch.device("cuda")) is None
    assert amp_dtype("fp16", torch.device("cuda")) is torch.float16
    assert amp_dtype("bf16", torch.device("cuda", 0)) is torch.bfloat16
    with pytest.raises(ValueError, match="fp8.*auto, off, fp16, bf16"):
        amp_dtype("fp8", "cpu")


def test_autocast_is_float32_on_the_cpu():
    with autocast(torch.device("cpu"), torch.bfloat16):
        y = torch.ones(2, 2) @ torch.ones(2, 2)
    assert y.dtype is torch.float32 and float(y[0, 0]) == 2.0
