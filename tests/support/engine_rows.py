"""The assertion the CPU engines' tests share: a compiled model's rows equal the PyTorch model's."""

import pytest
import torch


def assert_rows_match(compiled, model, shapes) -> None:
    """`compiled` gives `model`'s rows within 1e-3 at each input shape and on a channels_last input (what val
    feeds on the CPU), and refuses a size that is not a multiple of the largest stride (8 here)."""
    for shape in shapes:
        x = torch.rand(shape, generator=torch.Generator().manual_seed(sum(shape)))
        with torch.inference_mode():
            expected = model(x)
        got = compiled(x)
        assert got.shape == expected.shape and got.dtype == torch.float32
        assert float((got - expected).abs().max()) < 1e-3
    nhwc = torch.rand(1, 3, 64, 64).to(memory_format=torch.channels_last)
    with torch.inference_mode():
        assert float((compiled(nhwc) - model(nhwc)).abs().max()) < 1e-3
    with pytest.raises(ValueError, match="not a multiple of the model's largest stride 8"):
        compiled(torch.rand(1, 3, 36, 64))
