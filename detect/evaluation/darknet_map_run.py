"""`darknet detector map`'s detections from a model of this project: each image read and resized as Darknet's own
loader does (detect.data.formats.darknet_image), the model run in float32, its rows turned into Darknet's
detections and NMS, ready for the figures of detect.evaluation.darknet_map (detect.evaluation.darknet_eval)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from detect.data.formats.darknet_image import darknet_letterbox, darknet_resize, read_rgb
from detect.evaluation.darknet_map import (
    MAP_NMS,
    MAP_THRESH,
    DarknetDetections,
    darknet_detections,
    darknet_nms,
)


def head_grids(model) -> list[tuple[int, int, int]]:
    """(anchors, H, W) of each [yolo] head of a detect.darknet model at its build size, in row order."""
    return [(head.num_anchors, *model.layer_shapes[head.layer_index][1:]) for head in model.heads]


def nms_kind(model) -> tuple[str, float]:
    """(nms_kind, beta_nms) of the model's last [yolo] layer, where Darknet's map reads them (a kind Darknet does
    not know is its default NMS)."""
    last = max(model.heads, key=lambda head: head.layer_index).options
    kind = str(last.get("nms_kind", "default"))
    return (kind if kind in ("greedynms", "diounms") else "default"), float(last.get("beta_nms", 0.6))


def darknet_input(image_rgb: np.ndarray, net_size: tuple[int, int], letter_box: bool) -> torch.Tensor:
    """[3, h, w] float32 in 0..1: Darknet's stretch (resize_image) or letterbox of the image."""
    w, h = net_size
    out = darknet_letterbox(image_rgb, w, h) if letter_box else darknet_resize(image_rgb, w, h)
    return torch.from_numpy(np.ascontiguousarray(out.transpose(2, 0, 1)))


@torch.no_grad()
def model_detections(model, image_paths: Sequence[str | Path], letter_box: bool | None = None,
                     thresh: float = MAP_THRESH, nms: float = MAP_NMS, batch: int = 8, decoder: str = "opencv",
                     images: Sequence[np.ndarray] | None = None, exif: str = "ignore") -> list[DarknetDetections]:
    """Per image, Darknet's detections after do_nms_sort, from an eval-mode detect.darknet model (float32 batches
    on the model's own device, its rows read back on the CPU). `letter_box` defaults to the cfg's [net] letter_box
    (Darknet's map reads it from there too); `decoder` and `exif` are darknet_image.read_rgb's ("ignore": Darknet's
    sideways pixels of an EXIF-rotated photo); `images` (uint8 RGB HWC, decoded elsewhere) replace reading
    `image_paths`."""
    if letter_box is None:
        letter_box = bool(model.net_options.get("letter_box", 0))
    net_h, net_w = model.input_size
    grids = head_grids(model)
    kind, beta = nms_kind(model)
    device = next(iter(model.state_dict().values()), torch.empty(0)).device  # a packed CPU model has no parameters
    found = []
    for start in range(0, len(image_paths), batch):
        chunk = range(start, min(start + batch, len(image_paths)))
        pictures = [images[i] if images is not None else read_rgb(image_paths[i], decoder, exif) for i in chunk]
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # float32 as Darknet's, not TF32 on GPUs
            rows = model(torch.stack([darknet_input(p, (net_w, net_h), letter_box) for p in pictures]).to(device))
        for picture, image_rows in zip(pictures, rows.float().cpu().numpy()):
            size = (picture.shape[1], picture.shape[0])
            dets = darknet_detections(image_rows, size, (net_w, net_h), thresh, letter_box, grids)
            found.append(darknet_nms(dets, nms, kind, beta))
    return found
