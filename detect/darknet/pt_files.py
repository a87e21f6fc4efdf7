"""PyTorch `.pt` files as the model side reads and writes them: a safe loader (`weights_only=True`, one-line
refusals that name the file), the weights to use from any checkpoint kind, and the weights-only `.pt` writer.
The training checkpoint (optimiser, RNG, verification on write) is `detect.engine.checkpoint`'s.
"""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path

import torch

from detect.runtime.files import atomic_write

CHECKPOINT_EXPECTED = ("a .pt written by torch.save: a dict with 'model' or 'ema' weights, or a state dict of "
                       "tensors")
ZIP_MAGIC = b"PK\x03\x04"  # torch.save's container since torch 1.6
PICKLE_PROTO = b"\x80"  # the first byte of a pickle of protocol 2 or newer (torch's legacy format)


def atomic_save(obj, path: str | Path) -> None:
    """torch.save `obj` to `path` atomically."""
    atomic_write(path, lambda f: torch.save(obj, f))


def load_checkpoint(path: str | Path, map_location="cpu") -> dict:
    """Load a checkpoint with `weights_only=True` (a file that needs Python code to unpickle is refused, its
    code never run), with one-line errors that name the file, what it is not and what was expected."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    _check_container(path)
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols before it refuses: noise
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise ValueError(f"{path} is not a safe PyTorch checkpoint: {_refusal_reason(str(e))}; expected "
                         f"{CHECKPOINT_EXPECTED}") from None
    except Exception as e:  # a damaged zip or pickle: torch raises many types
        raise ValueError(f"{path} is not a readable PyTorch checkpoint ({type(e).__name__}: "
                         f"{_first_line(e)}); expected {CHECKPOINT_EXPECTED}") from None
    if not isinstance(ckpt, dict):
        raise ValueError(f"{path} holds a {type(ckpt).__name__}, not a checkpoint; "
                         f"expected {CHECKPOINT_EXPECTED}")
    return ckpt


def _check_container(path: Path) -> None:
    """torch.save writes a zip (before torch 1.6, a pickle); anything else is refused before unpickling."""
    with open(path, "rb") as f:
        head = f.read(4)
    if not head:
        raise ValueError(f"{path} is empty (0 bytes), not a PyTorch checkpoint; "
                         f"expected {CHECKPOINT_EXPECTED}")
    if head != ZIP_MAGIC and head[:1] != PICKLE_PROTO:
        raise ValueError(f"{path} is not a PyTorch checkpoint (neither torch.save's zip nor a pickle); "
                         f"expected {CHECKPOINT_EXPECTED} (Darknet weights must be named *.weights)")


def _first_line(error: Exception) -> str:
    """The first sentence of an error: torch appends paragraphs of generic advice to its reader errors."""
    line = next((line.strip() for line in str(error).splitlines() if line.strip()), "no detail")
    return line.split(". ")[0].rstrip(".")


def _refusal_reason(message: str) -> str:
    """What torch's multi-paragraph weights_only refusal comes down to, in a few words."""
    code = re.search(r"GLOBAL ([\w.]+)", message)
    if code:
        return f"it needs Python code to unpickle ({code.group(1)}), which a safe load refuses (none was run)"
    detail = message.split("WeightsUnpickler error:")[-1] if "WeightsUnpickler error:" in message else ""
    detail = next((line.strip() for line in detail.splitlines() if line.strip()), "")
    return f"its pickled data is damaged or not torch.save's ({detail or 'unreadable'})"


def is_torch_checkpoint(path: str | Path) -> bool:
    """Whether `path` was written by torch.save (by its suffix, else torch's zip container), not Darknet."""
    path = Path(path)
    if path.suffix in (".pt", ".pth"):
        return True
    with open(path, "rb") as f:
        return f.read(4) == ZIP_MAGIC


def checkpoint_state_dict(checkpoint, source: str | Path = "checkpoint") -> dict:
    """The weights to use from a loaded checkpoint (read from `source`, named in errors): `ema` when present,
    else `model`, else a bare state dict. Refuses one that holds no tensors."""
    if isinstance(checkpoint, dict) and ("model" in checkpoint or "ema" in checkpoint):
        state = checkpoint.get("ema") or checkpoint.get("model")
        if state is None:
            raise ValueError(f"{source} has neither 'ema' nor 'model' weights")
        where = "its 'ema'" if checkpoint.get("ema") else "its 'model'"
    else:
        state, where = checkpoint, "it"
    if not isinstance(state, dict) or not any(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{source} holds no weights: {where} is {_describe(state)}, not a state dict of "
                         f"tensors; expected {CHECKPOINT_EXPECTED}")
    return state


def _describe(value) -> str:
    if not isinstance(value, dict):
        return f"a {type(value).__name__}"
    kinds = sorted({type(v).__name__ for v in value.values()})
    return f"a dict of {', '.join(kinds)}" if kinds else "an empty dict"


def save_pt(model, path: str | Path, names=None, ema_state: dict | None = None, resize: str | None = None) -> None:
    """A weights-only checkpoint of a Darknet model: {"model", "ema", "cfg_text", "names", "resize"}, atomically;
    `resize` (how the weights see images) defaults to the cfg's letter_box."""
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    mode = resize or ("letterbox" if model.net_options.get("letter_box") else "stretch")
    atomic_save({"model": state, "ema": ema_state, "cfg_text": model.cfg_text, "names": list(names or []),
                 "resize": mode}, path)


HEAVY_KEYS = ("model", "ema", "optimizer", "scaler", "rng", "epoch_partial")  # the tensors; the rest describes


def checkpoint_record(weights: str | Path | None, checkpoint: dict | None = None) -> dict | None:
    """What a `.pt` says about itself (opts, resize, names, class thresholds, ...: every entry but the tensors),
    from `checkpoint` when it was read already, else read from `weights`; None for Darknet weights or no file."""
    if checkpoint is None:
        if weights is None or not Path(weights).is_file() or not is_torch_checkpoint(weights):
            return None
        checkpoint = load_checkpoint(weights)
    return {k: v for k, v in checkpoint.items() if k not in HEAVY_KEYS}


def _record(source) -> dict | None:
    return source if isinstance(source, dict) else checkpoint_record(source)


def trained_resize(source: dict | str | Path | None) -> str | None:
    """How a `.pt` was trained to see images (detect.data.augmentation.resize_modes): the mode its run recorded (opts'
    `resize`, or the top-level `resize` of a weights-only file), `letterbox` for a `.pt` from before the record
    (this project trained that way only), None for Darknet weights or no file (the cfg's `letter_box` says).
    `source`: the file, or its `checkpoint_record`."""
    record = _record(source)
    if record is None:
        return None
    opts = record.get("opts")
    mode = (opts.get("resize") if isinstance(opts, dict) else None) or record.get("resize")
    return "stretch" if mode in ("stretch", "stretch-single") else "letterbox"


def trained_img_size(source: dict | str | Path | None) -> int | None:
    """The input size a `.pt` was trained at (its opts' img_size, which best.pt and last.pt record), or None for
    Darknet weights, a file without it, or no file: the tools default to it rather than a fixed 416. `source`:
    the file, or its `checkpoint_record`."""
    record = _record(source)
    opts = record.get("opts") if record is not None else None
    size = opts.get("img_size") if isinstance(opts, dict) else None
    return int(size) if isinstance(size, (int, float)) and size > 0 else None
