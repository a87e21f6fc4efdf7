"""detect.tracking.bytetrack: ids on the first frame and by confirmation, the low-score stage, lost tracks kept
for the buffer, per-class thresholds and the class penalty, on hand-made detections."""

import numpy as np

from detect.tracking.bytetrack import ByteTracker
from detect.tracking.config import TRACKERS, TrackerConfig


def box(x, y, w=20.0, h=30.0):
    return [x, y, x + w, y + h]


def step(tracker, boxes, scores, classes=None):
    found = tracker.update(np.array(boxes, np.float64).reshape(-1, 4), np.array(scores, np.float64), classes)
    return dict(zip(found.index.tolist(), found.ids.tolist()))


def test_first_frame_ids_at_once_and_a_newcomer_confirmed_by_its_second_sighting():
    t = ByteTracker(TrackerConfig())
    assert step(t, [box(0, 0), box(100, 0)], [0.9, 0.8]) == {0: 1, 1: 2}
    assert step(t, [box(5, 0), box(105, 0)], [0.9, 0.8]) == {0: 1, 1: 2}
    # frame 3: a third object appears: seen once, not yet a track with an id
    assert step(t, [box(10, 0), box(110, 0), box(200, 100)], [0.9, 0.8, 0.7]) == {0: 1, 1: 2}
    assert step(t, [box(200, 100), box(15, 0), box(115, 0)], [0.7, 0.9, 0.8]) == {0: 3, 1: 1, 2: 2}


def test_a_one_frame_ghost_takes_no_id():
    t = ByteTracker(TrackerConfig())
    step(t, [box(0, 0)], [0.9])
    assert step(t, [box(5, 0), box(300, 300)], [0.9, 0.6]) == {0: 1}  # a false positive, seen once
    assert step(t, [box(10, 0)], [0.9]) == {0: 1}
    assert len(t) == 1  # the ghost's unconfirmed track is gone
    step(t, [box(15, 0), box(200, 0)], [0.9, 0.6])
    assert step(t, [box(20, 0), box(200, 0)], [0.9, 0.6]) == {0: 1, 1: 2}  # the next object is id 2, not 3


def test_faint_boxes_keep_a_track_only_through_the_second_stage():
    scores = [0.9] * 4 + [0.15] * 3 + [0.9]  # an occlusion: the detector's score drops below --conf
    for name, shown_while_faint in (("bytetrack", True), ("sort", False)):
        t = ByteTracker(TRACKERS[name])
        seen = [step(t, [box(2 * f, 0)], [s]) for f, s in enumerate(scores)]
        assert all(frame == {0: 1} for frame in seen[:4] + seen[7:]), name  # the same id before and after
        assert all(bool(frame) == shown_while_faint for frame in seen[4:7]), name


def test_a_lost_track_waits_for_the_buffer_scaled_by_the_frame_rate():
    for fps, gap, same in ((30, 30, True), (30, 31, False), (15, 15, True), (15, 16, False)):
        t = ByteTracker(TrackerConfig(), fps=fps)
        step(t, [box(0, 0)], [0.9])
        step(t, [box(0, 0)], [0.9])
        for _ in range(gap):
            step(t, [], [])
        step(t, [box(0, 0)], [0.9])
        back = step(t, [box(0, 0)], [0.9])
        assert back == ({0: 1} if same else {0: 2}), (fps, gap)


def test_the_buffer_in_frames_is_bytetracks_and_zero_means_none():
    assert [TrackerConfig(buffer=b).lost_frames(fps) for b, fps in ((30, 30), (30, 14.9), (0, 30), (1, 5))] == \
        [30, 14, 0, 1]  # int(fps / 30 x buffer), at least 1 unless the buffer is 0


def test_per_class_high_thresholds():
    # a class whose threshold is 1 is never kept, so never tracked: allowed
    assert TrackerConfig(high=(1.0, 0.2), new_track=0.2).high == (1.0, 0.2)
    t = ByteTracker(TrackerConfig(high=(0.5, 0.2), new_track=0.2))
    # class 0 at 0.3 is below its 0.5: no track; class 1 at 0.3 is above its 0.2: a track
    assert step(t, [box(0, 0), box(100, 0)], [0.3, 0.3], np.array([0, 1])) == {1: 1}


def test_a_detection_of_the_tracks_class_wins_a_close_call():
    t = ByteTracker(TrackerConfig())
    step(t, [box(0, 0, 40, 40)], [0.9], np.array([0]))
    # two boxes overlap the track alike (IoU 0.75 and 0.8); the other class's counts at half
    found = step(t, [box(0, 0, 40, 30), box(0, 0, 40, 32)], [0.9, 0.9], np.array([0, 1]))
    assert found == {0: 1}


def test_unusable_boxes_are_ignored():
    t = ByteTracker(TrackerConfig())
    assert step(t, [[10, 10, 10, 40], box(0, 0), box(50, 50)], [0.9, 0.05, 0.9]) == {2: 1}
