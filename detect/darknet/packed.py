"""The CPU inference path of fused convolutions: oneDNN kernels fed weights reordered once into the blocked layout
they compute in, with the activation applied inside the kernel, on channels_last (NHWC) activations.

Why: a plain `nn.Conv2d` on the CPU hands oneDNN an OIHW weight and an NCHW input, so every call reorders the
weight (yolov3-tiny: 35 MB a forward pass) and the input and output into oneDNN's layout, then runs the activation
as a separate pass over the output. Packing removes the weight reorder, NHWC removes the activation reorders, and
the fused activation removes one read and one write of every feature map (figures in README, "CPU inference").
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from .layers import ConvBlock

log = logging.getLogger(__name__)

# Darknet activation -> (oneDNN post-op, its scalars); checked equal to detect.darknet.activations in the tests.
# Others (mish, gelu, ...) run after the kernel as usual.
FUSED_ACTIVATIONS = {
    "linear": ("none", []),
    "leaky": ("leaky_relu", [0.1]),
    "revleaky": ("leaky_relu", [0.1]),
    "relie": ("leaky_relu", [0.01]),
    "relu": ("relu", []),
    "logistic": ("sigmoid", []),
    "tanh": ("tanh", []),
    "swish": ("swish", []),
    "hardtan": ("hardtanh", [-1.0, 1.0]),
}


def packing_available() -> bool:
    """Whether this torch build has the oneDNN convolution ops the packed path calls."""
    return (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_convolution_pointwise")
            and hasattr(torch.ops.mkldnn, "_reorder_convolution_weight"))


class PackedConv(nn.Module):
    """A fused `ConvBlock` (no BatchNorm) for CPU inference in float32: same outputs within float rounding.

    The packed weight is an opaque oneDNN tensor held as a plain attribute: the module cannot be moved to another
    device or saved (pack the model last, as `detect.darknet.load.for_inference` does)."""

    def __init__(self, block: ConvBlock, input_size: list[int] | None = None):
        super().__init__()
        if block.bn is not None:
            raise ValueError("PackedConv needs a fused ConvBlock: call model.fuse() first")
        conv = block.conv
        self.conv_args = (list(conv.padding), list(conv.stride), list(conv.dilation), conv.groups)
        self.out_channels = conv.out_channels
        with torch.no_grad():
            # the layout oneDNN picks for `input_size` [N, C, H, W]; another size still runs, with a reorder
            self.weight = torch.ops.mkldnn._reorder_convolution_weight(conv.weight.detach().float(),
                                                                      *self.conv_args, input_size)
            self.bias = conv.bias.detach().float().clone()
        self.activation_name = block.act.name
        self.post_op, self.post_op_scalars = FUSED_ACTIVATIONS.get(block.act.name, ("none", []))
        self.after = None if block.act.name in FUSED_ACTIVATIONS else block.act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=torch.channels_last)
        y = torch.ops.mkldnn._convolution_pointwise(x, self.weight, self.bias, *self.conv_args, self.post_op,
                                                    self.post_op_scalars, "")
        return y if self.after is None else self.after(y)

    def extra_repr(self) -> str:
        padding, stride, _, groups = self.conv_args
        return (f"out_channels={self.out_channels}, padding={padding}, stride={stride}, groups={groups}, "
                f"activation={self.activation_name} ({'fused' if self.after is None else 'after'})")


def pack_convolutions(model: nn.Module, batch: int = 1) -> int:
    """Replace every fused float32 CPU `ConvBlock` of a Darknet model with a `PackedConv` whose weight layout
    suits the model's input size at `batch` images, in place; returns how many were packed (0 when this torch
    has no oneDNN, with one log line)."""
    if not packing_available():
        log.info("oneDNN convolution ops not available in this torch build: CPU convolutions stay unpacked")
        return 0
    packed = 0
    input_shapes = [(model.net_options["channels"], *model.input_size)] + list(model.layer_shapes[:-1])
    for i, layer in enumerate(model.layers):
        if (isinstance(layer, ConvBlock) and layer.bn is None and layer.conv.weight.device.type == "cpu"
                and layer.conv.weight.dtype == torch.float32):
            model.layers[i] = PackedConv(layer, [batch, *input_shapes[i]])
            packed += 1
    return packed
