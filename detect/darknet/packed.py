"""The CPU inference path of fused convolutions: oneDNN kernels fed weights reordered once into the blocked layout
they compute in, with the activation applied inside the kernel, on channels_last (NHWC) activations.

Why: a plain `nn.Conv2d` on the CPU hands oneDNN an OIHW weight and an NCHW input, so every call reorders the
weight (yolov3-tiny: 35 MB a forward pass) and the input and output into oneDNN's layout, then runs the activation
as a separate pass over the output. Packing removes the weight reorder, NHWC removes the activation reorders, and
the fused activation removes one read and one write of every feature map (docs/benchmarks.md, "The packed
PyTorch path", has the figures).

The layout oneDNN computes in depends on the input's shape (batch, height, width), not on the weight alone:
on an AVX2 CPU, yolov3-tiny's convolutions take up to 3 layouts each over predict's rect canvases. A weight
packed for one shape and run at another is reordered by the kernel on every call: at 320x448 after packing
for 416x416, 5 of the 13 weights, two of them (into or out of a padded 24-row block) through oneDNN's
reference reorder, several times the pass itself. So a `PackedConv` packs its weight once for
each input shape it meets and keeps it (the last `SHAPES_PER_CONV` shapes); shapes whose packed weights come
out byte for byte the same share one tensor, so memory grows with the layouts met, not with the shapes.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import OrderedDict

import torch
from torch import nn

from .layers import ConvBlock
from .resample import MaxPool

log = logging.getLogger(__name__)

SHAPES_PER_CONV = 64  # input shapes (batch, height, width) whose packed weight a PackedConv keeps

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
    """Whether this torch build has the oneDNN ops the packed path calls (the last two read a packed
    weight's bytes, which tell its layouts apart)."""
    return torch.backends.mkldnn.is_available() and all(
        hasattr(torch.ops.mkldnn, op) for op in ("_convolution_pointwise", "_reorder_convolution_weight",
                                                 "_nbytes", "data_ptr"))


class PackedConv(nn.Module):
    """A fused `ConvBlock` (no BatchNorm) for CPU inference in float32: same outputs within float rounding.

    The packed weights are opaque oneDNN tensors held as plain attributes: the module cannot be moved to
    another device or saved (pack the model last, as `detect.darknet.load.for_inference` does). `packings`
    counts the weight reorders done: one when built, then one at the first call of each input shape it does
    not remember (no more at that shape while it is remembered)."""

    def __init__(self, block: ConvBlock, input_size: list[int] | None = None,
                 max_shapes: int = SHAPES_PER_CONV):
        super().__init__()
        if block.bn is not None:
            raise ValueError("PackedConv needs a fused ConvBlock: call model.fuse() first")
        conv = block.conv
        self.conv_args = (list(conv.padding), list(conv.stride), list(conv.dilation), conv.groups)
        self.out_channels = conv.out_channels
        self.max_shapes = max_shapes
        self.packings = 0
        self._shapes: OrderedDict[tuple[int, int, int], torch.Tensor] = OrderedDict()  # oldest use first
        self._lock = threading.Lock()  # one model may serve several threads
        with torch.no_grad():
            # the layout for `input_size` [N, C, H, W] (the model's own size), kept while the module lives
            self.weight = self._pack(conv.weight.detach().float(), input_size)
            self.bias = conv.bias.detach().float().clone()
        if input_size is not None:
            self._shapes[(input_size[0], *input_size[2:])] = self.weight
        self.activation_name = block.act.name
        self.post_op, self.post_op_scalars = FUSED_ACTIVATIONS.get(block.act.name, ("none", []))
        self.after = None if block.act.name in FUSED_ACTIVATIONS else block.act

    def _pack(self, dense: torch.Tensor, input_size: list[int] | None) -> torch.Tensor:
        """The weight reordered into the layout oneDNN computes in for inputs of `input_size`."""
        self.packings += 1
        return torch.ops.mkldnn._reorder_convolution_weight(dense, *self.conv_args, input_size)

    def _layouts(self) -> list[torch.Tensor]:
        """The distinct packed weights held, the one built first."""
        return list({id(w): w for w in (self.weight, *self._shapes.values())}.values())

    @property
    def layout_count(self) -> int:
        """How many packed copies of the weight this module holds: one per distinct layout."""
        return len(self._layouts())

    def weight_for(self, shape: torch.Size) -> torch.Tensor:
        """The packed weight for an input of `shape` [N, C, H, W]: the one kept, else packed now and kept."""
        key = (shape[0], shape[2], shape[3])
        with self._lock:
            weight = self._shapes.get(key)
            if weight is not None:
                self._shapes.move_to_end(key)
                return weight
            with torch.no_grad():
                packed = self._pack(self.weight.to_dense(), list(shape))
            weight = next((w for w in self._layouts() if _same_bytes(w, packed)), packed)
            self._shapes[key] = weight
            if len(self._shapes) > self.max_shapes:
                self._shapes.popitem(last=False)  # its weight goes too unless a kept shape shares it
            return weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=torch.channels_last)
        y = torch.ops.mkldnn._convolution_pointwise(x, self.weight_for(x.shape), self.bias, *self.conv_args,
                                                    self.post_op, self.post_op_scalars, "")
        return y if self.after is None else self.after(y)

    def extra_repr(self) -> str:
        padding, stride, _, groups = self.conv_args
        return (f"out_channels={self.out_channels}, padding={padding}, stride={stride}, groups={groups}, "
                f"activation={self.activation_name} ({'fused' if self.after is None else 'after'}), "
                f"layouts={self.layout_count}")


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two packed (opaque oneDNN) tensors hold the same bytes: one weight in one layout."""
    size = torch.ops.mkldnn._nbytes(a)
    if size != torch.ops.mkldnn._nbytes(b):
        return False
    a_bytes, b_bytes = (torch.frombuffer((ctypes.c_uint8 * size).from_address(torch.ops.mkldnn.data_ptr(t)),
                                         dtype=torch.uint8) for t in (a, b))
    return torch.equal(a_bytes, b_bytes)


def pack_model(model: nn.Module, batch: int = 1) -> int:
    """The CPU inference path: `pack_convolutions`, and max-pools as running maxima of views
    (detect.darknet.resample.view_max_pool); returns how many convolutions were packed."""
    for layer in model.layers:
        if isinstance(layer, MaxPool):
            layer.by_views = True
    return pack_convolutions(model, batch)


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
