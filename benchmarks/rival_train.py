"""`python -m benchmarks rival_train`: time to accuracy of the main job against ultralytics YOLO11n, side by side.

    python -m benchmarks rival_train                       # YOLO11n 20 epochs, then our main job at 100 epochs

1. ultralytics YOLO11n from scratch (`yolo11n.yaml`, no pretrained weights) on the built-in synthetic dataset,
   converted to ultralytics' layout (images linked, YOLO txt labels), its default recipe at the main job's
   image size, timed end to end (`--rival-epochs`, default 20);
2. its best.pt scored with pycocotools on the val split (predictions at conf 0.001, as our evaluation runs):
   the same COCO mAP@0.5:0.95 our results.csv holds, so the two are one figure;
3. our main job (`torchrun --nproc_per_node 2 train.py --epochs N`), timed; stopped once an epoch's mAP reaches
   the rival's (`--run-out` lets it finish). Prints the time to that mAP and its ratio to the rival's time.
ultralytics is a benchmark dependency (`pip install ultralytics`), not a runtime one. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import ROOT

RIVAL_SCRIPT = """
import json, sys, time
from ultralytics import YOLO
args = json.loads(sys.argv[1])
start = time.perf_counter()
model = YOLO("yolo11n.yaml")
model.train(data=args["data"], epochs=args["epochs"], imgsz=args["imgsz"], device="cpu", project=args["project"],
            name="rival", exist_ok=True, pretrained=False, plots=False, verbose=False)
wall = time.perf_counter() - start
best = YOLO(args["project"] + "/rival/weights/best.pt")
detections = []
for item in args["images"]:
    result = best.predict(item["file"], imgsz=args["imgsz"], conf=0.001, iou=0.7, max_det=300, device="cpu",
                          verbose=False)[0]
    boxes = result.boxes
    for (x1, y1, x2, y2), score, cls in zip(boxes.xyxy.tolist(), boxes.conf.tolist(), boxes.cls.tolist()):
        detections.append({"image_id": item["id"], "category_id": args["categories"][int(cls)],
                           "bbox": [x1, y1, x2 - x1, y2 - y1], "score": score})
json.dump({"wall": wall, "detections": detections}, open(args["out"], "w"))
"""


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks rival_train", description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(ROOT / "data" / "synthetic.yaml"), help="a synthetic dataset spec")
    p.add_argument("--img-size", type=int, default=320, help="both tools (the main job's size)")
    p.add_argument("--rival-epochs", type=int, default=20)
    p.add_argument("--epochs", type=int, default=100, help="our main job's schedule")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--run-out", action="store_true", help="let our run finish rather than stop at the rival's mAP")
    p.add_argument("--workdir", default=None, help="run folders (default: a temporary folder)")
    p.add_argument("train_args", nargs="*", help="extra train.py flags after --")
    return p.parse_args(argv)


def yolo_layout(spec_path: str, folder: Path) -> tuple[Path, dict, list[dict], list[int]]:
    """The dataset in ultralytics' layout under `folder`: (its data.yaml, the val COCO json, val images as
    {id, file}, the category id of each YOLO class index)."""
    from detect.data.loader import resolve_spec
    from tests.support.coco_to_yolo import write_yolo_copy  # the one COCO -> YOLO folder writer of the clone

    spec = resolve_spec(spec_path)
    for split, images, labels in (("train", spec.train, spec.train_annotations),
                                  ("val", spec.val, spec.val_annotations)):
        if not (folder / split).exists():
            write_yolo_copy(Path(images), Path(labels), folder / split)
    val_coco = json.loads(Path(spec.val_annotations).read_text())
    categories = sorted(c["id"] for c in val_coco["categories"])
    names = {i: c["name"] for i, c in enumerate(sorted(val_coco["categories"], key=lambda c: c["id"]))}
    data = folder / "ultralytics.yaml"
    data.write_text(f"path: {folder}\ntrain: train/images\nval: val/images\nnames: {json.dumps(names)}\n")
    images = [{"id": im["id"], "file": str(folder / "val" / "images" / im["file_name"])} for im in val_coco["images"]]
    return data, val_coco, images, categories


def coco_map(ground_truth: dict, detections: list[dict]) -> float:
    """pycocotools' mAP@0.5:0.95 of `detections` on `ground_truth` (COCO dicts)."""
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = ground_truth
        gt.createIndex()
        if not detections:
            return 0.0
        evaluator = COCOeval(gt, gt.loadRes(detections), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[0])


def run_rival(args, work: Path) -> tuple[float, float]:
    """(wall seconds of YOLO11n's training, its best.pt's COCO mAP on val)."""
    data, val_coco, images, categories = yolo_layout(args.data, work / "yolo-data")
    out = work / "rival.json"
    payload = {"data": str(data), "epochs": args.rival_epochs, "imgsz": args.img_size, "project": str(work),
               "images": images, "categories": categories, "out": str(out)}
    env = {**os.environ, "YOLO_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", RIVAL_SCRIPT, json.dumps(payload)], cwd=work, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ultralytics training failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(out.read_text())
    own = [float(r["metrics/mAP50-95(B)"]) for r in csv.DictReader((work / "rival" / "results.csv").open(),
                                                                    skipinitialspace=True)]
    print(f"ultralytics' own validation: best mAP50-95 {max(own, default=float('nan')):.4f}, last {own[-1]:.4f}")
    return float(result["wall"]), coco_map(val_coco, result["detections"])


def run_ours(args, work: Path, target: float) -> tuple[float | None, int | None, float, list[dict]]:
    """Our main job until an epoch's mAP reaches `target`: (seconds to it, that epoch, wall, rows)."""
    run_dir = work / "ours" / "main"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}",
           str(ROOT / "train.py"), "--data", args.data, "--img-size", str(args.img_size), "--epochs",
           str(args.epochs), "--project", str(work / "ours"), "--name", "main", "--exist-ok", *args.train_args]
    log = work / "ours.log"
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    reached = epoch = None
    rows: list[dict] = []
    while proc.poll() is None:
        time.sleep(1.0)
        results = run_dir / "results.csv"
        if not results.exists():
            continue
        rows = list(csv.DictReader(results.open()))
        hit = next((r for r in rows if r.get("map") and float(r["map"]) >= target), None)
        if hit is not None and reached is None:
            reached, epoch = time.perf_counter() - start, int(hit["epoch"])
            if not args.run_out:
                os.killpg(proc.pid, 15)  # SIGTERM: the run saves last.pt and exits
                proc.wait()
                break
    wall = time.perf_counter() - start
    if proc.returncode not in (0, None, -15, 143) and reached is None:
        raise RuntimeError(f"train.py failed (exit {proc.returncode}):\n{log.read_text()[-3000:]}")
    if run_dir.joinpath("results.csv").exists():
        rows = list(csv.DictReader((run_dir / "results.csv").open()))
    return reached, epoch, wall, rows


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import ultralytics
    except ImportError:
        print("ultralytics is not installed: pip install ultralytics", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rival_wall, rival_map = run_rival(args, work)
        print(f"ultralytics {ultralytics.__version__} YOLO11n from scratch, {args.rival_epochs} epochs at "
              f"{args.img_size}: {rival_wall:.0f} s, best.pt mAP@0.5:0.95 {rival_map:.4f} (pycocotools, val)")
        reached, epoch, wall, rows = run_ours(args, work, rival_map)
        best = max((float(r["map"]) for r in rows if r.get("map")), default=float("nan"))
        if reached is None:
            print(f"ours ({args.epochs}-epoch schedule, {args.nproc} processes): did not reach {rival_map:.4f} "
                  f"(best {best:.4f}) in {wall:.0f} s")
            return 0
        print(f"ours ({args.epochs}-epoch schedule, {args.nproc} processes): mAP@0.5:0.95 >= {rival_map:.4f} at "
              f"epoch {epoch}, {reached:.0f} s from launch = {reached / rival_wall:.2f}x ultralytics' time "
              f"(best so far {best:.4f}; {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
