"""Training checkpoints: plain data (loadable with `torch.load(weights_only=True)`), written atomically by rank 0,
verified before they replace the previous one. Reading any `.pt` (and the weights-only kind) is
`detect.darknet.pt_files`'.

Layout (docs/architecture.md): `model` and `ema` state dicts, `cfg_text`, `names`, `epoch` (epochs completed),
plus for resuming: `step` (optimiser steps), `batch_in_epoch` (micro-batches of the current epoch already done when
a run was interrupted mid-epoch), `optimizer`, `scaler`, `ema_updates`, `best_fitness`, `hyp`, `opts`, `rng`.
"""

from __future__ import annotations

import logging
import os
import random
import zlib
from pathlib import Path

import numpy as np
import torch

from detect.runtime import dist
from detect.runtime.files import atomic_write

log = logging.getLogger(__name__)

REQUIRED_RESUME_KEYS = ("model", "optimizer", "epoch", "step", "cfg_text", "opts")


def rng_state() -> dict:
    """Every random generator's state this process uses, as tensors / lists / ints."""
    np_state = np.random.get_state()
    py_version, py_internal, py_gauss = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "python": {"version": py_version, "internal": list(py_internal), "gauss": py_gauss},
        "cuda": [s for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    }
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["internal"]), p["gauss"]))
    if state.get("cuda") and torch.cuda.is_available():
        cuda_states = state["cuda"][: torch.cuda.device_count()]
        torch.cuda.set_rng_state_all(cuda_states)


class _Crc32Writer:
    """A binary file that keeps the CRC-32 of everything written through it, and the OSError a write raised:
    torch.save reports a failed write (a full disk) as a RuntimeError ("unexpected pos ..."), which hides it."""

    def __init__(self, f):
        self.f, self.crc, self.error = f, 0, None

    def write(self, data) -> int:
        self.crc = zlib.crc32(data, self.crc)
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


def file_crc32(path: str | Path, chunk: int = 1 << 22) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            crc = zlib.crc32(block, crc)
    return crc


def previous_path(path: str | Path) -> Path:
    """Where the checkpoint before `path` is kept: last.pt -> last.prev.pt."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def verify_written(tmp: Path, crc: int, state: dict) -> None:
    """Read a just-written checkpoint back: the bytes on disk are the bytes written (CRC-32; torch.load checks no
    checksum itself), and torch.load(weights_only=True) parses it to the same epoch and step. The parse maps the
    tensors (mmap) instead of copying them: the CRC has covered their bytes. OSError when it differs."""
    if file_crc32(tmp) != crc:
        raise OSError(f"{tmp}: the bytes read back differ from those written (a failing disk or file system)")
    try:
        back = torch.load(tmp, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:
        raise OSError(f"{tmp}: the checkpoint just written does not load back ({type(e).__name__}: {e})") from None
    if any(back.get(k) != state.get(k) for k in ("epoch", "step", "batch_in_epoch")):
        raise OSError(f"{tmp}: the checkpoint read back has another epoch/step than the one written")


def _keep_previous(path: Path) -> None:
    """Set the current `path` aside as `previous_path(path)`; a hard link keeps `path` itself in place until
    the new file replaces it (a rename where the file system has no hard links)."""
    if not path.exists():
        return
    prev = previous_path(path)
    link = prev.with_name(f".{prev.name}.link")
    try:
        link.unlink(missing_ok=True)
        os.link(path, link)
        os.replace(link, prev)
    except OSError:
        os.replace(path, prev)


def save_checkpoint(state: dict, path: str | Path, keep_previous: bool = True) -> bool:
    """Rank 0 writes `state` atomically and verifies it (`verify_written`) before it replaces `path`; with
    `keep_previous` the file it replaces becomes `previous_path(path)` (last.prev.pt), so a good checkpoint
    survives a new one that turns out bad later. Other ranks do nothing. Returns whether this rank wrote.
    A failed write or check (a full disk: OSError ENOSPC / EFBIG) raises and leaves `path` as it was."""
    if not dist.is_main_process():
        return False
    path = Path(path)
    writer: list[_Crc32Writer] = []

    def write(f):
        writer.append(_Crc32Writer(f))
        try:
            torch.save(state, writer[0])
        except RuntimeError:
            if writer[0].error is not None:
                raise writer[0].error from None
            raise

    def put_in_place(tmp: Path):
        verify_written(tmp, writer[0].crc, state)
        if keep_previous:
            _keep_previous(path)

    atomic_write(path, write, before_replace=put_in_place)
    log.debug("saved %s", path)
    return True


def lean_checkpoint(ckpt: dict, img_size: int | None = None) -> dict:
    """What inference and fine-tuning need from a full checkpoint (best.pt, and any file users share): the
    EMA weights (the model's when the run had no EMA) under the key they came from, the cfg, the class names
    and the run's metadata; no optimiser, scaler, RNG or second copy of the weights. `img_size`: the size the
    run trained at (also in `opts`), which the tools take as their default."""
    key = "ema" if ckpt.get("ema") is not None else "model"
    opts = dict(ckpt.get("opts") or {})
    if img_size is not None:
        opts["img_size"] = int(img_size)
    return {key: ckpt[key], "cfg_text": ckpt["cfg_text"], "names": list(ckpt["names"]), "epoch": ckpt["epoch"],
            "best_fitness": ckpt.get("best_fitness"), "hyp": ckpt.get("hyp"), "opts": opts, "lean": True}


def check_resumable(ckpt: dict, path: str | Path) -> None:
    missing = [k for k in REQUIRED_RESUME_KEYS if k not in ckpt]
    if missing:
        what = ("best.pt holds the best weights only" if ckpt.get("lean") else "a weights-only file?")
        raise ValueError(f"{path} cannot be resumed: it lacks {', '.join(missing)} ({what}: resume from "
                         f"last.pt, or fine-tune from it with --weights {path})")


def build_checkpoint(*, model, ema, optimizer, scaler, epoch: int, step: int, batch_in_epoch: int,
                     best_fitness: float, cfg_text: str, names: list, hyp: dict, opts: dict,
                     rank_rng: list | None = None) -> dict:
    """The dict `save_checkpoint` writes. `model` is the bare module; `rank_rng` every rank's `rng_state()`."""
    return {
        "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "ema": ema.module.state_dict() if ema is not None else None,
        "ema_updates": ema.updates if ema is not None else 0,
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
        "epoch": int(epoch),
        "step": int(step),
        "batch_in_epoch": int(batch_in_epoch),
        "best_fitness": float(best_fitness),
        "cfg_text": cfg_text,
        "names": list(names),
        "hyp": dict(hyp),
        "opts": dict(opts),
        "rng": rank_rng or [],
    }
