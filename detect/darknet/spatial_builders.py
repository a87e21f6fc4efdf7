"""Builders for the spatial layers (conv, route, shortcut, pooling, upsample, reorg) and the shape context:
shapes (C, H, W) and strides propagate as in Darknet (§1.3, §2)."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from .activations import read_activation
from .cfg import MAX_CHANNELS, Section
from .layers import ConvBlock
from .merge import Route, Shortcut
from .resample import (
    LocalAvgPool,
    MaxPool,
    Reorg3d,
    ReorgOld,
    Upsample,
    pool_output_size,
)


@dataclass
class Built:
    module: nn.Module
    shape: tuple[int, int, int]  # output (C, H, W)
    stride: tuple[float, float]  # input pixels per output cell (y, x)
    common: dict = field(default_factory=dict)  # the keys every layer section has (cfg.COMMON_KEYS), typed


class BuildContext:
    """The layers built so far and the network input, for shape lookups."""

    def __init__(self, input_shape: tuple[int, int, int]):
        self.input_shape = input_shape
        self.built: list[Built] = []

    def previous(self, index: int) -> tuple[tuple[int, int, int], tuple[float, float]]:
        if index == 0:
            return self.input_shape, (1.0, 1.0)
        return self.built[index - 1].shape, self.built[index - 1].stride


def _positive(section: Section, key: str, default: int, maximum: int | None = None) -> int:
    value = section.get_int(key, default)
    if value < 1:
        raise section.error(f"'{key}={value}' must be at least 1", key)
    if maximum is not None and value > maximum:
        raise section.error(f"'{key}={value}' is more than {maximum} (a typo?)", key)
    return value


def _reject_option(section: Section, key: str, why: str) -> None:
    if section.get_int(key, 0):
        raise section.error(f"'{key}' is not supported by this project ({why})", key)


def build_convolutional(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), (py, px) = ctx.previous(section.index)
    filters, size = _positive(section, "filters", 1, MAX_CHANNELS), _positive(section, "size", 1)
    stride = _positive(section, "stride", 1)
    stride_x, stride_y = section.get_int("stride_x", -1), section.get_int("stride_y", -1)
    sx, sy = (stride_x if stride_x >= 1 else stride), (stride_y if stride_y >= 1 else stride)
    padding = size // 2 if section.get_int("pad", 0) else section.get_int("padding", 0)
    dilation = 1 if size == 1 else _positive(section, "dilation", 1)
    groups = max(1, section.get_int("groups", 1))
    batch_normalize = bool(section.get_int("batch_normalize", 0) or section.get_int("cbn", 0))
    act = read_activation(section, "logistic")
    for key, why in (("antialiasing", "blur after conv"), ("binary", "XNOR nets"), ("xnor", "XNOR nets")):
        _reject_option(section, key, why)
    if section.has("share_index"):
        raise section.error("'share_index' (weights shared with another layer) is not supported", "share_index")
    for key in ("bin_output", "sway", "rotate", "stretch", "stretch_sway", "angle", "dot", "grad_centr",
                "reverse", "coordconv", "assisted_excitation", "stream", "wait_stream"):
        section.get_float(key)  # training/GPU tricks with no effect on the forward pass
    if c % groups or filters % groups:
        raise section.error(f"groups={groups} must divide the input channels ({c}) and filters ({filters})", "groups")
    section.check_weights(filters * (c // groups) * size * size, f"filters={filters} x {c // groups} input channels "
                          f"x size={size}x{size}", "size" if size * size > filters else "filters")
    if dilation > 1 and 2 * padding != size - 1:
        raise section.error(f"dilation={dilation} with size={size} and padding {padding}: Darknet's shape rule "
                            "and its dilated convolution disagree unless pad=1 and size is odd", "dilation")
    out_h, out_w = (h + 2 * padding - size) // sy + 1, (w + 2 * padding - size) // sx + 1
    if out_h < 1 or out_w < 1:
        raise section.error(f"input {h}x{w} is too small for size={size} stride=({sy},{sx}) padding={padding}")
    module = ConvBlock(c, filters, size, (sy, sx), padding, dilation, groups, batch_normalize, act,
                       flipped=bool(section.get_int("flipped", 0)))
    return Built(module, (filters, out_h, out_w), (py * sy, px * sx))


def build_route(section: Section, ctx: BuildContext) -> Built:
    sources = section.get_layer_refs("layers")
    groups = _positive(section, "groups", 1)
    group_id = section.get_int("group_id", 0)
    section.get_int("stream", -1), section.get_int("wait_stream", -1)
    if not 0 <= group_id < groups:
        raise section.error(f"group_id={group_id} must be in 0..{groups - 1} (groups={groups})", "group_id")
    shapes = [ctx.built[i].shape for i in sources]
    for i, (c, h, w) in zip(sources, shapes):
        if (h, w) != shapes[0][1:]:
            raise section.error(f"layer {i} is {h}x{w} but layer {sources[0]} is {shapes[0][1]}x{shapes[0][2]}; "
                                "routed layers must have the same size", "layers")
        if c % groups:
            raise section.error(f"layer {i} has {c} channels, not divisible by groups={groups}", "groups")
    channels = sum(s[0] for s in shapes) // groups
    return Built(Route(sources, groups, group_id), (channels,) + shapes[0][1:], ctx.built[sources[0]].stride)


def build_shortcut(section: Section, ctx: BuildContext) -> Built:
    shape, stride = ctx.previous(section.index)
    sources = section.get_layer_refs("from")
    act = read_activation(section, "linear")
    weights_type = section.get_str("weights_type", "none")
    weights_type = {"per_layer": "per_feature"}.get(weights_type, weights_type)
    if weights_type not in ("none", "per_feature", "per_channel"):
        raise section.error(f"weights_type={weights_type}: expected none, per_feature, per_layer or per_channel",
                            "weights_type")
    normalization = section.get_str("weights_normalization", "none")
    normalization = {"avg_relu": "relu"}.get(normalization, normalization)
    if normalization not in ("none", "relu", "softmax"):
        raise section.error(f"weights_normalization={normalization}: expected none, relu, avg_relu or softmax",
                            "weights_normalization")
    if weights_type != "none" and normalization == "none":
        raise section.error("weighted shortcut needs weights_normalization=relu, avg_relu or softmax",
                            "weights_normalization")
    for i in sources:
        if ctx.built[i].shape[1:] != shape[1:]:
            raise section.error(f"layer {i} is {ctx.built[i].shape[1]}x{ctx.built[i].shape[2]}, the input is "
                                f"{shape[1]}x{shape[2]}; shortcut layers must have the same size", "from")
    return Built(Shortcut(sources, shape[0], weights_type, normalization, act), shape, stride)


def _pooled_size(section: Section, h: int, w: int, size: int, sy: int, sx: int, padding: int) -> tuple[int, int]:
    """Output (h, w) of a Darknet pooling window; an input too small for it is a cfg error."""
    out_h, out_w = pool_output_size(h, padding, size, sy), pool_output_size(w, padding, size, sx)
    if out_h < 1 or out_w < 1:
        raise section.error(f"input {h}x{w} is too small for size={size} padding={padding}")
    return out_h, out_w


def _pool_keys(section: Section) -> tuple[int, int, int, int]:
    stride = _positive(section, "stride", 1)
    stride_x, stride_y = _positive(section, "stride_x", stride), _positive(section, "stride_y", stride)
    size = _positive(section, "size", stride)
    padding = section.get_int("padding", size - 1)
    if padding < 0:
        raise section.error(f"padding={padding} must not be negative", "padding")
    _reject_option(section, "antialiasing", "blur after pooling")
    return size, stride_y, stride_x, padding


def build_maxpool(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), (py, px) = ctx.previous(section.index)
    size, sy, sx, padding = _pool_keys(section)
    section.get_int("maxpool_zero_nonmax", 0)  # a GPU-only training trick
    if section.get_int("maxpool_depth", 0):
        out_channels = _positive(section, "out_channels", 1)
        return Built(MaxPool(size, sy, sx, padding, True, out_channels), (out_channels, h, w), (py, px))
    section.get_int("out_channels", 1)
    out_h, out_w = _pooled_size(section, h, w, size, sy, sx, padding)
    return Built(MaxPool(size, sy, sx, padding), (c, out_h, out_w), (py * sy, px * sx))


def build_local_avgpool(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), (py, px) = ctx.previous(section.index)
    size, sy, sx, padding = _pool_keys(section)
    out_h, out_w = _pooled_size(section, h, w, size, sy, sx, padding)
    return Built(LocalAvgPool(size, sy, sx, padding), (c, out_h, out_w), (py * sy, px * sx))


def build_upsample(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), (py, px) = ctx.previous(section.index)
    stride, scale = section.get_int("stride", 2), section.get_float("scale", 1.0)
    if stride == 0:
        raise section.error("stride=0: use a positive stride to upsample or a negative one to downsample", "stride")
    if stride > 0:
        return Built(Upsample(stride, scale), (c, h * stride, w * stride), (py / stride, px / stride))
    s = -stride
    if h // s < 1 or w // s < 1:
        raise section.error(f"input {h}x{w} is too small to downsample by {s}", "stride")
    return Built(Upsample(stride, scale), (c, h // s, w // s), (py * s, px * s))


def build_reorg3d(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), (py, px) = ctx.previous(section.index)
    s, reverse = _positive(section, "stride", 1), bool(section.get_int("reverse", 0))
    if reverse:
        if c % (s * s):
            raise section.error(f"reverse reorg needs channels ({c}) divisible by stride²={s * s}", "stride")
        return Built(Reorg3d(s, True), (c // (s * s), h * s, w * s), (py / s, px / s))
    if h % s or w % s:
        raise section.error(f"input {h}x{w} is not divisible by stride={s}", "stride")
    return Built(Reorg3d(s, False), (c * s * s, h // s, w // s), (py * s, px * s))


def build_reorg(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), (py, px) = ctx.previous(section.index)
    s = _positive(section, "stride", 1)
    _reject_option(section, "reverse", "legacy reverse reorg")
    if h % s or w % s or c % (s * s):
        raise section.error(f"input {c}x{h}x{w}: [reorg] needs H, W divisible by stride={s} and C by {s * s}",
                            "stride")
    return Built(ReorgOld(s), (c * s * s, h // s, w // s), (py * s, px * s))
