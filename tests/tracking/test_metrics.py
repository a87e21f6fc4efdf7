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
