"""`detect.val --track`: a model and a tracker over MOTChallenge sequences, scored against their ground truth.

Each sequence's frames run through the Predictor in batches, in order, and its own tracker; the tracked boxes
become MOT rows (frame numbers from the image names), scored by detect.tracking.metrics per sequence and
combined. The detector's thresholds are tracking ones (detect.tracking.settings).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect.inference.options import InferenceOptions
from detect.inference.predictor import Predictor
from detect.runtime.files import atomic_write_text

from .config import TrackerConfig
from .frame_source import detect_batch, in_batches, read_frames, sequence_items, track_frame
from .metrics import TrackingScores, combine, evaluate_sequence, protocol_for, scores
from .mot import MotRows, Sequence, mot_lines, read_mot
from .sources import SourceTracks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SequenceResult:
    name: str
    frames: int
    tracks: MotRows
    scores: TrackingScores
    raw: dict  # TrackEval's results, for combining


def track_sequence(predictor: Predictor, seq: Sequence, config: TrackerConfig,
                   only_class: int | None = None) -> MotRows:
    """The tracked boxes of every frame of `seq` as MOT rows (the frames in batches of the predictor's size),
    of the detections of `only_class` when given. The frames come through frame_source.read_frames: a frame of
    seqinfo.ini's seqLength without an image, or one that cannot be read (a warning), is a gap the tracks move
    and age through, its ground truth missed."""
    tracks = SourceTracks(config, seq.fps)
    file_numbers = None if seq.length else [number for number, _ in seq.frames]  # sequence_items' places
    parts = []
    for batch in in_batches(read_frames(sequence_items(seq)), predictor.settings.batch_size):
        for frame, det in zip(batch, detect_batch(predictor, batch)):
            rows = track_frame(tracks, frame, det if det is None or only_class is None
                               else det[det[:, 5] == only_class])
            if rows is not None:
                number = frame.number if file_numbers is None else file_numbers[frame.number - 1]
                parts.append(MotRows(np.full(len(rows), number), rows[:, 6].astype(np.int64), rows[:, :4],
                                     rows[:, 4]))
    return MotRows.stack(parts)


def pedestrian_class(names: list[str] | None) -> int | None:
    """The model's class MOTChallenge scores (a one-class model's class, else the one named person or
    pedestrian), or None."""
    if names is not None and len(names) == 1:
        return 0
    found = [i for i, name in enumerate(names or []) if name.strip().lower() in ("person", "pedestrian")]
    return found[0] if found else None


def evaluate_sequences(predictor: Predictor, sequences: list[Sequence], config: TrackerConfig,
                       progress=print, names: list[str] | None = None) -> tuple[list[SequenceResult], TrackingScores]:
    """Each sequence tracked and scored under its ground truth's rules (detect.tracking.metrics.protocol_for;
    FileNotFoundError for one without gt/gt.txt, ValueError for a MOTChallenge benchmark sequence and a model
    of `names` without a person class, both before any work), and the combined scores."""
    missing = [str(seq.ground_truth) for seq in sequences if not seq.ground_truth.is_file()]
    if missing:
        raise FileNotFoundError(f"no ground truth: {', '.join(missing[:3])} (a MOTChallenge sequence has "
                                f"gt/gt.txt: frame,id,left,top,width,height,conf,class,visibility)")
    protocols = {seq.name: protocol_for(seq.name) for seq in sequences}
    person = pedestrian_class(names)
    benchmark = [name for name, protocol in protocols.items() if protocol.scored_class is not None]
    if benchmark and person is None:
        raise ValueError(f"{benchmark[0]} is a MOTChallenge sequence, scored on pedestrians only, and the model has "
                         f"no class named person or pedestrian (its classes: {', '.join((names or ['?'])[:8])}"
                         f"{', ...' if names and len(names) > 8 else ''}): track with a model that detects people")
    for name in sorted({protocols[seq.name].name for seq in sequences}):
        log.info("scoring %s: %s", ", ".join(seq.name for seq in sequences if protocols[seq.name].name == name), name)
    results = []
    for seq in sequences:
        protocol = protocols[seq.name]
        if missing := seq.missing_frames():
            log.warning("%s: no image of %d of its %d frames (seqLength; first: %s); their ground truth counts as "
                        "missed", seq.path, len(missing), seq.length, ", ".join(map(str, missing[:5])))
        tracks = track_sequence(predictor, seq, config, person if protocol.scored_class is not None else None)
        raw = evaluate_sequence(read_mot(seq.ground_truth), tracks, seq.scored_frames(), protocol)
        results.append(SequenceResult(seq.name, len(seq.frames), tracks, scores(raw), raw))
        progress(f"{seq.name}: {len(seq.frames)} frames, {len(np.unique(tracks.ids))} tracks, "
                 f"{format_scores(results[-1].scores)}")
    return results, scores(combine([r.raw for r in results]))


def format_scores(s: TrackingScores) -> str:
    return (f"HOTA {s.hota:.3f} (DetA {s.deta:.3f}, AssA {s.assa:.3f}), MOTA {s.mota:.3f}, IDF1 {s.idf1:.3f}, "
            f"ID switches {s.id_switches}")


def format_sequence_table(results: list[SequenceResult], combined: TrackingScores) -> str:
    header = (f"{'sequence':24s} {'frames':>6s} {'HOTA':>6s} {'DetA':>6s} {'AssA':>6s} {'MOTA':>6s} {'IDF1':>6s} "
              f"{'IDSW':>5s} {'FP':>6s} {'FN':>6s} {'GT ids':>6s} {'ids':>5s}")

    def line(name, frames, s):
        return (f"{name:24s} {frames:6d} {s.hota:6.3f} {s.deta:6.3f} {s.assa:6.3f} {s.mota:6.3f} {s.idf1:6.3f} "
                f"{s.id_switches:5d} {s.false_positives:6d} {s.false_negatives:6d} {s.gt_ids:6d} {s.tracked_ids:5d}")

    rows = [line(r.name, r.frames, r.scores) for r in results]
    return "\n".join([header, *rows, line("COMBINED", sum(r.frames for r in results), combined)])


def write_results(run_dir: Path, results: list[SequenceResult], combined: TrackingScores, extra: dict) -> None:
    """tracking.json (per sequence and combined) and mot/<sequence>.txt, the tracked boxes as MOT results."""
    (run_dir / "mot").mkdir(parents=True, exist_ok=True)
    for r in results:
        t = r.tracks
        text = "".join(mot_lines(int(f), t.boxes[t.frames == f], t.ids[t.frames == f], t.conf[t.frames == f])
                       for f in np.unique(t.frames))
        atomic_write_text(run_dir / "mot" / f"{r.name}.txt", text)
    record = {"combined": combined.as_dict(), "sequences": {r.name: r.scores.as_dict() for r in results}, **extra}
    atomic_write_text(run_dir / "tracking.json", json.dumps(record, indent=1))


def run_track_eval(weights, cfg, data, tracker: str, options: InferenceOptions, device, world_size: int = 1,
                   project="runs/val", name: str = "exp") -> TrackingScores:
    """`detect.val --track`: `data` names the sequences (detect.tracking.mot.find_sequences); the detector runs as
    predict --track runs it (settings.tracking_detector: `options` with predict's defaults), its thresholds
    (conf, else the model's per-class ones, else 0.25) the tracker's high score. Prints the table and writes
    tracking.json and mot/ to the run folder `project`/`name`; returns the combined scores."""
    from detect.inference.loading import class_names
    from detect.inference.options import EVALUATION, load_handle
    from detect.runtime.runs import next_run_dir

    from .mot import find_sequences
    from .settings import tracking_detector

    if world_size > 1:
        raise ValueError("--track evaluates in one process (each sequence is one tracker's, in frame order); run "
                         "python -m detect.val --track without torchrun")
    sequences = find_sequences(data)  # before the model loads: a wrong folder fails at once
    handle = load_handle(weights, cfg, options, device)
    settings, config = tracking_detector(handle, options, tracker, device, batch_size=EVALUATION.batch_size)
    results, combined = evaluate_sequences(Predictor(handle.runner, settings, device), sequences, config,
                                           names=class_names(handle))
    print(format_sequence_table(results, combined))
    run_dir = next_run_dir(project, name)
    write_results(run_dir, results, combined, {"tracker": config.name, "weights": str(weights), "data": str(data)})
    print(f"results written to {run_dir}")
    return combined
