"""Command-line options of `train.py`, their validation and the hyperparameter file.

Everything a user can get wrong is checked here, before any process group, model or loader is built.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from detect.darknet.load import check_img_size
from detect.data.records.image_cache import CHOICES as IMAGE_CACHE_CHOICES
from detect.engine.config import load_hyp
from detect.engine.mlflow_logger import mlflow_available
from detect.engine.optim import OPTIMIZERS, SCHEDULES
from detect.evaluation.cocoeval_engines import BACKENDS, DEFAULT_BACKEND
from detect.runtime.assets import asset, find_user_file, missing_file_hint
from detect.runtime.commands import DefaultsHelpFormatter, check_at_least
from detect.runtime.dist import DEFAULT_TIMEOUT_S
from detect.runtime.precision import AMP_MODES
from detect.runtime.tensorboard import tensorboard_available

DEFAULT_CFG = asset("cfg", "yolo-mini.cfg")
DEFAULT_DATA = asset("data", "synthetic.yaml")
HYP_FROM_CFG = "cfg"  # --hyp cfg: the cfg's own training keys (detect.engine.cfg_training)
AUGMENT_ON = ("host", "device")  # --augment-on: where training batches are augmented


def with_shipped_files(opts: TrainOptions) -> TrainOptions:
    """--cfg, --data and --hyp as files: one named by file name alone (or as cfg/<name>, data/<name>) that is not
    in the current folder is the shipped one (detect.runtime.assets); a file found nowhere is refused here."""
    found = {}
    for flag, key, kind, suffixes in (("--cfg", "cfg", "cfg", (".cfg",)), ("--data", "data", "data", (".yaml",)),
                                      ("--hyp", "hyp", "cfg", (".yaml",))):
        value = getattr(opts, key)
        if value is None or (key == "hyp" and value == HYP_FROM_CFG):
            continue
        path = find_user_file(value, kind)
        if not path.exists():
            raise FileNotFoundError(f"{flag} {value}: no such file; {missing_file_hint(kind, suffixes)}")
        found[key] = str(path) if path != Path(value) else value
    return replace(opts, **found)


@dataclass(frozen=True)
class TrainOptions:
    """The run's settings (flags); hyperparameters are `detect.engine.config.Hyp`, read from `hyp`."""

    cfg: str | None = None  # None: a .pt --weights' own cfg, else DEFAULT_CFG (detect.engine.run_plan.choose_cfg)
    data: str = str(DEFAULT_DATA)
    hyp: str | None = None  # None: the defaults of detect.engine.config (cfg/hyp.yaml lists them)
    weights: str | None = None
    epochs: int = 20
    batch_size: int | str = 8  # or "auto": the largest that fits the GPU (detect.engine.batch_probe)
    img_size: int | None = None
    device: str = "auto"
    workers: int = 1
    project: str = "runs/train"
    name: str = "exp"
    exist_ok: bool = False
    resume: str | None = None
    sync_bn: str = "auto"
    freeze: str | None = None
    seed: int = 0
    optimizer: str = "sgd"
    schedule: str = "cos"
    nbs: int | None = None  # None: 64, or fewer for a short fine-tune (detect.engine.finetune)
    amp: str = "auto"
    ema: bool = True
    multi_scale: bool = False
    anchors: str = "keep"
    compile: bool = False
    eval_interval: int = 1
    patience: int | None = None  # stop after this many evaluations without a better fitness (None: off)
    save_period: int | None = None  # also keep a lean epoch<N>.pt every this many epochs (None: off)
    max_batches: int | None = None
    single_cls: bool = False  # every class of --data becomes one (detect.data.formats.class_selection)
    sampler: str = "uniform"  # uniform | repeat-factor (detect.data.sampling.samplers.RepeatFactorSampler)
    repeat_thresh: float = 0.1  # repeat-factor sampling: classes in fewer than this fraction of images repeat
    cache_dir: str | None = None
    cache: str | None = "auto"  # auto | ram | disk | off: decoded images kept between epochs (image_cache)
    augment_on: str = "host"  # host | device: where a batch's pixels are augmented
    resize: str = "letterbox"  # letterbox | stretch: how images are fed (recorded in the .pt; inference follows)
    coco_backend: str = DEFAULT_BACKEND  # the COCOeval engine (detect.evaluation.cocoeval_engines)
    metric: str = "coco"  # the fitness of best.pt: coco (mAP@0.5:0.95), voc07 / voc12 (VOC mAP@0.5), darknet
    plots: bool = True
    tensorboard: bool = False
    mlflow: bool = False  # also on when MLFLOW_TRACKING_URI is set (detect.engine.monitor.make_loggers)
    mlflow_experiment: str = "detect"
    dist_timeout: float = DEFAULT_TIMEOUT_S  # seconds a collective waits for the slowest rank (detect.runtime.dist)
    # the options the command line named (not saved): --resume checks them against the run's own
    given: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("given")
        return d


def batch_size_arg(text: str) -> int | str:
    """--batch-size: a number, or auto (CUDA only)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of images or auto, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    d = TrainOptions()
    p = argparse.ArgumentParser(
        prog="train.py", formatter_class=DefaultsHelpFormatter,
        description="Train a Darknet .cfg detector. Same file under `python train.py` (one process) and "
                    "`torchrun --nproc_per_node=N train.py` (DDP; gloo on CPU, NCCL on CUDA).")
    p.add_argument("--cfg", default=None,
                   help="Darknet model .cfg (default: the cfg a .pt in --weights was trained with, else "
                        "cfg/yolo-mini.cfg)")
    p.add_argument("--data", default=d.data, help="dataset spec yaml (data/*.yaml), or a Darknet obj.data")
    p.add_argument("--hyp", default=None,
                   help="hyperparameter yaml (optimiser, loss gains, augmentation); keys left out keep their "
                        "defaults, which cfg/hyp.yaml lists (default: those defaults); 'cfg': the Darknet cfg's own "
                        "[net]/[yolo] training keys, mapped key by key")
    p.add_argument("--weights", default=None,
                   help="initial weights: Darknet .weights, a partial backbone (e.g. darknet53.conv.74) or a .pt; "
                        "every tensor whose shape matches is loaded (fine-tuning onto another class count)")
    p.add_argument("--epochs", type=int, default=d.epochs, help="epochs to train")
    p.add_argument("--batch-size", "--batch", type=batch_size_arg, default=d.batch_size,
                   help="images per process per micro-batch")
    p.add_argument("--img-size", "--img", type=int, default=None,
                   help="training/eval size in pixels (default: cfg [net] width)")
    p.add_argument("--device", default=d.device, help="auto, cpu, cuda or cuda:N (torchrun: one GPU per local rank)")
    p.add_argument("--workers", type=int, default=d.workers, help="data-loader workers per process")
    p.add_argument("--project", default=d.project, help="folder holding the run folders")
    p.add_argument("--name", default=d.name, help="run folder name under --project (exp, exp2, ... unless --exist-ok)")
    p.add_argument("--exist-ok", action="store_true", help="reuse an existing run folder instead of a new one")
    p.add_argument("--resume", nargs="?", const="auto", default=None,
                   help="continue a run (exactly when the world size and batch are the run's): a last.pt path, or "
                        "no value for the newest runs/train/*/last.pt")
    p.add_argument("--sync-bn", default=d.sync_bn, choices=("auto", "on", "off"),
                   help="SyncBatchNorm: auto = CUDA with more than one process")
    p.add_argument("--freeze", default=None,
                   help="'backbone' or N: freeze those layers (weights and BatchNorm statistics)")
    p.add_argument("--seed", type=int, default=d.seed,
                   help="base seed (shuffle shared by all ranks; augmentation seeded per sample by seed, epoch, index)")
    p.add_argument("--optimizer", default=d.optimizer, choices=OPTIMIZERS, help="SGD (Nesterov) or AdamW")
    p.add_argument("--schedule", default=d.schedule, choices=SCHEDULES,
                   help="learning-rate schedule after warm-up (step uses hyp steps/scales, Darknet-style)")
    p.add_argument("--cos", dest="schedule", action="store_const", const="cos", help="same as --schedule cos")
    p.add_argument("--step", dest="schedule", action="store_const", const="step", help="same as --schedule step")
    p.add_argument("--nbs", type=int, default=None,
                   help="nominal batch size reached by gradient accumulation (default: 64; a short fine-tune "
                        "from --weights accumulates less so that it makes enough optimiser steps)")
    p.add_argument("--amp", default=d.amp, choices=AMP_MODES,
                   help="mixed precision: on CUDA auto = bf16 where supported, else fp16; on the CPU auto = bf16 "
                        "where the CPU has native bf16 (AVX512-BF16, AMX), else float32; fp16 is for CUDA")
    p.add_argument("--half", dest="amp", action="store_const", const="fp16", help="same as --amp fp16")
    p.add_argument("--no-ema", dest="ema", action="store_false", help="evaluate and save the raw weights, no EMA")
    p.add_argument("--anchors", default=d.anchors, choices=("keep", "fit"),
                   help="fit: recompute the cfg's anchors for this dataset (k-means + refinement for recall) and "
                        "train with them (written to the run's model.cfg and checkpoints); keep: the cfg's "
                        "(their fit is checked and logged either way)")
    p.add_argument("--multi-scale", action="store_true", help="random input size per step in [0.5, 1.5] x img size")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model and the loss with its target assignment (fuses BatchNorm, "
                        "activations and the loss's elementwise work; the first steps compile)")
    p.add_argument("--eval-interval", type=int, default=d.eval_interval, help="evaluate every N epochs (and last)")
    p.add_argument("--patience", type=int, default=None,
                   help="stop when the fitness (mAP@0.5:0.95) has not improved for N evaluations; every rank stops "
                        "at the same epoch, the log and results.csv say why (default: off)")
    p.add_argument("--save-period", type=int, default=None,
                   help="also keep epoch<N>.pt (lean, as best.pt) every N epochs (default: off)")
    p.add_argument("--max-batches", type=int, default=None, help="stop each epoch after N micro-batches (smoke runs)")
    p.add_argument("--single-cls", action="store_true",
                   help="train every class of --data (or of its `classes:` choice) as one class")
    p.add_argument("--sampler", default=d.sampler, choices=("uniform", "repeat-factor"),
                   help="uniform: every image once per epoch; repeat-factor: images holding rare classes more "
                        "often (LVIS repeat-factor sampling, --repeat-thresh)")
    p.add_argument("--repeat-thresh", type=float, default=d.repeat_thresh, metavar="T",
                   help="repeat-factor sampling: a class in a fraction f < T of the training images repeats its "
                        "images sqrt(T / f) times per epoch")
    p.add_argument("--cache-dir", default=None,
                   help="label cache / generated-data folder (default: $DETECT_CACHE, else ~/.cache/detect)")
    p.add_argument("--cache", default=d.cache, choices=IMAGE_CACHE_CHOICES,
                   help="decode every image once and keep it resized: ram = shared memory, one copy per node; "
                        "disk = beside the label cache; off = decode every epoch; auto (default) = ram when a "
                        "split's decoded images take at most a quarter of the free memory, else off")
    p.add_argument("--augment-on", default=d.augment_on, choices=AUGMENT_ON,
                   help="where training images are augmented: host = the loader workers (OpenCV); device = the "
                        "whole batch on the training device (the workers draw and send the source pixels; the same "
                        "boxes, the pixels within rounding; docs/benchmarks.md \"One H200\" has the figures)")
    p.add_argument("--resize", default=d.resize, choices=("letterbox", "stretch", "stretch-single"),
                   help="how images are fed in training and evaluation: letterbox (keep the aspect ratio) or "
                        "stretch (fill the square, Darknet's letter_box=0; stretch-single: mosaic tiles keep their "
                        "aspect ratio); best.pt records it and val, predict and export follow it")
    p.add_argument("--coco-backend", default=d.coco_backend, choices=BACKENDS,
                   help="COCOeval engine of the evaluations (pycocotools' numbers from each; ultrafast-pycocotools "
                        "is Rust, faster-coco-eval C++, pycocotools the reference)")
    p.add_argument("--metric", default=d.metric, choices=("coco", "voc07", "voc12", "darknet"),
                   help="what best.pt and --patience follow: coco = mAP@0.5:0.95; voc07 / voc12 = VOC mAP@0.5 "
                        "(11-point / all-point); darknet = Darknet's own detector map mAP@0.50 (its image reading "
                        "and resize, detect.val --metric darknet); logged beside COCO's each evaluation")
    p.add_argument("--no-plots", dest="plots", action="store_false",
                   help="no pictures in the run folder (results.png, labels.png, PR/F1/confusion, mosaics)")
    p.add_argument("--tensorboard", action="store_true",
                   help="log losses, lr, mAPs and images/s per epoch for TensorBoard in the run folder")
    p.add_argument("--mlflow", action="store_true",
                   help="log the run to MLflow: params, metrics per epoch, plots, best.pt, status (the store: "
                        "MLFLOW_TRACKING_URI, which alone turns this on; else sqlite:///mlflow.db here)")
    p.add_argument("--mlflow-experiment", default=d.mlflow_experiment, metavar="NAME",
                   help="the MLflow experiment a new run goes into (made if missing)")
    p.add_argument("--dist-timeout", type=float, default=d.dist_timeout, metavar="SECONDS",
                   help="a rank that does not reach a collective within this ends the group, with a message "
                        "naming it (long enough for rank 0 to build a label cache or run COCOeval)")
    return p


def validate(opts: TrainOptions) -> TrainOptions:
    """Fail early, naming the flag and what would be right."""
    check_at_least("--epochs", opts.epochs)
    if opts.batch_size == "auto":
        import torch

        if opts.device == "cpu" or not torch.cuda.is_available():
            raise ValueError("--batch-size auto probes the GPU's memory, and this run has no GPU "
                             f"(--device {opts.device}); give a number, e.g. --batch-size 8")
    else:
        check_at_least("--batch-size", opts.batch_size)
    check_at_least("--nbs", opts.nbs, allow_none=True)
    check_at_least("--eval-interval", opts.eval_interval)
    check_at_least("--max-batches", opts.max_batches, allow_none=True)
    check_at_least("--patience", opts.patience, allow_none=True)
    check_at_least("--save-period", opts.save_period, allow_none=True)
    if not 0 < opts.repeat_thresh <= 1:
        raise ValueError(f"--repeat-thresh is a fraction of the training images in (0, 1], got {opts.repeat_thresh}")
    if not opts.dist_timeout > 0:
        raise ValueError(f"--dist-timeout must be a positive number of seconds, got {opts.dist_timeout}")
    if opts.workers < 0:
        raise ValueError(f"--workers must be >= 0, got {opts.workers}")
    if opts.img_size is not None:  # every cfg's largest stride is 32 or more: refuse before any data work
        check_img_size(opts.img_size, 32)
    if opts.freeze is not None and opts.freeze != "backbone" and not opts.freeze.isdigit():
        raise ValueError(f"--freeze must be 'backbone' or a number of layers, got {opts.freeze!r}")
    opts = with_shipped_files(opts)
    if opts.weights is not None and not Path(opts.weights).is_file():
        raise FileNotFoundError(f"--weights {opts.weights}: no such file")
    if opts.tensorboard and not tensorboard_available():
        raise ValueError("--tensorboard needs the tensorboard package (pip install tensorboard)")
    if opts.mlflow and not mlflow_available():
        raise ValueError("--mlflow needs the mlflow-skinny package: pip install -e \".[mlflow]\"")
    return opts


# options a resumed run may take afresh (where it runs, not what it trains); --epochs extends or shortens it
RESUME_MAY_CHANGE = frozenset({"resume", "device", "workers", "dist_timeout", "cache", "cache_dir", "epochs",
                               "project", "augment_on", "mlflow", "mlflow_experiment"})
PATH_OPTIONS = ("cfg", "data", "hyp", "weights", "cache_dir")


def given_values(argv=None) -> dict:
    """The options the command line names (argparse dests) and their values as train.py's parser reads them: an
    abbreviated flag (--weight) under its own name, nothing for the flags it leaves out."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return vars(parser.parse_args(argv))


def given_options(argv=None) -> tuple[str, ...]:
    """The options the command line names (argparse dests), whatever their values."""
    return tuple(sorted(given_values(argv)))


def with_absolute_paths(opts: TrainOptions) -> TrainOptions:
    """File options made absolute, so that opts.yaml and the checkpoint resume from any working folder."""
    return replace(opts, **{k: str(Path(v).resolve()) for k in PATH_OPTIONS
                            if (v := getattr(opts, k)) is not None and not (k == "hyp" and v == HYP_FROM_CFG)})


def parse_options(argv=None) -> TrainOptions:
    args = build_parser().parse_args(argv)
    opts = with_absolute_paths(validate(TrainOptions(**vars(args), given=given_options(argv))))
    load_hyp(None if opts.hyp == HYP_FROM_CFG else opts.hyp)  # a bad hyp file fails here, before any process group
    return opts


def training_size(model, opts: TrainOptions) -> int:
    """--img-size, or the cfg's; a multiple of the model's largest stride."""
    return check_img_size(opts.img_size or max(model.input_size), model.max_stride)
