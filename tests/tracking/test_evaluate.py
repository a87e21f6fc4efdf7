"""detect.tracking.evaluate and `detect.val --track`: a detector's boxes through the tracker over MOT sequences,
scored; by hand on a stand-in detector, and end to end with yolov3-tiny on a pan along a coco-tiny street."""

import json
import math

import cv2
import numpy as np
import pytest

from benchmarks.track_data import write_sequence
from detect.tracking.config import TrackerConfig
from detect.tracking.evaluate import evaluate_sequences, format_sequence_table, track_sequence, write_results
from detect.tracking.mot import find_sequences, parse_mot
from detect.val import main as val_main
from tests.support.log_lines import log_lines
from tests.support.tracking import RowsPredictor, panned_street


def _write_still_sequence(root):
    """5 frames: object 1 throughout, object 2 from frame 3, object 3 an ignore region (gt conf 0)."""
    seq = root / "still"
    (seq / "img1").mkdir(parents=True)
    (seq / "gt").mkdir()
    for n in range(1, 6):
        cv2.imwrite(str(seq / "img1" / f"{n:06d}.jpg"), np.full((48, 64, 3), 114, np.uint8))
    gt = [f"{n},1,4,4,20,20,1,1,1" for n in range(1, 6)] + [f"{n},2,36,20,20,20,1,1,1" for n in range(3, 6)]
    gt += [f"{n},3,30,0,10,10,0,1,0.2" for n in range(1, 6)]
    (seq / "gt" / "gt.txt").write_text("\n".join(gt) + "\n")
    (seq / "seqinfo.ini").write_text("[Sequence]\nname=still\nimDir=img1\nframeRate=30\nimExt=.jpg\n")
    frames = [[[4, 4, 24, 24, 0.9, 0], [30, 0, 40, 10, 0.8, 0]] + ([[36, 20, 56, 40, 0.7, 0]] if n >= 3 else [])
              for n in range(1, 6)]
    return seq, frames


def test_scores_of_a_stand_in_detector_by_hand(tmp_path):
    seq, frames = _write_still_sequence(tmp_path / "MOT")
    predictor = RowsPredictor(frames, batch_size=4)
    results, combined = evaluate_sequences(predictor, find_sequences(tmp_path / "MOT"), TrackerConfig(),
                                           progress=lambda line: None)
    assert predictor.calls == [4, 1]  # the frames in batches, in order
    s = results[0].scores
    # 8 scored boxes; object 2's first sighting (frame 3) only starts its track: 1 miss; the box on the ignore
    # region is removed, not a false positive
    assert (s.false_negatives, s.false_positives, s.id_switches) == (1, 0, 0)
    assert s.mota == pytest.approx(7 / 8) and s.idf1 == pytest.approx(14 / 15)
    # still boxes: the tracked boxes are exact, DetA = 7/8; AssA: object 1's 5 matches at 1, object 2's 2 at 2/3
    assert s.hota == pytest.approx(math.sqrt(7 / 8 * (5 + 2 * 2 / 3) / 7))
    assert combined == s
    write_results(tmp_path / "run", results, combined, {"tracker": "bytetrack"})
    lines = (tmp_path / "run" / "mot" / "still.txt").read_text().splitlines()
    # objects 1 and 3 (the ignore region is in the results: it is removed when scoring) from frame 1, 2 from 4
    assert len(lines) == 5 + 5 + 2 and lines[0] == "1,1,4.00,4.00,20.00,20.00,0.9000,-1,-1,-1"
    assert lines[8] == "4,3,36.00,20.00,20.00,20.00,0.7000,-1,-1,-1"
    record = json.loads((tmp_path / "run" / "tracking.json").read_text())
    assert record["combined"]["mota"] == pytest.approx(7 / 8) and record["tracker"] == "bytetrack"
    assert "COMBINED" in format_sequence_table(results, combined)


def test_an_unreadable_frame_and_one_past_the_images_are_missed_frames_not_a_crash(tmp_path):
    seq, frames = _write_still_sequence(tmp_path / "MOT")
    (seq / "img1" / "000002.jpg").write_bytes(b"not a jpeg")
    with open(seq / "gt" / "gt.txt", "a") as f:
        f.write("6,1,4,4,20,20,1,1,1\n")  # frame 6 has ground truth but no image
    (seq / "seqinfo.ini").write_text("[Sequence]\nname=still\nimDir=img1\nframeRate=30\nseqLength=6\nimExt=.jpg\n")
    predictor = RowsPredictor([frames[0], *frames[2:]], batch_size=4)
    with log_lines("detect.tracking") as lines:
        results, _ = evaluate_sequences(predictor, find_sequences(tmp_path / "MOT"), TrackerConfig(),
                                        progress=lambda line: None)
    assert predictor.calls == [3, 1]  # frames 1, 3, 4, then 5
    assert lines[0] == "scoring still: class-agnostic, conf-0 boxes ignored"
    assert "no image of 1 of its 6 frames" in lines[1]
    assert lines[2] == (f"frame 2 of still, {seq / 'img1' / '000002.jpg'}: not an image OpenCV can decode "
                        f"(10 bytes); a gap the tracks age through")
    s = results[0].scores
    # object 1 missed in frames 2 and 6, object 2 at its first sighting (3); object 1 keeps its id over the gap
    assert (s.gt_boxes, s.false_negatives, s.false_positives, s.id_switches) == (9, 3, 0, 0)
    assert s.mota == pytest.approx(6 / 9)


def test_an_unreadable_frame_is_a_gap_the_tracks_age_through(tmp_path):
    """Object 2 is first seen in frame 3 (a track not yet confirmed), frame 4 cannot be read, frame 5 sees it
    again: its track goes on through the gap and is confirmed in frame 5 (an empty frame 4 would have ended it,
    and frame 5 would have started it over, unconfirmed)."""
    seq, frames = _write_still_sequence(tmp_path / "MOT")
    (seq / "img1" / "000004.jpg").write_bytes(b"not a jpeg")
    predictor = RowsPredictor([frames[0], frames[1], frames[2], frames[4]])
    tracks = track_sequence(predictor, find_sequences(tmp_path / "MOT")[0], TrackerConfig())
    assert sorted(set(tracks.frames[tracks.ids == 3].tolist())) == [5]  # object 2, tracked from frame 5
    assert 4 not in tracks.frames.tolist()


def test_frames_numbered_like_timestamps_follow_on_without_a_seqlength(tmp_path):
    seq, frames = _write_still_sequence(tmp_path / "MOT")
    for n in range(5, 0, -1):  # 000001.jpg -> 001000.jpg ... : no seqLength, so no 999 frames between them
        (seq / "img1" / f"{n:06d}.jpg").rename(seq / "img1" / f"{1000 * n:06d}.jpg")
    tracks = track_sequence(RowsPredictor(frames), find_sequences(tmp_path / "MOT")[0], TrackerConfig())
    assert sorted(set(tracks.frames.tolist())) == [1000, 2000, 3000, 4000, 5000]
    assert tracks.ids[tracks.frames == 5000].tolist() == [1, 2, 3]  # the tracks held over the steps of 1000


def test_a_motchallenge_sequence_tracks_the_person_class_and_needs_one(tmp_path):
    seq, frames = _write_still_sequence(tmp_path / "MOT")
    (seq / "seqinfo.ini").write_text("[Sequence]\nname=MOT17-09-SDP\nimDir=img1\nframeRate=30\nimExt=.jpg\n")
    # the detector sees the pedestrians as class 1 and a car (class 0) on object 1's place
    rows = [[[*r[:5], 1] for r in f] + [[4, 4, 24, 24, 0.9, 0]] for f in frames]
    predictor = RowsPredictor(rows)
    with log_lines("detect.tracking.evaluate") as lines:
        results, _ = evaluate_sequences(predictor, find_sequences(tmp_path / "MOT"), TrackerConfig(),
                                        progress=lambda line: None, names=["car", "person"])
    assert lines == ["scoring MOT17-09-SDP: MOTChallenge MOT16/17: pedestrians, distractors removed"]
    s = results[0].scores
    # the car's boxes were never tracked (no false positives, no second id on object 1); object 3 is conf 0 and
    # class 1, a pedestrian not scored and no distractor: its tracked box is a false positive, as in TrackEval
    assert (s.false_negatives, s.false_positives, s.tracked_ids) == (1, 5, 3)
    predictor = RowsPredictor(rows)
    with pytest.raises(ValueError, match="MOT17-09-SDP is a MOTChallenge sequence, scored on pedestrians only"):
        evaluate_sequences(predictor, find_sequences(tmp_path / "MOT"), TrackerConfig(), names=["car", "dog"])
    assert predictor.calls == []


def test_a_sequence_without_ground_truth_is_refused_before_any_work(tmp_path):
    seq, frames = _write_still_sequence(tmp_path / "MOT")
    (seq / "gt" / "gt.txt").unlink()
    predictor = RowsPredictor(frames)
    with pytest.raises(FileNotFoundError, match="no ground truth"):
        evaluate_sequences(predictor, find_sequences(tmp_path / "MOT"), TrackerConfig())
    assert predictor.calls == []


@pytest.mark.slow
def test_val_track_with_yolov3_tiny_on_a_pan_along_a_street(shared, tmp_path, capsys):
    seq = panned_street(shared)
    write_sequence(seq, tmp_path / "MOT")
    args = ["--track", "--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared("weights", "yolov3-tiny.weights")), "--data", str(tmp_path / "MOT"), "--img", "320",
            "--device", "cpu", "--project", str(tmp_path / "runs"), "--name", "t"]
    assert val_main(args) == 0
    out = capsys.readouterr().out
    assert "COMBINED" in out and "street" in out
    record = json.loads((tmp_path / "runs" / "t" / "tracking.json").read_text())
    combined = record["combined"]
    assert combined["gt_boxes"] == int((seq.truth.conf == 1).sum())
    # yolov3-tiny at 320 finds most vehicles; measured: HOTA 0.65, MOTA 0.72, IDF1 0.82, 7 ids for 6 objects
    assert combined["hota"] > 0.5 and combined["mota"] > 0.5 and combined["idf1"] > 0.6
    assert 4 <= combined["tracked_ids"] <= 10 and combined["id_switches"] <= 3
    tracked = parse_mot((tmp_path / "runs" / "t" / "mot" / "street.txt").read_text())
    assert set(tracked.frames.tolist()) <= set(range(1, 13)) and tracked.ids.min() == 1
    assert val_main(["--track", "--weights", "x.pt", "--data", str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_val_track_refuses_the_map_evaluations_flags(capsys):
    with pytest.raises(SystemExit) as stop:
        val_main(["--track", "--weights", "x.pt", "--data", "MOT", "--save-thresholds", "--split", "train"])
    assert stop.value.code == 2
    assert "--split, --save-thresholds: not for --track" in capsys.readouterr().err
