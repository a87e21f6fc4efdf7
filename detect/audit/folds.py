"""`--folds K`: every image audited by a model that never trained on it.

A model reproduces the errors it learnt: audited on its own training split it agrees with a missing label it was
taught to leave out. So the split's images are dealt into K folds (by a hash of each path: the same folds on every
run), and for each fold a train.py run (the user's training flags, given after `--`) trains on the other K - 1
folds and evaluates on this one (its best.pt chosen on it); that model then runs over this fold. The folds are
written as COCO jsons from the split's records (the labels as training reads them, crowd regions kept), image ids
being the records' positions, so every detection comes back to its image of the user's split. Cost: K trainings
on (K - 1) / K of the split each, about K - 1 times one training on all of it, plus one pass over the split.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from detect.audit.detections import ModelRun, crowd_regions, detect_split, looks_by_position, small_boxes
from detect.runtime.commands import train_launcher

log = logging.getLogger("detect.audit")

OWN_FLAGS = {"data": "--data", "project": "--project", "name": "--name", "exist_ok": "--exist-ok",
             "resume": "--resume"}  # each fold's run sets these itself


@dataclass(frozen=True)
class FoldPlan:
    folds: int
    train_args: tuple[str, ...]  # train.py's flags, as the user gave them after `--`
    nproc: int = 1  # train.py processes per fold run (torchrun when more than 1)


def check_fold_train_args(train_args) -> None:
    """One line for flags train.py would refuse, or that the fold runs set themselves (read by train.py's own
    parser: an abbreviated --proj is --project)."""
    from detect.engine.options import given_values

    try:
        given = given_values(list(train_args))
    except SystemExit:  # argparse printed the flag at fault
        raise ValueError("the train.py flags after `--` are not valid (train.py's error above)") from None
    owned = [flag for dest, flag in OWN_FLAGS.items() if dest in given]
    if owned:
        raise ValueError(f"{', '.join(owned)} after `--`: each fold's train.py run sets --data, --project and --name "
                         f"itself (its folds' data, the audit's run folder); leave it out")


def assign_folds(paths: list[str], folds: int) -> np.ndarray:
    """Fold of each image: images ordered by a hash of their path, then dealt round-robin (sizes differ by one)."""
    if folds < 2:
        raise ValueError(f"--folds {folds}: at least 2 (each fold is audited by a model trained on the others)")
    if len(paths) < folds:
        raise ValueError(f"--folds {folds} needs at least {folds} images; the split has {len(paths)}")
    keys = [hashlib.sha1(p.encode()).hexdigest() for p in paths]
    order = sorted(range(len(paths)), key=keys.__getitem__)
    fold = np.empty(len(paths), np.int64)
    fold[order] = np.arange(len(paths)) % folds
    return fold


def _coco_json(source, indices, root: Path, crowds: dict) -> dict:
    images, annotations = [], []
    for i in indices:
        record = source.records[i]
        images.append({"id": int(i), "file_name": os.path.relpath(record.path, root), "width": record.width,
                       "height": record.height})
        crowd_boxes, crowd_classes = crowds.get(record.image_id, (np.zeros((0, 4)), np.zeros(0, np.int64)))
        for boxes, classes, crowd in ((record.boxes, record.classes, 0), (crowd_boxes, crowd_classes, 1)):
            for box, cls in zip(np.asarray(boxes, float).reshape(-1, 4), classes):
                w, h = float(box[2] - box[0]), float(box[3] - box[1])
                annotations.append({"id": len(annotations) + 1, "image_id": int(i), "category_id": int(cls) + 1,
                                    "bbox": [float(box[0]), float(box[1]), w, h], "area": w * h, "iscrowd": crowd})
    categories = [{"id": k + 1, "name": name} for k, name in enumerate(source.names)]
    return {"images": images, "annotations": annotations, "categories": categories}


def write_fold_specs(source, fold: np.ndarray, folder: Path) -> list[Path]:
    """For each fold k, folder/fold<k>/data.yaml: train = the other folds, val = fold k (COCO jsons)."""
    root = Path(os.path.commonpath([os.path.abspath(r.path) for r in source.records])).resolve()
    if root.is_file():
        root = root.parent
    crowds = crowd_regions(source)
    specs = []
    for k in range(int(fold.max()) + 1):
        where = folder / f"fold{k}"
        where.mkdir(parents=True, exist_ok=True)
        for split, indices in (("train", np.flatnonzero(fold != k)), ("val", np.flatnonzero(fold == k))):
            (where / f"{split}.json").write_text(json.dumps(_coco_json(source, indices, root, crowds)))
        spec = {"path": str(where.resolve()), "format": "coco", "train": str(root), "val": str(root),
                "train_annotations": "train.json", "val_annotations": "val.json", "names": list(source.names)}
        (where / "data.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        specs.append(where / "data.yaml")
    return specs


def train_fold(plan: FoldPlan, spec: Path, folder: Path, k: int) -> Path:
    """Fold k's model: its train.py run in folder/fold<k>; the path of its best.pt."""
    command = [*train_launcher(plan.nproc), *plan.train_args, "--data", str(spec), "--project", str(folder),
               "--name", f"fold{k}", "--exist-ok"]
    log.info("fold %d of %d: %s", k + 1, plan.folds, shlex.join(command))
    done = subprocess.run(command, check=False)
    best = folder / f"fold{k}" / "best.pt"
    if done.returncode != 0 or not best.is_file():
        raise RuntimeError(f"fold {k + 1} of {plan.folds}: train.py exited with status {done.returncode}"
                           f"{'' if best.is_file() else ' without a best.pt'} (its output is above; the run folder "
                           f"is {folder / f'fold{k}'}): {shlex.join(command)}")
    return best


@dataclass
class FoldDetections:
    detections: dict[int, np.ndarray]  # record position -> detections by the model that did not train on it
    looks: dict[int, tuple]  # record position -> its closer looks by that model (detect.audit.close_look)
    map50s: list[float]  # each fold model's mAP@0.5 on its fold
    img_size: int


def fold_detections(source, plan: FoldPlan, folder: Path, run: ModelRun, ctx,
                    look_closer: bool = True) -> FoldDetections:
    """Every image's detections, and with `look_closer` its small boxes' closer looks, by the model that did not
    train on it. One process (the fold runs may use several: plan.nproc)."""
    check_fold_train_args(plan.train_args)
    fold = assign_folds([r.path for r in source.records], plan.folds)
    specs = write_fold_specs(source, fold, folder)
    out = FoldDetections({}, {}, [], 0)
    boxes = None
    for k, spec in enumerate(specs):
        best = train_fold(plan, spec, folder, k)
        fold_run = dataclasses.replace(run, weights=str(best), cfg=None, data=str(spec), split="val")
        found = detect_split(fold_run, ctx)
        out.detections.update(found.detections)
        out.map50s.append(found.result.map50)
        out.img_size = found.img_size
        if look_closer:  # the fold's split names its images by their positions in the user's (_coco_json)
            boxes = small_boxes(source, found.img_size) if boxes is None else boxes
            mine = {n: b for n, b in boxes.items() if fold[n] == k}
            out.looks.update(looks_by_position(fold_run, mine, lambda n: n, ctx))
        log.info("fold %d of %d: %d images audited by %s (mAP@0.5 there %.3f)", k + 1, plan.folds,
                 int((fold == k).sum()), best, found.result.map50)
    return out
