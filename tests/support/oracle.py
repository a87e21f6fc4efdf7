"""An independent NumPy (float64) forward pass of a Darknet cfg, written from the reference
(../shared/docs/darknet-format.md §1-4) without any of detect.darknet: its own cfg reader, its own .weights
reader and one plain function per layer type. Used to check the torch model layer by layer."""

from __future__ import annotations

import numpy as np


def read_sections(text: str) -> list[tuple[str, dict]]:
    sections = []
    for line in text.splitlines():
        line = "".join(line.split())
        if not line or line[0] in "#;":
            continue
        if line[0] == "[":
            sections.append((line[1:-1], {}))
        else:
            key, _, value = line.partition("=")
            sections[-1][1].setdefault(key, value)
    return sections


def ints(value: str) -> list[int]:
    return [int(v) for v in value.split(",")]


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def activate(x, name):
    """§2.2, formula by formula."""
    if name == "linear":
        return x
    if name == "logistic":
        return sigmoid(x)
    if name in ("leaky", "revleaky"):
        return np.where(x > 0, x, 0.1 * x)
    if name == "relu":
        return np.maximum(x, 0)
    if name == "relu6":
        return np.minimum(np.maximum(x, 0), 6)
    if name == "mish":
        softplus = np.where(x > 20, x, np.where(x < -20, np.exp(x), np.log1p(np.exp(np.minimum(x, 20)))))
        return x * np.tanh(softplus)
    if name == "swish":
        return x * sigmoid(x)
    if name == "hard_mish":
        return np.where(x > 0, x, np.where(x > -2, x * x / 2 + x, 0))
    if name == "elu":
        return np.where(x >= 0, x, np.exp(np.minimum(x, 0)) - 1)
    if name == "selu":
        return np.where(x >= 0, 1.0507 * x, 1.0507 * 1.6732 * (np.exp(np.minimum(x, 0)) - 1))
    if name == "gelu":
        return 0.5 * x * (1 + np.tanh(0.797885 * x + 0.035677 * x ** 3))
    if name == "relie":
        return np.where(x > 0, x, 0.01 * x)
    if name == "ramp":
        return x * (x > 0) + 0.1 * x
    if name == "tanh":
        return 2 / (1 + np.exp(-2 * x)) - 1
    if name == "loggy":
        return 2 / (1 + np.exp(-x)) - 1
    if name == "hardtan":
        return np.clip(x, -1, 1)
    if name == "lhtan":
        return np.where(x < 0, 0.001 * x, np.where(x > 1, 0.001 * (x - 1) + 1, x))
    if name == "plse":
        return np.where(x < -4, 0.01 * (x + 4), np.where(x > 4, 0.01 * (x - 4) + 1, 0.125 * x + 0.5))
    if name == "stair":
        n = np.floor(x)
        return np.where(n % 2 == 0, np.floor(x / 2), (x - n) + np.floor(x / 2))
    if name == "normalize_channels":
        p = np.maximum(x, 0)
        return p / (0.0001 + p.sum(1, keepdims=True))
    if name == "normalize_channels_softmax":
        return np.exp(x) / (0.0001 + np.exp(x).sum(1, keepdims=True))
    if name == "normalize_channels_softmax_maxval":
        e = np.exp(x - x.max(1, keepdims=True))
        return e / (0.0001 + e.sum(1, keepdims=True))
    raise ValueError(name)


class WeightReader:
    """§4: header (uint64 seen from version 0.2), then float32 arrays in layer order."""

    def __init__(self, path):
        data = open(path, "rb").read()
        major, minor, _ = np.frombuffer(data, "<i4", 3)
        header = 20 if major * 10 + minor >= 2 else 16
        self.body = np.frombuffer(data, "<f4", offset=header).astype(np.float64)
        self.pos = 0

    def take(self, count):
        out = self.body[self.pos: self.pos + count]
        assert out.size == count, "weights file too short"
        self.pos += count
        return out


def conv(x, weights, bias, stride_y, stride_x, padding, dilation, groups, k):
    """Darknet's im2col convolution: zero padding padding·dilation, Darknet's output-size rule."""
    n, c, h, w = x.shape
    filters = weights.shape[0]
    out_h = (h + 2 * padding - k) // stride_y + 1
    out_w = (w + 2 * padding - k) // stride_x + 1
    p = padding * dilation
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    out = np.zeros((n, filters, out_h, out_w))
    cg, fg = c // groups, filters // groups
    for g in range(groups):
        for ky in range(k):
            for kx in range(k):
                rows = ky * dilation + stride_y * np.arange(out_h)
                cols = kx * dilation + stride_x * np.arange(out_w)
                patch = xp[:, g * cg:(g + 1) * cg][:, :, rows][:, :, :, cols]
                wk = weights[g * fg:(g + 1) * fg, :, ky, kx]
                out[:, g * fg:(g + 1) * fg] += np.einsum("fc,nchw->nfhw", wk, patch)
    return out + bias.reshape(1, -1, 1, 1) if bias is not None else out


def batchnorm(x, scales, mean, var, biases):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (scales.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 0.00001)
            + biases.reshape(shape))


def pool_windows(x, size, sy, sx, padding, reduce):
    """Output (i, j) covers rows i·sy − padding//2 … + size−1 (same for columns); outside positions ignored."""
    n, c, h, w = x.shape
    out_h, out_w = (h + padding - size) // sy + 1, (w + padding - size) // sx + 1
    out = np.zeros((n, c, out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            y0, x0 = i * sy - padding // 2, j * sx - padding // 2
            window = x[:, :, max(y0, 0):min(y0 + size, h), max(x0, 0):min(x0 + size, w)]
            out[:, :, i, j] = reduce(window.reshape(n, c, -1), axis=2)
    return out


def depth_maxpool(x, out_channels):
    n, c, h, w = x.shape
    return np.stack([x[:, g::out_channels].max(1) for g in range(out_channels)], 1)


def upsample(x, stride, scale):
    if stride > 0:
        return scale * x.repeat(stride, 2).repeat(stride, 3)
    s = -stride
    n, c, h, w = x.shape
    out = np.zeros((n, c, h // s, w // s))
    for i in range(h // s):
        for j in range(w // s):
            out[:, :, i, j] = x[:, :, i * s:(i + 1) * s, j * s:(j + 1) * s].sum((2, 3))
    return scale * out


def reorg3d(x, s):
    n, c, h, w = x.shape
    out = np.zeros((n, c * s * s, h // s, w // s))
    for oy in range(s):
        for ox in range(s):
            out[:, (oy * s + ox) * c:(oy * s + ox + 1) * c] = x[:, :, oy::s, ox::s][:, :, : h // s, : w // s]
    return out


def reorg_old(x, s):
    """§2.9: the input buffer read as (C/s², H·s, W·s), reorganised as reorg3d, result read as (C·s², H/s, W/s)."""
    n, c, h, w = x.shape
    as_big = x.reshape(n, c // (s * s), h * s, w * s)
    return reorg3d(as_big, s).reshape(n, c * s * s, h // s, w // s)


def shortcut_weights(raw, n_inputs, channels, weights_type, normalization):
    w = raw.reshape(n_inputs, -1) if weights_type == "per_channel" else raw.reshape(n_inputs, 1)
    if normalization == "softmax":
        e = np.exp(w - w.max(0, keepdims=True))
        return e / (0.0001 + e.sum(0, keepdims=True))
    p = np.maximum(w, 0.001)  # GPU / fused form (the project's documented choice)
    return p / (0.0001 + p.sum(0, keepdims=True))


def yolo_activate(x, opts):
    """§2.7: logistic on x, y, obj and classes unless new_coords; then x, y ← x·s − (s−1)/2."""
    n, ch, h, w = x.shape
    classes = int(opts.get("classes", 20))
    a = ch // (classes + 5)
    y = x.reshape(n, a, classes + 5, h, w).copy()
    if not int(opts.get("new_coords", 0)):
        y[:, :, 0:2] = sigmoid(y[:, :, 0:2])
        y[:, :, 4:] = sigmoid(y[:, :, 4:])
    s = float(opts.get("scale_x_y", 1))
    y[:, :, 0:2] = y[:, :, 0:2] * s - 0.5 * (s - 1)
    return y.reshape(n, ch, h, w)


def yolo_decode(activated, opts, net_h, net_w):
    """§3.2 on the layer output: rows (a·H + y)·W + x with cx, cy, w, h in input pixels, obj, classes."""
    n, ch, h, w = activated.shape
    classes = int(opts.get("classes", 20))
    mask = ints(opts["mask"]) if "mask" in opts else list(range(int(opts.get("num", 1))))
    anchors = np.array([float(v) for v in opts["anchors"].split(",")]).reshape(-1, 2)
    t = activated.reshape(n, len(mask), classes + 5, h, w)
    rows = []
    for a, m in enumerate(mask):
        for r in range(h):
            for c in range(w):
                v = t[:, a, :, r, c]
                if int(opts.get("new_coords", 0)):
                    bw, bh = v[:, 2] ** 2 * 4 * anchors[m, 0] / net_w, v[:, 3] ** 2 * 4 * anchors[m, 1] / net_h
                else:
                    bw, bh = np.exp(v[:, 2]) * anchors[m, 0] / net_w, np.exp(v[:, 3]) * anchors[m, 1] / net_h
                bx, by = (c + v[:, 0]) / w, (r + v[:, 1]) / h
                box = np.stack([bx * net_w, by * net_h, bw * net_w, bh * net_h], 1)
                rows.append(np.concatenate([box, v[:, 4:]], 1))
    return np.stack(rows, 1)
