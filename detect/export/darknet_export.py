"""A model back to Darknet's own form: `<stem>.cfg`, `<stem>.weights` and `<stem>.names`.

The cfg is the model's `cfg_text`: for a training checkpoint that is the run's cfg (classes and the filters of
the convs feeding the heads rewritten by `num_classes`, anchors as refitted by `--anchors fit`), so Darknet and
OpenCV read the `.weights` with the layer list they were written with, and its `[net] letter_box` set to how the
model was trained to see images (1: letterbox, 0: stretch), since Darknet feeds images by that key. The weights
are those detect.val evaluates: a checkpoint's EMA when it has one, else its model weights.
"""

from __future__ import annotations

import logging
import re
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


def with_letter_box(cfg_text: str, resize: str) -> str:
    """`cfg_text` whose first section ([net] / [network]) says `letter_box` for `resize`; other lines kept."""
    lines = cfg_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("[")), None)
    if start is None:
        raise ValueError("the model's cfg has no [net] section")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("[")), len(lines))
    section = [line for line in lines[start + 1:end] if not re.match(r"\s*letter_box\s*=", line)]
    setting = f"letter_box={1 if resize == 'letterbox' else 0}"
    return "\n".join([*lines[:start + 1], setting, *section, *lines[end:]]) + "\n"


def export_darknet(model, stem, names: list[str] | None = None, resize: str | None = None) -> DarknetFiles:
    """Write the unfused Darknet `model` as `stem`.cfg / .weights (/ .names when `names` are given); `resize`,
    how it sees images, goes to the cfg's letter_box (None: the cfg as it is)."""
    if model.fused:
        raise ValueError("cannot write Darknet files from a fused model (its BatchNorm arrays are folded)")
    if names is not None and len(names) != model.num_classes:
        raise ValueError(f"{len(names)} class names for a model of {model.num_classes} classes")
    files = darknet_paths(Path(stem), names is not None)
    text = model.cfg_text if model.cfg_text.endswith("\n") else model.cfg_text + "\n"
    if resize is not None:
        text = with_letter_box(text, resize)
    atomic_write_text(files.cfg, text)
    model.save_darknet_weights(files.weights)
    if files.names is not None:
        atomic_write_text(files.names, "".join(f"{name}\n" for name in names))
    log.info("wrote %s, %s%s (%d classes, %d floats)", files.cfg, files.weights,
             f", {files.names}" if files.names else "", model.num_classes, model.darknet_float_count())
    return files
