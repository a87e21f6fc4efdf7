"""The audit's pass over a split: whole images or tiles, whichever the model detects better on the split."""

import dataclasses
import logging
from types import SimpleNamespace

import numpy as np
import pytest

import detect.audit.detections as detections
from detect.audit.detections import MAX_TILES, ModelRun, SplitDetections, detect_split, mean_tiles, tile_size
from detect.inference.options import InferenceOptions
from detect.runtime import dist
from tests.support.val_data import write_coco_dataset, write_tiny_checkpoint


def _records(*sides):
    return [SimpleNamespace(width=w, height=h) for w, h in sides]


def test_tiles_are_half_the_median_longer_side_in_steps_of_32():
    assert tile_size(_records((640, 480), (640, 427), (500, 375))) == 320
    assert tile_size(_records((1920, 1080), (1280, 720), (1920, 1080))) == 960
    assert tile_size(_records((1000, 600))) == 512  # 500 rounds to 512
    assert tile_size(_records((40, 30))) == 32  # never below one stride's worth
    assert tile_size([]) == 32


def test_tiles_an_image_are_counted_over_the_split():
    assert mean_tiles(_records((640, 480), (640, 427)), 320, 0.2) == 6.0  # 3 x 2 each
    assert mean_tiles(_records((640, 480), (300, 200)), 320, 0.2) == 3.0  # the small one fits in a tile
    assert mean_tiles([], 320, 0.2) == 0.0


def _fake_passes(monkeypatch, sides, whole_map, tiled_map):
    """_one_pass replaced by one that records the tile size asked for and scores each pass as given."""
    calls = []

    def fake(run, ctx):
        calls.append(run.options.slice_size)
        score = tiled_map if run.options.slice_size else whole_map
        source = SimpleNamespace(records=_records(*sides))
        return SplitDetections(source, {1: np.full((1, 6), score)}, SimpleNamespace(map50=score), 416)

    monkeypatch.setattr(detections, "_one_pass", fake)
    return calls


@pytest.mark.parametrize("whole_map, tiled_map, uses_tiles", [(0.45, 0.49, True), (0.67, 0.55, False)])
def test_the_pass_with_the_higher_map50_on_the_split_is_audited(monkeypatch, caplog, whole_map, tiled_map,
                                                                uses_tiles):
    calls = _fake_passes(monkeypatch, ((640, 480), (640, 480)), whole_map, tiled_map)
    ctx = SimpleNamespace(is_main=True)
    run = ModelRun("w.pt", None, "d.yaml", "val", InferenceOptions(img_size=416), choose_tiles=True)
    with caplog.at_level(logging.INFO, logger="detect.audit"):
        found = detect_split(run, ctx)
    assert calls == [None, 320]
    assert found.result.map50 == (tiled_map if uses_tiles else whole_map)
    assert f"{whole_map:.3f} on whole images, {tiled_map:.3f} with tiles of 320 px" in caplog.text
    assert ("the audit uses the tiles" if uses_tiles else "the audit uses the whole images") in caplog.text
    # a tile size given, or the choice off: one pass, as asked
    calls.clear()
    detect_split(dataclasses.replace(run, options=InferenceOptions(img_size=416, slice_size=256)), ctx)
    detect_split(dataclasses.replace(run, choose_tiles=False), ctx)
    assert calls == [256, None]


def test_a_split_of_mixed_resolutions_is_not_cut_into_hundreds_of_tiles(monkeypatch, caplog):
    sides = [(400, 300)] * 8 + [(4000, 3000)] * 2  # half the median side, 192 px, cuts the large ones 21 x 16
    calls = _fake_passes(monkeypatch, sides, 0.4, 0.9)
    run = ModelRun("w.pt", None, "d.yaml", "val", InferenceOptions(img_size=416), choose_tiles=True)
    with caplog.at_level(logging.INFO, logger="detect.audit"):
        found = detect_split(run, SimpleNamespace(is_main=True))
    assert mean_tiles(_records(*sides), 192, 0.2) > MAX_TILES
    assert calls == [None] and found.result.map50 == 0.4
    assert "the audit uses the whole images: tiles of 192 px" in caplog.text and "--slice SIZE" in caplog.text


def test_both_passes_run_for_real_and_the_chosen_one_is_returned(tmp_path):
    spec = write_coco_dataset(tmp_path / "d", sizes=((96, 128), (128, 80), (128, 128)))
    weights = write_tiny_checkpoint(tmp_path)
    run = ModelRun(str(weights), None, str(spec), "val", InferenceOptions(img_size=64), 0, tmp_path / "cache",
                   choose_tiles=True)
    ctx = dist.init_distributed("cpu")
    found = detect_split(run, ctx)
    whole = detect_split(dataclasses.replace(run, choose_tiles=False), ctx)
    tiled = detect_split(dataclasses.replace(run, options=InferenceOptions(img_size=64, slice_size=64)), ctx)
    assert found.result.map50 == max(whole.result.map50, tiled.result.map50)
    assert sorted(found.detections) == [10, 11, 12]
