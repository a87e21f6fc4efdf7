"""The oracle's network walk: §1.3 references, §2 layer semantics, §4.2 weight order (NumPy, float64)."""

from __future__ import annotations

import numpy as np

from tests.support.oracle import (
    WeightReader,
    activate,
    batchnorm,
    conv,
    depth_maxpool,
    ints,
    pool_windows,
    read_sections,
    reorg3d,
    reorg_old,
    shortcut_weights,
    upsample,
    yolo_activate,
    yolo_decode,
)


def _refs(value: str, index: int) -> list[int]:
    return [index + r if r < 0 else r for r in ints(value)]


def _conv_layer(x, o, wr):
    c = x.shape[1]
    filters, k = int(o.get("filters", 1)), int(o.get("size", 1))
    stride = int(o.get("stride", 1))
    sx, sy = int(o.get("stride_x", -1)), int(o.get("stride_y", -1))
    sx, sy = (sx if sx >= 1 else stride), (sy if sy >= 1 else stride)
    padding = k // 2 if int(o.get("pad", 0)) else int(o.get("padding", 0))
    dilation = 1 if k == 1 else int(o.get("dilation", 1))
    groups = max(1, int(o.get("groups", 1)))
    bn = int(o.get("batch_normalize", 0))
    biases = wr.take(filters)
    if bn:
        scales, mean, var = wr.take(filters), wr.take(filters), wr.take(filters)
    weights = wr.take(filters * (c // groups) * k * k).reshape(filters, c // groups, k, k)
    y = conv(x, weights, None if bn else biases, sy, sx, padding, dilation, groups, k)
    if bn:
        y = batchnorm(y, scales, mean, var, biases)
    return activate(y, o.get("activation", "logistic"))


def _shortcut_layer(x, o, inputs, wr):
    channels = x.shape[1]
    weights_type = {"per_layer": "per_feature"}.get(o.get("weights_type", "none"), o.get("weights_type", "none"))
    norm = {"avg_relu": "relu"}.get(o.get("weights_normalization", "none"), o.get("weights_normalization"))
    n = len(inputs) + 1
    if weights_type == "none":
        w = np.ones((n, 1))
    else:
        raw = wr.take(n if weights_type == "per_feature" else n * channels)
        w = shortcut_weights(raw, n, channels, weights_type, norm)
    out = x * w[0].reshape(1, -1, 1, 1)
    for k, a in enumerate(inputs, start=1):
        m = min(channels, a.shape[1])
        wk = w[k] if w.shape[1] == 1 else w[k][:m]
        out[:, :m] = out[:, :m] + a[:, :m] * wk.reshape(1, -1, 1, 1)
    return activate(out, o.get("activation", "linear"))


def _pool_keys(o):
    stride = int(o.get("stride", 1))
    sx, sy = int(o.get("stride_x", stride)), int(o.get("stride_y", stride))
    size = int(o.get("size", stride))
    return size, sy, sx, int(o.get("padding", size - 1))


def _connected_layer(x, o, wr):
    flat = x.reshape(x.shape[0], -1)
    outputs = int(o.get("output", 1))
    biases = wr.take(outputs)
    weights = wr.take(outputs * flat.shape[1]).reshape(outputs, flat.shape[1])
    y = flat @ weights.T
    if int(o.get("batch_normalize", 0)):
        scales, mean, var = wr.take(outputs), wr.take(outputs), wr.take(outputs)
        y = scales * (y - mean) / np.sqrt(var + 0.00001)
    y = activate(y + biases, o.get("activation", "logistic"))
    return y.reshape(y.shape[0], -1, 1, 1)


def _softmax_layer(x, o):
    flat = x.reshape(x.shape[0], -1)
    groups, temperature = int(o.get("groups", 1)), float(o.get("temperature", 1))
    chunks = flat.reshape(flat.shape[0], groups, -1) / temperature
    e = np.exp(chunks - chunks.max(2, keepdims=True))
    return (e / e.sum(2, keepdims=True)).reshape(flat.shape)


def _layer(kind, o, x, outputs, index, wr):
    if kind in ("convolutional", "conv"):
        return _conv_layer(x, o, wr)
    if kind == "route":
        groups, gid = int(o.get("groups", 1)), int(o.get("group_id", 0))
        parts = []
        for t in (outputs[i] for i in _refs(o["layers"], index)):
            chunk = t.shape[1] // groups
            parts.append(t[:, gid * chunk:(gid + 1) * chunk])
        return np.concatenate(parts, 1)
    if kind == "shortcut":
        return _shortcut_layer(x, o, [outputs[i] for i in _refs(o["from"], index)], wr)
    if kind in ("maxpool", "max"):
        if int(o.get("maxpool_depth", 0)):
            return depth_maxpool(x, int(o.get("out_channels", 1)))
        return pool_windows(x, *_pool_keys(o), np.max)
    if kind in ("local_avgpool", "local_avg"):
        return pool_windows(x, *_pool_keys(o), np.mean)
    if kind == "upsample":
        return upsample(x, int(o.get("stride", 2)), float(o.get("scale", 1)))
    if kind == "reorg3d":
        return reorg3d(x, int(o.get("stride", 1)))
    if kind == "reorg":
        return reorg_old(x, int(o.get("stride", 1)))
    if kind in ("sam", "scale_channels"):
        return activate(x * outputs[_refs(o["from"], index)[0]], o.get("activation", "linear"))
    if kind in ("avgpool", "avg"):
        return x.mean((2, 3), keepdims=True)
    if kind in ("dropout", "empty", "silence"):
        return x
    if kind in ("connected", "conn"):
        return _connected_layer(x, o, wr)
    if kind in ("softmax", "soft"):
        return _softmax_layer(x, o)
    if kind == "batchnorm":
        c = x.shape[1]
        biases, scales, mean, var = wr.take(c), wr.take(c), wr.take(c), wr.take(c)
        return batchnorm(x, scales, mean, var, biases)
    if kind == "activation":
        return activate(x, o.get("activation", "linear"))
    if kind == "yolo":
        return yolo_activate(x, o)
    raise ValueError(kind)


def oracle_forward(cfg_text: str, weights_path, x: np.ndarray):
    """(every layer's output, decoded [N, P, 5+K] rows of all [yolo] layers or None)."""
    sections = read_sections(cfg_text)
    wr = WeightReader(weights_path)
    outputs, detections = [], []
    net_h, net_w = x.shape[2], x.shape[3]
    for index, (kind, o) in enumerate(sections[1:]):
        prev = x if index == 0 else outputs[-1]
        y = _layer(kind, o, prev, outputs, index, wr)
        outputs.append(y)
        if kind == "yolo":
            detections.append(yolo_decode(y, o, net_h, net_w))
    assert wr.pos == wr.body.size, f"oracle consumed {wr.pos} of {wr.body.size} floats"
    return outputs, (np.concatenate(detections, 1) if detections else None)
