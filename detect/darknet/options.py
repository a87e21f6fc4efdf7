"""Typed `[net]` and `[yolo]` options with Darknet's defaults (reference §1.5 and §2.7)."""

from __future__ import annotations

import math

from .cfg import Section

# key -> default; the default's Python type decides how the value is parsed (list = list of floats)
NET_DEFAULTS = {
    "width": 0, "height": 0, "channels": 0, "inputs": 0, "letter_box": 0,
    "batch": 1, "subdivisions": 1, "time_steps": 1,
    "learning_rate": 0.001, "learning_rate_min": 0.00001, "momentum": 0.9, "decay": 0.0001,
    "max_batches": 0, "policy": "constant", "burn_in": 0, "power": 4.0, "step": 1, "scale": 1.0,
    "steps": None, "scales": None, "seq_scales": None, "gamma": 1.0, "sgdr_cycle": None, "sgdr_mult": 2,
    "adam": 0, "B1": 0.9, "B2": 0.999, "eps": 0.000001, "loss_scale": 1.0, "ema_alpha": 0.0,
    "angle": 0.0, "aspect": 1.0, "saturation": 1.0, "exposure": 1.0, "hue": 0.0, "flip": 1, "blur": 0,
    "gaussian_noise": 0, "mixup": 0, "cutmix": 0, "mosaic": 0, "mosaic_bound": 0, "max_crop": None,
    "min_crop": None, "resize_step": 32, "label_smooth_eps": 0.0, "track": 0, "augment_speed": 2,
    "sequential_subdivisions": None, "contrastive": 0, "contrastive_jit_flip": 0, "contrastive_color": 0,
    "unsupervised": 0, "attention": 0, "adversarial_lr": 0.0, "try_fix_nan": 0, "weights_reject_freq": 0,
    "equidistant_point": 0, "badlabels_rejection_percentage": 0.0, "num_sigmas_reject_badlabels": 0.0,
    "use_cuda_graph": 0, "dynamic_minibatch": 0, "optimized_memory": 0, "workspace_size_limit_MB": 1024.0,
    "max_chart_loss": 20.0, "show_receptive_field": 0,
}
_NET_LISTS = {"steps": int, "scales": float, "seq_scales": float}

YOLO_DEFAULTS = {
    "classes": 20, "num": 1, "mask": None, "anchors": None, "scale_x_y": 1.0, "new_coords": 0,
    "nms_kind": "default", "beta_nms": 0.6, "max": 200, "jitter": 0.2, "resize": 1.0, "random": 0.0,
    "ignore_thresh": 0.5, "truth_thresh": 1.0, "iou_thresh": 1.0, "iou_loss": "mse", "iou_normalizer": 0.75,
    "obj_normalizer": 1.0, "cls_normalizer": 1.0, "delta_normalizer": 1.0, "max_delta": math.inf,
    "counters_per_class": None, "label_smooth_eps": 0.0, "objectness_smooth": 0, "focal_loss": 0,
    "iou_thresh_kind": "iou", "show_details": 1, "track_history_size": 5, "sim_thresh": 0.8,
    "dets_for_track": 1, "dets_for_show": 1, "track_ciou_norm": 0.01, "embedding_layer": None, "map": None,
}


def _typed(section: Section, key: str, default):
    if isinstance(default, bool) or isinstance(default, int):
        return section.get_int(key, default)
    if isinstance(default, float):
        return section.get_float(key, default)
    if isinstance(default, str):
        return section.get_str(key, default)
    return section.get_str(key, None)


def parse_net_options(section: Section) -> dict:
    """Every `[net]` key with its Darknet default; lists parsed; keys outside the table kept as strings."""
    values = {}
    for key, default in NET_DEFAULTS.items():
        if key in _NET_LISTS:
            kind = _NET_LISTS[key]
            values[key] = (section.get_int_list(key) if kind is int else section.get_float_list(key))
        elif default is None:  # integers whose default depends on other keys
            values[key] = section.get_int(key)
        else:
            values[key] = _typed(section, key, default)
    derived = {"sgdr_cycle": values["max_batches"], "max_crop": 2 * values["width"],
               "min_crop": values["width"], "sequential_subdivisions": values["subdivisions"]}
    for key, value in derived.items():
        if values[key] is None:
            values[key] = value
    values["sequential_subdivisions"] = min(values["sequential_subdivisions"], values["subdivisions"])
    for key in ("width", "height", "channels"):
        if values[key] < 0:
            raise section.error(f"'{key}={values[key]}' must not be negative", key)
    if values["channels"] <= 0 or values["width"] <= 0 or values["height"] <= 0:
        if values["inputs"] <= 0:
            raise section.error("set width, height and channels (or inputs) in [net]")
    return values


def parse_yolo_options(section: Section) -> dict:
    """Every `[yolo]` key with its Darknet default (training keys included), validated mask and anchors."""
    opts = {}
    for key, default in YOLO_DEFAULTS.items():
        if key in ("mask",):
            opts[key] = section.get_int_list(key)
        elif key in ("anchors", "counters_per_class"):
            opts[key] = section.get_float_list(key)
        elif key == "embedding_layer":
            opts[key] = section.get_int(key)
        else:
            opts[key] = _typed(section, key, default)
    num, classes = opts["num"], opts["classes"]
    if num < 1:
        raise section.error(f"'num={num}' must be at least 1", "num")
    if classes < 1:
        raise section.error(f"'classes={classes}' must be at least 1", "classes")
    if opts["mask"] is None:
        opts["mask"] = list(range(num))
    for m in opts["mask"]:
        if not 0 <= m < num:
            raise section.error(f"mask index {m} is outside the anchors (num={num}: valid 0..{num - 1})", "mask")
    if opts["anchors"] is None:
        opts["anchors"] = [0.5] * (2 * num)
    if len(opts["anchors"]) < 2 * num:
        raise section.error(f"'anchors' has {len(opts['anchors'])} values; num={num} needs {2 * num} "
                            "(w,h pairs)", "anchors")
    opts["anchors"] = opts["anchors"][: 2 * num]  # Darknet reads only the first 2*num numbers
    if opts["counters_per_class"] is not None and len(opts["counters_per_class"]) != classes:
        raise section.error(f"'counters_per_class' has {len(opts['counters_per_class'])} values; "
                            f"classes={classes}", "counters_per_class")
    if opts["new_coords"] not in (0, 1):
        raise section.error(f"'new_coords={opts['new_coords']}' must be 0 or 1", "new_coords")
    return opts


def rewrite_num_classes(sections: list[Section], num_classes: int) -> None:
    """Set `classes` of every [yolo] and `filters` of the conv feeding it, for fine-tuning a cfg onto another
    class count without editing the file."""
    if num_classes < 1:
        raise ValueError(f"num_classes={num_classes} must be at least 1")
    for section in sections:
        if section.type != "yolo":
            continue
        feeder = sections[section.index]  # sections[0] is [net], so this is layer index-1
        if feeder.type != "convolutional":
            raise section.error(f"num_classes needs a [convolutional] right before [yolo], found {feeder.header}")
        mask = section.get_int_list("mask")
        anchors_used = len(mask) if mask is not None else section.get_int("num", YOLO_DEFAULTS["num"])
        section.set("classes", num_classes)
        feeder.set("filters", (num_classes + 5) * anchors_used)
