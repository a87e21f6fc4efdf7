"""Per-class confidence thresholds that travel with a model file, and which threshold inference uses.

One `--conf` for every class is wrong for most models: a frequent, well-learnt class peaks in F1 at a higher
score than a rare or hard one. The thresholds are chosen on a validation split (detect.evaluation.thresholds:
each class's best-F1 threshold, shrunk toward the global one for classes with few boxes) after training and by
`detect.val --save-thresholds`, and are stored with the weights:
- a `.pt`: its key `class_conf` (the dict `ClassConf.to_dict` makes: plain lists, numbers and a string, which
  `torch.load(weights_only=True)` reads);
- an `.onnx` export: its metadata (detect.inference.onnx_metadata, key `class_conf`; detect.export copies a
  `.pt`'s);
- Darknet `.weights`, which have no room for them: a json file beside them, `<name>.weights.class_conf.json`,
  with the SHA-1 of the weights they were chosen for: weights retrained or replaced in place leave a json that
  no longer belongs to them, which is then said in a warning and not used.

`conf_options` decides, once per load, what the Predictor filters by: a `conf` the user gave overrides them (every
class at that value), else the file's thresholds, else DEFAULT_CONF; each choice is one log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from detect.darknet.pt_files import atomic_save, is_torch_checkpoint, load_checkpoint
from detect.runtime.files import atomic_write_bytes, atomic_write_text

from .optional import require

log = logging.getLogger(__name__)

DEFAULT_CONF = 0.25  # predict's and the API's threshold when neither the user nor the model file gives one

KEY = "class_conf"  # in a .pt and in an ONNX export's metadata
SIDECAR_SUFFIX = ".class_conf.json"
SIDECAR_DIGEST_KEY = "weights_sha1"  # in the json beside a .weights file: the weights it belongs to


@dataclass(frozen=True)
class ClassConf:
    """Confidence thresholds, one per class of the model, and where they come from."""

    conf: tuple[float, ...]  # per class: a detection is kept when its score >= conf[class]
    global_conf: float  # the best-F1 threshold of all classes together, toward which rare classes are shrunk
    instances: tuple[int, ...]  # ground-truth boxes of each class in the split they were chosen on
    shrink: float  # k of the shrinkage (detect.evaluation.thresholds)
    chosen_on: str  # the split they were chosen on, in words

    def to_dict(self) -> dict:
        return {"conf": [float(c) for c in self.conf], "global_conf": float(self.global_conf),
                "instances": [int(n) for n in self.instances], "shrink": float(self.shrink),
                "chosen_on": self.chosen_on}

    @classmethod
    def from_dict(cls, data, where) -> ClassConf:
        """Read back `to_dict`'s dict, stored in `where` (named in the one-line error a damaged one raises)."""
        try:
            conf = tuple(float(c) for c in data["conf"])
            made = cls(conf, float(data["global_conf"]), tuple(int(n) for n in data["instances"]),
                       float(data["shrink"]), str(data["chosen_on"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: damaged per-class thresholds ({type(e).__name__}: {e}); choose them again "
                             f"with detect.val --save-thresholds") from None
        if not conf or len(made.instances) != len(conf) or not all(0 <= c <= 1 for c in conf):
            raise ValueError(f"{where}: per-class thresholds must be one number in [0, 1] per class, got {conf}; "
                             f"choose them again with detect.val --save-thresholds")
        return made

    def describe(self) -> str:
        """The thresholds in a few words, for one log line."""
        if len(self.conf) == 1:
            values = f"{self.conf[0]:.3f}"
        else:
            values = f"{min(self.conf):.3f} to {max(self.conf):.3f} over {len(self.conf)} classes"
        return f"{values} (global best-F1 {self.global_conf:.3f}), chosen on {self.chosen_on}"


def sidecar_path(weights) -> Path:
    """The json beside a Darknet `.weights` file that holds its thresholds."""
    weights = Path(weights)
    return weights.with_name(weights.name + SIDECAR_SUFFIX)


def stored_in(weights) -> Path:
    """Where the thresholds of the model file `weights` are kept: the file itself (.pt, .onnx), else the json
    beside it."""
    weights = Path(weights)
    return weights if weights.suffix.lower() == ".onnx" or is_torch_checkpoint(weights) else sidecar_path(weights)


def _file_sha1(path: Path) -> str:
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def read_class_conf(weights, record: dict | None = None) -> ClassConf | None:
    """The thresholds stored with a `.pt` (from its `record`, pt_files.checkpoint_record, when read already) or
    beside a `.weights` file (an `.onnx` carries its own in its metadata, read with it:
    detect.inference.onnx_runtime), or None."""
    weights = Path(weights)
    if record is not None:
        data = record.get(KEY)
        return None if data is None else ClassConf.from_dict(data, weights)
    if not weights.is_file():
        return None
    if is_torch_checkpoint(weights):
        data = load_checkpoint(weights).get(KEY)
        return None if data is None else ClassConf.from_dict(data, weights)
    sidecar = sidecar_path(weights)
    if not sidecar.is_file():
        return None
    try:
        data = json.loads(sidecar.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{sidecar}: not readable json ({type(e).__name__}: {e}); delete it or choose the "
                         f"thresholds again with detect.val --save-thresholds") from None
    class_conf = ClassConf.from_dict(data, sidecar)
    belongs_to = data.get(SIDECAR_DIGEST_KEY) if isinstance(data, dict) else None
    if belongs_to is not None and belongs_to != _file_sha1(weights):
        log.warning("%s: these per-class thresholds were chosen for other weights than %s (they changed since: "
                    "retrained or replaced); not used. Choose them again with detect.val --save-thresholds, or "
                    "delete the json", sidecar, weights.name)
        return None
    return class_conf


def save_class_conf(weights, class_conf: ClassConf) -> Path:
    """Store `class_conf` with the model file `weights` (module docstring: into a `.pt`, into an `.onnx`'s
    metadata, beside anything else) atomically; returns the file written."""
    weights = Path(weights)
    if weights.suffix.lower() == ".onnx":
        onnx = require("onnx")
        proto = onnx.load(str(weights))
        kept = [(p.key, p.value) for p in proto.metadata_props if p.key != KEY]
        del proto.metadata_props[:]
        for key, value in [*kept, (KEY, json.dumps(class_conf.to_dict()))]:
            proto.metadata_props.add(key=key, value=value)
        atomic_write_bytes(weights, proto.SerializeToString())
        return weights
    if is_torch_checkpoint(weights):
        ckpt = load_checkpoint(weights)
        ckpt[KEY] = class_conf.to_dict()
        atomic_save(ckpt, weights)
        return weights
    path = sidecar_path(weights)
    data = class_conf.to_dict() | {SIDECAR_DIGEST_KEY: _file_sha1(weights)}
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    return path


def check_class_count(class_conf: ClassConf | None, num_classes: int, weights, flag: str = "--conf") -> None:
    """ValueError when stored thresholds are not one per class of the model file `weights` they came with (checked
    where they would be used: detect.val, which chooses new ones, loads such a model all the same)."""
    if class_conf is not None and len(class_conf.conf) != num_classes:
        raise ValueError(f"{stored_in(weights)} carries {len(class_conf.conf)} per-class thresholds but the model "
                         f"predicts {num_classes} classes; choose them again with detect.val --save-thresholds, or "
                         f"give {flag}")


def conf_options(class_conf: ClassConf | None, conf: float | None, path, flag: str = "--conf") -> dict:
    """The InferenceSettings fields (`conf`, `class_conf`) for a model file whose stored thresholds are
    `class_conf`: the `conf` a user gave (by `flag`) for every class, else the stored thresholds, else
    DEFAULT_CONF. Using or overriding stored thresholds is said in one log line."""
    name = Path(path).name
    if class_conf is None:
        return {"conf": DEFAULT_CONF if conf is None else conf, "class_conf": None}
    given = flag if flag.endswith("=") else f"{flag} "  # --conf 0.3, conf=0.3
    if conf is not None:
        log.info("%s%g for every class (%s's per-class thresholds are not used)", given, conf, name)
        return {"conf": conf, "class_conf": None}
    log.info("confidence: %s's per-class thresholds, %s; %sX gives every class X instead", name,
             class_conf.describe(), given)
    return {"conf": min(class_conf.conf), "class_conf": tuple(class_conf.conf)}
