"""PyTorch model -> ONNX file with torch.onnx's dynamo exporter (torch.export + onnxscript), metadata attached,
checked with onnx.checker, written atomically.

The graph's input is `images` float [N, 3, H, W] in [0, 1]; without NMS its output `output` is the eval
contract [N, P, 5+K] (docs/architecture.md), with NMS see detect.export.nms_graph. `dynamic=True` leaves the
batch, height and width free (height and width must stay multiples of max_stride); otherwise all three are
fixed at export and the runtime feeds that size.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from detect.darknet.packed import PackedConv
from detect.inference.class_conf import ClassConf
from detect.inference.onnx_metadata import OnnxMetadata
from detect.inference.optional import require
from detect.runtime.files import atomic_write_bytes

from .nms_graph import BOXES, SCORES, NmsCandidates, append_nms

log = logging.getLogger(__name__)

DEFAULT_OPSET = 18  # the dynamo exporter's own opset: no version conversion pass on the graph


@dataclass(frozen=True)
class OnnxExportOptions:
    img_size: tuple[int, int]  # (h, w) of the example input; the fixed input size unless dynamic
    batch: int = 1
    dynamic: bool = False
    half: bool = False
    device: str = "cpu"  # where the model is traced (the graph itself runs anywhere)
    nms: bool = False
    conf: float = 0.25  # --nms: the graph's default conf_threshold (0 with class_conf)
    class_conf: tuple[float, ...] | None = None  # --nms: per-class thresholds applied in the graph
    iou: float = 0.45
    max_det: int = 300
    multi_label: bool = False
    opset: int = DEFAULT_OPSET
    resize: str | None = None  # how the model sees images, for the metadata (None: the cfg's letter_box)
    net_shape: tuple[int, int] | None = None  # for the metadata: a Darknet-trained non-square network's (h, w)


def _dynamic_shapes(dynamic: bool, stride: int):
    """Free batch; height and width as multiples of the largest stride, which keeps every layer's size an exact
    division that torch.export's shape solver can follow (a plain free size fails on e.g. yolov7-tiny)."""
    if not dynamic:
        return None
    height = stride * torch.export.Dim("height_blocks", min=1, max=1024)
    width = stride * torch.export.Dim("width_blocks", min=1, max=1024)
    return {"x": {0: torch.export.Dim("batch", min=1, max=4096), 2: height, 3: width}}


def _run_exporter(module: torch.nn.Module, example: torch.Tensor, output_names: list[str], options, stride: int):
    """The ONNX ModelProto of `module` (its progress lines go to the debug log, not the console)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            program = torch.onnx.export(module, (example,), dynamo=True, opset_version=options.opset,
                                        input_names=["images"], output_names=output_names,
                                        dynamic_shapes=_dynamic_shapes(options.dynamic, stride), optimize=True)
    except Exception as e:  # torch.export / onnxscript failures: the summary in one line, the rest in the log
        log.debug("torch.onnx.export failed", exc_info=True)
        summary = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise ValueError(f"torch.onnx could not export this model ({type(e).__name__}: {summary}); run with "
                         f"debug logging for the whole trace") from None
    finally:
        log.debug("torch.onnx: %s", captured.getvalue())
    return program.model_proto


def _name_input_dims(proto) -> None:
    """Call the free input dimensions batch, height and width (the exporter numbers them), everywhere."""
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    renames = {d.dim_param: new for d, new in zip(dims, ("batch", None, "height", "width")) if d.dim_param and new}
    for info in (*proto.graph.input, *proto.graph.output, *proto.graph.value_info):
        for d in info.type.tensor_type.shape.dim:
            if d.dim_param in renames:
                d.dim_param = renames[d.dim_param]


def export_onnx(model, path, options: OnnxExportOptions, names: list[str] | None = None,
                class_conf: ClassConf | None = None) -> OnnxMetadata:
    """Export the Darknet `model` (unfused or fused; a fused copy in eval mode is exported) to `path`;
    `class_conf`, the per-class thresholds of the weights, goes into the metadata."""
    onnx = require("onnx")
    require("onnxscript")
    if names is not None and len(names) != model.num_classes:
        raise ValueError(f"{len(names)} class names for a model of {model.num_classes} classes")
    if any(isinstance(m, PackedConv) for m in model.modules()):
        raise ValueError("this model's convolutions are packed for CPU inference (for_inference); export the model "
                         "as loaded, or from for_inference(..., pack=False)")
    h, w = options.img_size
    if h % model.max_stride or w % model.max_stride:
        raise ValueError(f"--img {h}x{w} is not a multiple of the model's largest stride {model.max_stride}")
    dtype = torch.float16 if options.half else torch.float32
    model = copy.deepcopy(model).to(options.device).eval()  # the caller's model stays as it was
    if not model.fused:
        model.fuse()  # in float32, before any conversion to fp16
    model = model.to(dtype)
    module = NmsCandidates(model, options.multi_label, options.class_conf).eval() if options.nms else model
    # a dynamic export traces with 2 images: torch.export would fix a size of 1 as a constant
    example_batch = 2 if options.dynamic else options.batch
    example = torch.rand(example_batch, 3, h, w, generator=torch.Generator().manual_seed(0)).to(options.device, dtype)
    outputs = [BOXES, SCORES] if options.nms else ["output"]
    proto = _run_exporter(module, example, outputs, options, model.max_stride)
    batch = None if options.dynamic else options.batch
    _name_input_dims(proto)
    if options.nms:
        append_nms(proto, options.conf, options.iou, options.max_det, batch)
    metadata = OnnxMetadata(
        names=list(names) if names else None, num_classes=model.num_classes,
        strides=[int(max(head.stride)) for head in model.heads], max_stride=model.max_stride,
        input_size=None if options.dynamic else (h, w), batch=batch, precision="fp16" if options.half else "fp32",
        output="nms" if options.nms else "rows",
        nms={"conf": options.conf, "iou": options.iou, "max_det": options.max_det, "multi_label": options.multi_label,
             "class_conf": options.class_conf} if options.nms else None,
        resize=options.resize or ("letterbox" if model.net_options.get("letter_box") else "stretch"),
        class_conf=class_conf, net_shape=options.net_shape)
    del proto.metadata_props[:]
    for key, value in metadata.to_props().items():
        proto.metadata_props.add(key=key, value=value)
    proto.producer_name = "detect.export"
    onnx.checker.check_model(proto, full_check=True)
    atomic_write_bytes(Path(path), proto.SerializeToString())
    log.info("%s: ONNX opset %d, %s, input %s, %s", path, options.opset, metadata.precision,
             "dynamic" if options.dynamic else f"{options.batch}x3x{h}x{w}",
             f"NMS in the graph (max_det {options.max_det})" if options.nms else "rows [N, P, 5+K]")
    return metadata
