"""detect.tracking.assignment: the matching with a cost limit, and the costs ByteTrack matches on."""

import numpy as np

from detect.tracking.assignment import iou_cost, match, unmatched


def test_one_good_pair_beats_two_fair_ones():
    # track 0 fits detection 0 well (0.3); pairing track 0 with detection 1 (0.75) and track 1 with detection 0
    # (0.5) matches more but costs 1.25 > 0.3 + 0.8 (two left unmatched at limit / 2 each): LAPJV's choice
    cost = np.array([[0.3, 0.75], [0.5, 1.0]])
    rows, cols = match(cost, 0.8)
    assert rows.tolist() == [0] and cols.tolist() == [0]


def test_pairs_above_the_limit_are_never_made():
    cost = np.array([[0.9, 0.2], [0.85, 0.95]])
    rows, cols = match(cost, 0.8)
    assert rows.tolist() == [0] and cols.tolist() == [1]
    assert unmatched(2, rows).tolist() == [1] and unmatched(2, cols).tolist() == [0]
    empty = match(np.zeros((0, 3)), 0.8)
    assert len(empty[0]) == 0 and len(empty[1]) == 0


def test_fused_cost_prefers_the_surer_detection():
    tracks = np.array([[0.0, 0.0, 10.0, 10.0]])
    dets = np.array([[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 5.0]])
    np.testing.assert_allclose(iou_cost(tracks, dets), [[0.0, 0.5]])
    np.testing.assert_allclose(iou_cost(tracks, dets, np.array([0.5, 0.9])), [[0.5, 0.55]])
