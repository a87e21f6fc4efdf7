"""`python -m detect.export`: a trained model as ONNX (checked with onnxruntime) or as Darknet files.

    python -m detect.export --weights runs/train/exp/best.pt --img 416            # best.onnx, fixed 1x3x416x416
    python -m detect.export --weights best.pt --dynamic                             # any batch and h, w
    python -m detect.export --weights best.pt --nms --conf 0.25 --iou 0.45         # NMS in the graph
    python -m detect.export --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights --names cfg/coco.names
    python -m detect.export --weights best.pt --format darknet                      # best.cfg/.weights/.names

`--half` writes an fp16 graph, meant for GPU runtimes (CPU runtimes run fp16 convolutions slowly, if at all).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from detect.darknet.load import load_model
from detect.data.spec import read_class_names
from detect.runtime.commands import run_command
from detect.runtime.log import setup_logging

log = logging.getLogger(__name__)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m detect.export", description=__doc__.split("\n")[0])
    p.add_argument("--weights", required=True, help=".pt checkpoint or Darknet .weights")
    p.add_argument("--cfg", help="Darknet .cfg (optional for .pt checkpoints, which carry their cfg)")
    p.add_argument("--format", default="onnx", choices=("onnx", "darknet"))
    p.add_argument("--output", help="output file (onnx) or path stem (darknet); default: beside --weights")
    p.add_argument("--names", help="class names file (one per line) for a .weights file, which has none")
    p.add_argument("--img-size", "--img", dest="img", type=int, nargs="+", default=[416],
                   help="input size: one value, or h w")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--batch-size", "--batch", dest="batch", type=int, default=1,
                       help="fixed batch size of the graph")
    shape.add_argument("--dynamic", action="store_true", help="batch, height and width free at run time")
    p.add_argument("--half", action="store_true", help="fp16 graph (for GPU runtimes)")
    p.add_argument("--nms", action="store_true", help="NMS in the graph: outputs detections and their counts")
    p.add_argument("--conf", type=float, default=0.25, help="--nms: default confidence threshold (an input)")
    p.add_argument("--iou", type=float, default=0.45, help="--nms: default IoU threshold (an input)")
    p.add_argument("--max-det", type=int, default=300, help="--nms: detections per image at most")
    p.add_argument("--multi-label", action="store_true",
                   help="--nms: every class above --conf gives a row (detect.val's way), not only the best")
    p.add_argument("--opset", type=int, default=18, help="ONNX opset")
    args = p.parse_args(argv)
    if len(args.img) > 2 or min(args.img) < 1 or args.batch < 1 or args.max_det < 1:
        p.error(f"--img takes 1 or 2 positive sizes, --batch and --max-det positive integers; got --img "
                f"{args.img}, --batch {args.batch}, --max-det {args.max_det}")
    if not 0 <= args.conf < 1 or not 0 <= args.iou <= 1:
        p.error(f"--conf must be in [0, 1) and --iou in [0, 1], got {args.conf} and {args.iou}")
    return args


def _output_stem(args) -> Path:
    weights = Path(args.weights)
    stem = Path(args.output) if args.output else weights.with_suffix("")
    if args.format == "darknet" and stem.with_suffix(".weights").resolve() == weights.resolve():
        raise ValueError(f"--format darknet would overwrite --weights {weights}; give --output another stem")
    return stem


def run(args) -> Path:
    setup_logging(0, 1)
    img_size = (args.img[0], args.img[-1])
    loaded = load_model(args.cfg, args.weights, img_size=img_size, exact=True)
    names = read_class_names(args.names) if args.names else loaded.names
    if names is not None and len(names) != loaded.model.num_classes:
        raise ValueError(f"--names {args.names or args.weights} lists {len(names)} classes but the model predicts "
                         f"{loaded.model.num_classes}")
    stem = _output_stem(args)
    if args.format == "darknet":
        from .darknet_export import export_darknet

        files = export_darknet(loaded.model, stem, names)
        print(f"Darknet files written: {files.cfg}, {files.weights}" + (f", {files.names}" if files.names else ""))
        return files.weights
    from .onnx_export import OnnxExportOptions, export_onnx

    path = stem if args.output else stem.with_suffix(".onnx")
    options = OnnxExportOptions(img_size=img_size, batch=args.batch, dynamic=args.dynamic, half=args.half,
                                nms=args.nms, conf=args.conf, iou=args.iou, max_det=args.max_det,
                                multi_label=args.multi_label, opset=args.opset)
    export_onnx(loaded.model, path, options, names)
    print(f"ONNX model written: {path}")
    return path


def main(argv=None) -> int:
    return run_command(parse_args, run, argv)


if __name__ == "__main__":
    sys.exit(main())
