"""Darknet `.weights` read/write (reference §4) and fine-tuning transfer from `.weights` or `.pt` checkpoints.

A `.weights` file has no layout of its own: it is read with the layer list of the cfg it was written for. For a
model built with `num_classes=`, that is the cfg before the rewrite (`model.weights_file_layout()`); arrays
whose shapes then differ from the model's (the convs feeding the heads) are not copied whole but row by row
(detect.darknet.transfer), and reported.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from detect.darknet.pt_files import (
    checkpoint_state_dict,
    is_torch_checkpoint,
    load_checkpoint,
)
from detect.runtime.files import atomic_write

from .layers import ConvBlock
from .transfer import (
    assumed_coco_names,
    cfg_head_layouts,
    describe_head,
    model_head_layouts,
    transfer_state,
)

log = logging.getLogger(__name__)

SAVE_VERSION = (0, 2, 5)  # what AlexeyAB's Darknet writes
_BN_ARRAYS = {"scales", "rolling_mean", "rolling_variance"}
# Darknet marks transposed `connected` weights with a major or minor above 1000; larger or negative numbers
# (about every file of random or foreign bytes) are no Darknet header
MAX_HEADER_VERSION = 65535


def read_header(data: bytes, path) -> tuple[tuple[int, int, int], int, int]:
    """((major, minor, revision), seen, header bytes) from the first 20 (or more) bytes of a file:
    seen is uint64 from version 0.2 on, else uint32."""
    if len(data) < 16:
        raise ValueError(f"{path}: {len(data)} bytes is too short for a Darknet weights header; expected a "
                         f"Darknet .weights file (a 16- or 20-byte header, then float32 arrays)")
    major, minor, revision = (int(v) for v in np.frombuffer(data, "<i4", 3))
    if not all(0 <= v <= MAX_HEADER_VERSION for v in (major, minor, revision)):
        raise ValueError(f"{path} is not a Darknet weights file: its header version "
                         f"{major}.{minor}.{revision} is not one Darknet writes (e.g. 0.2.5); expected a Darknet "
                         f".weights file (a PyTorch checkpoint must be named *.pt)")
    if major * 10 + minor >= 2:
        if len(data) < 20:
            raise ValueError(f"{path}: {len(data)} bytes is too short for a version {major}.{minor} header")
        return (major, minor, revision), int(np.frombuffer(data, "<u8", 1, 12)[0]), 20
    return (major, minor, revision), int(np.frombuffer(data, "<u4", 1, 12)[0]), 16


def _layer_tensors(model):
    """(layer index, module, [(array name, tensor)]) for every layer that has arrays in a .weights file."""
    for i, module in enumerate(model.layers):
        tensors = module.darknet_tensors() if hasattr(module, "darknet_tensors") else []
        if tensors:
            yield i, module, tensors


def _flipped(module, name: str) -> bool:
    return name == "weights" and isinstance(module, ConvBlock) and module.flipped


def _file_array(body, pos, tensor, name, module, transposed_connected, path, index):
    count = tensor.numel()
    if pos + count > body.size:
        raise ValueError(f"{path}: the file ends inside layer {index} ({type(module).__name__}): array '{name}' "
                         f"needs {count} floats, {body.size - pos} are left; expected the .weights of this "
                         f"cfg (or a partial one ending at a layer boundary)")
    array = body[pos: pos + count]
    if _flipped(module, name):  # stored [(C/groups)·k·k][n]
        array = array.reshape(-1, tensor.shape[0]).T
    elif name == "weights" and transposed_connected and tensor.dim() == 2:  # stored [in][out]
        array = array.reshape(tensor.shape[1], tensor.shape[0]).T
    return array.reshape(tensor.shape)


def read_darknet_arrays(layout, path) -> tuple[dict, dict]:
    """Read `path` with `layout`'s layer list: ({state-dict name: array}, report). Stops cleanly at a layer
    boundary at the end of the file (partial files); errors on a mid-layer end or leftover floats."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        version, seen, header = read_header(f.read(20), path)
    if (size - header) % 4:
        raise ValueError(f"{path}: body of {size - header} bytes is not a whole number of float32 values; "
                         f"expected a Darknet .weights file (a header, then float32 arrays)")
    body = np.fromfile(path, "<f4", offset=header)  # writable, so tensors can share its memory
    transposed = version[0] > 1000 or version[1] > 1000
    names = {id(t): name for name, t in layout.state_dict(keep_vars=True).items()}
    arrays, pos, stop, last = {}, 0, len(layout.layers), -1
    for index, module, tensors in _layer_tensors(layout):
        common = layout.layer_common[index]
        if common["dontload"]:
            continue
        if pos == body.size:
            stop = index
            break
        for name, tensor in tensors:
            if common["dontloadscales"] and name in _BN_ARRAYS:
                continue
            arrays[names[id(tensor)]] = _file_array(body, pos, tensor, name, module, transposed, path, index)
            pos += tensor.numel()
        last = index
    if pos < body.size:
        raise ValueError(f"{path}: {body.size - pos} floats are left over after the last layer with weights "
                         f"(layer {last}); the cfg expects {pos} floats in all. Is this the right cfg?")
    report = {"path": str(path), "version": version, "seen": seen, "layers_loaded": stop,
              "total_layers": len(layout.layers), "floats": int(pos), "bytes": size,
              "bytes_consumed": header + 4 * int(pos)}
    return arrays, report


def load_darknet_weights(model, path, names: list[str] | None = None) -> dict:
    """Load a Darknet .weights file into `model`; returns a report (layers loaded, floats consumed, skipped,
    heads). `names` are the model's class names, matched against COCO's when the file's heads have 80 classes."""
    if model.fused:
        raise ValueError("load .weights before fuse(): a fused model has no BatchNorm to receive them")
    layout = model.weights_file_layout()
    arrays, report = read_darknet_arrays(layout, path)
    source_layouts = model_head_layouts(layout)
    source_names = assumed_coco_names(source_layouts, path) if names is not None else None
    state = {k: torch.from_numpy(v) for k, v in arrays.items()}
    report["skipped"], report["heads"], report["copied"] = transfer_state(model, state, source_layouts,
                                                                          source_names, names)
    report["tensors_loaded"] = len(arrays) - len(report["skipped"])
    model.seen = report["seen"]
    log.info("%s: loaded %d of %d layers (%d floats, %d of %d bytes), version %s, seen %d%s", path,
             report["layers_loaded"], report["total_layers"], report["floats"], report["bytes_consumed"],
             report["bytes"], ".".join(map(str, report["version"])), report["seen"],
             f"; {len(report['skipped'])} tensors not copied whole (shape differs)" if report["skipped"] else "")
    _log_heads(report["heads"])
    return report


def save_darknet_weights(model, path, cutoff: int | None = None) -> None:
    """Write header (0, 2, 5) + uint64 seen and the arrays of layers 0..cutoff-1 (all by default), atomically."""
    if model.fused:
        raise ValueError("cannot save .weights from a fused model: its BatchNorm arrays are gone")
    count = len(model.layers)
    cutoff = count if cutoff is None else cutoff
    if not 0 < cutoff <= count:
        raise ValueError(f"cutoff={cutoff} must be in 1..{count} (the number of layers)")

    def write(f):
        f.write(np.array(SAVE_VERSION, "<i4").tobytes() + np.array([model.seen], "<u8").tobytes())
        for index, module, tensors in _layer_tensors(model):
            if index >= cutoff:
                break
            for name, tensor in tensors:
                array = tensor.detach().float().cpu().numpy()
                if _flipped(module, name):
                    array = array.reshape(array.shape[0], -1).T
                f.write(np.ascontiguousarray(array, "<f4").data)

    atomic_write(path, write)
    log.info("%s: wrote layers 0..%d", path, cutoff - 1)


def _strip_prefixes(state: dict) -> dict:
    """Keys of a DDP- or torch.compile-wrapped model's state dict, without the wrapper prefixes."""
    out = {}
    for key, value in state.items():
        for prefix in ("module.", "_orig_mod."):
            while key.startswith(prefix):
                key = key[len(prefix):]
        out[key] = value
    return out


def _log_heads(heads: list[dict]) -> None:
    for head in heads:
        log.info("  %s", describe_head(head))


def load_weights(model, path, checkpoint: dict | None = None, names: list[str] | None = None) -> dict:
    """Fine-tuning transfer from a `.weights` file or a `.pt` checkpoint: every tensor whose name and shape match
    is copied, and the convs feeding the heads row by row (box and objectness rows, class rows whose names match
    `names`, the model's class names); the rest keep their initialisation. Returns a report with `skipped` and
    `heads` (one dict per head, see detect.darknet.transfer.head_report) and logs it. A `.pt` the caller has
    already read is passed as `checkpoint` (it is not read again)."""
    path = Path(path)
    if checkpoint is None and not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    if checkpoint is None and not is_torch_checkpoint(path):
        return load_darknet_weights(model, path, names)
    if checkpoint is None:
        checkpoint = load_checkpoint(path)
    state = _strip_prefixes(checkpoint_state_dict(checkpoint, path))
    cfg_text = checkpoint.get("cfg_text") if isinstance(checkpoint.get("cfg_text"), str) else None
    source_layouts = cfg_head_layouts(cfg_text, f"{path} (its cfg_text)") if cfg_text else None
    source_names = checkpoint.get("names")  # a bare state dict has none
    source_names = [str(n) for n in source_names] if isinstance(source_names, (list, tuple)) and source_names \
        else None
    skipped, heads, copied = transfer_state(model, state, source_layouts, source_names, names)
    missing = sorted(set(model.state_dict()) - set(state))
    report = {"path": str(path), "tensors_loaded": len(state) - len(skipped), "skipped": skipped,
              "missing": missing, "heads": heads, "copied": copied}
    log.info("%s: loaded %d tensors; %d skipped (shape or name differs), %d model tensors not in the file",
             path, report["tensors_loaded"], len(skipped), len(missing))
    for line in skipped:
        log.info("  skipped %s", line)
    _log_heads(heads)
    return report
