"""detect.tracking.frame_source: the frames of a source numbered, a frame without an image a gap the tracker ages
through (never an empty frame); and the one rule seen through the three frame loops (Detector.track, predict's
Tracking, detect.val --track's track_sequence) on the same detections."""

from pathlib import Path

import cv2
import numpy as np

from detect.data.records.images import BadImage
from detect.streams.reader import StreamStats
from detect.tracking.config import TrackerConfig
from detect.tracking.frame_source import (
    Frame,
    detect_batch,
    in_batches,
    read_frames,
    sequence_items,
    track_frame,
)
from detect.tracking.mot import Sequence
from detect.tracking.sources import SourceTracks
from tests.support.log_lines import log_lines

BOX = np.array([[10.0, 10.0, 30.0, 30.0, 0.9, 0.0]])
NONE = np.zeros((0, 6))


def test_read_frames_numbers_reads_and_drops(tmp_path):
    good, bad = tmp_path / "a.png", tmp_path / "b.jpg"
    cv2.imwrite(str(good), np.full((8, 10, 3), 7, np.uint8))
    bad.write_bytes(b"not a jpeg")
    array = np.zeros((4, 5, 3), np.uint8)
    stats = StreamStats()
    items = [(0, array, "s"), (1, good, "s"), (2, bad, "s"), (3, BadImage("empty_file", "zero-byte file"), "s"),
             (4, None, "t")]
    with log_lines("detect.tracking.frame_source") as lines:
        frames = list(read_frames(items, stats))
    assert [(f.number, f.source) for f in frames] == [(0, "s"), (1, "s"), (2, "s"), (3, "s"), (4, "t")]
    assert frames[0].image is array and frames[1].image.shape == (8, 10, 3) and frames[1].image[0, 0, 0] == 7
    assert [f.image is None for f in frames] == [False, False, True, True, True]
    # only the file read here is named (a BadImage was reported where it was decoded; None has no file)
    assert lines == [f"frame 2 of s, {bad}: not an image OpenCV can decode (10 bytes); a gap the tracks age through"]
    assert (stats.read, stats.processed, stats.dropped) == (2, 2, 3)


def test_sequence_items_count_seqlength_frames_or_places():
    paths = [Path("img1/000001.jpg"), Path("img1/000003.jpg")]
    with_length = Sequence(Path("s"), "s", [(1, paths[0]), (3, paths[1])], 30.0, length=4)
    assert list(sequence_items(with_length)) == [(1, paths[0], "s"), (2, None, "s"), (3, paths[1], "s"),
                                                 (4, None, "s")]
    stamps = Sequence(Path("s"), "s", [(1000, paths[0]), (2000, paths[1])], None)  # numbers that may be times
    assert list(sequence_items(stamps)) == [(1, paths[0], "s"), (2, paths[1], "s")]


def test_batches_and_a_batch_detected_in_one_call():
    image = np.zeros((4, 4, 3), np.uint8)
    frames = [Frame(i, None if i == 1 else image, "s") for i in range(5)]
    batches = list(in_batches(iter(frames), 2))
    assert [[f.number for f in b] for b in batches] == [[0, 1], [2, 3], [4]]
    calls = []

    def detect(images):
        calls.append(len(images))
        return [BOX * (k + 1) for k in range(len(images))]

    found = detect_batch(detect, batches[0])
    assert calls == [1] and found[1] is None and found[0].tolist() == BOX.tolist()
    assert detect_batch(detect, [Frame(7, None, "s")]) == [None] and calls == [1]  # nothing to detect: no call


def test_a_frame_without_an_image_is_a_gap_not_an_empty_frame():
    """A box seen once (a track not yet confirmed) and again after an unreadable frame keeps its track: an empty
    frame in between would have ended it, and the next sighting would start over unconfirmed."""
    tracks = SourceTracks(TrackerConfig())
    image = np.zeros((64, 64, 3), np.uint8)
    shown = [track_frame(tracks, Frame(n, image if rows is not None else None, "s"), rows)
             for n, rows in enumerate([NONE, BOX, None, BOX])]
    assert shown[2] is None and [r[:, 6].tolist() for r in (shown[0], shown[1], shown[3])] == [[], [], [1.0]]
    assert tracks.frames == 3 and tracks.tracker.frame == 4  # tracked 3 frames; the tracker moved 4 on
    empty = SourceTracks(TrackerConfig())  # what an empty frame would do instead
    assert [empty.update(rows, n)[:, 6].tolist() for n, rows in enumerate([NONE, BOX, NONE, BOX])][3] == []


def _rows_by_grey(frames: list[np.ndarray]):
    """A stand-in detector whose rows for a frame are chosen by the frame's grey level (its place)."""
    from tests.support.tracking import RowsPredictor

    class ByGrey(RowsPredictor):
        def __call__(self, images):
            self.calls.append(len(images))
            return [frames[int(image[0, 0, 0]) // 10] for image in images]

    return ByGrey(frames, batch_size=2)


def test_the_three_frame_loops_track_an_unreadable_frame_alike(tmp_path):
    from detect.api import Detector
    from detect.predict.inputs import Input
    from detect.predict.tracks import Tracking
    from detect.tracking.evaluate import track_sequence
    from detect.tracking.mot import read_sequence

    detections = [NONE, BOX, BOX, BOX + [2, 0, 2, 0, 0, 0]]  # frame 2 is unreadable
    folder = tmp_path / "seq" / "img1"
    folder.mkdir(parents=True)
    for n in range(4):
        path = folder / f"{n + 1:06d}.png"
        if n == 2:
            path.write_bytes(b"broken")
        else:
            cv2.imwrite(str(path), np.full((64, 64, 3), 10 * n, np.uint8))
    # Detector.track over the folder
    with Detector(_rows_by_grey(detections), ["thing"]).track(folder) as stream:
        api = {stream.index: found.track_ids.tolist() for _, found in stream}
    assert stream.stats.dropped == 1
    # detect.val --track over the same folder as a MOTChallenge sequence (frames from 1)
    mot = track_sequence(_rows_by_grey(detections), read_sequence(tmp_path / "seq"), TrackerConfig())
    # predict --track: the folder's images decoded (the broken one a BadImage), each frame of the sequence
    tracking = Tracking(TrackerConfig(), tmp_path / "run", ["thing"], str(folder))
    items = [(Input(p, p.name, p.stem), BadImage("undecodable", "broken") if n == 2 else
              cv2.imread(str(p))) for n, p in enumerate(sorted(folder.iterdir()))]
    predicted = {}
    for (item, _), frame in zip(items, tracking.frames(items)):
        if frame.image is not None:
            predicted[frame.number] = tracking.image(item, frame, detections[frame.number])[0][:, 6].tolist()
    assert api == predicted == {0: [], 1: [], 3: [1]}
    assert mot.frames.tolist() == [4] and mot.ids.tolist() == [1]
    assert tracking.finish()["sources"][0] | {"per_class": None} == {
        "source": "img1", "frames": 3, "dropped": 1, "tracks": 1, "per_class": None}
