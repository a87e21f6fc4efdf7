"""The flags detect.val and detect.predict share, each defined once with its range check (`check_inference_args`
after parsing: detect.inference.predictor.check_ranges, which the API and detect.export use too), the one
function that turns them into typed options (`inference_options`), and the default number of workers. Defaults
that differ by tool (a detection threshold for predict, an evaluation one for val) are the tool's ToolDefaults
(detect.inference.options), applied when the settings are built, not by argparse."""

from __future__ import annotations

import argparse
import os

from detect.data.augmentation.resize_modes import RESIZE_MODES
from detect.ops.slicing import DEFAULT_OVERLAP
from detect.runtime.precision import AMP_DTYPES

from .class_conf import DEFAULT_CONF
from .engines import BACKENDS
from .options import InferenceOptions, ToolDefaults
from .predictor import check_ranges


def default_workers() -> int:
    """Workers that fit the machine: its cores shared by the processes torchrun starts on this node, at most 4."""
    local_processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return min(4, max(1, (os.cpu_count() or 1) // local_processes))


def add_model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cfg", help="Darknet .cfg (optional for .pt checkpoints, which carry their cfg)")
    p.add_argument("--weights", required=True, help=".weights, .pt checkpoint or .onnx (detect.export)")


def add_inference_flags(p: argparse.ArgumentParser, defaults: ToolDefaults, *, batch_help: str,
                        slice_choice: bool = False) -> None:
    """--img-size, --batch-size, --conf, --iou, --max-det, --square, --resize, --augment, --slice, --overlap, --amp,
    --half, --device and --backend. --conf, --iou, --max-det and --batch-size default to None (not given: the
    tool's `defaults` apply in detect.inference.options.build_settings, so a value given equal to a default is
    still given); their help states `defaults`. `slice_choice`: --slice also takes `auto` (its default: the tool
    chooses) and `off` (detect.audit)."""
    p.add_argument("--img-size", "--img", dest="img", type=int, default=None,
                   help="input size (long side), a multiple of the model's largest stride (default: the size a .pt "
                        "was trained at, else the cfg's [net] size; an ONNX export's own size)")
    p.add_argument("--batch-size", "--batch", dest="batch", type=int, default=None,
                   help=f"{batch_help} (default {defaults.batch_size})")
    conf_default = (f"{defaults.conf:g}" if defaults.conf is not None else
                    f"the per-class thresholds the model file carries, chosen by training or detect.val "
                    f"--save-thresholds; else {DEFAULT_CONF:g}")
    p.add_argument("--conf", type=float, default=None,
                   help=f"confidence threshold (objectness * class) for every class (default: {conf_default})")
    p.add_argument("--iou", type=float, default=None, help=f"NMS IoU threshold (default {defaults.iou:g})")
    p.add_argument("--max-det", type=int, default=None,
                   help=f"detections per image at most (default {defaults.max_det})")
    p.add_argument("--square", action="store_true", help="square img x img letterbox instead of the image's own "
                   "rect canvas (long side at --img-size, at least half a stride of border)")
    p.add_argument("--resize", default=None, choices=RESIZE_MODES,
                   help="how images become the input (default: the model's own: what a .pt was trained with, "
                        "else the cfg's [net] letter_box, 0 = stretch as Darknet does; an ONNX export's metadata)")
    p.add_argument("--augment", action="store_true",
                   help="test-time augmentation: the images also at 0.83 (mirrored) and 0.67 of the size, every "
                        "pass's boxes merged by one NMS (about 2x the inference time)")
    add_slice_flags(p, slice_choice)
    p.add_argument("--amp", default="off", choices=tuple(AMP_DTYPES),
                   help="autocast precision of the model's forward pass on CUDA (ignored on the CPU)")
    p.add_argument("--half", dest="amp", action="store_const", const="fp16", help="same as --amp fp16")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--backend", default="auto", choices=BACKENDS,
                   help="CPU inference engine: auto = ncnn where the model's layers allow, else OpenVINO, else "
                        "PyTorch (docs/inference.md \"CPU engines\"); ncnn, openvino or torch to choose. CUDA and .onnx "
                        "files ignore auto")


def add_workers_flag(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--workers", type=int, default=default_workers(),
                   help=f"{what} (default: the CPU cores per local process, at most 4)")


def add_run_folder_flags(p: argparse.ArgumentParser, project: str) -> None:
    p.add_argument("--project", default=project, help="parent folder of the run folder")
    p.add_argument("--name", default="exp", help="run folder name (a number is appended when it exists)")


def _number(kind, name: str, low: float, high: float):
    """An argparse type: `kind(text)` in [low, high), else argparse's `invalid <name> value` message."""
    def parse(text: str):
        value = kind(text)
        if not low <= value < high:
            raise ValueError
        return value
    parse.__name__ = name
    return parse


def add_slice_flags(p: argparse.ArgumentParser, choice: bool = False) -> None:
    """--slice SIZE and --overlap F (sliced inference, detect.ops.slicing), checked as they parse. `choice`:
    --slice also takes `auto` (the default: the tool decides, detect.audit.detections) and `off`."""
    size = _number(int, "tile size (a positive number of pixels)", 1, float("inf"))
    what = ("sliced inference for small objects in large images: tiles of SIZE pixels, each run at --img-size, plus "
            "the whole image; boxes mapped back and merged by class-wise NMS")
    if choice:
        def size_or_choice(text: str):
            return text if text in ("auto", "off") else size(text)

        size_or_choice.__name__ = "tile size (a positive number of pixels, auto or off)"
        p.add_argument("--slice", type=size_or_choice, default="auto", metavar="SIZE|auto|off",
                       help=f"{what}. auto: the model runs over the split whole and in tiles of half the images' "
                            f"median longer side, and the pass with the higher mAP@0.5 on the split's labels is "
                            f"audited; off: whole images only")
    else:
        p.add_argument("--slice", type=size, default=None, metavar="SIZE", help=what)
    p.add_argument("--overlap", type=_number(float, "overlap (a fraction in [0, 1))", 0, 1),
                   default=DEFAULT_OVERLAP, metavar="F",
                   help=f"with --slice: neighbouring tiles overlap by at least this fraction of SIZE "
                        f"(default {DEFAULT_OVERLAP})")


def flag_name(setting: str) -> str:
    """The command-line spelling of an inference setting (max_det -> --max-det)."""
    return "--" + setting.replace("_", "-")


def check_inference_args(p: argparse.ArgumentParser, args) -> None:
    """The ranges of `add_inference_flags` (predictor.check_ranges) and --workers, as one argparse error (exit 2)
    naming the flag."""
    try:
        check_ranges(args.img, args.conf, args.iou, args.max_det, args.batch, flag_name)
    except ValueError as e:
        p.error(str(e))
    if args.workers < 0:
        p.error(f"--workers must be 0 or more, got {args.workers}")


def inference_options(args: argparse.Namespace) -> InferenceOptions:
    """The one place the flags of `add_inference_flags` (and detect.val's --single-label and --no-merge, where
    the parser has them) become the typed options every tool and library function takes."""
    return InferenceOptions(
        img_size=args.img, conf=args.conf, iou=args.iou, max_det=args.max_det, batch_size=args.batch,
        square=args.square, resize=args.resize, augment=args.augment,
        slice_size=args.slice if isinstance(args.slice, int) else None,
        slice_overlap=args.overlap, amp=args.amp, backend=args.backend,
        multi_label=False if getattr(args, "single_label", False) else None,
        merge=False if getattr(args, "no_merge", False) else None)
