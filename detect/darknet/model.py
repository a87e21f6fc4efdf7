"""`Darknet`: an nn.Module built from a Darknet `.cfg`, computing what Darknet computes (contract in
docs/architecture.md, section detect.darknet)."""

from __future__ import annotations

import logging
import math

import torch
from torch import nn

from .builder import build_layers
from .cfg import parse_cfg, read_cfg_source, render_cfg
from .layers import ConvBlock
from .merge import Route
from .options import parse_net_options, rewrite_num_classes
from .weights import load_darknet_weights, save_darknet_weights
from .yolo import YoloHead

log = logging.getLogger(__name__)


def _size_pair(img_size) -> tuple[int, int]:
    if isinstance(img_size, int):
        return img_size, img_size
    h, w = img_size
    return int(h), int(w)


class Darknet(nn.Module):
    """A model from a cfg path or cfg text, built for `img_size` (int or (h, w); default the cfg's size).

    eval(): [N, P, 5+K] decoded rows (cx, cy, w, h in input pixels, objectness, class probabilities), head by head,
    row (a*H + y)*W + x inside a head; train(): list of raw maps [N, A, H, W, 5+K]; classifiers: softmax output.
    """

    def __init__(self, cfg, img_size=None, num_classes: int | None = None):
        super().__init__()
        text, source, path = read_cfg_source(cfg)
        sections = parse_cfg(text, source)
        self.cfg_path = path
        self.source_cfg_text = text  # the layout of .weights files written for this cfg as given
        if num_classes is not None:
            rewrite_num_classes(sections, num_classes)
            text = render_cfg(sections)
        self.cfg_text = text
        self.net_options = parse_net_options(sections[0])
        sections[0].warn_unused()
        cfg_size = (self.net_options["height"], self.net_options["width"])
        self.input_size = cfg_size if img_size is None else _size_pair(img_size)
        channels = self.net_options["channels"]
        built = build_layers(sections[1:], (channels, *self.input_size))
        self.layers = nn.ModuleList(b.module for b in built)
        self.layer_shapes = [b.shape for b in built]
        self.layer_common = [b.common for b in built]  # per layer: dontload, dontloadscales, learning_rate, ...
        self.heads = [m for m in self.layers if isinstance(m, YoloHead)]
        self.is_classifier = not self.heads
        self.max_stride = max(1, math.ceil(max(max(b.stride) for b in built)))
        self.num_classes = self._class_count(sections)
        self.seen = 0  # training images seen, as stored in the .weights header
        self.fused = False
        self._check_size(img_size is not None)
        self._keep = {j for m in self.layers for j in getattr(m, "sources", ())}
        self._yolo_output_used = [isinstance(m, YoloHead) and self._output_used(i) for i, m in enumerate(self.layers)]

    def _class_count(self, sections) -> int:
        if self.is_classifier:
            return self.layer_shapes[-1][0]
        counts = {h.num_classes for h in self.heads}
        if len(counts) > 1:
            raise sections[self.heads[1].layer_index + 1].error(
                f"all [yolo] heads must have the same classes; found {sorted(counts)}", "classes")
        return counts.pop()

    def _check_size(self, explicit: bool) -> None:
        h, w = self.input_size
        if self.is_classifier or (h % self.max_stride == 0 and w % self.max_stride == 0):
            return
        message = f"input size {h}x{w} is not a multiple of the model's largest stride {self.max_stride}"
        if explicit:
            raise ValueError(message + f"; use e.g. {math.ceil(h / self.max_stride) * self.max_stride}")
        log.warning("%s (cfg %s)", message, self.cfg_path or "<text>")

    def _output_used(self, index: int) -> bool:
        """Whether a later layer reads layer `index`'s output (a route ignores the previous output)."""
        if index in self._keep:
            return True
        following = self.layers[index + 1] if index + 1 < len(self.layers) else None
        return following is not None and not isinstance(following, Route)

    def _run(self, x: torch.Tensor, record: bool):
        outputs, raws, recorded = {}, [], []
        for i, layer in enumerate(self.layers):
            if isinstance(layer, YoloHead):
                raw = layer(x)
                raws.append(raw)
                if self._yolo_output_used[i] or record:
                    x = layer.activate(raw)
            elif hasattr(layer, "sources"):
                x = layer(x, [outputs[j] for j in layer.sources])
            else:
                x = layer(x)
            if i in self._keep:
                outputs[i] = x
            if record:
                recorded.append(x)
        return x, raws, recorded

    def forward(self, x: torch.Tensor):
        out, raws, _ = self._run(x, record=False)
        if self.is_classifier:
            return out.flatten(1)
        if self.training:
            return raws
        size = tuple(x.shape[2:])
        return torch.cat([head.decode(raw, size).reshape(raw.shape[0], -1, raw.shape[-1])
                          for head, raw in zip(self.heads, raws)], 1)

    def layer_outputs(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's output as Darknet stores it (a [yolo] layer's is its activated map); for checks."""
        return self._run(x, record=True)[2]

    @torch.no_grad()
    def fuse(self) -> Darknet:
        """Fold every BatchNorm into its convolution (inference only; the model can no longer be saved
        as .weights of its cfg)."""
        for module in self.layers:
            if isinstance(module, ConvBlock):
                module.fuse()
        self.fused = True
        return self

    def load_darknet_weights(self, path) -> dict:
        """Read a Darknet .weights file; returns the report of weights.load_darknet_weights."""
        return load_darknet_weights(self, path)

    def save_darknet_weights(self, path, cutoff: int | None = None) -> None:
        save_darknet_weights(self, path, cutoff)

    def weights_file_layout(self) -> Darknet:
        """The model whose layer list this model's .weights files follow: itself, or for a model built with
        `num_classes=`, the cfg as given, built on the meta device (shapes only)."""
        if self.source_cfg_text == self.cfg_text:
            return self
        with torch.device("meta"):
            return Darknet(self.source_cfg_text, img_size=self.input_size)

    def darknet_float_count(self) -> int:
        """Floats this model's layers occupy in a .weights file (parameters plus BN running statistics)."""
        return sum(t.numel() for m in self.layers for _, t in getattr(m, "darknet_tensors", list)())

    def extra_repr(self) -> str:
        source = self.cfg_path or "<text>"
        return f"cfg={source}, input_size={self.input_size}, classes={self.num_classes}, heads={len(self.heads)}"

