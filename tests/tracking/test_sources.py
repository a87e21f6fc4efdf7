"""detect.tracking.sources: one tracker per source when frames of several sources come interleaved (as images
of several folders share predict's batches), trails, and the distinct tracks per class."""

import numpy as np

from detect.tracking.config import TrackerConfig
from detect.tracking.sources import SourceTracks, TrackerBank, summary_line


def rows(*objects):
    """Rows (x1, y1, x2, y2, score, class) of objects given as (x, y, class)."""
    return np.array([[x, y, x + 20, y + 30, 0.9, k] for x, y, k in objects], np.float64).reshape(-1, 6)


def test_interleaved_sources_keep_their_own_ids_and_frames():
    bank = TrackerBank(TrackerConfig())
    seen = {"a": [], "b": []}
    for f in range(6):
        # source a: two people walking right; source b: one car at the same place as a's first person
        seen["a"].append(bank.update("a", rows((4 * f, 0, 0), (100 + 4 * f, 0, 0)))[:, 6].tolist())
        seen["b"].append(bank.update("b", rows((4 * f, 0, 2)))[:, 6].tolist())
    assert seen["a"] == [[1, 2]] * 6 and seen["b"] == [[1]] * 6  # b's car is b's id 1, not a's id 3
    assert bank["a"].frames == 6 and bank["b"].frames == 6
    summary = bank.summary(["person", "bike", "car"])
    assert summary["per_class"] == {"person": 2, "car": 1} and summary["tracks"] == 3
    assert [s["source"] for s in summary["sources"]] == ["a", "b"]
    assert summary["sources"][1] == {"source": "b", "frames": 6, "tracks": 1, "per_class": {"car": 1}}
    assert summary_line(summary["per_class"]) == "2 person, 1 car" and summary_line({}) == "no tracks"


def test_a_source_that_starts_later_starts_at_id_1():
    bank = TrackerBank(TrackerConfig())
    for f in range(3):
        bank.update("a", rows((10 * f, 0, 0), (200, 10 * f, 0), (300, 300, 1)))
    assert bank.update("b", rows((0, 0, 0)))[:, 6].tolist() == [1]


def test_tracked_rows_trails_and_the_class_seen_most():
    tracks = SourceTracks(TrackerConfig(), trail_frames=3)
    for f, k in enumerate([0, 0, 1, 0, 0]):  # one class flip of the detector
        out = tracks.update(rows((5 * f, 0, k)))
    assert out.shape == (1, 7) and out[0, 4] == 0.9 and out[0, 6] == 1
    np.testing.assert_allclose(out[0, :4], [20, 0, 40, 30], atol=1.0)  # the filtered box, near the detection
    trail = np.array(tracks.trails[1])  # (frame, cx, cy) of the last 3 frames
    assert trail[:, 0].tolist() == [3, 4, 5]
    np.testing.assert_allclose(trail[:, 1:], [[20, 15], [25, 15], [30, 15]], atol=1.5)
    assert tracks.track_classes() == {1: 0} and tracks.class_counts() == {0: 1}
    for _ in range(3):
        tracks.update(rows())
    assert tracks.trails == {}  # an unseen track's trail fades


def test_frames_a_stream_dropped_are_a_gap_the_tracks_move_through():
    """An object moving 10 px a frame; frames 10-14 never reach the tracker (a live stream dropped them). Told the
    frames' numbers, the tracker predicts across the gap and keeps the id; fed as if consecutive, the object
    has jumped 60 px past the prediction and becomes a new track."""

    def box(frame):
        x = 10.0 * frame
        return [[x, 50.0, x + 40.0, 90.0, 0.9, 0]]

    frames = [*range(10), *range(15, 20)]
    for numbered in (True, False):
        tracks = SourceTracks(TrackerConfig(), fps=30)
        ids = [tracks.update(box(f), f if numbered else None)[:, 6].tolist() for f in frames]
        assert ids[9] == [1.0]
        if numbered:
            assert ids[10:] == [[1.0]] * 5
        else:
            assert 1.0 not in ids[11]
    # the buffer counts the source's frames: 31 frames of gap end a track at 30 fps
    tracks = SourceTracks(TrackerConfig(), fps=30)
    tracks.update(box(0), 0)
    tracks.update(box(1), 1)
    assert tracks.update(box(33), 33)[:, 6].tolist() == []  # a new track (unconfirmed): track 1 ended
