"""Training-loader throughput and memory per worker: `python -m detect.bench data --data ... --img-size 416`.

Every configuration runs in a fresh process so its memory figures are its own: images/s over `--batches`
timed batches after one warm-up batch (worker start-up excluded), the peak RSS of the process that iterates
the loader, and the peak RSS of its largest loader worker (RUSAGE_CHILDREN after the workers exit; pages
shared with the parent count, as RSS does). With `--ultralytics-python` (a python with the ultralytics
package, e.g. a separate venv) the same is measured for ultralytics' own training loader on the same
images and the same validated boxes, converted to its YOLO layout in a temp dir. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AUGMENT = {"mosaic": 1.0, "degrees": 0.0, "translate": 0.1, "scale": 0.5, "shear": 0.0, "fliplr": 0.5,
           "hsv_h": 0.015, "hsv_s": 0.7, "hsv_v": 0.4}

ULTRALYTICS_SCRIPT = r'''
import json, resource, sys, time
args = json.loads(sys.argv[1])
from ultralytics.cfg import get_cfg
from ultralytics.data import build_dataloader, build_yolo_dataset
aug = args["augment"]
cfg = get_cfg(overrides=dict(imgsz=args["img"], mosaic=aug["mosaic"], degrees=aug["degrees"],
    translate=aug["translate"], scale=aug["scale"], shear=aug["shear"], perspective=0.0, flipud=0.0,
    fliplr=aug["fliplr"], hsv_h=aug["hsv_h"], hsv_s=aug["hsv_s"], hsv_v=aug["hsv_v"], mixup=0.0,
    copy_paste=0.0, cutmix=0.0, cache=False, rect=False, task="detect", fraction=1.0))
data = {"names": dict(enumerate(args["names"])), "nc": len(args["names"]), "channels": 3}
dataset = build_yolo_dataset(cfg, args["images"], args["batch"], data, mode="train", stride=32)
loader = build_dataloader(dataset, args["batch"], args["workers"], shuffle=True, rank=-1, drop_last=True,
                          device="cpu")
done, start = -1, None
while done < args["batches"]:
    for batch in loader:
        done += 1
        if done == 0:
            start = time.perf_counter()
        if done == args["batches"]:
            break
elapsed = time.perf_counter() - start
loader.close()
print("RESULT " + json.dumps({"images_per_s": args["batches"] * args["batch"] / elapsed,
      "workers_used": loader.num_workers,
      "main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
'''


def measure_ours(spec_path: str, img: int, batch: int, workers: int, batches: int, cache_dir: str | None,
                 cache: str | None = None, buffer_images: int | None = None) -> dict:
    import gc

    from detect.data.augmentation.augment_config import AugmentConfig
    from detect.data.loader import build_train_loader

    tick = time.perf_counter()
    loader = build_train_loader(spec_path, img, batch, AugmentConfig(**AUGMENT), workers, 32, 0, 1, seed=0,
                                cache_dir=cache_dir, cache=cache, buffer_images=buffer_images)
    setup_s = time.perf_counter() - tick
    cache_mb = loader.dataset.image_cache.nbytes / 2**20 if loader.dataset.image_cache is not None else 0.0
    done, start, epoch = -1, None, 0
    while done < batches:
        for _ in loader.epoch(epoch):
            done += 1
            if done == 0:
                start = time.perf_counter()  # after the first batch: worker start-up is not throughput
            if done == batches:
                break
        epoch += 1
    elapsed = time.perf_counter() - start
    loader.close()
    gc.collect()  # the workers exit with the stream; their peak shows in RUSAGE_CHILDREN
    return {"images_per_s": batches * batch / elapsed, "workers_used": workers, "setup_s": setup_s,
            "cache_mb": cache_mb,
            "main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def run_isolated(spec_path: str, img: int, batch: int, workers: int, batches: int, cache_dir,
                 cache: str | None = None, buffer_images: int | None = None) -> dict:
    """measure_ours in a fresh interpreter, so the memory figures are this configuration's alone."""
    payload = json.dumps([spec_path, img, batch, workers, batches, cache_dir, cache, buffer_images])
    code = ("import json, sys; from detect.bench.data import measure_ours; "
            "print('RESULT ' + json.dumps(measure_ours(*json.loads(sys.argv[1]))))")
    proc = subprocess.run([sys.executable, "-c", code, payload], capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"loader run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def export_yolo(spec_path: str, cache_dir: str | None, out: Path) -> tuple[Path, list[str]]:
    """The validated train split as a YOLO tree (symlinked images, our boxes) for ultralytics."""
    from detect.data.loader import open_split

    source = open_split(spec_path, "train", cache_dir)
    images, labels = out / "images" / "train", out / "labels" / "train"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)
    for r in source.records:
        name = Path(r.path).name
        os.symlink(os.path.abspath(r.path), images / name)
        rows = [f"{c} {(b[0] + b[2]) / 2 / r.width:.8f} {(b[1] + b[3]) / 2 / r.height:.8f} "
                f"{(b[2] - b[0]) / r.width:.8f} {(b[3] - b[1]) / r.height:.8f}"
                for b, c in zip(r.boxes.tolist(), r.classes.tolist())]
        (labels / Path(name).with_suffix(".txt")).write_text("\n".join(rows) + "\n")
    return images, source.names


def measure_ultralytics(python: str, images: Path, names: list[str], img: int, batch: int, workers: int,
                        batches: int) -> dict:
    payload = json.dumps({"images": str(images), "names": names, "img": img, "batch": batch,
                          "workers": workers, "batches": batches, "augment": AUGMENT})
    env = {**os.environ, "YOLO_OFFLINE": "1", "YOLO_VERBOSE": "False"}
    proc = subprocess.run([python, "-c", ULTRALYTICS_SCRIPT, payload], capture_output=True, text=True, env=env,
                          timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"ultralytics run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def format_row(name: str, workers: int, r: dict) -> str:
    worker_mb = f"{r['worker_mb']:8.0f}" if r["workers_used"] > 0 else "       -"
    per_worker = r["images_per_s"] / max(r["workers_used"], 1)
    return (f"{name:12s} {workers:7d} {r['workers_used']:5d} {r['images_per_s']:9.1f} {per_worker:11.1f} "
            f"{r['main_mb']:8.0f} {worker_mb}")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m detect.bench data", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="data/coco-tiny.yaml", help="dataset spec (train split is used)")
    p.add_argument("--img-size", "--img", dest="img", type=int, default=416, help="training image size")
    p.add_argument("--batch-size", "--batch", dest="batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2, help="measure 0, 1, ..., N loader workers")
    p.add_argument("--batches", type=int, default=30, help="timed batches per configuration")
    p.add_argument("--cache-dir", default=None, help="label cache / synthetic data folder (default: $DETECT_CACHE, else ~/.cache/detect)")
    p.add_argument("--cache", default="none", choices=("none", "ram", "disk", "compare"),
                   help="image cache of the loader; compare: rows without (with the per-worker buffer of recent "
                        "images, and without it as on a large split where it rarely hits) and with --cache ram")
    p.add_argument("--ultralytics-python", default=None,
                   help="python of an environment with ultralytics installed, to time its loader too")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    print(f"training loader, {args.data} train split, {args.img}x{args.img}, batch {args.batch}, "
          f"mosaic + affine (translate {AUGMENT['translate']}, scale {AUGMENT['scale']}) + HSV + flip, "
          f"{args.batches} timed batches, {os.cpu_count()} CPU core(s)")
    print(f"{'loader':12s} {'workers':>7s} {'used':>5s} {'images/s':>9s} {'per worker':>11s} "
          f"{'main MB':>8s} {'worker MB':>8s}")
    # (row name, cache, per-worker buffer of recent images: None = the loader's default)
    rows = {"none": [("detect", None, None)], "ram": [("detect ram", "ram", None)],
            "disk": [("detect disk", "disk", None)],
            "compare": [("detect", None, None), ("no buffer", None, 0), ("detect ram", "ram", None)]}[args.cache]
    for name, cache, buffer in rows:
        for w in range(args.workers + 1):
            r = run_isolated(args.data, args.img, args.batch, w, args.batches, args.cache_dir, cache, buffer)
            print(format_row(name, w, r) + (f"   cache {r['cache_mb']:.0f} MB, set-up {r['setup_s']:.1f} s"
                                            if cache else ""), flush=True)
    if args.ultralytics_python:
        with tempfile.TemporaryDirectory() as tmp:
            images, names = export_yolo(args.data, args.cache_dir, Path(tmp))
            for w in range(args.workers + 1):
                r = measure_ultralytics(args.ultralytics_python, images, names, args.img, args.batch, w,
                                        args.batches)
                print(format_row("ultralytics", w, r), flush=True)
    print("per worker = images/s divided by the workers used (the main process when 0); MB = peak RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
