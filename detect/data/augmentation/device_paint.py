"""Paint a `DeviceBatch` (detect.data.augmentation.device_augment) on its device: the model's float input, augmented.

A fixed number of kernels per batch, whatever its size and its mosaics: the windows' parts scattered onto
canvases of PAD_VALUE, one bilinear `grid_sample` through every geometry's matrix (flips included), the mixup
blend, then OpenCV's 8-bit HSV conversion, lookup tables and conversion back, emulated in integer arithmetic.
Each step rounds to uint8 levels where OpenCV does, so the result is the host pipeline's within interpolation
rounding (OpenCV interpolates in fixed point with 1/32-pixel positions; this is float32). Works on CPU tensors too
(the tests compare it with the host pipeline there).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from detect.data.augmentation.device_augment import DeviceBatch
from detect.data.augmentation.mosaic import PAD_VALUE

_HSV_SHIFT = 12  # OpenCV's fixed-point division tables for 8-bit HSV (hsv_shift)


def _canvases(batch: DeviceBatch, geometries: int) -> torch.Tensor:
    """float32 [G, H, W, 3], levels minus PAD_VALUE: each geometry's window at the top left of a canvas of 0 (the
    shift lets grid_sample's zero padding stand for PAD_VALUE beyond the canvas, as warpAffine's border)."""
    height, width = batch.canvas_hw
    canvas = torch.zeros((geometries, height, width, 3), dtype=torch.float32, device=batch.pixels.device)
    total = batch.pixels.shape[0]
    if total == 0:
        return canvas
    parts = batch.parts
    counts = parts[:, 3] * parts[:, 4]
    part_of = torch.repeat_interleave(torch.arange(parts.shape[0], device=parts.device), counts, output_size=total)
    local = torch.arange(total, device=parts.device) - parts[part_of, 5]
    part_width = parts[part_of, 4]
    row = torch.div(local, part_width, rounding_mode="floor")
    column = local - row * part_width
    target = (parts[part_of, 0] * height + parts[part_of, 1] + row) * width + parts[part_of, 2] + column
    canvas.view(-1, 3)[target] = batch.pixels.to(torch.float32) - PAD_VALUE
    return canvas


def _sampling_grid(batch: DeviceBatch, height: int, width: int) -> torch.Tensor:
    """[G, S, S, 2] grid_sample coordinates of every output pixel centre in its window (align_corners=False)."""
    size, device = batch.size, batch.pixels.device
    # float32 places a sample within 1e-4 px on a 3S canvas; the matrices are exact float64 until here
    centres = torch.arange(size, device=device, dtype=torch.float32) + 0.5
    ys, xs = torch.meshgrid(centres, centres, indexing="ij")
    m = batch.to_window.to(torch.float32)[:, :, :, None, None]  # [G, 3, 3, 1, 1]
    # elementwise, not a matrix product: TF32 matmuls would round positions to ~0.5 px
    mapped = m[:, :, 0] * xs + m[:, :, 1] * ys + m[:, :, 2]  # [G, 3, S, S]
    xy = (mapped[:, :2] / mapped[:, 2:3]).permute(0, 2, 3, 1)
    scale = torch.tensor([2.0 / width, 2.0 / height], device=device, dtype=torch.float32)
    return xy * scale - 1


def _warped(batch: DeviceBatch) -> torch.Tensor:
    """float32 [G, 3, S, S] BGR levels 0-255, rounded as OpenCV's warps round."""
    geometries = batch.to_window.shape[0]
    source = _canvases(batch, geometries).permute(0, 3, 1, 2)  # channels-last strides, as grid_sample reads any
    height, width = batch.canvas_hw
    out = F.grid_sample(source, _sampling_grid(batch, height, width), mode="bilinear", padding_mode="zeros",
                        align_corners=False)
    return (out + PAD_VALUE).round_().clamp_(0, 255)


def _blend(batch: DeviceBatch, warped: torch.Tensor) -> torch.Tensor:
    """[B, 3, S, S]: each sample's own geometry, blended with its mixup partner where it has one."""
    n = len(batch)
    own = warped[:n]
    if not batch.any_partner:
        return own
    has_partner = batch.partner >= 0
    partner = warped[batch.partner.clamp(min=0)]
    ratio = batch.mix.view(n, 1, 1, 1)
    mixed = (own * ratio + partner * (1 - ratio)).round_().clamp_(0, 255)
    return torch.where(has_partner.view(n, 1, 1, 1), mixed, own)


def _bgr_to_hsv(image: torch.Tensor):
    """OpenCV's COLOR_BGR2HSV on 8-bit levels: (h 0-179, s, v) as int32 [B, S, S] each (products < 2^31)."""
    b, g, r = image.to(torch.int32).unbind(1)
    v = torch.maximum(torch.maximum(b, g), r)
    diff = v - torch.minimum(torch.minimum(b, g), r)
    one = 1 << (_HSV_SHIFT - 1)
    s_div = torch.where(v > 0, torch.round((255 << _HSV_SHIFT) / v.clamp(min=1).double()).int(), 0)
    s = (diff * s_div + one) >> _HSV_SHIFT
    h_div = torch.where(diff > 0, torch.round((180 << _HSV_SHIFT) / (6.0 * diff.clamp(min=1).double())).int(), 0)
    h = torch.where(v == r, g - b, torch.where(v == g, b - r + 2 * diff, r - g + 4 * diff))
    h = (h * h_div + one) >> _HSV_SHIFT
    return torch.where(h < 0, h + 180, h), s, v


def _hsv_to_bgr(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """OpenCV's COLOR_HSV2BGR on 8-bit levels: float32 [B, 3, S, S] BGR levels."""
    hf = h.to(torch.float32) * (6.0 / 180.0)
    hf = torch.where(hf >= 6, hf - 6, hf)
    sf, vf = s.to(torch.float32) / 255.0, v.to(torch.float32) / 255.0
    sector = hf.floor()
    frac = hf - sector
    p, q, t = vf * (1 - sf), vf * (1 - sf * frac), vf * (1 - sf * (1 - frac))
    # (b, g, r) per sector: OpenCV's sector table over (v, p, q, t)
    table = {0: (p, t, vf), 1: (p, vf, q), 2: (t, vf, p), 3: (vf, q, p), 4: (vf, p, t), 5: (q, p, vf)}
    channels = []
    for c in range(3):
        out = table[5][c]
        for k in range(4, -1, -1):
            out = torch.where(sector == k, table[k][c], out)
        channels.append(torch.where(sf == 0, vf, out))
    return (torch.stack(channels, 1) * 255.0).round_().clamp_(0, 255)


def _hsv(batch: DeviceBatch, image: torch.Tensor) -> torch.Tensor:
    """The samples' HSV lookup tables applied through OpenCV's 8-bit HSV (samples without HSV pass as they are)."""
    if not batch.any_hsv:
        return image
    n = len(batch)
    h, s, v = _bgr_to_hsv(image)
    tables = batch.hsv_tables.to(torch.int64)  # [B, 3, 256]
    looked_up = [tables[:, c].gather(1, x.reshape(n, -1).long()).view_as(x) for c, x in enumerate((h, s, v))]
    jittered = _hsv_to_bgr(*looked_up)
    return torch.where(batch.hsv_on.view(n, 1, 1, 1), jittered, image)


def paint_levels(batch: DeviceBatch) -> torch.Tensor:
    """float32 [B, 3, S, S] RGB levels 0-255 (whole numbers) on the batch's device."""
    image = _hsv(batch, _blend(batch, _warped(batch)))
    return image.flip(1)  # BGR -> RGB


def paint_batch(batch: DeviceBatch, device: torch.device) -> torch.Tensor:
    """The model's input: float32 [B, 3, S, S] RGB in [0, 1] on `device` (the copies are asynchronous)."""
    return paint_levels(batch.to(device)).div_(255)


def paint_uint8(batch: DeviceBatch) -> torch.Tensor:
    """uint8 [B, 3, S, S] RGB on the CPU (what a host batch holds: plots of the first batches)."""
    return paint_levels(batch.to(torch.device("cpu"))).to(torch.uint8)
