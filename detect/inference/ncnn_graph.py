"""A fused Darknet model as an ncnn network: the `.param` text and the `.bin` weights, written straight from the
model's layers (no ONNX in between), up to the inputs of its [yolo] heads, which the caller decodes.

`ncnn_graph(fused, size)` -> `NcnnGraph`; a layer ncnn cannot run with Darknet's semantics raises `UnsupportedLayer`
naming it (the caller then takes another engine). Layers: convolutional (groups and dilation; activations that
ncnn has), route (concat, groups), shortcut (unweighted), maxpool, upsample (nearest), and the
pass-through layers (dropout, empty). The formats are ncnn's developer-guide ones: a param line is
`Type name #bottoms #tops bottoms... tops... id=value ...` (an array as `-233xx=count,v,...`); a convolution's
weights are a zero 4-byte tag then float32 [out, in/groups, kh, kw], its bias raw float32.

Two hints steer ncnn's kernel choice; neither changes a value, and any input size still runs:
- each convolution's output shape at the input size the model is meant for (param 30, ncnn's "shape hints").
  Without them ncnn prepares one Winograd variant for every size (F(4,3) above 32 channels); with them it
  prepares the variant its own per-shape profile prefers (F(2,3) for yolov3-tiny's 512->1024 at 13x13, whose
  F(4,3) weights are 4x the plain ones and are streamed once per image).
- Winograd off (param 31, the layer's feature mask) for a convolution of fewer than 8 input channels, the one
  reading the image: ncnn would run it as Winograd over unpacked channels, slower than its direct kernel.
docs/benchmarks.md ("Why ncnn: Winograd, the kernel hints, memory") has the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from detect.darknet import Darknet
from detect.darknet.layers import ConvBlock, Identity
from detect.darknet.merge import Route, Shortcut
from detect.darknet.resample import MaxPool, Upsample, pool_pads
from detect.darknet.yolo import YoloHead

PARAM_MAGIC = 7767517  # the first line of every ncnn .param file
INPUT_BLOB = "data"
NO_TAG = b"\0\0\0\0"  # weight tag: raw float32 follows
WINOGRAD_OFF = 1 << 6  # ncnn's per-layer feature mask bit that disables Winograd convolution

# Darknet activation -> ncnn Convolution activation (type, params); None: a separate layer (SEPARATE).
FUSED_ACTIVATIONS = {"linear": (0, ()), "relu": (1, ()), "leaky": (2, (0.1,)), "relie": (2, (0.01,)),
                     "relu6": (3, (0.0, 6.0)), "hardtan": (3, (-1.0, 1.0)), "logistic": (4, ()), "mish": (5, ())}
# the same activations as their own ncnn layers (after a shortcut), plus those a convolution cannot fuse
SEPARATE_ACTIVATIONS = {"relu": ("ReLU", ""), "leaky": ("ReLU", "0=0.1"), "relie": ("ReLU", "0=0.01"),
                        "relu6": ("Clip", "0=0.0 1=6.0"), "hardtan": ("Clip", "0=-1.0 1=1.0"),
                        "logistic": ("Sigmoid", ""), "mish": ("Mish", ""), "swish": ("Swish", ""), "tanh": ("TanH", "")}


class UnsupportedLayer(ValueError):
    """A layer the ncnn graph cannot express with Darknet's semantics."""


@dataclass
class NcnnGraph:
    param: str
    weights: bytes
    head_blobs: list[str]  # the blob feeding each [yolo] head, in head order
    heads: list[YoloHead]


class _Writer:
    """Collects layers and blobs; a blob read by several layers gets ncnn's Split layer at the end."""

    def __init__(self):
        self.layers: list[list] = []  # [type, name, bottoms, tops, params]
        self.weights: list[bytes] = []

    def add(self, kind: str, name: str, bottoms: list[str], top: str, params: str = "") -> str:
        self.layers.append([kind, name, list(bottoms), [top], params])
        return top

    def render(self, outputs: list[str]) -> str:
        """The .param text: every blob read more than once (or read and also an output) is split."""
        readers: dict[str, int] = {}
        for _, _, bottoms, _, _ in self.layers:
            for blob in bottoms:
                readers[blob] = readers.get(blob, 0) + 1
        for blob in outputs:
            readers[blob] = readers.get(blob, 0) + 1
        copies: dict[str, list[str]] = {blob: [f"{blob}_{k}" for k in range(n)] for blob, n in readers.items()
                                        if n > 1}
        lines, taken = [], {blob: 0 for blob in copies}

        def read(blob: str) -> str:
            if blob not in copies:
                return blob
            taken[blob] += 1
            return copies[blob][taken[blob] - 1]

        def emit(kind, name, bottoms, tops, params):
            lines.append(" ".join([kind, name, str(len(bottoms)), str(len(tops)), *bottoms, *tops, params]).rstrip())

        emit("Input", "input", [], [INPUT_BLOB], "")
        if INPUT_BLOB in copies:
            emit("Split", f"split_{INPUT_BLOB}", [INPUT_BLOB], copies[INPUT_BLOB], "")
        for kind, name, bottoms, tops, params in self.layers:
            emit(kind, name, [read(b) for b in bottoms], tops, params)
            for top in tops:
                if top in copies:
                    emit("Split", f"split_{top}", [top], copies[top], "")
        self.output_names = [read(blob) for blob in outputs]
        blobs = {b for line in lines for b in line.split()[4:] if "=" not in b}
        return f"{PARAM_MAGIC}\n{len(lines)} {len(blobs)}\n" + "\n".join(lines) + "\n"


def _floats(tensor: torch.Tensor) -> bytes:
    return tensor.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4").tobytes()


def _activation(writer: _Writer, name: str, act: str, blob: str) -> str:
    if act == "linear":
        return blob
    if act not in SEPARATE_ACTIVATIONS:
        raise UnsupportedLayer(f"{name}: activation '{act}' has no ncnn layer")
    kind, params = SEPARATE_ACTIVATIONS[act]
    return writer.add(kind, f"{name}_{act}", [blob], f"{blob}_{act}", params)


def _convolution(writer: _Writer, name: str, block: ConvBlock, blob: str, out_shape) -> str:
    conv = block.conv
    if block.bn is not None:
        raise UnsupportedLayer(f"{name}: BatchNorm not folded (convert the fused model)")
    kh, kw = conv.kernel_size
    (sy, sx), (py, px), (dy, dx) = conv.stride, conv.padding, conv.dilation
    act = block.act.name
    fused = FUSED_ACTIVATIONS.get(act)
    act_type, act_params = fused if fused is not None else (0, ())
    params = [f"0={conv.out_channels}", f"1={kw}", f"11={kh}", f"2={dx}", f"12={dy}", f"3={sx}", f"13={sy}",
              f"4={px}", f"14={py}", f"15={px}", f"16={py}", "5=1", f"6={conv.weight.numel()}"]
    if conv.groups > 1:
        params.append(f"7={conv.groups}")
    if act_type:
        params.append(f"9={act_type}")
    if act_params:
        params.append(f"-23310={len(act_params)}," + ",".join(repr(float(v)) for v in act_params))
    c, h, w = out_shape
    params.append(f"-23330=4,3,{w},{h},{c}")  # shape hint (module docstring)
    if conv.in_channels < 8:
        params.append(f"31={WINOGRAD_OFF}")  # the image's convolution runs direct (module docstring)
    bias = conv.bias if conv.bias is not None else torch.zeros(conv.out_channels)
    writer.weights += [NO_TAG, _floats(conv.weight), _floats(bias)]
    kind = "ConvolutionDepthWise" if conv.groups > 1 else "Convolution"
    top = writer.add(kind, name, [blob], f"{name}_out", " ".join(params))
    return top if fused is not None else _activation(writer, name, act, top)


def _maxpool(writer: _Writer, name: str, pool: MaxPool, blob: str, in_shape) -> str:
    if pool.depth:
        raise UnsupportedLayer(f"{name}: maxpool_depth (pooling across channels)")
    _, h, w = in_shape
    left, right, top, bottom = pool_pads(h, w, pool.size, pool.stride_y, pool.stride_x, pool.padding)
    # windows over an -inf border, never counted: ncnn pads max pooling with -FLT_MAX ("valid" mode: no extra pad)
    params = (f"0=0 1={pool.size} 11={pool.size} 2={pool.stride_x} 12={pool.stride_y} 3={left} 14={right} "
              f"13={top} 15={bottom} 5=1")
    return writer.add("Pooling", name, [blob], f"{name}_out", params)


def _upsample(writer: _Writer, name: str, layer: Upsample, blob: str) -> str:
    if layer.stride < 0:
        raise UnsupportedLayer(f"{name}: upsample with a negative stride (block sums)")
    out = blob
    if layer.stride != 1:
        out = writer.add("Interp", name, [blob], f"{name}_out", f"0=1 1={float(layer.stride)} 2={float(layer.stride)}")
    if layer.scale != 1:
        out = writer.add("BinaryOp", f"{name}_scale", [out], f"{name}_scaled", f"0=2 1=1 2={float(layer.scale)}")
    return out


def _route(writer: _Writer, name: str, layer: Route, sources: list[str], shapes) -> str:
    parts = []
    for k, (blob, shape) in enumerate(zip(sources, shapes)):
        if layer.groups > 1:
            size = shape[0] // layer.groups
            start = size * layer.group_id
            blob = _channels(writer, f"{name}_part{k}", blob, start, start + size)
        parts.append(blob)
    if len(parts) == 1:
        return parts[0]
    return writer.add("Concat", name, parts, f"{name}_out", "0=0")


def _channels(writer: _Writer, name: str, blob: str, start: int, end: int) -> str:
    return writer.add("Crop", name, [blob], name, f"-23309=1,{start} -23310=1,{end} -23311=1,0")


def _shortcut(writer: _Writer, name: str, layer: Shortcut, blob: str, sources: list[str], shapes, channels) -> str:
    """Darknet adds only the leading min(C, C_from) channels of each source; the rest of the input passes."""
    if layer.weights is not None:
        raise UnsupportedLayer(f"{name}: weighted shortcut ({layer.weights_type})")
    out = blob
    for k, (source, shape) in enumerate(zip(sources, shapes)):
        added = shape[0]
        if added > channels:
            source = _channels(writer, f"{name}_from{k}", source, 0, channels)
        if added >= channels:
            out = writer.add("BinaryOp", f"{name}_add{k}", [out, source], f"{name}_sum{k}", "0=0")
            continue
        head = _channels(writer, f"{name}_head{k}", out, 0, added)
        tail = _channels(writer, f"{name}_tail{k}", out, added, channels)
        summed = writer.add("BinaryOp", f"{name}_add{k}", [head, source], f"{name}_sum{k}", "0=0")
        out = writer.add("Concat", f"{name}_cat{k}", [summed, tail], f"{name}_out{k}", "0=0")
    return _activation(writer, name, layer.act.name, out)


def _scaled(shape, size, model_size) -> tuple[int, int, int]:
    """A layer's (C, H, W) at `model_size` as it is at input `size` (both (h, w))."""
    c, h, w = shape
    return c, max(1, round(h * size[0] / model_size[0])), max(1, round(w * size[1] / model_size[1]))


def ncnn_graph(fused: Darknet, size: tuple[int, int] | None = None) -> NcnnGraph:
    """The ncnn network of `fused` (BatchNorm folded) up to its heads' inputs, its kernels chosen for input
    `size` (h, w; default the model's own), though any size runs. UnsupportedLayer names the first layer ncnn
    cannot run as Darknet does."""
    if fused.is_classifier:
        raise UnsupportedLayer("a classifier (no [yolo] heads)")
    writer = _Writer()
    target = size or fused.input_size
    blobs: list[str] = []  # per layer index: the blob holding its output
    head_blobs: list[str] = []
    current = INPUT_BLOB
    c, h, w = fused.net_options["channels"], *fused.input_size
    in_shape = (c, h, w)
    for i, layer in enumerate(fused.layers):
        name = f"layer{i}"
        if isinstance(layer, YoloHead):
            if fused._yolo_output_used[i]:
                raise UnsupportedLayer(f"{name}: a later layer reads this [yolo] layer's output")
            head_blobs.append(current)
        elif isinstance(layer, ConvBlock):
            current = _convolution(writer, name, layer, current,
                                   _scaled(fused.layer_shapes[i], target, fused.input_size))
        elif isinstance(layer, MaxPool):
            current = _maxpool(writer, name, layer, current, in_shape)
        elif isinstance(layer, Upsample):
            current = _upsample(writer, name, layer, current)
        elif isinstance(layer, Route):
            current = _route(writer, name, layer, [blobs[j] for j in layer.sources],
                             [fused.layer_shapes[j] for j in layer.sources])
        elif isinstance(layer, Shortcut):
            current = _shortcut(writer, name, layer, current, [blobs[j] for j in layer.sources],
                                [fused.layer_shapes[j] for j in layer.sources], in_shape[0])
        elif not isinstance(layer, (Identity, nn.Dropout)):  # pass-through at inference
            raise UnsupportedLayer(f"{name}: {type(layer).__name__} has no ncnn counterpart here")
        blobs.append(current)
        in_shape = fused.layer_shapes[i]
    param = writer.render(head_blobs)
    return NcnnGraph(param, b"".join(writer.weights), writer.output_names, list(fused.heads))
