"""COCO evaluation at full size: `python -m benchmarks coco_eval` (figures, not pass/fail).

For each size (default: COCO val's, 5,000 images x 80 classes x 300 detections per image = 1.5M, and an
Objects365-like 50,000 images x 365 classes x 100 = 5M), generated from a seed (benchmarks.scale_data: COCO's
box statistics; detections are jittered ground truth plus random false positives), each in fresh processes:
- each COCOeval engine alone, in one process: loadRes + evaluate + accumulate + summarize of the rows already in
  memory (as [n, 7] float64 rows), wall seconds and peak RSS during them (the rows and the ground truth
  included, the interpreter's start and the generation not: the peak is reset after generating);
- the project's evaluator (detect.evaluation.evaluator.CocoEvaluator.compute: the rows exchanged by category,
  COCOeval shared by the ranks on the default engine, the slices gathered) at 1 and 2 ranks (gloo, spawned),
  each rank holding its own images' rows; seconds and peak RSS per rank, without and with each rank matching
  its images and rank 0 merging the matches (`keep_results`: the plots and per-class thresholds of detect.val
  and of every training evaluation), and the time to stream every rank's rows into one results.json.
The engines' figures are pycocotools' numbers (checked: the printed AP@[.50:.95] is the same on every line).
Engines that would take minutes and gigabytes at the larger size are skipped above `--slow-engines-up-to` images.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.scale_data import fake_detections, synthetic_ground_truth
from detect.evaluation.coco import detections_to_rows, sort_rows

ENGINES = ("pycocotools", "faster-coco-eval", "hotcoco", "ultrafast-pycocotools")
SLOW_ENGINES = ("pycocotools", "faster-coco-eval")


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks coco_eval", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="5000x80x300,50000x365x100",
                   help="comma list of IMAGESxCLASSESxDETECTIONS_PER_IMAGE")
    p.add_argument("--engines", default=",".join(ENGINES), help=f"comma list of {', '.join(ENGINES)}")
    p.add_argument("--ranks", default="1,2", help="process counts for the project's evaluator")
    p.add_argument("--slow-engines-up-to", type=int, default=5000,
                   help=f"images up to which {' and '.join(SLOW_ENGINES)} run alone (above: skipped)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        args.sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",") if size]
        assert all(len(size) == 3 for size in args.sizes)
    except (ValueError, AssertionError):
        p.error(f"--sizes: IMAGESxCLASSESxDETECTIONS, e.g. 5000x80x300; got {args.sizes!r}")
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        p.error(f"--engines: unknown {sorted(unknown)}; choose from {', '.join(ENGINES)}")
    args.ranks = [int(r) for r in args.ranks.split(",") if r]
    return args


def generate(images: int, classes: int, per_image: int, seed: int) -> tuple[dict, np.ndarray]:
    """(ground-truth dict, [n, 7] rows (image id, x, y, w, h, score, category id), sorted as the evaluator sorts)."""
    gt = synthetic_ground_truth(images, seed, classes)
    ids = [c["id"] for c in gt["categories"]]
    boxes: dict[int, list] = {}
    for a in gt["annotations"]:
        boxes.setdefault(a["image_id"], []).append((*a["bbox"], ids.index(a["category_id"])))
    rng = np.random.default_rng(seed + 1)
    rows = []
    for image in gt["images"]:
        own = np.asarray(boxes.get(image["id"], []), dtype=np.float64).reshape(-1, 5)
        xyxy = np.concatenate([own[:, :2], own[:, :2] + own[:, 2:4]], 1)
        det = fake_detections(xyxy, own[:, 4].astype(np.int64), per_image, classes, rng)
        rows.append(detections_to_rows(det, image["id"], ids))
    return gt, sort_rows(np.concatenate(rows))


def coco_of(gt: dict):
    """pycocotools' COCO of a ground-truth dict, as DatasetSource.coco_ground_truth() makes it."""
    import contextlib
    import io

    from pycocotools.coco import COCO

    coco = COCO()
    coco.dataset = gt
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := the RSS now


def peak_mb() -> float:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _engine_alone(engine: str, size: tuple, seed: int, out: str) -> None:
    """One engine's loadRes + evaluate + accumulate + summarize on the rows in memory, in this process."""
    import contextlib
    import io

    gt_dict, rows = generate(*size, seed)
    if engine == "pycocotools":
        from pycocotools.cocoeval import COCOeval
        gt = coco_of(gt_dict)
    elif engine == "faster-coco-eval":
        from faster_coco_eval import COCO
        from faster_coco_eval import COCOeval_faster as COCOeval
        gt = COCO(gt_dict)
    elif engine == "hotcoco":
        from hotcoco import COCO, COCOeval
        gt = COCO(gt_dict)
    else:
        from ultrafast_pycocotools import COCO, COCOeval
        gt = COCO(gt_dict, verbose=False)
    reset_peak()
    base = peak_mb()
    tick = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        evaluator = COCOeval(gt, gt.loadRes(rows), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    seconds = time.perf_counter() - tick
    Path(out).write_text(json.dumps({"s": seconds, "peak_mb": peak_mb(), "base_mb": base, "map": float(evaluator.stats[0]),
                                     "rows": len(rows)}))


class GeneratedSource:
    """What CocoEvaluator reads of a split: its category ids, names and pycocotools ground truth."""

    def __init__(self, gt: dict):
        self.category_ids = [c["id"] for c in gt["categories"]]
        self.names = [c["name"] for c in gt["categories"]]
        self._coco = coco_of(gt)

    def coco_ground_truth(self):
        return self._coco


def _evaluator_rank(rank: int, world: int, port: int, size: tuple, seed: int, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch

    from detect.evaluation.evaluator import CocoEvaluator, write_results_json
    from detect.runtime import dist

    torch.set_num_threads(1)
    ctx = dist.init_distributed("cpu", timeout_s=3600)
    try:
        gt, rows = generate(*size, seed)
        source = GeneratedSource(gt)
        image_ids = [image["id"] for image in gt["images"]][rank::world]
        mine = rows[np.isin(rows[:, 0], image_ids)]
        starts = np.searchsorted(mine[:, 0], image_ids)  # rows sorted by image
        ends = np.searchsorted(mine[:, 0], image_ids, side="right")
        del rows
        from detect.evaluation.cocoeval_engines import _ultrafast_ground_truth

        tick = time.perf_counter()
        _ultrafast_ground_truth(source.coco_ground_truth())  # once per split (training reuses it every epoch)
        figures = {"index_s": time.perf_counter() - tick}
        for keep in (False, True):
            evaluator = CocoEvaluator(source, keep_results=keep)
            for image_id, a, b in zip(image_ids, starts, ends):
                evaluator.add_rows(mine[a:b], image_id)
            dist.barrier()
            reset_peak()
            base = peak_mb()
            tick = time.perf_counter()
            result = evaluator.compute()
            figures[str(keep)] = {"s": time.perf_counter() - tick, "peak_mb": peak_mb(), "base_mb": base,
                                  "map": result.map,
                                  "cocoeval_s": result.rank_seconds[rank]["cocoeval"], "backend": result.backend}
            if keep:
                reset_peak()
                tick = time.perf_counter()
                write_results_json(Path(out).with_suffix(".results.json"), result.rows)
                figures.update(json_s=time.perf_counter() - tick, json_peak_mb=peak_mb())
            del evaluator, result
        every = dist.all_gather_object(figures)
    finally:
        dist.destroy(ctx)
    if rank == 0:
        Path(out).write_text(json.dumps(every))


def _run_child(target, args) -> None:
    child = mp.get_context("spawn").Process(target=target, args=args)
    child.start()
    child.join()
    if child.exitcode:
        raise RuntimeError(f"{target.__name__}{args[:2]} exited with {child.exitcode}")


def main(argv=None) -> int:
    import torch.multiprocessing as tmp_mp

    from detect.bench.val import _free_port as free_port

    args = parse_args(argv)
    print(f"COCO evaluation, rows in memory; CPU: {_cpu_model()}, {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            images, classes, per_image = size
            print(f"\n{images:,} images x {classes} classes x {per_image} detections per image "
                  f"({images * per_image:,} detections)", flush=True)
            print(f"| {'what':<46} | {'s':>6} | {'peak RSS MB':>13} | {'before MB':>11} | {'AP':>7} |")
            print(f"|{'-' * 48}|{'-' * 8}|{'-' * 15}|{'-' * 13}|{'-' * 9}|")
            for engine in args.engines:
                if engine in SLOW_ENGINES and images > args.slow_engines_up_to:
                    print(f"| {engine + ' alone':<46} | skipped above {args.slow_engines_up_to:,} images "
                          f"(--slow-engines-up-to) |")
                    continue
                module = {"faster-coco-eval": "faster_coco_eval", "ultrafast-pycocotools": "ultrafast_pycocotools"}
                if importlib.util.find_spec(module.get(engine, engine)) is None:
                    print(f"| {engine + ' alone':<46} | not installed (pip install {engine}) |")
                    continue
                out = os.path.join(tmp, f"{engine}-{images}.json")
                try:
                    _run_child(_engine_alone, (engine, size, args.seed, out))
                except RuntimeError as e:
                    print(f"| {engine + ' alone':<46} | failed: {e} |")
                    continue
                f = json.loads(Path(out).read_text())
                print(f"| {engine + ' alone, one process':<46} | {f['s']:6.2f} | {f['peak_mb']:13.0f} | "
                      f"{f['base_mb']:11.0f} | {f['map']:.5f} |", flush=True)
            for world in args.ranks:
                out = os.path.join(tmp, f"evaluator-{images}-{world}.json")
                tmp_mp.start_processes(_evaluator_rank, args=(world, free_port(), size, args.seed, out), nprocs=world,
                                       start_method="spawn")
                every = json.loads(Path(out).read_text())
                for keep, label in (("False", "compute()"), ("True", "compute() + matches")):
                    ranks = [f[keep] for f in every]
                    what = f"evaluator, {world} rank{'s' if world > 1 else ''}: {label}"
                    peaks = " / ".join(f"{r['peak_mb']:.0f}" for r in ranks)
                    bases = " / ".join(f"{r['base_mb']:.0f}" for r in ranks)
                    print(f"| {what:<46} | {max(r['s'] for r in ranks):6.2f} | {peaks:>13} | {bases:>11} | "
                          f"{ranks[0]['map']:.5f} |", flush=True)
                print(f"(evaluator on {every[0]['False']['backend']}; its index of the ground truth, built once per "
                      f"split: {every[0]['index_s']:.2f} s; results.json of every rank's rows streamed by rank 0: "
                      f"{every[0]['json_s']:.1f} s, peak RSS " + " / ".join(f"{f['json_peak_mb']:.0f}" for f in every)
                      + " MB)")
    return 0


def _cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
