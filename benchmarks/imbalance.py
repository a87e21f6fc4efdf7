"""`python -m benchmarks imbalance`: do repeat-factor sampling and class weights help rare classes?

    python -m benchmarks imbalance --seeds 0 1            # 6 coco-tiny classes, 2 of them made rare

Builds a split from coco-tiny (COCO json): the `--classes` most frequent classes of its train images, of which
the `--rare` least frequent keep only `--keep` train images each (the other images holding them are left out
whole, so no object goes unlabelled); val keeps every val image with its boxes of those classes. The classes are
renamed `my-<name>` so that no pretrained class row transfers by name: the heads learn them from this data, as
on a user's own classes. Then the default fine-tune (yolov3-tiny COCO weights, 2 processes) runs once per
variant and seed: plain, `--sampler repeat-factor`, `class_weights: auto`, and both; detect.val on best.pt
gives the overall mAP and each rare class's AP.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import ROOT, SHARED

VARIANTS = {"plain": ([], ""), "repeat-factor": (["--sampler", "repeat-factor"], ""),
            "class-weights": ([], "class_weights: auto\n"),
            "both": (["--sampler", "repeat-factor"], "class_weights: auto\n")}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks imbalance", description=__doc__.split("\n")[0])
    p.add_argument("--coco", default=str(SHARED / "data" / "coco-tiny"), help="a COCO folder (train2017, val2017)")
    p.add_argument("--classes", type=int, default=6, help="the most frequent classes of the train images")
    p.add_argument("--rare", type=int, default=2, help="how many of them are made rare")
    p.add_argument("--keep", type=int, default=2, help="train images kept per rare class")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--img-size", type=int, default=416)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--repeat-thresh", type=float, default=None, help="train.py's --repeat-thresh (default its own)")
    p.add_argument("--out", default=None, help="folder for the split and the runs (default: a temporary one)")
    return p.parse_args(argv)


def _images_per_class(ann: dict) -> dict[int, set]:
    held = collections.defaultdict(set)
    for a in ann["annotations"]:
        if not a.get("iscrowd"):
            held[a["category_id"]].add(a["image_id"])
    return held


def build_split(coco: Path, out: Path, classes: int, rare: int, keep: int) -> tuple[Path, list[str], str]:
    """(data spec, the rare classes' names, a one-line description) of the imbalanced split under `out`."""
    train = json.loads((coco / "annotations" / "instances_train2017.json").read_text())
    val = json.loads((coco / "annotations" / "instances_val2017.json").read_text())
    held = _images_per_class(train)
    chosen = sorted(held, key=lambda c: (-len(held[c]), c))[:classes]
    rare_ids = chosen[-rare:] if rare else []
    dropped = set()
    for c in rare_ids:
        dropped |= set(sorted(held[c])[keep:])
    names = {c["id"]: c["name"] for c in train["categories"]}
    categories = [{"id": c, "name": f"my-{names[c]}"} for c in chosen]

    def subset(ann: dict, leave_out: set) -> dict:
        images = [im for im in ann["images"] if im["id"] not in leave_out]
        kept = {im["id"] for im in images}
        boxes = [a for a in ann["annotations"] if a["category_id"] in chosen and a["image_id"] in kept]
        return {"images": images, "annotations": boxes, "categories": categories}

    out.mkdir(parents=True, exist_ok=True)
    split = {"train": subset(train, dropped), "val": subset(val, set())}
    for name, ann in split.items():
        (out / f"{name}.json").write_text(json.dumps(ann))
    spec = out / "imbalanced.yaml"
    spec.write_text(f"path: {coco}\nformat: coco\ntrain: train2017\nval: val2017\n"
                    f"train_annotations: {out / 'train.json'}\nval_annotations: {out / 'val.json'}\n")
    counts = collections.Counter(a["category_id"] for a in split["train"]["annotations"])
    val_counts = collections.Counter(a["category_id"] for a in split["val"]["annotations"])
    described = ", ".join(f"{names[c]} {len(_images_per_class(split['train']).get(c, ()))} img / {counts[c]} boxes"
                          f" (val {val_counts[c]})" for c in chosen)
    return spec, [f"my-{names[c]}" for c in rare_ids], (f"train {len(split['train']['images'])} images: "
                                                         f"{described}")


def run_variant(args, spec: Path, project: Path, variant: str, seed: int) -> dict:
    flags, hyp_text = VARIANTS[variant]
    name = f"{variant}-s{seed}"
    extra = ["--seed", str(seed), *flags]
    if args.repeat_thresh is not None and "--sampler" in flags:
        extra += ["--repeat-thresh", str(args.repeat_thresh)]
    if hyp_text:
        hyp = project / f"{name}-hyp.yaml"
        hyp.write_text(hyp_text)
        extra += ["--hyp", str(hyp)]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    train = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}",
             str(ROOT / "train.py"), "--cfg", str(ROOT / "cfg" / "yolov3-tiny.cfg"),
             "--weights", str(SHARED / "weights" / "yolov3-tiny.weights"), "--data", str(spec),
             "--img-size", str(args.img_size), "--epochs", str(args.epochs), "--batch-size", "8",
             "--project", str(project), "--name", name, "--exist-ok", "--no-plots", *extra]
    start = time.perf_counter()
    proc = subprocess.run(train, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} seed {seed}: training failed (exit {proc.returncode}):\n"
                           + proc.stdout[-2000:] + proc.stderr[-2000:])
    val = [sys.executable, "-m", "detect.val", "--weights", str(project / name / "best.pt"), "--data", str(spec),
           "--img-size", str(args.img_size), "--project", str(project / "val"), "--name", name]
    proc = subprocess.run(val, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} seed {seed}: detect.val failed:\n" + proc.stdout[-2000:] + proc.stderr[-2000:])
    metrics = json.loads((project / "val" / name / "metrics.json").read_text())
    return {"map": metrics["map"], "map50": metrics["map50"], "wall": wall,
            "per_class": {c["name"]: (c["ap50"], c["ap"]) for c in metrics["per_class"]}}


def main(argv=None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        spec, rare, described = build_split(Path(args.coco), out / "split", args.classes, args.rare, args.keep)
        print(f"split {spec}: {described}; rare: {', '.join(rare)}")
        header = f"{'variant':>14s} {'seed':>4s} {'mAP@0.5':>8s} {'mAP':>6s} " + " ".join(
            f"{n + ' AP50/AP':>22s}" for n in rare) + f" {'train s':>8s}"
        print(header)
        for variant in args.variants:
            for seed in args.seeds:
                r = run_variant(args, spec, out / "runs", variant, seed)
                cells = " ".join(f"{r['per_class'].get(n, (float('nan'),) * 2)[0]:11.3f}/"
                                 f"{r['per_class'].get(n, (float('nan'),) * 2)[1]:.3f}".rjust(22) for n in rare)
                print(f"{variant:>14s} {seed:4d} {r['map50']:8.3f} {r['map']:6.3f} {cells} {r['wall']:8.0f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
