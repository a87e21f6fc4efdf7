"""detect.ops.tta: every augmented pass's boxes land back on the input's pixels."""

import pytest
import torch
from torch import nn

from detect.ops.tta import AugmentedModel


class BrightSpot(nn.Module):
    """A fake detector: one box centred on the brightest pixel of channel 0, 12 px wide per 100 px of input
    (an object scales with the image), objectness 1, one class."""

    def forward(self, x):
        n, _, h, w = x.shape
        flat = x[:, 0].flatten(1).argmax(1)
        cy, cx = (flat // w).float() + 0.5, (flat % w).float() + 0.5
        size = torch.full_like(cx, 0.12 * w)
        return torch.stack([cx, cy, size, size, torch.ones_like(cx), torch.ones_like(cx)], 1)[:, None]


@pytest.mark.parametrize("channels_last", [False, True])
def test_each_pass_maps_back_to_the_input(channels_last):
    x = torch.full((2, 3, 160, 224), 0.2)
    x[0, 0, 40:44, 150:154] = 1.0  # a bright 4x4 square centred at (152, 42)
    x[1, 0, 120:124, 20:24] = 1.0  # and at (22, 122)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    out = AugmentedModel(BrightSpot(), stride=32)(x)
    assert out.shape == (2, 3, 6)  # three passes, one row each
    for image, (cx, cy) in enumerate([(152, 42), (22, 122)]):
        rows = out[image]
        assert torch.allclose(rows[:, 0], torch.tensor(float(cx)), atol=2.0), rows[:, 0]
        assert torch.allclose(rows[:, 1], torch.tensor(float(cy)), atol=2.0), rows[:, 1]
    # sizes: 12% of the (padded) width at each scale, brought back by the width that pass had (224 x 0.83 is 186
    # pixels, 224 x 0.67 is 150): about 12% of 224 again
    assert out[0, :, 2].tolist() == pytest.approx([26.88, 0.12 * 192 * 224 / 186, 0.12 * 160 * 224 / 150], rel=1e-4)


def test_one_flip_per_scale():
    with pytest.raises(ValueError, match="one flip per scale"):
        AugmentedModel(BrightSpot(), 32, scales=(1, 0.5), flips=(False,))
