"""NMS inside the exported graph (`--nms`).

The PyTorch side (`NmsCandidates`) turns the model's rows into what ONNX's NonMaxSuppression takes: boxes
[N, P, 4] (x1, y1, x2, y2) and scores [N, K, P] = objectness x class probability, where single-label keeps only
each box's best class (detect.predict's choice; multi-label keeps every class, detect.val's). `append_nms`
then adds, with onnx.helper, NonMaxSuppression (class-aware by construction: it suppresses within a class)
and a per-image top-`max_det` by score, giving

    detections [N, max_det, 6]: x1, y1, x2, y2 (input pixels), score, class; best first, zero rows after
    num_detections [N] (int64): how many rows of each image are detections

`conf_threshold` and `iou_threshold` are graph inputs ([1] float) whose defaults are the export's values; a
runtime may feed others. With per-class thresholds (a model that carries them, exported without --conf) the
scores below their class's threshold are zeroed before NMS and `conf_threshold` defaults to 0: a runtime's value
can only raise them. `max_det` fixes the output shape, so it is set at export.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from detect.inference.optional import require
from detect.ops.boxes import xywh_to_xyxy

BOXES, SCORES = "nms_boxes", "nms_scores"
CONF_INPUT, IOU_INPUT = "conf_threshold", "iou_threshold"
DETECTIONS, COUNTS = "detections", "num_detections"


class NmsCandidates(nn.Module):
    """`model`'s rows as NonMaxSuppression inputs: (boxes [N, P, 4] xyxy, scores [N, K, P]); with `class_conf`
    (one threshold per class) a score below its class's threshold is 0."""

    def __init__(self, model: nn.Module, multi_label: bool, class_conf=None):
        super().__init__()
        self.model = model
        self.multi_label = multi_label
        self.register_buffer("class_conf", None if class_conf is None else torch.tensor(class_conf), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self.model(x)
        scores = rows[..., 5:] * rows[..., 4:5]
        if not self.multi_label:  # only the best class of a box can pass, as in non_max_suppression
            best, cls = scores.max(-1, keepdim=True)
            scores = torch.zeros_like(scores).scatter(-1, cls, best)
        if self.class_conf is not None:  # score >= its class's threshold, as non_max_suppression keeps it
            scores = scores * (scores >= self.class_conf.to(scores)).to(scores.dtype)
        return xywh_to_xyxy(rows[..., :4]), scores.transpose(1, 2)


class _GraphBuilder:
    """Nodes and constants appended to one graph, with generated unique names."""

    def __init__(self, helper, numpy_helper):
        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes, self.constants, self.count = [], [], 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"nms/{hint}_{self.count}"

    def const(self, value, dtype) -> str:
        name = self.name("const")
        self.constants.append(self.numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], outputs: int = 1, **attrs) -> str | list[str]:
        names = [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(self.helper.make_node(op_type, inputs, names, name=self.name(op_type), **attrs))
        return names[0] if outputs == 1 else names


def _per_image_top(g: _GraphBuilder, selected: str, boxes: str, scores: str, max_det: int) -> tuple[str, str]:
    """(detections [N, max_det, 6], num_detections [N]) from NonMaxSuppression's [M, 3] (image, class, box)."""
    image = g.op("Gather", [selected, g.const(0, np.int64)], axis=1)                     # [M]
    cls = g.op("Cast", [g.op("Gather", [selected, g.const(1, np.int64)], axis=1)], to=1)  # [M] float
    image_box = g.op("Gather", [selected, g.const([0, 2], np.int64)], axis=1)            # [M, 2]
    score = g.op("GatherND", [scores, selected])                                         # [M]
    box = g.op("GatherND", [boxes, image_box])                                           # [M, 4]
    columns = [box, g.op("Unsqueeze", [score, g.const([1], np.int64)]),
               g.op("Unsqueeze", [cls, g.const([1], np.int64)])]
    rows = g.op("Concat", columns, axis=1)                                               # [M, 6]
    rows = g.op("Concat", [rows, g.const(np.zeros((max_det, 6)), np.float32)], axis=0)   # + max_det blank rows
    # score of each row for each image ([N, M + max_det]; -1 elsewhere), then the max_det best per image
    batch = g.op("Gather", [g.op("Shape", [boxes]), g.const(0, np.int64)], axis=0)
    images = g.op("Unsqueeze", [g.op("Range", [g.const(0, np.int64), batch, g.const(1, np.int64)]),
                                g.const([1], np.int64)])                                 # [N, 1]
    member = g.op("Equal", [images, g.op("Unsqueeze", [image, g.const([0], np.int64)])])  # [N, M]
    per_image = g.op("Where", [member, g.op("Unsqueeze", [score, g.const([0], np.int64)]), g.const(-1, np.float32)])
    blank_shape = g.op("Concat", [g.op("Unsqueeze", [batch, g.const([0], np.int64)]),
                                  g.const([max_det], np.int64)], axis=0)
    blanks = g.op("Expand", [g.const(-1, np.float32), blank_shape])                       # [N, max_det]
    per_image = g.op("Concat", [per_image, blanks], axis=1)
    values, index = g.op("TopK", [per_image, g.const([max_det], np.int64)], outputs=2, axis=1, largest=1, sorted=1)
    valid = g.op("Greater", [values, g.const(-0.5, np.float32)])                          # scores are >= 0
    keep = g.op("Cast", [g.op("Unsqueeze", [valid, g.const([2], np.int64)])], to=1)
    g.nodes.append(g.helper.make_node("Mul", [g.op("Gather", [rows, index], axis=0), keep], [DETECTIONS]))
    g.nodes.append(g.helper.make_node("ReduceSum", [g.op("Cast", [valid], to=7), g.const([1], np.int64)],
                                      [COUNTS], keepdims=0))
    return DETECTIONS, COUNTS


def append_nms(model_proto, conf: float, iou: float, max_det: int, batch: int | None) -> None:
    """Replace the outputs (BOXES, SCORES) of `model_proto` (from NmsCandidates) by NMS detections, in place;
    `batch` is the fixed batch size (None: dynamic)."""
    onnx = require("onnx")
    helper = onnx.helper
    g = _GraphBuilder(helper, onnx.numpy_helper)
    graph = model_proto.graph
    boxes = g.op("Cast", [BOXES], to=1)  # NonMaxSuppression takes float32 (an fp16 export casts here)
    scores = g.op("Cast", [SCORES], to=1)
    selected = g.op("NonMaxSuppression", [boxes, scores, g.const([max_det], np.int64), IOU_INPUT, CONF_INPUT])
    _per_image_top(g, selected, boxes, scores, max_det)
    for name, value in ((CONF_INPUT, conf), (IOU_INPUT, iou)):  # inputs with defaults (initializers)
        graph.input.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [1]))
        graph.initializer.append(onnx.numpy_helper.from_array(np.array([value], np.float32), name))
    graph.initializer.extend(g.constants)
    graph.node.extend(g.nodes)
    del graph.output[:]
    batch_dim = batch or "batch"
    graph.output.extend([
        helper.make_tensor_value_info(DETECTIONS, onnx.TensorProto.FLOAT, [batch_dim, max_det, 6]),
        helper.make_tensor_value_info(COUNTS, onnx.TensorProto.INT64, [batch_dim]),
    ])
