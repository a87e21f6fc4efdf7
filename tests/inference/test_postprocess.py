import pytest
import torch

from detect.inference.postprocess import non_max_suppression, scale_to_original


def _row(cx, cy, w, h, obj, probs):
    return [cx, cy, w, h, obj, *probs]


def test_threshold_uses_obj_times_class_and_one_label_per_box():
    pred = torch.tensor([[
        _row(50, 50, 20, 20, 0.9, [0.5, 0.8, 0.1]),   # best class 1, score 0.72
        _row(200, 200, 10, 10, 0.5, [0.3, 0.1, 0.1]),  # score 0.15 < 0.2: dropped although obj 0.5 passes
        _row(300, 100, 40, 20, 0.1, [1.0, 1.0, 1.0]),  # objectness below threshold
    ]])
    (det,) = non_max_suppression(pred, conf_thres=0.2, iou_thres=0.5, multi_label=False)
    assert det.shape == (1, 6)
    assert torch.allclose(det[0], torch.tensor([40.0, 40.0, 60.0, 60.0, 0.72, 1.0]))


def test_multi_label_gives_one_row_per_passing_class():
    pred = torch.tensor([[_row(50, 50, 20, 20, 0.9, [0.5, 0.8, 0.1])]])
    (det,) = non_max_suppression(pred, conf_thres=0.2, iou_thres=0.5, multi_label=True)
    assert det[:, 5].tolist() == [1.0, 0.0]
    assert torch.allclose(det[:, 4], torch.tensor([0.72, 0.45]))


def test_nms_is_class_aware_and_per_image():
    # two boxes of IoU 81/119 = 0.68 in class 0, plus the same box in class 1
    boxes = [_row(50, 50, 10, 10, 0.9, [1.0, 0.0]), _row(51, 51, 10, 10, 0.8, [1.0, 0.0]),
             _row(51, 51, 10, 10, 0.7, [0.0, 1.0])]
    pred = torch.tensor([boxes, boxes])
    dets = non_max_suppression(pred, conf_thres=0.01, iou_thres=0.6, multi_label=False)
    assert len(dets) == 2
    for det in dets:  # the 0.8 box is suppressed by the 0.9 one (same class); class 1 survives
        assert det[:, 4].tolist() == pytest.approx([0.9, 0.7])
        assert det[:, 5].tolist() == [0.0, 1.0]
    # above the pair's IoU nothing is suppressed
    (det,) = non_max_suppression(pred[:1], conf_thres=0.01, iou_thres=0.7, multi_label=False)
    assert det[:, 4].tolist() == pytest.approx([0.9, 0.8, 0.7])


def test_max_det_keeps_best_per_image_and_empty_images():
    g = torch.Generator().manual_seed(0)
    n = 50
    centres = torch.arange(n, dtype=torch.float32)[:, None] * 30 + 15  # disjoint 10x10 boxes
    rows = torch.cat([centres, centres, torch.full((n, 2), 10.0), torch.rand(n, 1, generator=g) * 0.9 + 0.1,
                      torch.ones(n, 1)], dim=1)
    empty = rows.clone()
    empty[:, 4] = 0.0
    pred = torch.stack([rows, empty, rows])
    dets = non_max_suppression(pred, conf_thres=0.05, iou_thres=0.5, max_det=7)
    assert [len(d) for d in dets] == [7, 0, 7]
    best7 = torch.sort(rows[:, 4], descending=True).values[:7]
    assert torch.allclose(dets[0][:, 4], best7) and torch.allclose(dets[2][:, 4], best7)
    assert dets[1].shape == (0, 6)


def test_class_filter_and_no_candidates():
    pred = torch.tensor([[_row(50, 50, 20, 20, 0.9, [0.9, 0.8])]])
    (det,) = non_max_suppression(pred, conf_thres=0.1, classes=[1])
    assert det[:, 5].tolist() == [1.0]
    (none,) = non_max_suppression(torch.zeros(1, 10, 7), conf_thres=0.1)
    assert none.shape == (0, 6)
    with pytest.raises(ValueError, match="5\\+K"):
        non_max_suppression(torch.zeros(10, 7))


def test_scale_to_original_inverts_letterbox_and_clips():
    # a 200x100 (w x h) image letterboxed into 416x416: ratio 2.08, resized 416x208, pad top 104
    boxes = torch.tensor([[20.8, 104 + 20.8, 124.8, 104 + 104.0, 0.9, 3.0],
                          [-10.0, 90.0, 500.0, 330.0, 0.5, 1.0]])
    out = scale_to_original(boxes, ratio=2.08, pad=(0.0, 104.0), orig_size=(100, 200))
    assert torch.allclose(out[0], torch.tensor([10.0, 10.0, 60.0, 50.0]), atol=1e-4)
    assert torch.allclose(out[1], torch.tensor([0.0, 0.0, 200.0, 100.0]))
    # per-axis ratios
    out = scale_to_original(torch.tensor([[10.0, 20.0, 30.0, 40.0]]), ratio=(2.0, 4.0), pad=(2, 4),
                            orig_size=(100, 100))
    assert torch.allclose(out, torch.tensor([[4.0, 4.0, 14.0, 9.0]]))


def test_candidate_cap_per_image_keeps_the_best():
    rows = torch.tensor([_row(15 + 30 * i, 15, 10, 10, 0.1 * (i + 1), [1.0]) for i in range(6)])
    pred = torch.stack([rows, rows.flip(0)])
    dets = non_max_suppression(pred, conf_thres=0.01, max_candidates=2)
    for det in dets:
        assert det[:, 4].tolist() == pytest.approx([0.6, 0.5])


def test_merge_nms_averages_the_suppressed_cluster_by_iou_and_score():
    pred = torch.tensor([[_row(50, 50, 20, 20, 0.9, [1.0, 0.0]),   # xyxy 40..60
                          _row(52, 52, 20, 20, 0.6, [1.0, 0.0]),   # IoU 324/476 = 0.68 with the first
                          _row(52, 52, 20, 20, 0.5, [0.0, 1.0]),   # other class: its own cluster
                          _row(150, 150, 20, 20, 0.4, [1.0, 0.0])]])
    (det,) = non_max_suppression(pred, conf_thres=0.1, iou_thres=0.6, multi_label=False, merge=True)
    assert det[:, 4].tolist() == pytest.approx([0.9, 0.5, 0.4])
    # weights IoU x score: itself 1 x 0.9, the other 324/476 x 0.6 -> (0.9*40 + 0.40840*42) / 1.30840 = 40.6243
    w = 324 / 476 * 0.6
    x1 = (0.9 * 40 + w * 42) / (0.9 + w)
    assert x1 == pytest.approx(40.6243, abs=1e-4)
    assert torch.allclose(det[0, :4], torch.tensor([x1, x1, x1 + 20, x1 + 20]))
    assert torch.allclose(det[1, :4], torch.tensor([42.0, 42.0, 62.0, 62.0]))
    assert torch.allclose(det[2, :4], torch.tensor([140.0, 140.0, 160.0, 160.0]))
    (plain,) = non_max_suppression(pred, conf_thres=0.1, iou_thres=0.6, multi_label=False)
    assert torch.allclose(plain[0, :4], torch.tensor([40.0, 40.0, 60.0, 60.0]))


def test_per_class_thresholds_keep_score_at_or_above_their_class_threshold():
    pred = torch.tensor([[
        _row(50, 50, 20, 20, 0.9, [0.5, 0.8, 0.1]),    # best class 1, score 0.72; class 0 0.45
        _row(200, 200, 10, 10, 0.5, [0.6, 0.1, 0.1]),  # class 0, score 0.3
        _row(300, 100, 40, 20, 0.5, [0.1, 0.1, 0.5]),  # class 2, score 0.25: exactly its threshold, kept
    ]])
    thresholds = [0.4, 0.75, 0.25]
    (det,) = non_max_suppression(pred, conf_thres=thresholds, iou_thres=0.5, multi_label=False)
    # the 0.72 box's best class 1 misses its 0.75 (single-label: its class 0 score does not stand in)
    assert det[:, 5].tolist() == [2.0] and det[:, 4].tolist() == pytest.approx([0.25])
    (det,) = non_max_suppression(pred, conf_thres=thresholds, iou_thres=0.5, multi_label=True)
    assert det[:, 5].tolist() == [0.0, 2.0] and det[:, 4].tolist() == pytest.approx([0.45, 0.25])
    with pytest.raises(ValueError, match="2 per-class confidence thresholds for a model of 3 classes"):
        non_max_suppression(pred, conf_thres=[0.1, 0.2])


def test_per_class_thresholds_equal_nms_at_their_minimum_then_filtering():
    generator = torch.Generator().manual_seed(0)
    n, k = 400, 5
    xy = torch.rand(2, n, 2, generator=generator) * 200
    wh = 10 + torch.rand(2, n, 2, generator=generator) * 40
    pred = torch.cat((xy, wh, torch.rand(2, n, 1 + k, generator=generator)), dim=-1)
    thresholds = torch.tensor([0.05, 0.3, 0.5, 0.15, 0.7])
    for multi_label in (False, True):
        filtered = non_max_suppression(pred, thresholds, 0.5, max_det=5000, multi_label=multi_label)
        plain = non_max_suppression(pred, float(thresholds.min()) - 1e-6, 0.5, max_det=5000, multi_label=multi_label)
        for got, every in zip(filtered, plain):
            keep = every[:, 4] >= thresholds[every[:, 5].long()]
            assert len(got) > 20 and torch.equal(got, every[keep])


def test_a_numpy_number_is_one_threshold_not_a_list_of_them():
    import numpy as np

    torch.manual_seed(0)
    pred = torch.rand(2, 60, 8)  # 3 classes
    expected = non_max_suppression(pred, 0.3, 0.45)
    for conf in (np.float32(0.3), np.float64(0.3), torch.tensor(0.3)):
        got = non_max_suppression(pred, conf, 0.45)
        assert all(torch.allclose(a, b) for a, b in zip(got, expected)), type(conf)
