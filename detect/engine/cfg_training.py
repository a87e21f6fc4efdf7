"""The training settings a Darknet cfg carries ([net] learning_rate, burn_in, policy, augmentation; [yolo] jitter,
counters_per_class) as this trainer's hyperparameters and options.

`--hyp cfg` maps every key the cfg sets that has an equivalent, and logs the mapping key by key; keys without one
are listed with the reason. Without it, a new run says once which training keys its cfg sets and ignores.
The scales differ where the two trainers differ:
- Darknet's `learning_rate` goes with its own loss and a batch-mean gradient; this trainer's loss is scaled by
  the nominal batch and its usual lr0 is 0.01 where Darknet's is 0.001, so lr0 = 10 x learning_rate keeps the
  cfg's choice relative to each trainer's usual value.
- `saturation` / `exposure` s draw a factor in [1/s, s]; hsv_s / hsv_v g draw one in [1 - g, 1 + g]: g = s - 1.
- `jitter` j crops up to j of each side: a zoom of up to +-j (scale j) and a shift of up to j/2 (translate).
- `counters_per_class` weights a class's classification loss by max_count / count (capped by the head's
  `max_delta`), as Darknet does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from detect.darknet.cfg import parse_cfg, read_cfg_source

NET_TRAINING_KEYS = ("learning_rate", "momentum", "decay", "burn_in", "power", "max_batches", "policy", "steps",
                     "scales", "batch", "subdivisions", "mosaic", "mixup", "cutmix", "flip", "hue", "saturation",
                     "exposure", "angle", "aspect", "blur", "gaussian_noise", "letter_box", "label_smooth_eps")
YOLO_TRAINING_KEYS = ("jitter", "counters_per_class", "label_smooth_eps")
DARKNET_USUAL_LR, OUR_USUAL_LR = 0.001, 0.01


@dataclass
class CfgTraining:
    """What a cfg's training keys become: flat hyp keys, TrainOptions fields, and a line per key."""

    source: str
    set_keys: dict[str, str]  # key -> value as written (yolo keys prefixed "yolo.")
    hyp: dict = field(default_factory=dict)
    opts: dict = field(default_factory=dict)
    mapped: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)


def cfg_training_keys(cfg) -> tuple[str, dict[str, str]]:
    """(source, {key: raw value}) of the training keys `cfg` (a path or cfg text) sets explicitly; [yolo] keys
    are read from the last [yolo] section (Darknet takes jitter from there) and prefixed `yolo.`."""
    text, source, _ = read_cfg_source(cfg)
    sections = parse_cfg(text, source)
    found = {k: sections[0].get_str(k) for k in NET_TRAINING_KEYS if sections[0].has(k)}
    heads = [s for s in sections if s.type == "yolo"]
    if heads:
        found.update({f"yolo.{k}": heads[-1].get_str(k) for k in YOLO_TRAINING_KEYS if heads[-1].has(k)})
        max_delta = heads[-1].get_str("max_delta")
        if "yolo.counters_per_class" in found and max_delta is not None:
            found["yolo.max_delta"] = max_delta
    return source, found


def _floats(raw: str) -> list[float]:
    return [float(v) for v in raw.split("#")[0].split(",") if v.strip()]


def map_cfg_training(cfg, hyp_keys: set[str]) -> CfgTraining:
    """The mapping of `cfg`'s training keys onto hyp keys (only those in `hyp_keys`) and options."""
    source, keys = cfg_training_keys(cfg)
    out = CfgTraining(source, keys)
    f = {k: float(v) for k, v in keys.items() if k not in ("policy", "steps", "scales", "yolo.counters_per_class")}

    def to_hyp(key: str, name: str, value, why: str = "") -> None:
        if name not in hyp_keys:
            out.unmapped.append(f"{key}={keys[key]}: this trainer has no {name} yet")
            return
        out.hyp[name] = value
        out.mapped.append(f"{key}={keys[key]} -> {name} {value:g}{f' ({why})' if why else ''}"
                          if isinstance(value, float) else f"{key}={keys[key]} -> {name} {value}"
                          f"{f' ({why})' if why else ''}")

    if "learning_rate" in f:
        to_hyp("learning_rate", "lr0", f["learning_rate"] * OUR_USUAL_LR / DARKNET_USUAL_LR,
               "x10: relative to each trainer's usual value")
    if "momentum" in f:
        to_hyp("momentum", "momentum", f["momentum"])
    if "decay" in f:
        to_hyp("decay", "weight_decay", f["decay"])
    if "burn_in" in f:
        to_hyp("burn_in", "warmup_min_steps", int(f["burn_in"]), "optimiser steps; warmup_epochs 0")
        out.hyp["warmup_epochs"] = 0.0
        if "power" in f:
            to_hyp("power", "warmup_power", f["power"])
    _map_policy(keys, f, out)
    if "batch" in f:
        out.opts["nbs"] = int(f["batch"])
        out.mapped.append(f"batch={keys['batch']} -> --nbs {int(f['batch'])} (images per optimiser step)")
    if "subdivisions" in f:
        out.unmapped.append(f"subdivisions={keys['subdivisions']}: memory only; --batch-size sets the micro-batch")
    if "mosaic" in f:
        to_hyp("mosaic", "mosaic", 1.0 if f["mosaic"] else 0.0)
    if "mixup" in f:
        to_hyp("mixup", "mixup", 0.5 if f["mixup"] else 0.0, "half of the samples")
    if "flip" in f:
        to_hyp("flip", "fliplr", 0.5 if f["flip"] else 0.0)
    if "hue" in f:
        to_hyp("hue", "hsv_h", f["hue"])
    for key, name in (("saturation", "hsv_s"), ("exposure", "hsv_v")):
        if key in f:
            to_hyp(key, name, min(max(f[key] - 1.0, 0.0), 1.0), "a factor in [1/s, s] as one in [1-g, 1+g]")
    if "angle" in f:
        to_hyp("angle", "degrees", f["angle"])
    if "yolo.jitter" in f:
        to_hyp("yolo.jitter", "scale", f["yolo.jitter"], "zoom of up to +-jitter")
        to_hyp("yolo.jitter", "translate", f["yolo.jitter"] / 2, "shift of up to jitter/2")
    for key in ("label_smooth_eps", "yolo.label_smooth_eps"):
        if key in f and f[key] > 0:
            to_hyp(key, "label_smoothing", f[key])
    if "yolo.counters_per_class" in keys:
        counts = [max(c, 1.0) for c in _floats(keys["yolo.counters_per_class"])]
        cap = f.get("yolo.max_delta", math.inf)
        to_hyp("yolo.counters_per_class", "class_weights", [min(max(counts) / c, cap) for c in counts],
               "max_count / count, as Darknet")
    for key in ("letter_box", "cutmix", "aspect", "blur", "gaussian_noise"):
        if key in keys:
            out.unmapped.append(f"{key}={keys[key]}: {NO_EQUIVALENT[key]}")
    if "max_batches" in f and not any(m.startswith("policy") for m in out.mapped):
        out.unmapped.append(f"max_batches={keys['max_batches']}: the run's length is --epochs here")
    return out


NO_EQUIVALENT = {"letter_box": "training feeds images as --resize says (letterbox unless given: measured better "
                               "for fine-tunes, docs/benchmarks.md); best.pt records it and inference follows it",
                 "cutmix": "no cutmix here", "aspect": "no aspect jitter here (scale covers size)",
                 "blur": "no blur here", "gaussian_noise": "no noise here"}


def _map_policy(keys: dict, f: dict, out: CfgTraining) -> None:
    """policy steps (with steps, scales and max_batches) -> --schedule step at the same fractions of the run;
    constant -> constant; Darknet's other policies have no equivalent (the cosine schedule stays)."""
    policy = keys.get("policy", "").strip()
    if not policy:
        return
    if policy == "constant":
        out.opts["schedule"] = "constant"
        out.mapped.append("policy=constant -> --schedule constant")
    elif policy == "steps" and "steps" in keys and "scales" in keys and f.get("max_batches", 0) > 0:
        fractions = [round(s / f["max_batches"], 4) for s in _floats(keys["steps"])]
        scales = _floats(keys["scales"])
        out.opts["schedule"] = "step"
        out.hyp.update(steps=fractions, scales=scales)
        out.mapped.append(f"policy=steps, steps={keys['steps']}, max_batches={keys['max_batches']} -> --schedule "
                          f"step at {fractions} of the run, scales {scales}")
    else:
        out.unmapped.append(f"policy={policy}: no equivalent here (needs steps, scales and max_batches for "
                            f"'steps'); the --schedule stays")


def describe_ignored(cfg) -> str | None:
    """The line a run without --hyp cfg logs when its cfg sets training keys, or None when it sets none."""
    source, keys = cfg_training_keys(cfg)
    if not keys:
        return None
    shown = ", ".join(f"{k}={v}" for k, v in list(keys.items())[:8]) + (", ..." if len(keys) > 8 else "")
    return (f"{source} sets training keys this run does not use ({shown}); the hyperparameters are the defaults "
            f"and --hyp's: --hyp cfg maps the cfg's onto this trainer's, key by key")
