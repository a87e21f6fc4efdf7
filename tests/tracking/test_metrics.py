"""detect.tracking.metrics (TrackEval underneath) against figures worked out by hand."""

import math

import numpy as np
import pytest

from detect.tracking.metrics import combine, evaluate_sequence, scores
from detect.tracking.mot import parse_mot

# 3 frames, 2 objects side by side; the tracker follows both but gives the second a new id in frame 3
TRUTH = "1,1,0,0,10,10,1\n1,2,50,0,10,10,1\n2,1,2,0,10,10,1\n2,2,52,0,10,10,1\n3,1,4,0,10,10,1\n3,2,54,0,10,10,1\n"
SWITCH = "1,1,0,0,10,10,1\n1,2,50,0,10,10,1\n2,1,2,0,10,10,1\n2,2,52,0,10,10,1\n3,1,4,0,10,10,1\n3,3,54,0,10,10,1\n"


def test_one_id_switch_by_hand():
    s = scores(evaluate_sequence(parse_mot(TRUTH), parse_mot(SWITCH)))
    # MOTA = 1 - (FN + FP + IDSW) / GT = 1 - (0 + 0 + 1) / 6
    assert s.mota == pytest.approx(5 / 6) and s.id_switches == 1
    # IDF1: ids matched once over the sequence: 1<->1 (3 boxes), 2<->2 (2 boxes); track 3's box is an IDFP and
    # object 2's third box an IDFN: 2 x 5 / (2 x 5 + 1 + 1)
    assert s.idf1 == pytest.approx(10 / 12)
    # HOTA: boxes coincide, so DetA = 1 at every IoU threshold; AssA = mean over the 6 matches of
    # TPA / (TPA + FNA + FPA): object 1 with track 1: 3/3 (3 matches), object 2 with track 2: 2/3 (2 matches),
    # object 2 with track 3: 1/3 (1 match) -> (3 + 4/3 + 1/3) / 6 = 7/9
    assert s.deta == pytest.approx(1.0) and s.assa == pytest.approx(7 / 9)
    assert s.hota == pytest.approx(math.sqrt(7 / 9))
    assert (s.gt_boxes, s.gt_ids, s.tracked_boxes, s.tracked_ids) == (6, 2, 6, 3)


def test_misses_false_positives_and_ignore_regions():
    truth = parse_mot(TRUTH + "1,9,80,80,10,10,0\n2,9,80,80,10,10,0\n")  # object 9: an ignore region
    tracks = parse_mot("1,1,0,0,10,10,1\n2,1,2,0,10,10,1\n3,1,4,0,10,10,1\n"  # object 1 followed
                       "2,5,30,30,10,10,1\n"  # a box where nothing is: a false positive
                       "1,7,80,80,10,10,1\n2,7,80,80,10,10,1\n")  # on the ignore region: removed, no FP
    s = scores(evaluate_sequence(truth, tracks))
    assert (s.false_negatives, s.false_positives, s.id_switches) == (3, 1, 0)
    assert s.mota == pytest.approx(1 - 4 / 6)
    # IDTP 3 (object 1), IDFN 3 (object 2), IDFP 1 (track 5): 6 / (6 + 3 + 1)
    assert s.idf1 == pytest.approx(0.6)


def test_sequences_combine_as_counts():
    one = evaluate_sequence(parse_mot(TRUTH), parse_mot(SWITCH))
    perfect = evaluate_sequence(parse_mot(TRUTH), parse_mot(TRUTH))
    both = scores(combine([one, perfect]))
    assert both.mota == pytest.approx(1 - 1 / 12) and both.idf1 == pytest.approx(22 / 24)
    assert scores(perfect).hota == pytest.approx(1.0)
    empty = scores(evaluate_sequence(parse_mot(TRUTH), parse_mot("")))
    assert empty.mota == 0 and empty.false_negatives == 6 and np.isclose(empty.hota, 0)


def _motchallenge_folder(root, benchmark: str, seq: str, length: int = 20, seed: int = 0):
    """A MOTChallenge train split as TrackEval reads it (gt/<benchmark>-train/<seq>, a seqmap, a tracker's
    results): pedestrians, distractors and unscored vehicles, followed by a noisy tracker with id switches and
    false positives. Returns (gt.txt, results file)."""
    rng = np.random.default_rng(seed)
    seq_dir = root / "gt" / f"{benchmark}-train" / seq
    (seq_dir / "gt").mkdir(parents=True)
    (seq_dir / "seqinfo.ini").write_text(f"[Sequence]\nname={seq}\nimDir=img1\nframeRate=30\nseqLength={length}\n"
                                         f"imWidth=640\nimHeight=480\nimExt=.jpg\n")
    (root / "gt" / "seqmaps").mkdir()
    (root / "gt" / "seqmaps" / f"{benchmark}-train.txt").write_text(f"name\n{seq}\n")
    # (class, conf): pedestrians; a static person, a distractor, a reflection, a person on a vehicle, a
    # non-motorised vehicle (a distractor in MOT20 only), a car (never one)
    objects = [(1, 1)] * 4 + [(7, 0), (8, 0), (12, 0), (2, 0), (6, 0), (3, 0)]
    starts = rng.uniform([0, 0], [500, 380], (len(objects), 2))
    gt, tracked = [], []
    for f in range(1, length + 1):
        for i, ((k, z), (x, y)) in enumerate(zip(objects, starts), 1):
            gt.append(f"{f},{i},{x + 3 * f:.1f},{y:.1f},40,80,{z},{k},1")
            if rng.random() < 0.85:
                track = i if rng.random() < 0.9 else i + 100
                tracked.append(f"{f},{track},{x + 3 * f + rng.normal(0, 4):.1f},{y + rng.normal(0, 4):.1f},40,80,0.9,"
                               f"-1,-1,-1")
        if rng.random() < 0.3:
            tracked.append(f"{f},{500 + f},{rng.uniform(0, 600):.1f},{rng.uniform(0, 400):.1f},30,60,0.5,-1,-1,-1")
    (seq_dir / "gt" / "gt.txt").write_text("\n".join(gt) + "\n")
    results = root / "trackers" / f"{benchmark}-train" / "mine" / "data" / f"{seq}.txt"
    results.parent.mkdir(parents=True)
    results.write_text("\n".join(tracked) + "\n")
    return seq_dir / "gt" / "gt.txt", results


@pytest.mark.parametrize("benchmark, seq", [("MOT17", "MOT17-02-FRCNN"), ("MOT20", "MOT20-01")])
def test_motchallenge_sequences_score_as_trackeval_scores_its_own_benchmark(tmp_path, benchmark, seq):
    trackeval = pytest.importorskip("trackeval")
    from detect.tracking.metrics import CLASS_AGNOSTIC, protocol_for
    from detect.tracking.mot import read_mot

    gt, results = _motchallenge_folder(tmp_path, benchmark, seq)
    quiet = {"PRINT_CONFIG": False}
    evaluator = trackeval.Evaluator({"USE_PARALLEL": False, "PRINT_RESULTS": False, "TIME_PROGRESS": False,
                                     "OUTPUT_SUMMARY": False, "OUTPUT_DETAILED": False, "PLOT_CURVES": False,
                                     "DISPLAY_LESS_PROGRESS": True, **quiet})
    dataset = trackeval.datasets.MotChallenge2DBox({"GT_FOLDER": str(tmp_path / "gt"), "BENCHMARK": benchmark,
                                                    "TRACKERS_FOLDER": str(tmp_path / "trackers"),
                                                    "SPLIT_TO_EVAL": "train", "TRACKERS_TO_EVAL": ["mine"], **quiet})
    metrics = [trackeval.metrics.HOTA(), trackeval.metrics.CLEAR(quiet), trackeval.metrics.Identity(quiet)]
    reference = evaluator.evaluate([dataset], metrics)[0]["MotChallenge2DBox"]["mine"][seq]["pedestrian"]
    ours = scores(evaluate_sequence(read_mot(gt), read_mot(results), list(range(1, 21)), protocol_for(seq)))
    assert ours.hota == pytest.approx(float(np.mean(reference["HOTA"]["HOTA"])), abs=1e-9)
    assert ours.mota == pytest.approx(reference["CLEAR"]["MOTA"], abs=1e-9)
    assert ours.idf1 == pytest.approx(reference["Identity"]["IDF1"], abs=1e-9)
    assert (ours.false_positives, ours.false_negatives, ours.id_switches) == (
        reference["CLEAR"]["CLR_FP"], reference["CLEAR"]["CLR_FN"], reference["CLEAR"]["IDSW"])
    # a box on the car is a false positive there; the class-agnostic rules (conf 0 ignored) would forgive it
    agnostic = scores(evaluate_sequence(read_mot(gt), read_mot(results), list(range(1, 21)), CLASS_AGNOSTIC))
    assert agnostic.false_positives < ours.false_positives
    assert protocol_for("my-walk") is CLASS_AGNOSTIC and protocol_for("MOT16-04").distractors == (2, 7, 8, 12)
