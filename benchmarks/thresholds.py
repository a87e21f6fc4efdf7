"""`python -m benchmarks thresholds`: per-class confidence thresholds against one threshold, chosen on one set of
images and scored on another.

    python -m benchmarks thresholds --cfg ../shared/darknet-cfg/yolov3-tiny.cfg \\
        --weights ../shared/weights/yolov3-tiny.weights --data data/coco-tiny.yaml --choose val --score train
    python -m benchmarks thresholds --weights best.pt --data data/kangaroo.yaml --halves

The thresholds are chosen as `detect.val --save-thresholds` chooses them (val's protocol: conf 0.001, IoU 0.6,
multi-label, merge-NMS) on the --choose split, and scored as detect.predict and the API detect (conf, IoU 0.45,
single label, plain NMS) on the --score split, at IoU 0.5: the per-class thresholds (--shrink k), the global
best-F1 threshold of the same choice, and --conf 0.25. The scoring split runs once at a threshold below all of
them and each setting keeps the detections that pass it: what a run at that setting returns (class-aware NMS only
lets a box suppress lower scores of its class, and max_det and the candidate cap keep the highest scores where a
threshold drops the lowest, so the two commute). `--halves` splits one split's images (sorted by id) into
alternating halves A and B: chosen on A and scored on B, then the other way round, the counts summed, so every
image is scored once, by thresholds chosen without it. Rows: F1, precision, recall per class and in total
(counts summed over the classes; "mean F1" is the mean over the classes with boxes), then the total for each k.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from detect.data.loader import open_split
from detect.evaluation.evaluator import CocoEvaluator
from detect.evaluation.model_eval import Feed, evaluate_model
from detect.evaluation.split_match import match_share
from detect.evaluation.thresholds import SHRINK_K, Counts, choose_thresholds, count_at
from detect.inference.loading import load_model_file
from detect.inference.predictor import InferenceSettings, Predictor
from detect.runtime.log import setup_logging

PLAIN_CONF = 0.25  # detect.predict's and the API's --conf


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks thresholds", description=__doc__.split("\n")[0])
    p.add_argument("--weights", required=True)
    p.add_argument("--cfg", default=None)
    p.add_argument("--data", required=True)
    p.add_argument("--choose", default="val", help="the split the thresholds are chosen on")
    p.add_argument("--score", default="train", help="the split they are scored on")
    p.add_argument("--halves", action="store_true",
                   help="choose on alternating halves of --choose and score on the other half (--score unused)")
    p.add_argument("--choose-images", type=int, default=None, metavar="N",
                   help="choose on the first N images (by id) of the choosing images only: thresholds from little "
                        "data, as a small validation split gives them")
    p.add_argument("--img-size", "--img", dest="img", type=int, default=None)
    p.add_argument("--shrink", default="0,1,2,5,10,20,50,inf",
                   help=f"the k values whose totals are compared (the table uses {SHRINK_K:g})")
    p.add_argument("--batch-size", "--batch", dest="batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    return p.parse_args(argv)


def detection_rows(handle, source, split: str, args, *, conf: float, iou: float, multi_label: bool,
                   merge: bool) -> np.ndarray:
    """Every detection of the model on `source` ([n, 7] rows: image id, x, y, w, h, score, category id)."""
    settings = InferenceSettings.for_model(handle, conf=conf, iou=iou, batch_size=args.batch,
                                           multi_label=multi_label, merge=merge)
    evaluator = CocoEvaluator(source)  # scores; the Predictor's settings make the detections
    feed = Feed(split, args.batch, args.workers)
    return evaluate_model(handle, Predictor(handle.runner, settings, torch.device("cpu")), source, evaluator,
                          feed).rows


def folds(args, choose_source, score_source) -> list[tuple[list[int] | None, list[int] | None]]:
    """(image ids to choose on, image ids to score on) per fold; None: the whole split."""
    ids = sorted({int(r.image_id) for r in choose_source.records})
    limit = args.choose_images
    if not args.halves:
        return [(None if limit is None else ids[:limit], None)]
    a, b = ids[0::2], ids[1::2]
    return [(a[:limit], b), (b[:limit], a)]


def add(a: Counts | None, b: Counts) -> Counts:
    return b if a is None else Counts(a.tp + b.tp, a.fp + b.fp, a.fn + b.fn)


def measure(args, shrinks: list[float]):
    """(settings -> Counts summed over the folds, the thresholds of each fold, classes' names, chosen-on boxes,
    seconds)."""
    tick = time.perf_counter()
    handle = load_model_file(args.weights, args.cfg, device=torch.device("cpu"), img_size=args.img)
    choose_source = open_split(args.data, args.choose)
    score_split = args.choose if args.halves else args.score
    score_source = choose_source if args.halves else open_split(args.data, score_split)
    chosen_rows = detection_rows(handle, choose_source, args.choose, args, conf=0.001, iou=0.6, multi_label=True,
                                 merge=True)
    plan = [(c, s, [choose_thresholds(*_matched(chosen_rows, choose_source, c), shrink=k) for k in shrinks])
            for c, s in folds(args, choose_source, score_source)]
    lowest = min(min(float(ch.conf.min()), ch.global_conf) for _, _, choices in plan for ch in choices)
    floor = 0.9 * min(lowest, PLAIN_CONF)  # below every threshold scored: each setting keeps a part of these
    scored_rows = detection_rows(handle, score_source, score_split, args, conf=floor, iou=0.45, multi_label=False,
                                 merge=False)
    totals: dict[str, Counts | None] = {}
    boxes = np.zeros(len(choose_source.names), dtype=np.int64)
    for choose_ids, score_ids, choices in plan:
        matched = _matched(scored_rows, score_source, score_ids)
        main = choices[shrinks.index(SHRINK_K)]
        boxes += main.instances
        settings = {"per-class": main.conf, "global best-F1": main.global_conf, f"conf {PLAIN_CONF:g}": PLAIN_CONF}
        settings.update({f"k={k:g}": ch.conf for k, ch in zip(shrinks, choices)})
        for name, conf in settings.items():
            totals[name] = add(totals.get(name), count_at(*matched, conf))
    return totals, [choices[shrinks.index(SHRINK_K)] for _, _, choices in plan], list(choose_source.names), boxes, \
        time.perf_counter() - tick


def format_report(totals: dict, choices, names, boxes: np.ndarray, shrinks: list[float]) -> str:
    compared = ("per-class", "global best-F1", f"conf {PLAIN_CONF:g}")
    lines = [f"{'class':>16s} {'boxes':>5s} {'thr':>5s}" + "".join(f" | {c:^18s}" for c in compared),
             f"{'':>16s} {'':>5s} {'':>5s}" + f" | {'F1':>6s}{'P':>6s}{'R':>6s}" * len(compared)]
    scored = totals[compared[0]].tp + totals[compared[0]].fn
    for k in np.flatnonzero(scored):
        thr = np.mean([ch.conf[k] for ch in choices])
        cells = "".join(f" | {totals[c].f1()[k]:6.3f}{totals[c].precision()[k]:6.3f}{totals[c].recall()[k]:6.3f}"
                        for c in compared)
        lines.append(f"{names[k][:16]:>16s} {scored[k]:5d} {thr:5.3f}{cells}")
    cells = "".join(f" | {totals[c].f1(True):6.3f}{totals[c].precision(True):6.3f}{totals[c].recall(True):6.3f}"
                    for c in compared)
    lines.append(f"{'total':>16s} {int(scored.sum()):5d} {'':>5s}{cells}")
    means = "".join(f" | {totals[c].f1()[scored > 0].mean():6.3f}{'':12s}" for c in compared)
    lines.append(f"{'mean F1':>16s} {'':>5s} {'':>5s}{means}")
    global_conf = ", ".join(f"{ch.global_conf:.3f}" for ch in choices)
    lines += ["", f"global best-F1 threshold: {global_conf}; boxes the thresholds were chosen on: "
              f"{int(boxes.sum())} (classes with none take the global one)", "",
              "shrinkage k (t = (n t_c + k t_global) / (n + k)):  total F1, P, R | mean F1"]
    for k in shrinks:
        c = totals[f"k={k:g}"]
        lines.append(f"  k={k:<5g} {c.f1(True):6.3f} {c.precision(True):6.3f} {c.recall(True):6.3f} | "
                     f"{c.f1()[scored > 0].mean():6.3f}")
    return "\n".join(lines)


def _matched(rows, source, image_ids=None):
    """COCOeval's matching at IoU 0.5 of `rows` on `source`'s images (or `image_ids` of them), as an evaluation
    makes it (detect.evaluation.split_match)."""
    ids = [r.image_id for r in source.records] if image_ids is None else image_ids
    return match_share(rows, ids, source).matched()


def main(argv) -> int:
    args = parse_args(argv)
    shrinks = sorted({float(v) for v in args.shrink.split(",") if v.strip()} | {SHRINK_K})
    setup_logging(0, 1)
    totals, choices, names, boxes, seconds = measure(args, shrinks)
    where = f"alternating halves of {args.choose}" if args.halves else f"chosen on {args.choose}, scored on " \
                                                                        f"{args.score}"
    print(f"thresholds benchmark: {Path(args.weights).name} on {args.data}, {where}; k={SHRINK_K:g}; "
          f"{os.cpu_count()} CPU cores, {seconds:.0f} s")
    print(format_report(totals, choices, names, boxes, shrinks))
    return 0
