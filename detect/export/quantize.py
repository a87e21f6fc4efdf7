"""int8 ONNX models for CPU inference (`python -m detect.export --int8 --data SPEC`): onnxruntime's static
quantization of an exported float graph, calibrated on images of the user's own training split.

What is quantized, and why: the convolutions only (QDQ pairs, weights int8 per output channel, activations uint8),
with their scales from the 99.999th percentile of each activation over the calibration images. The first
convolution (raw pixels) and the convolutions that write the heads' raw outputs (box offsets and logits) stay
float: those are the places where a few int8 steps move boxes and scores most; percentile scales kept the mAP
where MinMax scales lost some (docs/benchmarks.md, "Export and int8", has the figures).

Images are prepared as every front end prepares them for a fixed-size graph (the Predictor's `model_input`:
fitted into its input, RGB, [0, 1]).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections import deque
from pathlib import Path

import numpy as np

from detect.inference.onnx_metadata import INT8_CHECK_KEY, OnnxMetadata
from detect.inference.optional import require
from detect.runtime.files import atomic_write_bytes

log = logging.getLogger(__name__)

DEFAULT_CALIBRATION_IMAGES = 80
CALIBRATION_PERCENTILE = 99.999


def float_convolutions(model_proto) -> list[str]:
    """Names of the Conv nodes kept float: the first one (fed by the graph input) and every one with no Conv
    after it (the heads' output convolutions)."""
    nodes = list(model_proto.graph.node)
    consumers: dict[str, list] = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    convs = [n for n in nodes if n.op_type == "Conv"]

    def reaches_conv(start) -> bool:
        queue, seen = deque(start.output), set()
        while queue:
            for node in consumers.get(queue.popleft(), []):
                if node.op_type == "Conv":
                    return True
                if id(node) not in seen:
                    seen.add(id(node))
                    queue.extend(node.output)
        return False

    kept = [convs[0].name] if convs else []
    return kept + [n.name for n in convs[1:] if not reaches_conv(n)]


class _Calibration:
    """onnxruntime's CalibrationDataReader protocol over images prepared as the model sees them (letterboxed or
    stretched: `resize`), read lazily, one at a time."""

    def __init__(self, paths: list[Path], shape: tuple[int, int], input_name: str, resize: str = "letterbox"):
        self.paths, self.shape, self.input_name, self.resize = iter(paths), shape, input_name, resize
        self.used = 0

    def get_next(self):
        from detect.data.records.images import BadImage, read_image
        from detect.inference.predictor import InferenceSettings, model_input

        settings = InferenceSettings(max(self.shape), fixed_shape=self.shape, resize=self.resize)
        for path in self.paths:
            try:
                image = read_image(path)
            except BadImage as e:
                log.warning("calibration: %s skipped (%s)", path, e.detail)
                continue
            canvas = model_input(image, settings, 1)[0]
            self.used += 1
            return {self.input_name: canvas[None].astype(np.float32) / 255}
        return None


class _DropAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def quantize_int8(float_path: Path, out_path: Path, images: list[Path], shape: tuple[int, int]) -> OnnxMetadata:
    """Write the int8 version of the float graph `float_path` to `out_path`, calibrated on `images` brought to
    `shape` (h, w) as the graph's metadata says (letterbox or stretch)."""
    onnx = require("onnx")
    quantization = require("onnxruntime.quantization")
    if not images:
        raise ValueError("--int8 needs calibration images: the --data spec's training split has none")
    model = onnx.load(str(float_path))
    metadata = OnnxMetadata.from_props({p.key: p.value for p in model.metadata_props}, float_path)
    keep = float_convolutions(model)
    reader = _Calibration(images, shape, model.graph.input[0].name, metadata.resize)
    tmp = out_path.with_name(out_path.name + ".quantizing")
    root = logging.getLogger()
    quiet = _DropAdvice()
    root.addFilter(quiet)  # onnxruntime advises pre-processing through the root logger; measured without it
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the calibrator prints its histogram settings
            quantization.quantize_static(
                str(float_path), str(tmp), reader, quant_format=quantization.QuantFormat.QDQ, per_channel=True,
                activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8,
                calibrate_method=quantization.CalibrationMethod.Percentile, op_types_to_quantize=["Conv"],
                nodes_to_exclude=keep, extra_options={"CalibPercentile": CALIBRATION_PERCENTILE})
        if reader.used == 0:
            raise ValueError(f"--int8: none of the {len(images)} calibration images could be read")
        quantized = onnx.load(str(tmp))
    finally:
        root.removeFilter(quiet)
        tmp.unlink(missing_ok=True)
    int8 = OnnxMetadata(**{**metadata.__dict__, "precision": "int8"})
    del quantized.metadata_props[:]
    for key, value in int8.to_props().items():
        quantized.metadata_props.add(key=key, value=value)
    atomic_write_bytes(out_path, quantized.SerializeToString())
    log.info("%s: int8 convolutions (%d kept float), calibrated on %d images at %dx%d", out_path, len(keep),
             reader.used, *shape)
    return int8


def record_int8_check(graph: Path, out_path: Path, verdict: dict) -> None:
    """Write the int8 `graph` to `out_path` with its mAP check's verdict in the metadata (`int8_check`: what
    detect.inference.onnx_metadata.int8_warning reads when the file is loaded)."""
    onnx = require("onnx")
    model = onnx.load(str(graph))
    props = {p.key: p.value for p in model.metadata_props}
    props[INT8_CHECK_KEY] = json.dumps(verdict)
    del model.metadata_props[:]
    for key, value in props.items():
        model.metadata_props.add(key=key, value=value)
    atomic_write_bytes(out_path, model.SerializeToString())


def calibration_images(data, count: int, cache_dir=None) -> list[Path]:
    """`count` images of the spec's training split, spread evenly over it (a sorted list's first images are
    often one scene)."""
    from detect.data.loader import open_split

    records = open_split(data, "train", cache_dir).records
    if count >= len(records):
        return [Path(r.path) for r in records]
    positions = np.linspace(0, len(records) - 1, count).round().astype(int)
    return [Path(records[int(i)].path) for i in positions]


__all__ = ["DEFAULT_CALIBRATION_IMAGES", "calibration_images", "float_convolutions", "quantize_int8",
           "record_int8_check"]
