"""What an exported ONNX model says about itself (`metadata_props`, plain strings) and how it is read back.

Keys: `producer` ("detect"), `names` (json list or null), `num_classes`, `strides` (json, one per head),
`max_stride`, `input_size` (json [h, w], or null for --dynamic), `batch` (int, or null for a dynamic batch),
`precision` (fp32 | fp16 | int8: quantized convolutions, float input), `output` ("rows": the eval contract [N, P, 5+K]; "nms": detections), `nms` (json
conf, iou, max_det, multi_label; only for "nms"), `resize` ("letterbox" or "stretch": how the model was
trained to see images; an export without it was letterboxed), `preprocess` (json: how inputs must be prepared),
`class_conf` (json, only when the model has per-class confidence thresholds: detect.inference.class_conf),
`net_shape` (json [h, w], only for Darknet weights of a non-square cfg: the shape of the canvas, which a
stretched image fills and a letterboxed one is fitted into, detect.data.augmentation.resize_modes.network_canvas),
`int8_check` (json, int8 graphs only: the export's mAP check, `result` passed | failed | skipped, `detail`; a
loader warns about an int8 graph whose check failed, was skipped or is not recorded: `int8_warning`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .class_conf import KEY as CLASS_CONF_KEY
from .class_conf import ClassConf

PRODUCER = "detect"
INT8_CHECK_KEY = "int8_check"

# The input convention of detect.val / detect.predict per resize mode, stored so another runtime can reproduce it.
_COMMON = {"channels": "RGB", "layout": "NCHW", "scale": "1/255 (float in [0, 1])",
           "rows": "cx, cy, w, h (input pixels), objectness, class probabilities (not multiplied by objectness)"}
PREPROCESS = {
    "letterbox": {**_COMMON, "pad_value": 114, "resize": "keep aspect ratio, bilinear; image centred on the canvas",
                  "canvas": "fixed input_size: the image fitted into that h, w; dynamic: any h, w multiple of "
                            "max_stride (detect.val: long side at --img plus at least half a stride of border, "
                            "rounded up), or net_shape's when it is given (the image fitted into it)"},
    "stretch": {**_COMMON, "resize": "bilinear to the canvas' h and w (x and y scaled independently), no border",
                "canvas": "fixed input_size; dynamic: a square of any multiple of max_stride, or net_shape's "
                          "aspect when it is given (its long side scaled to the size asked, each side rounded to "
                          "a multiple of max_stride)"},
}


@dataclass(frozen=True)
class OnnxMetadata:
    names: list[str] | None
    num_classes: int
    strides: list[int]
    max_stride: int
    input_size: tuple[int, int] | None  # None: height and width are dynamic
    batch: int | None  # None: dynamic batch
    precision: str  # "fp32", "fp16" or "int8" (int8 convolutions; the input is float32 either way)
    output: str  # "rows" or "nms"
    nms: dict | None  # conf, iou, max_det, multi_label of an "nms" graph
    resize: str = "letterbox"  # how images become the input (detect.data.augmentation.resize_modes)
    class_conf: ClassConf | None = None  # per-class confidence thresholds (detect.inference.class_conf)
    net_shape: tuple[int, int] | None = None  # a Darknet-trained non-square network's (h, w): the canvas
    int8_check: dict | None = None  # int8: {"result": "passed" | "failed" | "skipped", "detail": str}

    def to_props(self) -> dict[str, str]:
        thresholds = {} if self.class_conf is None else {CLASS_CONF_KEY: json.dumps(self.class_conf.to_dict())}
        shape = {} if self.net_shape is None else {"net_shape": json.dumps(list(self.net_shape))}
        check = {} if self.int8_check is None else {INT8_CHECK_KEY: json.dumps(self.int8_check)}
        return {
            "producer": PRODUCER,
            "names": json.dumps(self.names),
            "num_classes": str(self.num_classes),
            "strides": json.dumps(self.strides),
            "max_stride": str(self.max_stride),
            "input_size": json.dumps(list(self.input_size) if self.input_size else None),
            "batch": json.dumps(self.batch),
            "precision": self.precision,
            "output": self.output,
            "nms": json.dumps(self.nms),
            "resize": self.resize,
            "preprocess": json.dumps(PREPROCESS[self.resize]),
            **thresholds,
            **shape,
            **check,
        }

    @classmethod
    def from_props(cls, props: dict[str, str], path) -> OnnxMetadata:
        """Read the metadata of `path`; a model not written by detect.export is refused in one line."""
        if props.get("producer") != PRODUCER:
            raise ValueError(f"{path}: not an ONNX model written by detect.export (its metadata lacks "
                             f"producer={PRODUCER}); export it with python -m detect.export")
        thresholds = props.get(CLASS_CONF_KEY)
        class_conf = None if thresholds is None else ClassConf.from_dict(_json(thresholds, path), path)
        try:
            size = json.loads(props["input_size"])
            net_shape = json.loads(props.get("net_shape", "null"))
            int8_check = json.loads(props.get(INT8_CHECK_KEY, "null"))
            return cls(names=json.loads(props["names"]), num_classes=int(props["num_classes"]),
                       strides=list(json.loads(props["strides"])), max_stride=int(props["max_stride"]),
                       input_size=tuple(size) if size else None, batch=json.loads(props["batch"]),
                       precision=props["precision"], output=props["output"], nms=json.loads(props["nms"]),
                       resize=_resize(props.get("resize", "letterbox")), class_conf=class_conf,
                       net_shape=tuple(int(v) for v in net_shape) if net_shape else None,
                       int8_check=int8_check if isinstance(int8_check, dict) else None)
        except (KeyError, ValueError, TypeError) as e:
            raise ValueError(f"{path}: damaged detect.export metadata ({type(e).__name__}: {e}); "
                             f"export the model again") from None


def int8_warning(metadata: OnnxMetadata, path) -> str | None:
    """The one line a loader warns with about an int8 graph whose mAP check failed, was skipped, or is not
    recorded (an export from before the record, or a file edited by hand); None for float graphs and passed ones."""
    if metadata.precision != "int8":
        return None
    check = metadata.int8_check or {}
    result, detail = check.get("result"), check.get("detail", "")
    compare = "compare it with the float export on your val split (detect.val) before relying on it"
    if result == "passed":
        return None
    if result == "failed":
        return (f"{path}: this int8 graph failed its mAP check at export ({detail}); it detects worse than the float "
                f"model by more than was allowed: use the float export, or export again with more "
                f"--calibration-images (or a larger --max-map-drop, if that loss is acceptable)")
    if result == "skipped":
        return (f"{path}: this int8 graph was exported with --no-int8-check, so what int8 cost its mAP was never "
                f"measured; {compare}, or export again without --no-int8-check")
    return (f"{path}: this int8 graph records no mAP check (an older export?), so what int8 cost its mAP is "
            f"unknown; {compare}, or export it again with detect.export --int8")


def _json(text: str, path):
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"{path}: damaged per-class thresholds in its metadata ({e}); export the model again") \
            from None


def _resize(mode: str) -> str:
    if mode not in PREPROCESS:
        raise ValueError(f"resize {mode!r} (one of {', '.join(PREPROCESS)})")
    return mode
