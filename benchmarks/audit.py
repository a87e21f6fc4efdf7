"""`python -m benchmarks audit`: detect.audit against known label errors, next to cleanlab's image scores.

    python -m benchmarks audit --dataset coco-tiny --seeds 5     # the official yolov3-tiny, COCO val2017 images
    python -m benchmarks audit --dataset kangaroo --seeds 2      # fold models (--folds 3, 10-epoch fine-tunes)

Errors are injected into a real split (benchmarks.audit_inject: removed, moved, relabelled, invented boxes, each
--share of the boxes, seeded) and written as a YOLO dataset; the audit runs on it with a model that never trained
on its images: for coco-tiny the official yolov3-tiny (trained on COCO 2014 trainval minus the 5k minival, whose
images val2017 holds), for kangaroo each fold's fine-tune (`--folds`, the fold models trained on the corrupted
labels, as a user's would be), with the second opinion `detect.audit --folds` takes by default (the COCO weights
the folds start from; a row gives the default without it). Rows: box-level AP of the ranked issues, recall at N,
per-kind AP, image-level AP, for each scoring choice (detect.audit.scoring: calibration per class and size or
not, likelihood ratios or plain products), and cleanlab's `get_label_quality_scores` on the same detections
(image level only: it scores images), and the ceiling: the share of the errors the model gives away at all
(the true object detected, the invented box seen empty; audit_inject.seen_share), the box AP a perfect ranking
would reach. Means over the seeds, with each seed's figure. The coco-tiny detections do not depend on the labels
and are computed once; each kangaroo seed trains its own fold models (about 3 x 2 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import ROOT, SHARED
from benchmarks.audit_inject import KINDS, box_figures, image_ap, inject, seen_share, write_yolo_split
from detect.audit.calibration import CalibrationSettings
from detect.audit.close_look import boxes_to_look_at, with_looks
from detect.audit.detections import (
    ModelRun,
    audit_images,
    detect_split,
    looks_by_position,
    opinion_detections,
)
from detect.audit.folds import FoldPlan, fold_detections
from detect.audit.scoring import ScoringSettings, find_issues
from detect.data.loader import open_split
from detect.inference.options import InferenceOptions
from detect.runtime import dist
from detect.runtime.log import setup_logging

VARIANTS = {
    "default (likelihood, class x size)": ScoringSettings(),
    "likelihood, per size only": ScoringSettings(CalibrationSettings(per_class=False)),
    "likelihood, per class only": ScoringSettings(CalibrationSettings(per_size=False)),
    "likelihood, raw confidence": ScoringSettings(CalibrationSettings(enabled=False)),
    "products, class x size": ScoringSettings(method="product", min_score=0.05),
    "products, raw confidence": ScoringSettings(CalibrationSettings(enabled=False), method="product",
                                                min_score=0.05),
}
SEEN_CONF = (0.01, 0.25)  # any detection worth a look, and a confident one
DATASETS = {"coco-tiny": ("data/coco-tiny.yaml", ("val",)), "kangaroo": ("data/kangaroo.yaml", ("train", "val"))}


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks audit", description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="coco-tiny", choices=tuple(DATASETS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--share", type=float, default=0.03, help="share of the boxes per kind of error")
    p.add_argument("--resized", action="store_true",
                   help="box errors drawn at another extent about their centre (each side x0.55-0.7 or x1.45-1.8) "
                        "instead of moved (kangaroo --reuse: a folder made with the same choice)")
    p.add_argument("--folds", type=int, default=3, help="kangaroo: fold models")
    p.add_argument("--epochs", type=int, default=10, help="kangaroo: each fold's fine-tune")
    p.add_argument("--nproc", type=int, default=2, help="kangaroo: train.py processes per fold")
    p.add_argument("--img-size", type=int, default=416)
    p.add_argument("--augment", action="store_true", help="the audit's model run with test-time augmentation")
    p.add_argument("--slice", type=int, default=None, help="the audit's model run sliced into tiles of this size")
    p.add_argument("--whole", action="store_true",
                   help="the audit's model run on whole images only (detect.audit --slice off; default: --slice "
                        "auto, whole or tiles by the model's mAP@0.5 on the split)")
    p.add_argument("--conf", type=float, default=None, help="the audit's detection floor (default: detect.audit's)")
    p.add_argument("--max-det", type=int, default=None, help="detections kept an image (default: detect.audit's)")
    p.add_argument("--no-second-opinion", action="store_true",
                   help="kangaroo: leave out the second opinion detect.audit --folds takes by default (the official "
                        "COCO yolov3-tiny the fold models start from); without this flag a row gives the default "
                        "without it")
    p.add_argument("--close-look", default="small", choices=("small", "off"),
                   help="the audit's closer look at small boxes (detect.audit --close-look)")
    p.add_argument("--out", default=None, help="folder for the corrupted sets and fold runs (default: temporary)")
    p.add_argument("--reuse", action="store_true", help="kangaroo: rescore a previous --out's detections")
    p.add_argument("--oracle", type=float, default=None, metavar="RECALL",
                   help="coco-tiny: instead of yolov3-tiny, a detector that finds each true (clean) box with this "
                        "chance (confidence 0.5-0.99, corners moved by 5%% of the size) and makes two false "
                        "detections an image (confidence 0.01-0.6): what the scoring reaches with a good model")
    return p.parse_args(argv)


def _source_records(data: str, splits) -> tuple[list, list[str]]:
    sources = [open_split(str(ROOT / data), split) for split in splits]
    return [r for s in sources for r in s.records], sources[0].names


def _cleanlab_image_ap(images, errors, num_classes: int) -> float:
    from cleanlab.object_detection.rank import get_label_quality_scores

    labels = [{"bboxes": im.boxes.astype(np.float32), "labels": im.classes} for im in images]
    predictions = [[im.detections[im.detections[:, 5] == k, :5].astype(np.float32) for k in range(num_classes)]
                   for im in images]
    quality = np.asarray(get_label_quality_scores(labels, predictions, verbose=False))
    return image_ap(1.0 - quality, errors, len(images))


def score_seed(images, errors, num_classes: int, img_size: int, opinions: list | None = None) -> dict:
    """Each scoring variant's figures; with `opinions` (the second model's detections per image), the variants
    score the images with that second opinion, and one more row the default without it."""
    figures = {}
    if opinions is not None:
        issues = find_issues(images, num_classes, img_size)
        figures["default, no second opinion"] = box_figures(issues, errors) | {"image_ap": _image_ap(issues, errors,
                                                                                                   images)}
        images = [dataclasses.replace(im, opinion=opinions[im.index]) for im in images]
    for name, settings in VARIANTS.items():
        issues = find_issues(images, num_classes, img_size, settings)
        figures[name] = box_figures(issues, errors) | {"image_ap": _image_ap(issues, errors, images)}
    figures["cleanlab get_label_quality_scores"] = {"image_ap": _cleanlab_image_ap(images, errors, num_classes)}
    detections = [im.detections for im in images]
    figures.update({f"the model gives the error away, conf >= {c}": {"seen": seen_share(errors, detections, c)}
                    for c in SEEN_CONF})
    return figures


def _image_ap(issues, errors, images) -> float:
    """Image-level AP of images ranked by their worst issue."""
    worst = np.zeros(len(images))
    for issue in issues:
        worst[issue.image] = max(worst[issue.image], issue.score)
    return image_ap(worst, errors, len(images))


def second_opinions(data: str, splits, options, ctx) -> list:
    """The official COCO yolov3-tiny's detections on each image of `splits` (in _source_records' order)."""
    out = []
    for split in splits:
        source = open_split(str(ROOT / data), split)
        found, _ = opinion_detections(source, str(SHARED / "weights" / "yolov3-tiny.weights"),
                                      str(SHARED / "darknet-cfg" / "yolov3-tiny.cfg"), options, ctx, workers=2)
        out += [found[i] for i in range(len(source.records))]
    return out


def oracle_detections(images, recall: float, num_classes: int, seed: int = 0) -> list:
    """The images with the --oracle detector's detections in place of the model's."""
    rng = np.random.default_rng(seed)
    out = []
    for im in images:
        found = rng.uniform(0, 1, len(im.classes)) < recall
        wh = np.tile(im.boxes[:, 2:] - im.boxes[:, :2], 2)
        boxes = im.boxes + rng.normal(0, 0.05, im.boxes.shape) * wh
        det = np.concatenate([boxes, rng.uniform(0.5, 0.99, (len(boxes), 1)), im.classes[:, None]], 1)[found]
        false = rng.poisson(2)
        xy, size = rng.uniform(0, im.longer_side * 0.8, (false, 2)), rng.uniform(20, 150, (false, 2))
        det = np.concatenate([det, np.concatenate([xy, xy + size, rng.uniform(0.01, 0.6, (false, 1)),
                                                   rng.integers(0, num_classes, (false, 1))], 1)])
        out.append(dataclasses.replace(im, detections=det))
    return out


class SmallBoxLooks:
    """The closer looks at the small boxes of each corrupted copy of the split (detect.audit.close_look), each box
    looked at once over the seeds (the model does not change)."""

    def __init__(self, run: ModelRun, source, img_size: int, ctx):
        self.run, self.source, self.img_size, self.ctx = run, source, img_size, ctx
        self.seen: dict[tuple, np.ndarray] = {}

    def __call__(self, images: list) -> list:
        boxes = boxes_to_look_at(images, len(self.source.names), self.img_size)
        new = {n: np.array([b for b in found if (n, *b) not in self.seen]).reshape(-1, 4) for n, found in boxes.items()}
        new = {n: b for n, b in new.items() if len(b)}
        for n, (looked, rows) in looks_by_position(self.run, new, lambda n: self.source.records[n].image_id,
                                                   self.ctx).items():
            self.seen.update({(n, *box): det for box, det in zip(looked, rows)})
        return with_looks(images, {n: (b, [self.seen[(n, *box)] for box in b]) for n, b in boxes.items()})


def corrupted_images(base_images, corrupted) -> list:
    return [dataclasses.replace(im, boxes=corrupted.boxes[i], classes=corrupted.classes[i],
                                difficult=np.zeros(len(corrupted.classes[i]), bool))
            for i, im in enumerate(base_images)]


def kangaroo_seed(args, records, names, seed: int, out: Path, ctx, run_options) -> tuple[list, list, int, list]:
    """(audit images, injected errors, input size, the position in `records` of each image) of one seed: the
    corrupted copy audited by its fold models. The images stay in the copy's order (the scoring's simulated errors,
    which the closer looks were taken for, follow it); the errors are moved to it."""
    folder = out / f"seed{seed}"
    saved = folder / "audit_inputs.pkl"
    corrupted = inject(records, len(names), args.share, seed, resized=args.resized)
    if args.reuse and saved.is_file():
        images, img_size, order = pickle.loads(saved.read_bytes())
    else:
        spec = write_yolo_split(records, corrupted, names, folder / "data")
        source = open_split(str(spec), "train")
        train_args = ("--cfg", str(ROOT / "cfg" / "yolov3-tiny.cfg"), "--weights",
                      str(SHARED / "weights" / "yolov3-tiny.weights"), "--epochs", str(args.epochs), "--img-size",
                      str(args.img_size), "--batch-size", "8")
        run = ModelRun("", None, str(spec), "train", run_options, workers=2, choose_tiles=not args.whole)
        folds = fold_detections(source, FoldPlan(args.folds, train_args, args.nproc), folder / "folds", run, ctx,
                                look_closer=args.close_look == "small")
        print(f"seed {seed}: fold models' mAP@0.5 on their held-out folds: "
              f"{', '.join(f'{m:.3f}' for m in folds.map50s)}")
        images = with_looks(audit_images(source, folds.detections, key=lambda index, record: index), folds.looks)
        img_size = folds.img_size
        # the copy's images are named by their position in `records`: the injected errors' image indices
        order = [int(Path(r.path).stem) for r in source.records]
        saved.write_bytes(pickle.dumps((images, img_size, order)))
    position = {i: n for n, i in enumerate(order)}
    errors = [dataclasses.replace(e, image=position[e.image]) for e in corrupted.errors]
    return images, errors, img_size, order


def report(per_seed: list[dict], errors_per_seed: list[int]) -> None:
    print(f"\ninjected errors per seed: {errors_per_seed}")
    print(f"{'scoring':40s} {'box AP':>7s} {'R@N':>6s} " + " ".join(f"{k:>8s}" for k in KINDS) +
          f" {'image AP':>9s}  (per seed: box AP / image AP)")
    for name in per_seed[0]:
        rows = [s[name] for s in per_seed]
        if "seen" in rows[0]:  # what a perfect ranking could reach: the share of errors the detections show
            seen = {k: np.mean([r["seen"].get(k, np.nan) for r in rows]) for k in ("all", *KINDS)}
            print(f"{name:40s} {seen['all']:7.3f} {'':6s} " + " ".join(f"{seen[k]:8.3f}" for k in KINDS))
            continue
        mean = {k: _mean([r[k] for r in rows]) for k in rows[0] if k != "per_kind_ap"}
        kinds = " ".join(f"{_mean([r['per_kind_ap'].get(k, np.nan) for r in rows]):8.3f}"
                         if "per_kind_ap" in rows[0] else f"{'':8s}" for k in KINDS)
        box = f"{mean['box_ap']:7.3f} {mean['recall_at_n']:6.3f}" if "box_ap" in mean else f"{'':7s} {'':6s}"
        seeds = ", ".join((f"{r['box_ap']:.3f} / " if "box_ap" in r else "") + f"{r['image_ap']:.3f}" for r in rows)
        print(f"{name:40s} {box} {kinds} {mean['image_ap']:9.3f}  ({seeds})")


def _mean(values) -> float:
    """The mean of the figures a kind has (nan, without a warning, for a kind the dataset cannot hold: kangaroo's
    class errors)."""
    values = np.asarray(values, np.float64)
    return float(values[~np.isnan(values)].mean()) if (~np.isnan(values)).any() else float("nan")


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    setup_logging(0, 1)
    ctx = dist.init_distributed("cpu")
    data, splits = DATASETS[args.dataset]
    records, names = _source_records(data, splits)
    options = InferenceOptions(img_size=args.img_size, augment=args.augment, slice_size=args.slice, conf=args.conf,
                               max_det=args.max_det)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="audit-bench-"))
    start = time.perf_counter()
    per_seed, counts = [], []
    if args.dataset == "coco-tiny":
        run = ModelRun(str(SHARED / "weights" / "yolov3-tiny.weights"), str(SHARED / "darknet-cfg" / "yolov3-tiny.cfg"),
                       str(ROOT / data), "val", options, workers=2, choose_tiles=not args.whole)
        found = detect_split(run, ctx)
        base = audit_images(found.source, found.detections)
        looks = SmallBoxLooks(run, found.source, found.img_size, ctx)
        if args.oracle is not None:
            base = oracle_detections(base, args.oracle, len(names))
            print(f"an oracle detector (recall {args.oracle}) on coco-tiny val")
        else:
            print(f"yolov3-tiny on coco-tiny val: mAP@0.5 {found.result.map50:.3f}")
        for seed in range(args.seeds):
            corrupted = inject(records, len(names), args.share, seed, resized=args.resized)
            images = corrupted_images(base, corrupted)
            if args.close_look == "small" and args.oracle is None:
                images = looks(images)
            per_seed.append(score_seed(images, corrupted.errors, len(names), found.img_size))
            counts.append(len(corrupted.errors))
    else:
        opinions = None if args.no_second_opinion else second_opinions(data, splits, options, ctx)
        for seed in range(args.seeds):
            images, errors, img_size, order = kangaroo_seed(args, records, names, seed, out, ctx, options)
            per_seed.append(score_seed(images, errors, len(names), img_size,
                                       None if opinions is None else [opinions[i] for i in order]))
            counts.append(len(errors))
    print(f"{args.dataset}: {len(records)} images, {sum(len(r.classes) for r in records)} boxes, share {args.share} "
          f"per kind, {args.seeds} seed(s), {time.perf_counter() - start:.0f} s; folders in {out}")
    report(per_seed, counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
