"""`python -m detect.export`: a trained model as ONNX (checked with onnxruntime) or as Darknet files.

    python -m detect.export --weights runs/train/exp/best.pt --img 416            # best.onnx, fixed 1x3x416x416
    python -m detect.export --weights best.pt --dynamic                             # any batch and h, w
    python -m detect.export --weights best.pt --nms --conf 0.25 --iou 0.45         # NMS in the graph
    python -m detect.export --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights --names cfg/coco.names
    python -m detect.export --weights best.pt --format darknet                      # best.cfg/.weights/.names

    python -m detect.export --weights best.pt --int8 --data data/my.yaml           # best-int8.onnx, for CPUs

Per-class confidence thresholds the weights carry (best.pt, detect.val --save-thresholds) go into the ONNX
metadata, beside the Darknet files as <stem>.weights.class_conf.json, and with --nms into the graph unless --conf
is given.
`--half` writes an fp16 graph, meant for GPU runtimes (CPU runtimes run fp16 convolutions slowly, if at all).
`--int8` quantizes the convolutions for CPU inference, calibrated on images of --data's training split
(detect.export.quantize), then evaluates the float and the int8 graph on --data's val split as detect.val does
(detect.export.int8_check, in this process): an int8 graph that loses more than --max-map-drop mAP is refused,
written as best-int8-failed-check.onnx instead of best-int8.onnx (detect.export.int8_export).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from detect.darknet.load import check_img_size, load_model
from detect.darknet.pt_files import trained_img_size
from detect.data.augmentation.resize_modes import network_canvas
from detect.data.formats.spec import read_class_names
from detect.inference.class_conf import (
    check_class_count,
    conf_options,
    read_class_conf,
    save_class_conf,
    sidecar_path,
)
from detect.inference.cli_flags import flag_name
from detect.inference.loading import chosen_resize, darknet_net_shape
from detect.inference.predictor import check_ranges
from detect.runtime.commands import DefaultsHelpFormatter, run_command
from detect.runtime.dist import resolve_device
from detect.runtime.log import setup_logging

from .int8_check import DEFAULT_MAX_DROP

log = logging.getLogger(__name__)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m detect.export", description=__doc__.split("\n")[0],
                                formatter_class=DefaultsHelpFormatter)
    p.add_argument("--weights", required=True, help=".pt checkpoint or Darknet .weights")
    p.add_argument("--cfg", help="Darknet .cfg (optional for .pt checkpoints, which carry their cfg)")
    p.add_argument("--format", default="onnx", choices=("onnx", "darknet"))
    p.add_argument("--output", help="output file (onnx) or path stem (darknet); default: beside --weights, named "
                                    "by the variant: best.onnx, best-dynamic.onnx, best-b8-fp16-nms.onnx, "
                                    "best-640.onnx (a size other than the default) ...")
    p.add_argument("--names", help="class names file (one per line) for a .weights file, which has none")
    p.add_argument("--img-size", "--img", dest="img", type=int, nargs="+", default=None,
                   help="input size: one value, or h w; multiples of the model's largest stride (default: the size a "
                        ".pt was trained at, else the cfg's [net] size)")
    p.add_argument("--device", default="cpu",
                   help="where the model is traced: cpu, cuda, cuda:N or auto (the graph runs anywhere either way)")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--batch-size", "--batch", dest="batch", type=int, default=1,
                       help="fixed batch size of the graph")
    shape.add_argument("--dynamic", action="store_true", help="batch, height and width free at run time")
    p.add_argument("--half", action="store_true", help="fp16 graph (for GPU runtimes)")
    p.add_argument("--int8", action="store_true",
                   help="int8 convolutions for CPU inference (OpenVINO or onnxruntime), calibrated on --data's "
                        "train images and checked on its val split")
    p.add_argument("--data", help="--int8: the dataset spec whose training images calibrate the scales")
    p.add_argument("--calibration-images", type=int, default=None, metavar="N",
                   help="--int8: how many training images calibrate (spread over the split; default 80)")
    p.add_argument("--max-map-drop", type=float, default=None, metavar="F",
                   help=f"--int8: the most mAP@0.5:0.95 the int8 graph may lose on --data's val split against the "
                        f"float one (default {DEFAULT_MAX_DROP:g})")
    p.add_argument("--no-int8-check", action="store_true",
                   help="--int8: skip that evaluation (the float and the int8 graph on the val split)")
    p.add_argument("--nms", action="store_true", help="NMS in the graph: outputs detections and their counts")
    p.add_argument("--resize", default=None, choices=("letterbox", "stretch"),
                   help="the resize mode written to the ONNX metadata (default: the model's own: what a .pt was "
                        "trained with, else the cfg's letter_box)")
    p.add_argument("--conf", type=float, default=None,
                   help="--nms: default confidence threshold (an input) for every class (default: the per-class "
                        "thresholds the weights carry, applied in the graph; else 0.25)")
    p.add_argument("--iou", type=float, default=0.45, help="--nms: default IoU threshold (an input)")
    p.add_argument("--max-det", type=int, default=300, help="--nms: detections per image at most")
    p.add_argument("--multi-label", action="store_true",
                   help="--nms: every class above --conf gives a row (detect.val's way), not only the best")
    p.add_argument("--opset", type=int, default=18, help="ONNX opset")
    args = p.parse_args(argv)
    if args.img is not None and (len(args.img) > 2 or min(args.img) < 1):
        p.error(f"--img takes 1 or 2 positive sizes, got {' '.join(map(str, args.img))}")
    try:
        check_ranges(None, args.conf, args.iou, args.max_det, args.batch, flag_name)
    except ValueError as e:
        p.error(str(e))
    if args.int8 and (args.format != "onnx" or args.half or args.nms or not args.data):
        p.error("--int8 writes an ONNX graph without --half or --nms and needs --data (its training images "
                "calibrate the int8 scales)")
    if not args.int8 and (args.data or args.calibration_images is not None or args.max_map_drop is not None
                          or args.no_int8_check):
        p.error("--data, --calibration-images, --max-map-drop and --no-int8-check go with --int8")
    if args.max_map_drop is not None and not 0 <= args.max_map_drop < 1:
        p.error(f"--max-map-drop must be in [0, 1), got {args.max_map_drop}")
    if args.calibration_images is not None and args.calibration_images < 1:
        p.error(f"--calibration-images must be a positive number, got {args.calibration_images}")
    return args


def _output_stem(args) -> Path:
    weights = Path(args.weights)
    stem = Path(args.output) if args.output else weights.with_suffix("")
    if args.format == "darknet" and stem.with_suffix(".weights").resolve() == weights.resolve():
        raise ValueError(f"--format darknet would overwrite --weights {weights}; give --output another stem")
    return stem


def onnx_name(stem: Path, args, img_size: tuple[int, int], default_shape: tuple[int, int]) -> Path:
    """<stem>.onnx for the plain export at the default size, else the variant in the name, so that exports of
    one model never overwrite each other: -640 or -480x640, -dynamic or -b<N>, -fp16, -nms."""
    parts = []
    if img_size != default_shape:
        parts.append(f"{img_size[0]}" if img_size[0] == img_size[1] else f"{img_size[0]}x{img_size[1]}")
    if args.dynamic:
        parts.append("dynamic")
    elif args.batch != 1:
        parts.append(f"b{args.batch}")
    parts += ["fp16"] * args.half + ["int8"] * args.int8 + ["nms"] * args.nms
    return stem.with_name(stem.name + "".join(f"-{p}" for p in parts) + ".onnx")


def run(args) -> Path:
    setup_logging(0, 1)
    device = resolve_device(args.device, 0)
    # built at the cfg's own size: the requested one is checked against the strides first (one message)
    loaded = load_model(args.cfg, args.weights, exact=True)
    model = loaded.model
    resize = chosen_resize(model, args.weights, loaded.record, args.resize)
    trained_size = trained_img_size(loaded.record)
    default_size = trained_size or max(model.input_size)
    net_shape = darknet_net_shape(loaded)  # Darknet weights of a non-square cfg: fed at that shape, either mode
    if args.img is None:
        log.info("--img-size %s: %s (give --img-size to export another)", default_size if net_shape is None else
                 "%d %d" % net_shape, "the size the .pt was trained at" if trained_size else "the cfg's [net] size")
    default_shape = net_shape or (default_size, default_size)
    img_size = (args.img[0], args.img[-1]) if args.img else default_shape
    if args.img and len(args.img) == 1 and net_shape is not None:  # as predict and val read it for these weights
        check_img_size(args.img[0], model.max_stride)
        img_size = network_canvas(args.img[0], model.max_stride, net_shape)
        log.info("--img-size %d: the %dx%d network's shape with its long side %d: %dx%d (give H W for another "
                 "shape)", args.img[0], net_shape[1], net_shape[0], args.img[0], img_size[1], img_size[0])
    for side in img_size:
        check_img_size(side, model.max_stride)
    names = read_class_names(args.names) if args.names else loaded.names
    if names is not None and len(names) != model.num_classes:
        raise ValueError(f"--names {args.names or args.weights} lists {len(names)} classes but the model predicts "
                         f"{model.num_classes}")
    stem = _output_stem(args)
    class_conf = read_class_conf(args.weights, loaded.record)
    check_class_count(class_conf, model.num_classes, args.weights)
    if args.format == "darknet":
        from .darknet_export import export_darknet

        files = export_darknet(model, stem, names, resize)
        extra = [files.names] if files.names else []
        if class_conf is not None:  # .weights have no room for them: the json the loader reads beside them
            extra.append(save_class_conf(files.weights, class_conf))
        elif sidecar_path(files.weights).is_file():  # an earlier export's, which would be read with these weights
            sidecar_path(files.weights).unlink()
            print(f"{sidecar_path(files.weights)}: removed (the thresholds of an earlier export to this name)")
        print(f"Darknet files written: {files.cfg}, {files.weights}" + "".join(f", {f}" for f in extra))
        return files.weights
    from .onnx_export import OnnxExportOptions, export_onnx

    path = stem if args.output else onnx_name(stem, args, img_size, default_shape)
    # with --nms, the graph's thresholds: --conf for every class, else the weights' own (see conf_options)
    conf = conf_options(class_conf, args.conf, args.weights) if args.nms else {"conf": 0.25, "class_conf": None}
    options = OnnxExportOptions(img_size=img_size, batch=args.batch, dynamic=args.dynamic, half=args.half,
                                nms=args.nms, conf=0.0 if conf["class_conf"] else conf["conf"], iou=args.iou,
                                max_det=args.max_det, class_conf=conf["class_conf"], multi_label=args.multi_label,
                                opset=args.opset, device=str(device), resize=resize, net_shape=net_shape)
    if not args.int8:
        export_onnx(model, path, options, names, class_conf)
        print(f"ONNX model written: {path}")
        return path
    from .int8_export import Int8Settings, export_int8
    from .quantize import DEFAULT_CALIBRATION_IMAGES

    max_drop = DEFAULT_MAX_DROP if args.max_map_drop is None else args.max_map_drop
    settings = Int8Settings(args.data, args.calibration_images or DEFAULT_CALIBRATION_IMAGES,
                            None if args.no_int8_check else max_drop)
    return export_int8(model, path, options, names, class_conf, settings)


def main(argv=None) -> int:
    return run_command(parse_args, run, argv)


if __name__ == "__main__":
    sys.exit(main())
