"""benchmarks.track_data (the sequences with known tracks) and a short run of `python -m benchmarks track`."""

import numpy as np

from benchmarks.track import main
from benchmarks.track_data import MIN_VISIBLE, moving_shapes, pan_over, simulate_detections, write_sequence
from detect.tracking.mot import find_sequences, read_mot


def test_pan_moves_boxes_with_the_window_and_ignores_the_cut_ones():
    photo = np.zeros((300, 400, 3), np.uint8)
    boxes = np.array([[100.0, 60.0, 140.0, 120.0], [0.0, 0.0, 30.0, 30.0]])
    seq = pan_over(photo, boxes, np.array([0, 5]), "pan", length=5, size=(200, 150), zoom=(0.5, 0.5))
    # frame 1: the window (200 x 150 photo pixels, scale 1) at the photo's left edge, its top at 0
    first = seq.truth.at(1)
    assert first.ids.tolist() == [1, 2] and seq.classes[:2].tolist() == [0, 5]
    np.testing.assert_allclose(first.boxes, boxes)
    # frame 3 (half-way): the window has swept to the right edge (left 200) and half-way down (top 75)
    assert seq.truth.at(3).ids.tolist() == []  # both boxes out of view
    # frame 2 (a quarter): left 200 (1 - cos 90°) / 2 = 100, top 150 (1 - cos 45°) / 2 = 21.97; box 2 out of view
    top = 150 * (1 - np.cos(np.pi / 4)) / 2
    assert seq.truth.at(2).ids.tolist() == [1]
    np.testing.assert_allclose(seq.truth.at(2).boxes, [boxes[0] - [100, top, 100, top]], atol=1e-9)
    assert seq.length == 5 and len(seq.frames) == 5 and seq.frames[0].shape == (150, 200, 3)
    cut = pan_over(photo, np.array([[180.0, 10.0, 260.0, 50.0]]), np.array([0]), "cut", length=1, size=(200, 150),
                   zoom=(0.5, 0.5))
    assert cut.truth.boxes.tolist() == [[180, 10, 200, 50]] and cut.visibility.tolist() == [0.25]
    assert cut.truth.conf.tolist() == [0.0]  # a quarter showing: below MIN_VISIBLE, an ignore region
    assert MIN_VISIBLE == 0.4


def test_shapes_hide_one_another_and_the_detections_follow_the_truth(tmp_path):
    seq = moving_shapes("shapes", length=30, objects=6, size=(200, 150), seed=3)
    assert set(seq.truth.ids.tolist()) <= set(range(1, 7)) and seq.length == 30
    assert (seq.visibility <= 1.0 + 1e-6).all() and (seq.visibility < 0.99).any()  # some occlusion
    assert ((seq.truth.conf == 1) == (seq.visibility >= MIN_VISIBLE)).mean() > 0.9
    detections = simulate_detections(seq, seed=1)
    again = simulate_detections(seq, seed=1)
    assert len(detections) == 30 and all(np.array_equal(a, b) for a, b in zip(detections, again))
    assert all(d.shape[1] == 6 and (np.diff(d[:, 4]) <= 0).all() for d in detections)  # best first
    folder = write_sequence(seq, tmp_path)
    found = find_sequences(tmp_path)
    assert [s.name for s in found] == ["shapes"] and found[0].fps == 30 and len(found[0].frames) == 30
    truth = read_mot(folder / "gt" / "gt.txt")
    assert truth.ids.tolist() == seq.truth.ids.tolist() and truth.conf.tolist() == seq.truth.conf.tolist()
    np.testing.assert_allclose(truth.boxes, seq.truth.boxes, atol=0.01)


def test_bench_track_prints_the_table_and_the_timing(capsys):
    assert main(["--frames", "20", "--seeds", "1", "--photos", "1", "--boxes", "10", "--timing-frames", "10"]) == 0
    out = capsys.readouterr().out
    assert "IDF1" in out and "shapes-cross" in out and "shapes-crowd" in out
    assert "ms median" in out and "ours" in out
