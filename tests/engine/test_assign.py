import torch

from detect.engine.assign import (
    HeadSpec,
    best_anchor_per_target,
    build_targets,
    neighbour_reach,
    shape_iou,
)


def _heads(scale=1.0, new_coords=False):
    coarse = HeadSpec(anchors=torch.tensor([[81.0, 82.0], [135.0, 169.0], [344.0, 319.0]]), scale_x_y=scale,
                      new_coords=new_coords)
    fine = HeadSpec(anchors=torch.tensor([[10.0, 14.0], [23.0, 27.0], [37.0, 58.0]]), scale_x_y=scale,
                    new_coords=new_coords)
    return [coarse, fine]


def test_shape_iou_values():
    assert torch.allclose(shape_iou(torch.tensor([10.0, 10.0]), torch.tensor([5.0, 20.0])),
                          torch.tensor(50.0 / 150.0))


def test_best_anchor_covers_all_heads():
    heads = _heads()
    owner, local = best_anchor_per_target(heads, torch.tensor([[12.0, 15.0], [300.0, 300.0], [40.0, 60.0]]))
    assert owner.tolist() == [1, 0, 1]
    assert local.tolist() == [0, 2, 2]


def test_single_box_cell_and_target_in_pixels():
    heads = _heads()
    # image 1, class 2, centre (100.5, 40) px on a 416 input, 24x26 px
    t = torch.tensor([[1, 2, 100.5 / 416, 40 / 416, 24 / 416, 26 / 416]])
    coarse, fine = build_targets(heads, t, [(13, 13), (26, 26)], (416, 416), anchor_t=4.0)
    # fine head, stride 16: cell (6, 2); anchors 10x14 (ratio 2.4), 23x27 and 37x58 (ratio 2.23) all fit
    assert fine.count == 3
    assert fine.gx.tolist() == [6, 6, 6] and fine.gy.tolist() == [2, 2, 2]
    assert sorted(fine.anchor.tolist()) == [0, 1, 2]
    assert torch.allclose(fine.box[0], torch.tensor([100.5 - 96.0, 40.0 - 32.0, 24.0, 26.0]))
    assert fine.image.tolist() == [1, 1, 1] and fine.cls.tolist() == [2, 2, 2]
    # coarse head: 81x82 is 3.4x too large and fits; the others do not
    assert coarse.count == 1 and coarse.anchor.tolist() == [0]
    assert (coarse.gx.item(), coarse.gy.item()) == (3, 1)


def test_best_anchor_is_forced_when_nothing_fits():
    heads = _heads()
    t = torch.tensor([[0, 0, 0.5, 0.5, 2 / 416, 2 / 416]])  # 2x2 px: ratio to 10x14 is 7 > anchor_t
    coarse, fine = build_targets(heads, t, [(13, 13), (26, 26)], (416, 416), anchor_t=4.0)
    assert coarse.count == 0
    assert fine.count == 1 and fine.anchor.tolist() == [0]


def test_neighbour_cells_for_scale_two():
    assert neighbour_reach(1.0) == 0.0 and neighbour_reach(2.0) == 0.5 and abs(neighbour_reach(1.1) - 0.05) < 1e-9
    head = HeadSpec(anchors=torch.tensor([[16.0, 16.0]]), scale_x_y=2.0, new_coords=True)
    # stride 8 (8x8 grid on 64 px); centre at cell (3.25, 4.75): left neighbour (x) and lower neighbour (y)
    t = torch.tensor([[0, 0, 3.25 * 8 / 64, 4.75 * 8 / 64, 16 / 64, 16 / 64]])
    (out,) = build_targets([head], t, [(8, 8)], (64, 64))
    cells = sorted(zip(out.gx.tolist(), out.gy.tolist()))
    assert cells == [(2, 4), (3, 4), (3, 5)]
    # the centre relative to each cell stays reachable by p*2-0.5 in [-0.5, 1.5] cells
    rel = out.box[:, :2] / 8
    assert bool(((rel > -0.5) & (rel < 1.5)).all())


def test_no_neighbours_at_image_border():
    head = HeadSpec(anchors=torch.tensor([[16.0, 16.0]]), scale_x_y=2.0)
    t = torch.tensor([[0, 0, 0.2 / 8, 0.3 / 8, 0.25, 0.25]])  # in cell (0, 0), near its top-left corner
    (out,) = build_targets([head], t, [(8, 8)], (64, 64))
    assert list(zip(out.gx.tolist(), out.gy.tolist())) == [(0, 0)]


def test_iou_thresh_adds_anchors():
    head = HeadSpec(anchors=torch.tensor([[10.0, 10.0], [11.0, 11.0], [40.0, 40.0]]), options={"iou_thresh": 0.7})
    t = torch.tensor([[0, 0, 0.5, 0.5, 10.5 / 64, 10.5 / 64]])
    (out,) = build_targets([head], t, [(8, 8)], (64, 64), anchor_t=1.01)
    assert sorted(out.anchor.tolist()) == [0, 1]


def test_many_boxes_vectorised_and_empty():
    heads = _heads()
    g = torch.Generator().manual_seed(0)
    n = 200
    t = torch.cat([torch.randint(0, 4, (n, 1), generator=g).float(), torch.randint(0, 3, (n, 1), generator=g).float(),
                   torch.rand(n, 2, generator=g), torch.rand(n, 2, generator=g) * 0.5 + 0.01], 1)
    out = build_targets(heads, t, [(13, 13), (26, 26)], (416, 416))
    total = sum(o.count for o in out)
    assert total >= n
    for o, (gh, gw) in zip(out, [(13, 13), (26, 26)]):
        assert int(o.gx.max()) < gw and int(o.gy.max()) < gh and int(o.gx.min()) >= 0
    empty = build_targets(heads, torch.zeros(0, 6), [(13, 13), (26, 26)], (416, 416))
    assert all(o.count == 0 for o in empty)
