"""Turn parsed cfg sections into modules, one per layer, with their output shapes and strides (§2)."""

from __future__ import annotations

import logging
from dataclasses import replace

from torch import nn

from .activations import read_activation
from .cfg import MAX_CHANNELS, Section
from .layers import BatchNormLayer, Connected, GlobalAvgPool, Identity, Softmax
from .merge import Sam, ScaleChannels
from .options import parse_yolo_options
from .spatial_builders import (
    BuildContext,
    Built,
    _positive,
    build_convolutional,
    build_local_avgpool,
    build_maxpool,
    build_reorg,
    build_reorg3d,
    build_route,
    build_shortcut,
    build_upsample,
)
from .yolo import YoloHead

log = logging.getLogger(__name__)


def _single_source(section: Section) -> int:
    sources = section.get_layer_refs("from")
    if len(sources) != 1:
        raise section.error(f"'from' must name exactly one layer, got {len(sources)}", "from")
    return sources[0]


def build_sam(section: Section, ctx: BuildContext) -> Built:
    shape, stride = ctx.previous(section.index)
    source = _single_source(section)
    if ctx.built[source].shape != shape:
        raise section.error(f"layer {source} has shape {ctx.built[source].shape}, the input {shape}; "
                            "[sam] needs equal shapes", "from")
    return Built(Sam(source, read_activation(section, "linear")), shape, stride)


def build_scale_channels(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), _ = ctx.previous(section.index)
    source = _single_source(section)
    scale_wh = bool(section.get_int("scale_wh", 0))
    target = ctx.built[source]
    expected = (1,) + target.shape[1:] if scale_wh else (target.shape[0], 1, 1)
    if (c, h, w) != expected:
        raise section.error(f"input shape {(c, h, w)} does not fit layer {source} {target.shape}: "
                            f"scale_wh={int(scale_wh)} needs {expected}", "from")
    return Built(ScaleChannels(source, scale_wh, read_activation(section, "linear")), target.shape, target.stride)


def build_avgpool(section: Section, ctx: BuildContext) -> Built:
    (c, _, _), stride = ctx.previous(section.index)
    return Built(GlobalAvgPool(), (c, 1, 1), stride)


def build_dropout(section: Section, ctx: BuildContext) -> Built:
    shape, stride = ctx.previous(section.index)
    probability = section.get_float("probability", 0.2)
    if not 0 <= probability < 1:
        raise section.error(f"probability={probability} must be in [0, 1)", "probability")
    if section.get_int("dropblock", 0):
        log.warning("%s:%d: dropblock is trained as plain dropout here", section.source, section.line)
    section.get_float("dropblock_size_rel", 0.0), section.get_int("dropblock_size_abs", 0)
    return Built(nn.Dropout(probability), shape, stride)


def build_connected(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), stride = ctx.previous(section.index)
    outputs = _positive(section, "output", 1, MAX_CHANNELS)
    section.check_weights(c * h * w * outputs, f"{c * h * w} inputs x output={outputs}", "output")
    bn = bool(section.get_int("batch_normalize", 0))
    module = Connected(c * h * w, outputs, bn, read_activation(section, "logistic"))
    return Built(module, (outputs, 1, 1), stride)


def build_softmax(section: Section, ctx: BuildContext) -> Built:
    (c, h, w), stride = ctx.previous(section.index)
    groups = _positive(section, "groups", 1)
    temperature = section.get_float("temperature", 1.0)
    if section.has("tree"):
        raise section.error("softmax 'tree' (hierarchical classes) is not supported", "tree")
    section.get_int("spatial", 0), section.get_int("noloss", 0)
    if (c * h * w) % groups:
        raise section.error(f"{c * h * w} inputs are not divisible by groups={groups}", "groups")
    return Built(Softmax(groups, temperature), (c * h * w, 1, 1), stride)


def build_batchnorm(section: Section, ctx: BuildContext) -> Built:
    shape, stride = ctx.previous(section.index)
    return Built(BatchNormLayer(shape[0]), shape, stride)


def build_activation(section: Section, ctx: BuildContext) -> Built:
    shape, stride = ctx.previous(section.index)
    return Built(read_activation(section, "linear"), shape, stride)


def build_empty(section: Section, ctx: BuildContext) -> Built:
    shape, stride = ctx.previous(section.index)
    return Built(Identity(), shape, stride)


def build_yolo(section: Section, ctx: BuildContext, sections: list[Section]) -> Built:
    (c, h, w), stride = ctx.previous(section.index)
    options = parse_yolo_options(section)
    expected = (options["classes"] + 5) * len(options["mask"])
    if c != expected:
        feeder = sections[section.index - 1] if section.index > 0 else section
        key = "filters" if feeder.type == "convolutional" else None
        raise feeder.error(
            f"feeds [yolo] (line {section.line}) with {c} channels; classes={options['classes']} and "
            f"{len(options['mask'])} anchors in the mask need filters=(classes+5)*len(mask)={expected}", key)
    return Built(YoloHead(section.index, options, stride), (c, h, w), stride)


BUILDERS = {
    "convolutional": build_convolutional, "route": build_route, "shortcut": build_shortcut,
    "maxpool": build_maxpool, "local_avgpool": build_local_avgpool, "upsample": build_upsample,
    "reorg3d": build_reorg3d, "reorg": build_reorg, "sam": build_sam, "scale_channels": build_scale_channels,
    "avgpool": build_avgpool, "dropout": build_dropout, "connected": build_connected, "softmax": build_softmax,
    "batchnorm": build_batchnorm, "activation": build_activation, "empty": build_empty,
}


def build_layers(sections: list[Section], input_shape: tuple[int, int, int]) -> list[Built]:
    """Build every layer section (`sections` excludes [net]); warn once per unused key."""
    ctx = BuildContext(input_shape)
    for section in sections:
        if ctx.built and isinstance(ctx.built[-1].module, Softmax):
            raise section.error("no layer may follow [softmax] (its output is not a feature map)")
        if section.type == "yolo":
            built = build_yolo(section, ctx, sections)
        else:
            built = BUILDERS[section.type](section, ctx)
        built = replace(built, common=section.read_common())  # dontload, dontloadscales, learning_rate, ...
        section.warn_unused()
        ctx.built.append(built)
    return ctx.built


