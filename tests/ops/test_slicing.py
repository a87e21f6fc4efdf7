"""detect.ops.slicing: the tile grid, boxes mapped from a tile into the image, the interior-edge rule and the merge
of tiles with the whole-image pass."""

import pytest
import torch

from detect.ops.slicing import (
    check_slice,
    cut_by_tile_edge,
    merge_tiles,
    tile_grid,
    tile_starts,
    to_image_pixels,
)


def test_tile_grid_of_a_1600x1200_image():
    # 640 px tiles, overlap >= 0.2 (128 px): 3 columns 480 apart (overlap 160), 3 rows 280 apart (overlap 360)
    assert tile_starts(1600, 640, 0.2) == [0, 480, 960] and tile_starts(1200, 640, 0.2) == [0, 280, 560]
    grid = tile_grid(1600, 1200, 640, 0.2)
    assert len(grid) == 9 and grid[:4] == [(0, 0, 640, 640), (480, 0, 1120, 640), (960, 0, 1600, 640),
                                           (0, 280, 640, 920)]
    assert grid[-1] == (960, 560, 1600, 1200)
    assert tile_starts(1600, 416, 0.2) == [0, 296, 592, 888, 1184]  # 5 x 4 = 20 tiles of 416
    assert len(tile_grid(1600, 1200, 416, 0.2)) == 20
    assert tile_starts(1600, 640, 0.0) == [0, 480, 960] and tile_starts(1280, 640, 0.0) == [0, 640]


def test_every_tile_has_the_full_size_and_neighbours_overlap_enough():
    for length in (641, 700, 1000, 1333, 2048, 4000):
        for size, overlap in ((640, 0.2), (320, 0.25), (512, 0.0), (300, 0.5)):
            starts = tile_starts(length, size, overlap)
            assert starts[0] == 0 and starts[-1] == length - size
            gaps = [b - a for a, b in zip(starts, starts[1:])]
            assert max(gaps) <= size * (1 - overlap) + 0.5  # at least the overlap asked for (rounding: half a px)
            if len(starts) > 2:  # the fewest tiles: one fewer would leave less overlap than asked
                assert (length - size) / (len(starts) - 2) > size * (1 - overlap)


def test_an_image_that_fits_one_tile_is_one_tile_of_its_own_size():
    assert tile_grid(500, 300, 640) == [(0, 0, 500, 300)]
    assert tile_grid(1000, 300, 640, 0.2) == [(0, 0, 640, 300), (360, 0, 1000, 300)]


def test_bad_sizes_name_the_value():
    with pytest.raises(ValueError, match="--slice must be a positive tile size in pixels, got 0"):
        check_slice(0, 0.2)
    with pytest.raises(ValueError, match=r"slice_overlap must be a fraction of the tile in \[0, 1\), got 1.0"):
        check_slice(640, 1.0, "slice_size", "slice_overlap")


def test_boxes_move_from_tile_pixels_to_image_pixels():
    rows = torch.tensor([[10.0, 20.0, 50.0, 60.0, 0.5, 3.0]])
    mapped = to_image_pixels(rows, (480, 280, 1120, 920))
    assert mapped.tolist() == [[490.0, 300.0, 530.0, 340.0, 0.5, 3.0]] and rows[0, 0] == 10  # a new tensor


def test_only_interior_tile_edges_cut():
    tile = (480, 280, 1120, 920)  # a middle tile of 1600x1200: all four edges are interior
    rows = torch.tensor([[485.0, 400, 560, 450],  # within 12.8 px of the left edge 480
                         [600.0, 400, 700, 450],  # well inside
                         [900.0, 850, 1110, 915],  # near the right and bottom edges
                         [600.0, 293, 700, 300]])  # 13 px from the top: outside the margin
    assert cut_by_tile_edge(rows, tile, 1600, 1200, 12.8).tolist() == [True, False, True, False]
    corner = (0, 0, 640, 640)  # the image's own left and top border cut nothing
    rows = torch.tensor([[0.0, 0, 50, 50], [600.0, 10, 639, 50]])
    assert cut_by_tile_edge(rows, corner, 1600, 1200, 12.8).tolist() == [False, True]


def test_an_object_across_two_tiles_ends_as_one_box():
    # a 100x60 object at x 600..700, y 100..160 of a 1600x1200 image: tile (0, 0) shows its left 40 px cut at
    # x = 640, tile (480, 0) shows it whole; the whole-image pass finds it less precisely
    tiles = [(0, 0, 640, 640), (480, 0, 1120, 640)]
    left = torch.tensor([[600.0, 100, 640, 160, 0.80, 2]])  # tile (0, 0) pixels: cut by its right edge
    whole_in_tile = torch.tensor([[120.0, 100, 220, 160, 0.75, 2]])  # tile (480, 0) pixels
    whole_image = torch.tensor([[596.0, 97, 705, 166, 0.60, 2]])
    merged = merge_tiles(whole_image, [left, whole_in_tile], tiles, 1600, 1200, iou=0.45, max_det=300)
    assert merged.tolist() == [[600.0, 100, 700, 160, 0.75, 2]]
    # without the edge rule the cut box (IoU 0.4 with the object) would stay beside it: 2 boxes for 1 object
    kept = merge_tiles(whole_image, [left, whole_in_tile], tiles, 1600, 1200, iou=0.45, max_det=300,
                       edge_margin=-1.0)
    assert len(kept) == 2


def test_merge_is_class_wise_and_keeps_the_best_first_up_to_max_det():
    tiles = [(0, 0, 640, 640)]
    tile_rows = torch.tensor([[100.0, 100, 200, 200, 0.9, 0], [100.0, 100, 200, 200, 0.8, 1],
                              [300.0, 300, 340, 340, 0.3, 0]])
    whole = torch.tensor([[102.0, 101, 199, 203, 0.5, 0]])
    merged = merge_tiles(whole, [tile_rows], tiles, 1600, 1200, iou=0.45, max_det=300)
    assert merged[:, 4].tolist() == pytest.approx([0.9, 0.8, 0.3]) and merged[:, 5].tolist() == [0, 1, 0]
    assert len(merge_tiles(whole, [tile_rows], tiles, 1600, 1200, iou=0.45, max_det=2)) == 2
    empty = torch.zeros((0, 6))
    assert merge_tiles(empty, [empty], tiles, 1600, 1200, iou=0.45, max_det=300).shape == (0, 6)
