"""`python -m benchmarks track`: our ByteTrack beside ultralytics' on the same detections, per sequence.

    python -m benchmarks track                          # simulated detections on every sequence
    python -m benchmarks track --cfg cfg/yolov3-tiny.cfg --weights ../shared/weights/yolov3-tiny.weights

Sequences (benchmarks.track_data): a camera window panning and zooming across the coco-tiny val photos with
the most objects and the kangaroo photo with the most kangaroos (real objects moving with their annotation as
id, cut by the frame edge, leaving and coming back), and shapes crossing and hiding one another. Detections:
simulated from the ground truth (seeded jitter, misses and faint scores growing with occlusion, false
positives), or with --weights the model's on the photo sequences (class-agnostic, down to the tracker's low
threshold). Prints IDF1, HOTA and MOTA per sequence for each tracker (TrackEval, detect.tracking.metrics), and
the milliseconds of tracking per frame with --boxes objects in view.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks import ROOT
from benchmarks.track_data import moving_shapes, pan_over, simulate_detections
from benchmarks.track_rivals import OurTracker, UltralyticsTracker, ultralytics_available
from detect.tracking.config import LOW_SCORE
from detect.tracking.metrics import evaluate_sequence, scores
from detect.tracking.mot import MotRows


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks track", description=__doc__.split("\n")[0])
    p.add_argument("--coco", default=str(ROOT / "data" / "coco-tiny.yaml"), help="data spec of the COCO photos")
    p.add_argument("--kangaroo", default=str(ROOT / "data" / "kangaroo.yaml"), help="data spec of the kangaroos")
    p.add_argument("--photos", type=int, default=2, help="coco-tiny photos panned over (those with most objects)")
    p.add_argument("--photo", nargs="+", default=[], metavar="FILE",
                   help="coco-tiny val photos (file names) panned over as well, e.g. 000000454661.jpg (a street)")
    p.add_argument("--frames", type=int, default=120, help="frames per sequence")
    p.add_argument("--seed", type=int, default=0, help="seed of the shapes and the first simulated detections")
    p.add_argument("--seeds", type=int, default=10,
                   help="draws of simulated detections per sequence, the figures their mean (one ID switch moves "
                        "IDF1 by several points on a short sequence: one draw says little)")
    p.add_argument("--boxes", type=int, default=50, help="objects in view for the timing")
    p.add_argument("--timing-frames", type=int, default=300)
    p.add_argument("--cfg", help="with --weights: the model's detections on the photo sequences")
    p.add_argument("--weights", help="a model file (detect.predict's --weights); default: simulated detections")
    p.add_argument("--img-size", "--img", dest="img", type=int, default=None)
    return p.parse_args(argv)


def photo_sequences(spec_path: str, count: int, frames: int, prefix: str, named=()) -> list:
    """Pans over the `count` photos of the spec's val split with the most objects of at least 1% of the photo,
    and over those `named` (file names)."""
    from detect.data.formats.spec import load_data_spec
    from detect.data.loader import open_split
    from detect.data.records.images import read_image

    try:
        records = open_split(load_data_spec(spec_path), "val").records
    except (FileNotFoundError, ValueError) as e:
        print(f"skipped {prefix}: {e}")
        return []

    def big(r):
        area = np.prod(r.boxes[:, 2:] - r.boxes[:, :2], axis=1)
        return area >= 0.01 * r.width * r.height

    chosen = sorted(records, key=lambda r: (-int(big(r).sum()), Path(r.path).name))[:count]
    chosen += [r for r in records if Path(r.path).name in named and r not in chosen]
    out = []
    for k, r in enumerate(chosen):
        keep = big(r)
        out.append(pan_over(read_image(r.path), r.boxes[keep], r.classes[keep], f"{prefix}-{Path(r.path).stem}",
                            length=frames, phase=0.5 * k))
    return out


def model_detections(detector, seq) -> list[np.ndarray]:
    rows = []
    for found in detector(seq.frames):
        # class-agnostic: the photos' classes (a kangaroo) need not be the model's
        rows.append(np.concatenate([found.boxes, found.scores[:, None], np.zeros((len(found), 1))], axis=1))
    return rows


def track(tracker, detections: list[np.ndarray]) -> tuple[MotRows, list[float]]:
    """The tracker over a sequence's detections: its results and the seconds of each frame's step."""
    parts, seconds = [], []
    for frame, rows in enumerate(detections, 1):
        tick = time.perf_counter()
        boxes, ids, conf = tracker.step(rows)
        seconds.append(time.perf_counter() - tick)
        parts.append(MotRows(np.full(len(ids), frame), np.asarray(ids, np.int64), np.asarray(boxes, np.float64),
                             np.asarray(conf, np.float64)))
    return MotRows.stack(parts), seconds


def compare(seq, detections, rivals) -> dict:
    frames = list(range(1, seq.length + 1))
    return {name: scores(evaluate_sequence(seq.truth, track(make(), detections)[0], frames))
            for name, make in rivals.items()}


def mean_scores(seq, draws: list[list[np.ndarray]], rivals) -> dict[str, dict[str, float]]:
    """{tracker: {idf1, hota, mota, id_switches}} averaged over the draws of detections."""
    results = [compare(seq, detections, rivals) for detections in draws]
    return {name: {m: float(np.mean([getattr(r[name], m) for r in results]))
                   for m in ("idf1", "hota", "mota", "id_switches")} for name in rivals}


def timing(rivals, boxes: int, frames: int, seed: int) -> dict[str, tuple[float, float, float]]:
    """(median, mean, p90) ms per frame of each tracker, the trackers taking turns over 3 rounds."""
    scene = moving_shapes("timing", length=frames, objects=boxes, size=(1920, 1080), seed=seed, render=False)
    detections = simulate_detections(scene, seed=seed)
    per_frame = {name: [] for name in rivals}
    for _ in range(3):
        for name, make in rivals.items():
            per_frame[name] += track(make(), detections)[1]
    mean_boxes = np.mean([len(d) for d in detections])
    print(f"\ntiming: {frames} frames x 3 rounds, {boxes} objects ({mean_boxes:.1f} detections a frame on average)")
    return {name: (1e3 * float(np.median(s)), 1e3 * float(np.mean(s)), 1e3 * float(np.percentile(s, 90)))
            for name, s in per_frame.items()}


def main(argv=None) -> int:
    args = parse_args(argv)
    rivals = {"ours": OurTracker}
    version = ultralytics_available()
    if version:
        rivals[f"ultralytics {version}"] = UltralyticsTracker
    else:
        print("ultralytics is not installed (pip install ultralytics): only our tracker is measured")
    sequences = (photo_sequences(args.coco, args.photos, args.frames, "coco", args.photo)
                 + photo_sequences(args.kangaroo, 1, args.frames, "kangaroo")
                 + [moving_shapes("shapes-cross", args.frames, 8, seed=args.seed),
                    moving_shapes("shapes-crowd", args.frames, 20, seed=args.seed + 1)])
    names = list(rivals)
    print(f"per sequence: IDF1, HOTA, MOTA and ID switches of each tracker ({' | '.join(names)}); simulated "
          f"detections: the mean over {args.seeds} draws")
    print(f"{'sequence':28s} {'frames':>6s} {'ids':>4s}"
          + "".join(f"  {m:>13s}" for m in ("IDF1", "HOTA", "MOTA", "IDSW")))
    detector = None
    if args.weights:
        from detect.api import Detector

        detector = Detector.load(args.weights, cfg=args.cfg, img_size=args.img, conf=LOW_SCORE)
    for seq in sequences:
        real = detector is not None and not seq.name.startswith("shapes")
        draws = [model_detections(detector, seq)] if real else [
            simulate_detections(seq, seed=args.seed + k) for k in range(args.seeds)]
        result = mean_scores(seq, draws, rivals)
        cells = "".join("  " + " | ".join(f"{result[n][m]:{'5.1f' if m == 'id_switches' else '5.3f'}}" for n in names)
                        for m in ("idf1", "hota", "mota", "id_switches"))
        label = seq.name + (" (model)" if real else "")
        print(f"{label:28s} {seq.length:6d} {len(np.unique(seq.truth.ids)):4d}{cells}")
    for name, (median, mean, p90) in timing(rivals, args.boxes, args.timing_frames, args.seed).items():
        print(f"  {name:22s} {median:.3f} ms median, {mean:.3f} mean, {p90:.3f} p90 per frame")
    return 0
