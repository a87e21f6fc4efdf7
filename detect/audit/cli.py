"""`python -m detect.audit` (detect-audit): find the labels that are wrong, box by box.

    python -m detect.audit --weights best.pt --data data/mine.yaml                 # the val split
    python -m detect.audit --weights yolov3-tiny.weights --cfg yolov3-tiny.cfg --data data/coco.yaml
    python -m detect.audit --data data/mine.yaml --split train --folds 4 -- --weights yolov3-tiny.weights \\
        --cfg cfg/yolov3-tiny.cfg --epochs 10                                 # each image by a model that never saw it
    python -m detect.audit --weights best.pt --data data/mine.yaml --second-opinion yolov3-tiny.weights \\
        --second-cfg cfg/yolov3-tiny.cfg                                           # a general model's view of each box

Runs the model over the split as detect.val does, compares its detections with the labels, and writes to
runs/audit/<name>: issues.csv (one row per suspected error, most likely first: missing, box, class, spurious,
with the model's suggestion and the label's file and line), issues.json (the same, with the figures behind each
score), issues_sheet.jpg (the top issues as crops: the label in orange, the model's box in green), and with
--save-images N the top N issues each as a whole annotated image (issues/). docs/audit.md says how the score is
made and how to work through the list.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import detect.runtime.cpu_threads  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads)
from detect.audit.close_look import with_looks
from detect.audit.detections import (
    ModelRun,
    audit_images,
    detect_split,
    looks_by_position,
    opinion_detections,
    refuse_unlabelled,
    small_boxes,
)
from detect.audit.report import issue_rows, summary, write_issues
from detect.audit.scoring import ScoringSettings, find_issues
from detect.audit.second_opinion import with_opinions
from detect.audit.sheet import draw_issue_image, draw_sheet
from detect.inference.cli_flags import (
    add_inference_flags,
    add_run_folder_flags,
    add_workers_flag,
    check_inference_args,
    inference_options,
)
from detect.inference.options import AUDIT
from detect.runtime import dist
from detect.runtime.commands import DefaultsHelpFormatter, run_tool
from detect.runtime.log import setup_logging
from detect.runtime.runs import next_run_dir

log = logging.getLogger("detect.audit")

TRAINED_ON_IT = ("note: auditing the train split with a model trained on it hides the errors it learnt (it agrees "
                 "with them); --folds K audits every image with a model trained without it")


def parse_args(argv=None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    train_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="python -m detect.audit", description=__doc__.split("\n")[0],
                                formatter_class=DefaultsHelpFormatter,
                                epilog="With --folds, train.py's flags follow `--` (--weights and --cfg given before "
                                       "it are passed on as the fold runs' starting point).")
    p.add_argument("--weights", help=".weights, .pt or .onnx of a model of the dataset's classes (required without "
                                     "--folds)")
    p.add_argument("--cfg", help="Darknet .cfg (optional for .pt checkpoints, which carry their cfg)")
    p.add_argument("--data", required=True, help="dataset spec (data/*.yaml), a Darknet obj.data or an export folder")
    p.add_argument("--split", default="val", choices=("train", "val", "test"), help="the split whose labels to audit")
    add_inference_flags(p, AUDIT, batch_help="batch size", slice_choice=True)
    p.add_argument("--close-look", default="small", choices=("small", "off"),
                   help="look again at each small box (under 20 px at the input) in a crop about it, magnified: what "
                        "the model sees there tells a small object it misses from a label on nothing (cost: one "
                        "model pass a small box)")
    p.add_argument("--min-score", type=float, default=ScoringSettings.min_score,
                   help="list issues scoring at least this (the score is the chance the label is wrong)")
    p.add_argument("--top", type=int, default=36, help="issues on the contact sheet (issues_sheet.jpg)")
    p.add_argument("--save-images", type=int, default=0, metavar="N",
                   help="also draw the top N issues each on its whole image (issues/<rank>_<kind>_<image>.jpg)")
    p.add_argument("--folds", type=int, default=None, metavar="K",
                   help="train K models (train.py with the flags after --), each on K-1 folds of the split, and "
                        "audit each fold with the model that did not see it (cost: about K-1 trainings)")
    p.add_argument("--nproc-per-node", type=int, default=1,
                   help="with --folds: train.py processes per fold run (torchrun when more than 1)")
    p.add_argument("--second-opinion", default=None, metavar="WEIGHTS",
                   help="a second model of any classes (e.g. the COCO weights a fine-tune started from) whose view "
                        "of each box is compared with its view of the class's labels: a detection it sees as a "
                        "horse, where the labelled kangaroos look like dogs and sheep to it, is no missing label. "
                        "With --folds: the fold runs' starting --weights when their classes are not the dataset's; "
                        "'none' leaves it out")
    p.add_argument("--second-cfg", default=None, help="the --second-opinion model's Darknet .cfg (for .weights)")
    p.add_argument("--cache-dir", default=None,
                   help="label cache folder (default: $DETECT_CACHE, else ~/.cache/detect)")
    add_workers_flag(p, "data loader workers")
    add_run_folder_flags(p, "runs/audit")
    args = p.parse_args(argv)
    check_inference_args(p, args)
    if args.folds is None and not args.weights:
        p.error("--weights is required (or --folds K to train the models that audit the split)")
    if args.folds is None and train_args:
        p.error(f"flags after `--` ({' '.join(train_args)}) are train.py's for --folds; give --folds K")
    if args.folds is not None and args.folds < 2:
        p.error(f"--folds {args.folds}: at least 2 (each fold is audited by a model trained on the others)")
    if args.second_cfg and not args.second_opinion:
        p.error("--second-cfg is the --second-opinion model's cfg; give --second-opinion WEIGHTS too")
    if (args.second_opinion not in (None, "none") and not args.second_cfg
            and Path(args.second_opinion).suffix.lower() not in (".pt", ".onnx")):
        p.error(f"--second-cfg is required: {args.second_opinion} is read as Darknet weights, which hold no cfg; "
                f"pass the cfg they were trained with (a .pt or .onnx needs none)")
    if not 0 <= args.min_score <= 1:
        p.error(f"--min-score {args.min_score}: a chance, in [0, 1]")
    args.train_args = train_args
    if args.folds is not None:  # train.py's flags checked as its parser will, before any fold run starts
        from detect.audit.folds import check_fold_train_args
        from detect.engine.options import parse_options

        try:
            check_fold_train_args(train_args)
            parse_options(list(fold_train_args(args)))
        except (ValueError, OSError) as error:
            p.error(str(error))
    return args


def fold_train_args(args) -> tuple[str, ...]:
    """train.py's flags for each fold: those after `--`, plus --weights and --cfg given to the audit."""
    from detect.engine.options import given_values

    given = given_values(list(args.train_args))
    extra = [item for dest, value in (("weights", args.weights), ("cfg", args.cfg))
             if value and dest not in given for item in (f"--{dest}", value)]
    return (*extra, *args.train_args)


def run(args) -> list[dict] | None:
    ctx = dist.init_distributed(args.device)
    setup_logging(ctx.rank, ctx.world_size)
    try:
        model_run = ModelRun(args.weights or "", args.cfg, args.data, args.split, inference_options(args),
                             args.workers, Path(args.cache_dir) if args.cache_dir else None,
                             choose_tiles=args.slice == "auto")
        run_dir = dist.broadcast_object(next_run_dir(args.project, args.name) if ctx.is_main else None)
        if args.folds:
            from detect.audit.folds import FoldPlan, fold_detections
            from detect.data.loader import open_split

            if ctx.world_size > 1:
                raise ValueError("--folds runs in one process (its train.py runs take --nproc-per-node); start "
                                 "detect.audit without torchrun")
            source = open_split(args.data, args.split, model_run.cache_dir)
            refuse_unlabelled(source, args.data, args.split)
            plan = FoldPlan(args.folds, fold_train_args(args), args.nproc_per_node)
            folds = fold_detections(source, plan, run_dir / "folds", model_run, ctx,
                                    look_closer=args.close_look == "small")
            opinions = second_opinion(args, source, model_run, ctx)
            images = with_looks(audit_images(source, folds.detections, key=lambda index, record: index), folds.looks)
            img_size, map50s = folds.img_size, folds.map50s
            log.info("fold models' mAP@0.5 on their held-out folds: %s", ", ".join(f"{m:.3f}" for m in map50s))
        else:
            found = detect_split(model_run, ctx)
            opinions = second_opinion(args, found.source, model_run, ctx)
            source, img_size = found.source, found.img_size
            looks = {}
            if args.close_look == "small":
                looks = looks_by_position(model_run, small_boxes(source, img_size),
                                          lambda n: source.records[n].image_id, ctx)
            if not ctx.is_main:
                return None
            log.info("the model on the %s split: mAP@0.5 %.3f, mAP@0.5:0.95 %.3f (%d images)", args.split,
                     found.result.map50, found.result.map, found.result.num_images)
            if args.split == "train":
                print(TRAINED_ON_IT)
            images = with_looks(audit_images(source, found.detections), looks)
        if opinions is not None:
            images = with_opinions(images, opinions)
        issues = find_issues(images, len(source.names), img_size, ScoringSettings(min_score=args.min_score))
        return write_outputs(issues, source, run_dir, args)
    finally:
        dist.destroy()


def starting_weights(train_args) -> tuple[str | None, str | None]:
    """(--weights, --cfg) among train.py's flags, as its parser reads them: where the fold runs start from."""
    from detect.engine.options import given_values

    given = given_values(list(train_args))
    return given.get("weights"), given.get("cfg")


def second_opinion(args, source, model_run: ModelRun, ctx) -> dict | None:
    """Collective: the second model's detections per record index (rank 0), or None without one. With --folds
    and no --second-opinion, the weights the fold runs start from, when their classes are not the dataset's (a
    general model, such as COCO's)."""
    weights, cfg = args.second_opinion, args.second_cfg
    chosen = weights is not None
    if not chosen and args.folds:
        weights, cfg = starting_weights(fold_train_args(args))
    if not weights or weights == "none":
        return None
    try:
        found, _ = opinion_detections(source, weights, cfg, model_run.options, ctx, model_run.workers,
                                      model_run.cache_dir, other_classes_only=not chosen)
    except (ValueError, OSError) as error:
        if chosen:
            raise
        log.warning("no second opinion from the fold runs' starting weights %s (%s); name a general model and its "
                    "own cfg with --second-opinion W --second-cfg C", weights, error)
        return None
    if not chosen and found is not None:
        log.info("second opinion: %s, where the fold runs start from (--second-opinion none to leave it out)",
                 weights)
    return found


def write_outputs(issues, source, run_dir: Path, args) -> list[dict]:
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = issue_rows(issues, source)
    csv_path, _ = write_issues(rows, run_dir)
    sheet = draw_sheet(issues, source.records, source.names, run_dir / "issues_sheet.jpg", args.top)
    for rank, issue in enumerate(issues[:args.save_images], 1):
        stem = Path(source.records[issue.image].path).stem
        draw_issue_image(issue, rank, source.records[issue.image], source.names,
                         run_dir / "issues" / f"{rank:04d}_{issue.kind}_{stem}.jpg")
    print(summary(rows, len(source.records), sum(len(r.classes) for r in source.records)))
    print(f"written: {csv_path}, issues.json" + (f", {sheet.name}" if sheet else "") +
          (f", issues/ ({min(args.save_images, len(issues))} images)" if args.save_images else "") + f" in {run_dir}")
    return rows


def main(argv=None) -> int:
    """0 on success; 2 and `error: ...` on stderr for a user's mistake; 1 and one such line for any other failure
    (the traceback in the debug log); 130 on Ctrl-C."""
    return run_tool("detect.audit", parse_args, run, argv, log)
