"""Fine-tuning transfer of the convs that feed the `[yolo]` heads, row by row, when the class count or the class
names change. A feeder's output channels are laid out per anchor as [x, y, w, h, obj, class 0..K-1] (reference
§3.4), and only the class rows depend on the classes: box and objectness rows are copied anchor by anchor, class
rows where the class names are one class (detect.ops.class_names: case-insensitive, `_` and space alike, Darknet's
and COCO's spellings of six classes one). The other class rows keep the model's
own initialisation plus the from-scratch class prior, as a start without weights would have them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from detect.ops.class_names import COCO_NAMES, match_names, read_coco_names

from .cfg import parse_cfg
from .layers import ConvBlock
from .options import parse_yolo_options
from .surgery import class_prior_logit, prior_biases

log = logging.getLogger(__name__)

_BOX_OBJ = 5  # x, y, w, h, objectness


@dataclass(frozen=True)
class HeadLayout:
    """What the row layout of a head's feeder depends on."""
    layer_index: int
    num_anchors: int
    num_classes: int


def model_head_layouts(model) -> list[HeadLayout]:
    return [HeadLayout(h.layer_index, h.num_anchors, h.num_classes) for h in model.heads]


def cfg_head_layouts(cfg_text: str, source: str = "<checkpoint cfg>") -> list[HeadLayout]:
    """Head layouts of a cfg read as text (a checkpoint's own cfg), without building it."""
    layouts = []
    for section in parse_cfg(cfg_text, source):
        if section.type == "yolo":
            options = parse_yolo_options(section)
            layouts.append(HeadLayout(section.index, len(options["mask"]), options["classes"]))
    return layouts


def assumed_coco_names(layouts: list[HeadLayout], path) -> list[str] | None:
    """A .weights file holds no class names: heads of 80 classes are taken to be COCO's (the official files)."""
    if not layouts or any(layout.num_classes != 80 for layout in layouts):
        return None
    names = read_coco_names()
    if names is None:
        log.warning("%s: 80-class heads but %s is missing; class rows are not matched by name", path, COCO_NAMES)
        return None
    log.info("%s holds no class names; its heads have 80 classes, so the COCO names of %s are assumed",
             path, COCO_NAMES.name)
    return names


def class_map(source_names, names, source_classes: int, classes: int) -> list[int | None]:
    """For each of the model's classes, the source class whose rows it takes (None: initialised). Without names
    on both sides, equal class counts are taken to be the same classes in the same order."""
    if source_names is None or names is None:
        return list(range(classes)) if classes == source_classes else [None] * classes
    return match_names(source_names, names)


@dataclass
class HeadPlan:
    """How one head's feeder rows come from the source; `reason` says why none do."""
    head: int
    layout: HeadLayout
    source: HeadLayout | None
    tensors: list[str]  # state-dict names of the feeder's per-row tensors that the source holds
    classes: list[int | None]  # class_map
    names: list[str] | None
    reason: str | None = None

    @property
    def whole(self) -> bool:
        """The source rows are the model's rows in the same order: the plain same-shape copy does it."""
        return self.reason is None and self.classes == list(range(self.source.num_classes))

    @property
    def by_rows(self) -> bool:
        return self.reason is None and not self.whole

    def row_pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(model rows, source rows) to copy: every anchor's box and objectness rows, and its matched classes."""
        mine, theirs = [], []
        for a in range(self.layout.num_anchors):
            base, source_base = a * (_BOX_OBJ + self.layout.num_classes), a * (_BOX_OBJ + self.source.num_classes)
            pairs = [(e, e) for e in range(_BOX_OBJ)]
            pairs += [(_BOX_OBJ + k, _BOX_OBJ + s) for k, s in enumerate(self.classes) if s is not None]
            mine += [base + m for m, _ in pairs]
            theirs += [source_base + s for _, s in pairs]
        return torch.tensor(mine), torch.tensor(theirs)


def _row_tensors(model, head) -> dict[str, torch.Tensor]:
    """The feeder's tensors with one entry per output channel (conv weight and bias, BatchNorm arrays)."""
    index = head.layer_index - 1
    feeder = model.layers[index]
    if not isinstance(feeder, ConvBlock):
        return {}
    rows = feeder.conv.out_channels
    return {name: t for name, t in feeder.state_dict(prefix=f"layers.{index}.", keep_vars=True).items()
            if t.dim() >= 1 and t.shape[0] == rows}


def _infer_layout(head, state, tensors) -> HeadLayout | None:
    """A source without a cfg (a bare state dict): assume the model's anchors and read the class count off."""
    rows = state[tensors[0]].shape[0] if tensors else 0
    per_anchor, left = divmod(rows, head.num_anchors)
    if left or per_anchor <= _BOX_OBJ:
        return None
    return HeadLayout(head.layer_index, head.num_anchors, per_anchor - _BOX_OBJ)


def _why_not(head, source: HeadLayout | None, state, rows: dict, tensors: list[str], layouts) -> str | None:
    if not tensors:
        return f"the source has no weights for layer {head.layer_index - 1} (a partial file ends before it)"
    if source is None and layouts is not None:
        return f"the source has only {len(layouts)} heads"
    if source is None:
        return f"the source's rows ({tuple(state[tensors[0]].shape)}) fit no layout of {head.num_anchors} anchors"
    if source.layer_index != head.layer_index:
        return f"the source's head is at layer {source.layer_index}, this model's at {head.layer_index}"
    if source.num_anchors != head.num_anchors:
        return f"the source's head has {source.num_anchors} anchors, this model's {head.num_anchors}"
    expected = source.num_anchors * (_BOX_OBJ + source.num_classes)
    for name in tensors:
        theirs, mine = tuple(state[name].shape), tuple(rows[name].shape)
        if theirs[0] != expected or theirs[1:] != mine[1:]:
            return f"{name}: source {theirs} does not fit {source.num_classes} classes and model {mine}"
    return None


def plan_head_transfer(model, state: dict, source_layouts: list[HeadLayout] | None,
                       source_names: list[str] | None, names: list[str] | None) -> list[HeadPlan]:
    """One plan per model head. `source_layouts` (None: read off the shapes) pairs with the heads in cfg order."""
    if names is not None and len(names) != model.num_classes:
        raise ValueError(f"{len(names)} class names for a model of {model.num_classes} classes; pass one name "
                         f"per class")
    plans = []
    for i, head in enumerate(model.heads):
        rows = _row_tensors(model, head)
        tensors = [name for name in rows if name in state]
        if source_layouts is None:
            source = _infer_layout(head, state, tensors)
        else:
            source = source_layouts[i] if i < len(source_layouts) else None
        layout = HeadLayout(head.layer_index, head.num_anchors, head.num_classes)
        reason = _why_not(head, source, state, rows, tensors, source_layouts)
        known = source_names if source and source_names and len(source_names) == source.num_classes else None
        if source_names and source and known is None and i == 0:
            log.warning("the source has %d class names for %d classes; class rows are not matched by name",
                        len(source_names), source.num_classes)
        classes = class_map(known, names, source.num_classes, head.num_classes) if reason is None else []
        plans.append(HeadPlan(i, layout, source, tensors, classes, names, reason))
    return plans


@torch.no_grad()
def copy_head_rows(model, state: dict, plans: list[HeadPlan]) -> list[dict]:
    """Copy the planned rows (heads whose tensors fit whole were copied by the caller) and give the unmatched
    class rows the from-scratch class prior; returns one report dict per head."""
    target = model.state_dict(keep_vars=True)
    reports = []
    for plan in plans:
        if plan.by_rows:
            mine, theirs = plan.row_pairs()
            for name in plan.tensors:
                target[name][mine] = state[name][theirs].to(target[name])
            unmatched = [k for k, s in enumerate(plan.classes) if s is None]
            bias = prior_biases(model, model.heads[plan.head])
            if bias is not None and unmatched:
                bias[:, [_BOX_OBJ + k for k in unmatched]] += class_prior_logit(plan.layout.num_classes)
        reports.append(head_report(plan))
    return reports


def copy_matching(model, state: dict, by_rows: set) -> tuple[list[str], list[str]]:
    """Copy every tensor whose name and shape match, except those `by_rows` (their class rows are in another
    order); return (descriptions of those not copied whole, names of those copied whole)."""
    target = model.state_dict(keep_vars=True)
    skipped, copied = [], []
    with torch.no_grad():
        for name, value in state.items():
            if name not in target:
                skipped.append(f"{name}: not in this model")
            elif tuple(target[name].shape) != tuple(value.shape):
                skipped.append(f"{name}: source {tuple(value.shape)} vs model {tuple(target[name].shape)}")
            elif name in by_rows:
                skipped.append(f"{name}: class names differ (rows copied by name)")
            else:
                target[name].copy_(value)
                copied.append(name)
    return skipped, copied


def transfer_state(model, state: dict, source_layouts: list[HeadLayout] | None = None,
                   source_names: list[str] | None = None, names: list[str] | None = None
                   ) -> tuple[list, list, list]:
    """Fine-tuning transfer of a state dict: same-name same-shape tensors whole, then the head feeders row by row.
    Returns (descriptions of tensors not copied whole, one head_report per head, names of tensors copied whole)."""
    plans = plan_head_transfer(model, state, source_layouts, source_names, names)
    skipped, copied = copy_matching(model, state, {name for plan in plans if plan.by_rows for name in plan.tensors})
    return skipped, copy_head_rows(model, state, plans), copied


def head_report(plan: HeadPlan) -> dict:
    """What one head got: rows copied (box+objectness, class), matched and initialised classes, or why none."""
    layout, anchors = plan.layout, plan.layout.num_anchors
    label = (lambda k: plan.names[k]) if plan.names is not None else (lambda k: f"class {k}")
    matched = [label(k) for k, s in enumerate(plan.classes) if s is not None]
    initialised = [label(k) for k in range(layout.num_classes) if k >= len(plan.classes) or plan.classes[k] is None]
    copied_box_obj = 0 if plan.reason else _BOX_OBJ * anchors
    return {"head": plan.head, "layer": layout.layer_index, "anchors": anchors, "classes": layout.num_classes,
            "source_classes": plan.source.num_classes if plan.source else None,
            "box_obj_rows": copied_box_obj, "class_rows": len(matched) * anchors,
            "initialised_rows": anchors * (layout.num_classes + _BOX_OBJ) - copied_box_obj - len(matched) * anchors,
            "matched": matched, "initialised": initialised, "whole": plan.whole, "reason": plan.reason}


def describe_head(r: dict) -> str:
    where = f"head {r['head']} (layer {r['layer']}, {r['anchors']} anchors)"
    if r["reason"]:
        return f"{where}: nothing copied, {r['initialised_rows']} rows keep their initialisation: {r['reason']}"
    if not r["initialised"] and r["source_classes"] == r["classes"]:  # every class found: no list to read
        return f"{where}: {r['box_obj_rows']} box+obj rows and all {r['class_rows']} class rows copied " \
               f"({r['classes']} classes)"
    matched = ", ".join(r["matched"][:8]) + (f", ... ({len(r['matched'])})" if len(r["matched"]) > 8 else "")
    line = (f"{where}: {r['box_obj_rows']} box+obj rows copied; {r['class_rows']} class rows copied"
            f" ({r['source_classes']} -> {r['classes']} classes; matched: {matched or 'none'})")
    if r["initialised"]:
        line += f"; {r['initialised_rows']} class rows initialised ({', '.join(r['initialised'][:8])}" + \
                (", ...)" if len(r["initialised"]) > 8 else ")")
    return line
