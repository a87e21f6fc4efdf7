"""Training batches augmented on the device: what the loader workers send (`DeviceSample`, collated into a
`DeviceBatch`) instead of finished images.

A worker plans each sample as the host pipeline does (detect.data.augmentation.sample_plan: the same draws, the same boxes),
but paints no pixel. It sends, per geometry, the part of the canvas the output can reach (the window: the
bounding box of the output square mapped back, plus the pixel bilinear sampling reads beyond it), as the parts
of the source images that fall in it, with the matrix from output pixels to window pixels (the flips folded in)
and the sample's mixup ratio and HSV tables. detect.data.augmentation.device_paint paints a whole batch from that with a few
kernels: the windows filled on PAD_VALUE, one `grid_sample`, the blend, the HSV tables.

A window is on average about 1.3 output images of pixels at the default scale range (a zoom of z reads 1/z^2 of
an output's area), so the bytes a worker copies and the host sends are about what a finished sample costs, while
the warp, the HSV conversion and the flips leave the workers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import torch

from detect.data.augmentation.sample_plan import GeometryPlan, SamplePlan


def _flip_matrix(size: int, flip_lr: bool, flip_ud: bool) -> np.ndarray:
    """Flipped output corner coordinates -> unflipped ones (x -> S - x, y -> S - y); its own inverse."""
    return np.array([[-1 if flip_lr else 1, 0, size if flip_lr else 0],
                     [0, -1 if flip_ud else 1, size if flip_ud else 0], [0, 0, 1]], dtype=np.float64)


def output_window(to_canvas: np.ndarray, size: int, canvas_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1): the canvas pixels bilinear sampling of the size x size output reads, within the canvas.

    The output's pixel centres lie in [0, S]^2, whose image under `to_canvas` is a convex quadrilateral (the
    perspective keeps its horizon outside the output); a sample at x reads pixels floor(x - 1/2) and one more.
    """
    corners = np.array([[0, 0, 1], [size, 0, 1], [size, size, 1], [0, size, 1]], dtype=np.float64)
    mapped = corners @ to_canvas.T
    xy = mapped[:, :2] / mapped[:, 2:3]
    h, w = canvas_hw
    x0, y0 = (max(math.floor(v) - 1, 0) for v in xy.min(0))
    x1, y1 = min(math.ceil(xy[:, 0].max()) + 1, w), min(math.ceil(xy[:, 1].max()) + 1, h)
    return x0, y0, max(x1, x0), max(y1, y0)


@dataclass
class DeviceGeometry:
    to_window: np.ndarray  # [3, 3] float64: output corner coordinates (flipped as the sample is) -> window ones
    window_hw: tuple[int, int]
    parts: list  # (BGR uint8 [h, w, 3] view of a source image, y, x in the window)

    @classmethod
    def of(cls, plan: GeometryPlan, size: int, flip: np.ndarray) -> DeviceGeometry:
        to_canvas = np.linalg.inv(plan.matrix) @ flip
        x0, y0, x1, y1 = output_window(to_canvas, size, plan.canvas_hw)
        parts = []
        for image, cy, cx, ty, tx in plan.tiles():
            px0, py0, px1, py1 = max(cx.start, x0), max(cy.start, y0), min(cx.stop, x1), min(cy.stop, y1)
            if px1 > px0 and py1 > py0:  # the tile's pixels inside the window
                iy, ix = ty.start + py0 - cy.start, tx.start + px0 - cx.start
                parts.append((image[iy:iy + py1 - py0, ix:ix + px1 - px0], py0 - y0, px0 - x0))
        shift = np.array([[1, 0, -x0], [0, 1, -y0], [0, 0, 1]], dtype=np.float64)
        return cls(shift @ to_canvas, (y1 - y0, x1 - x0), parts)


@dataclass
class DeviceSample:
    """One sample's sources and instructions (a loader worker's output in place of its pixels)."""

    geometries: list[DeviceGeometry]  # one, or two for mixup
    mix_ratio: float | None
    hsv_tables: np.ndarray | None  # uint8 [3, 256] (detect.data.augmentation.augment.hsv_tables) or None: no HSV
    size: int

    @classmethod
    def of(cls, plan: SamplePlan) -> DeviceSample:
        flip = _flip_matrix(plan.size, plan.flip_lr, plan.flip_ud)
        return cls([DeviceGeometry.of(g, plan.size, flip) for g in plan.geometries], plan.mix_ratio,
                   plan.hsv_tables(), plan.size)


@dataclass
class DeviceBatch:
    """A batch of `DeviceSample`s as a few tensors (pinned and copied like any batch; painted by
    detect.data.augmentation.device_paint.paint_batch). Geometry i < B is sample i's own; a mixup partner comes after them."""

    pixels: torch.Tensor  # uint8 [P, 3]: every part's pixels, row after row, part after part (BGR)
    parts: torch.Tensor  # int64 [T, 6]: geometry, y, x (in its window), height, width, first row in `pixels`
    to_window: torch.Tensor  # float64 [G, 3, 3]
    partner: torch.Tensor  # int64 [B]: the mixup partner's geometry, or -1
    mix: torch.Tensor  # float32 [B]: the weight of the sample's own geometry (1 without mixup)
    hsv_tables: torch.Tensor  # uint8 [B, 3, 256]
    hsv_on: torch.Tensor  # bool [B]
    canvas_hw: tuple[int, int]  # the largest window of the batch: every window is painted in one such canvas
    size: int
    # known on the host, so that painting never asks the device (a read-back would make the host wait for the GPU)
    any_partner: bool = False
    any_hsv: bool = False

    def __len__(self) -> int:
        return int(self.partner.shape[0])

    def _tensors(self):
        return {f.name: getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), torch.Tensor)}

    def pin_memory(self) -> DeviceBatch:
        """Called by the DataLoader's pin-memory thread, as for a plain tensor batch."""
        for name, tensor in self._tensors().items():
            setattr(self, name, tensor.pin_memory())
        return self

    def to(self, device: torch.device) -> DeviceBatch:
        moved = {name: t.to(device, non_blocking=True) for name, t in self._tensors().items()}
        return DeviceBatch(**moved, canvas_hw=self.canvas_hw, size=self.size, any_partner=self.any_partner,
                           any_hsv=self.any_hsv)


def _shared_uint8(count: int) -> torch.Tensor:
    """A uint8 buffer that crosses to the training process without a copy when made in a loader worker (as
    default_collate builds its batches straight in shared memory)."""
    if torch.utils.data.get_worker_info() is None:
        return torch.empty(count, dtype=torch.uint8)
    elem = torch.empty(0, dtype=torch.uint8)
    return elem.new(elem._typed_storage()._new_shared(count, device=elem.device)).resize_(count)


def collate_device(samples: list[DeviceSample]) -> DeviceBatch:
    """Pack the samples' parts into one pixel buffer and their instructions into small tensors."""
    size = samples[0].size
    geometries = [s.geometries[0] for s in samples]
    partner = []
    for s in samples:
        partner.append(len(geometries) if len(s.geometries) > 1 else -1)
        geometries.extend(s.geometries[1:])
    rows, total = [], 0
    for g_index, g in enumerate(geometries):
        for image, y, x in g.parts:
            h, w = image.shape[:2]
            rows.append((g_index, y, x, h, w, total))
            total += h * w
    pixels = _shared_uint8(3 * total)
    flat = pixels.numpy().reshape(total, 3)
    for (image, _, _), row in zip((p for g in geometries for p in g.parts), rows):
        start, count = row[5], row[3] * row[4]
        flat[start:start + count].reshape(row[3], row[4], 3)[...] = image
    hsv = np.stack([s.hsv_tables if s.hsv_tables is not None else np.zeros((3, 256), np.uint8) for s in samples])
    canvas_hw = (max(1, max(g.window_hw[0] for g in geometries)), max(1, max(g.window_hw[1] for g in geometries)))
    return DeviceBatch(pixels=pixels.view(total, 3),
                       parts=torch.tensor(rows, dtype=torch.int64).reshape(-1, 6),
                       to_window=torch.from_numpy(np.stack([g.to_window for g in geometries])),
                       partner=torch.tensor(partner, dtype=torch.int64),
                       mix=torch.tensor([1.0 if s.mix_ratio is None else s.mix_ratio for s in samples],
                                        dtype=torch.float32),
                       hsv_tables=torch.from_numpy(hsv),
                       hsv_on=torch.tensor([s.hsv_tables is not None for s in samples]),
                       canvas_hw=canvas_hw, size=size, any_partner=max(partner) >= 0,
                       any_hsv=any(s.hsv_tables is not None for s in samples))
