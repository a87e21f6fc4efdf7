"""detect.tracking.mot: MOTChallenge result lines, reading gt files and sequence folders."""

import numpy as np
import pytest

from detect.tracking.mot import find_sequences, mot_lines, parse_mot, read_sequence


def test_result_lines_are_motchallenge_lines():
    text = mot_lines(3, np.array([[10.0, 20.0, 40.5, 80.25], [0.0, 0.0, 5.0, 5.0]]), np.array([7, 12]),
                     np.array([0.91234, 0.3]))
    assert text == "3,7,10.00,20.00,30.50,60.25,0.9123,-1,-1,-1\n3,12,0.00,0.00,5.00,5.00,0.3000,-1,-1,-1\n"
    assert mot_lines(1, np.zeros((0, 4)), np.zeros(0), np.zeros(0)) == ""


def test_ground_truth_is_read_with_its_ignore_flags():
    rows = parse_mot("1,1,10,20,30,40,1,1,1.0\n1,2,0,0,5,5,0,1,0.1\n\n2,1,12,20,30,40,1,1,0.9\n", "gt.txt")
    assert rows.frames.tolist() == [1, 1, 2] and rows.ids.tolist() == [1, 2, 1]
    assert rows.boxes.tolist()[0] == [10, 20, 40, 60] and rows.conf.tolist() == [1, 0, 1]
    assert parse_mot("4 3 1 2 3 4").conf.tolist() == [1.0]  # spaces, and no conf column: scored
    at = rows.at(2)
    assert at.ids.tolist() == [1] and at.boxes.tolist() == [[12, 20, 42, 60]]
    with pytest.raises(ValueError, match="gt.txt line 2: 4 values"):
        parse_mot("1,1,1,1,1,1\n1,1,1,1\n", "gt.txt")
    with pytest.raises(ValueError, match="line 1: 'a,b' is not numbers"):
        parse_mot("a,b", "gt.txt")


def test_sequence_folders(tmp_path):
    seq = tmp_path / "MOT" / "SEQ-01"
    (seq / "frames").mkdir(parents=True)
    for n in (1, 2, 10):
        (seq / "frames" / f"{n:06d}.jpg").write_bytes(b"x")
    (seq / "frames" / "notes.txt").write_text("not a frame")
    (seq / "seqinfo.ini").write_text("[Sequence]\nname=walk\nimDir=frames\nframeRate=25\nimExt=.jpg\n")
    found = read_sequence(seq)
    assert found.name == "walk" and found.fps == 25.0
    assert [n for n, _ in found.frames] == [1, 2, 10]  # numbered by the file names, gaps kept
    assert found.ground_truth == seq / "gt" / "gt.txt"
    assert [s.name for s in find_sequences(tmp_path / "MOT")] == ["walk"] == [s.name for s in find_sequences(seq)]
    (tmp_path / "plain" / "img1").mkdir(parents=True)
    (tmp_path / "plain" / "img1" / "a.png").write_bytes(b"x")
    (tmp_path / "plain" / "img1" / "b.png").write_bytes(b"x")
    unpadded = tmp_path / "unpadded" / "img1"
    unpadded.mkdir(parents=True)
    for n in (10, 2, 1, 9):
        (unpadded / f"{n}.jpg").write_bytes(b"x")
    (tmp_path / "unpadded" / "seqinfo.ini").write_text("[Sequence]\nseqLength=11\n")
    found = read_sequence(tmp_path / "unpadded")
    assert [(n, p.name) for n, p in found.frames] == [(1, "1.jpg"), (2, "2.jpg"), (9, "9.jpg"), (10, "10.jpg")]
    assert found.missing_frames() == [3, 4, 5, 6, 7, 8, 11] and found.scored_frames() == list(range(1, 12))
    (tmp_path / "unpadded" / "seqinfo.ini").write_text("[Sequence]\nseqLength=9\n")
    with pytest.raises(ValueError, match=r"seqinfo.ini: seqLength=9, but 10.jpg is frame 10"):
        read_sequence(tmp_path / "unpadded")
    plain = read_sequence(tmp_path / "plain")
    assert plain.name == "plain" and plain.fps is None and [n for n, _ in plain.frames] == [1, 2]
    with pytest.raises(FileNotFoundError, match="no MOTChallenge sequence in it"):
        find_sequences(tmp_path / "MOT" / "SEQ-01" / "frames")
    with pytest.raises(FileNotFoundError, match="no such folder"):
        find_sequences(tmp_path / "missing")


def test_stacked_rows_keep_the_ground_truths_classes():
    from detect.tracking.mot import MotRows

    truth = parse_mot("1,1,0,0,5,5,1,7,1\n", "gt.txt")
    results = MotRows(np.array([2]), np.array([4]), np.zeros((1, 4)), np.ones(1))
    assert MotRows.stack([truth, results]).classes.tolist() == [7, -1]
    assert MotRows.stack([results, results]).classes is None
