"""A model back to Darknet's own form: `<stem>.cfg`, `<stem>.weights` and `<stem>.names`.

The cfg is the model's `cfg_text`: for a training checkpoint that is the run's cfg (classes and the filters of
the convs feeding the heads rewritten by `num_classes`, anchors as refitted by `--anchors fit`), so Darknet and
OpenCV read the `.weights` with the layer list they were written with. The weights are those detect.val
evaluates: a checkpoint's EMA when it has one, else its model weights.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from detect.runtime.files import atomic_write_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DarknetFiles:
    cfg: Path
    weights: Path
    names: Path | None  # None when the model carries no class names


def darknet_paths(stem: Path, with_names: bool) -> DarknetFiles:
    return DarknetFiles(stem.with_suffix(".cfg"), stem.with_suffix(".weights"),
                        stem.with_suffix(".names") if with_names else None)


def export_darknet(model, stem, names: list[str] | None = None) -> DarknetFiles:
    """Write the unfused Darknet `model` as `stem`.cfg / .weights (/ .names when `names` are given)."""
    if model.fused:
        raise ValueError("cannot write Darknet files from a fused model (its BatchNorm arrays are folded)")
    if names is not None and len(names) != model.num_classes:
        raise ValueError(f"{len(names)} class names for a model of {model.num_classes} classes")
    files = darknet_paths(Path(stem), names is not None)
    text = model.cfg_text if model.cfg_text.endswith("\n") else model.cfg_text + "\n"
    atomic_write_text(files.cfg, text)
    model.save_darknet_weights(files.weights)
    if files.names is not None:
        atomic_write_text(files.names, "".join(f"{name}\n" for name in names))
    log.info("wrote %s, %s%s (%d classes, %d floats)", files.cfg, files.weights,
             f", {files.names}" if files.names else "", model.num_classes, model.darknet_float_count())
    return files
