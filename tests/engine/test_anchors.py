"""detect.engine.anchors: label shapes at the training size, fit figures under the loss's ratio rule, fitting, and the
cfg rewrite. Dataset figures come from ../shared (skipped when absent)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from detect.darknet import Darknet
from detect.data.records.records import ImageRecord
from detect.engine.anchor_fitting import (
    AnchorLayout,
    anchor_changes,
    describe_anchor_changes,
    fit_anchors,
    kmeans_anchors,
    read_anchor_layout,
    rewrite_cfg_anchors,
)
from detect.engine.anchors import (
    anchor_fit,
    label_shapes,
    model_anchor_fit,
    poor_fit_warning,
    ratio_metric,
    split_shapes,
)
from tests.conftest import ROOT

TINY_CFG = ROOT / "cfg" / "yolov3-tiny.cfg"  # pjreddie's masks 3,4,5 and 1,2,3: anchor 0 is unused
MINI_CFG = ROOT / "cfg" / "yolo-mini.cfg"


def record(width, height, boxes):
    boxes = np.array(boxes, dtype=np.float32).reshape(-1, 4)
    return ImageRecord("x.jpg", width, height, boxes, np.zeros(len(boxes), dtype=np.int64), 0)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("label-cache")


# -- shapes and figures on hand-made boxes -----------------------------------------------------------------
def test_label_shapes_scale_the_long_side_to_img_size():
    source = SimpleNamespace(records=[
        record(200, 100, [[0, 0, 50, 20], [10, 10, 30, 90]]),  # landscape: x2 at 400
        record(100, 400, [[5, 5, 25, 45]]),  # portrait: long side 400 already
        record(50, 50, []),  # no boxes
    ])
    np.testing.assert_allclose(label_shapes(source, 400), [[100, 40], [40, 160], [20, 40]])
    assert label_shapes(SimpleNamespace(records=[record(50, 50, [])]), 400).shape == (0, 2)


def test_fit_figures_follow_the_loss_ratio_rule():
    assert ratio_metric(np.array([[39.0, 10.0], [10.0, 2.5]]), np.array([[10.0, 10.0]]))[:, 0].tolist() == [3.9, 4.0]
    head_a = np.array([[10.0, 10.0], [200.0, 200.0]])
    head_b = torch.tensor([[40.0, 40.0]])  # model heads hold tensors
    shapes = np.array([
        [10, 10],  # exactly anchor A0
        [39, 10],  # 3.9x A0: matched
        [41, 10],  # 4.1x A0, 4x B (the rule is strict): matched by none
        [20, 20],  # 2x A0 and 2x B
        [40, 40],  # exactly B; 4x A0, 5x A1
        [200, 200],  # exactly A1
    ])
    fit = anchor_fit(shapes, [head_a, head_b], anchor_t=4.0)
    assert fit.head_recall == pytest.approx((4 / 6, 2 / 6))
    assert fit.recall == pytest.approx(5 / 6)
    assert fit.anchors_per_box == pytest.approx(6 / 6)
    assert fit.num_boxes == 6
    assert fit.summary() == ("anchor fit (ratio < 4, 6 boxes): best possible recall 0.833, 1.00 anchors/box; "
                             "per head: head 0 0.667, head 1 0.333")
    warning = poor_fit_warning(fit)
    assert "only 0.833 of 6 training boxes" in warning and "--anchors fit" in warning
    assert poor_fit_warning(anchor_fit(shapes[[0, 1, 3, 4, 5]], [head_a, head_b])) is None
    empty = anchor_fit(np.zeros((0, 2)), [head_a])
    assert empty.num_boxes == 0 and poor_fit_warning(empty) is None and "no boxes" in empty.summary()


def test_model_anchor_fit_reads_each_head():
    model = Darknet(MINI_CFG.read_text())  # heads: mask 3,4,5 (50..88 px squares) and 0,1,2 (16..36 px)
    fit = model_anchor_fit(model, np.array([[10.0, 10.0], [88.0, 88.0], [400.0, 400.0]]))
    # 10 is 5x of 50 and 1.6x of 16; 88 is 2.4x of 36; 400 is 4.5x of 88
    assert fit.head_recall == pytest.approx((1 / 3, 2 / 3))
    assert fit.recall == pytest.approx(2 / 3)
    assert fit.head_labels[0].startswith(f"layer {model.heads[0].layer_index} (stride ")


# -- fitting --------------------------------------------------------------------------------------------------
def clusters(seed=0):
    """600 shapes around three well separated sizes (log-normal spread)."""
    rng = np.random.default_rng(seed)
    centres = np.repeat([[12.0, 30.0], [60.0, 60.0], [220.0, 130.0]], 200, axis=0)
    return centres * np.exp(0.1 * rng.standard_normal(centres.shape))


def test_kmeans_finds_the_clusters_and_is_deterministic():
    shapes = clusters()
    centres = kmeans_anchors(shapes, 3, seed=0)
    order = np.argsort(centres.prod(1))
    np.testing.assert_allclose(centres[order], [[12, 30], [60, 60], [220, 130]], rtol=0.05)
    np.testing.assert_array_equal(kmeans_anchors(shapes, 3, seed=0), centres)


def test_fit_anchors_recovers_recall_from_bad_anchors():
    # The cfg's anchors are all near 12x30: the 220x130 boxes (half of them) are 12x its largest.
    shapes = np.concatenate([clusters()[:200], clusters(1)[400:]])  # 12x30 and 220x130: half and half
    layout = AnchorLayout(anchors=np.array([[8, 20], [10, 25], [12, 30], [14, 35], [16, 40], [18, 45]], float),
                          masks=((3, 4, 5), (0, 1, 2)), layers=(10, 20), classes=(1, 1))
    fitted = fit_anchors(shapes, layout, anchor_t=4.0, seed=0, generations=300)
    assert fitted.before.recall == pytest.approx(0.5)
    assert fitted.after.recall > 0.98
    assert fitted.after.num_boxes == 400
    again = fit_anchors(shapes, layout, anchor_t=4.0, seed=0, generations=300)
    np.testing.assert_array_equal(again.anchors, fitted.anchors)
    assert np.all(fitted.anchors == np.round(fitted.anchors))
    assert np.all(np.diff(fitted.anchors.prod(1)) >= 0)  # sorted by area
    assert "best possible recall 0.500 -> " in fitted.summary()


def test_fit_leaves_anchors_no_head_uses():
    layout = read_anchor_layout(TINY_CFG.read_text())
    assert layout.masks == ((3, 4, 5), (1, 2, 3)) and layout.used.tolist() == [1, 2, 3, 4, 5]
    fitted = fit_anchors(clusters(), layout, seed=0, generations=100)
    assert fitted.anchors[0].tolist() == [10, 14]
    assert fitted.after.recall == 1.0


def test_fit_refuses_shapes_too_small_to_fit():
    layout = read_anchor_layout(TINY_CFG.read_text())
    with pytest.raises(ValueError, match="at least 2 pixels"):
        fit_anchors(np.array([[1.0, 5.0]]), layout)


# -- the cfg rewrite ------------------------------------------------------------------------------------------
def test_rewrite_changes_only_the_anchor_lines_and_builds():
    text = TINY_CFG.read_text()
    new = np.array([[10, 14], [9, 8], [12, 26], [31, 39], [66, 58], [136, 151]], float)
    out = rewrite_cfg_anchors(text, new)
    before, after = text.splitlines(keepends=True), out.splitlines(keepends=True)
    assert len(before) == len(after)
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert len(changed) == 2 and all(before[i].lstrip().startswith("anchors") for i in changed)
    assert after[changed[0]] == "anchors = 10,14,  9,8,  12,26,  31,39,  66,58,  136,151\n"
    model = Darknet(out)
    assert model.heads[0].anchors.tolist() == [[31, 39], [66, 58], [136, 151]]  # mask 3,4,5
    assert model.heads[1].anchors.tolist() == [[9, 8], [12, 26], [31, 39]]  # mask 1,2,3
    assert read_anchor_layout(out).anchors.tolist() == new.tolist()


def test_rewrite_keeps_crlf_and_adds_a_missing_anchors_line():
    lines = MINI_CFG.read_text().splitlines()
    second = [i for i, line in enumerate(lines) if line.startswith("anchors=")][1]
    text = "\r\n".join(lines[:second] + ["# a comment", "anchors   =  1,1"] + lines[second + 1:]) + "\r\n"
    no_anchors = text.replace("anchors=16,16, 24,24, 36,36, 50,50, 66,66, 88,88\r\n", "", 1)
    new = np.arange(1, 13, dtype=float).reshape(6, 2) * 10
    out = rewrite_cfg_anchors(no_anchors, new)
    assert "anchors   =  10,20,  30,40,  50,60,  70,80,  90,100,  110,120\r\n" in out
    assert "[yolo]\r\nanchors=10,20,  30,40,  50,60,  70,80,  90,100,  110,120\r\nmask=3,4,5\r\n" in out
    assert out.replace("\r\n", "") == out.replace("\n", "").replace("\r", "")  # every line still ends CRLF
    model = Darknet(out)
    assert [h.anchors.tolist() for h in model.heads] == [new[[3, 4, 5]].tolist(), new[[0, 1, 2]].tolist()]
    with pytest.raises(ValueError, match="5 anchors given for a \\[yolo\\] with num=6"):
        rewrite_cfg_anchors(text, new[:5])


def test_layout_refuses_heads_with_different_anchor_lists():
    text = MINI_CFG.read_text().replace("anchors=16,16,", "anchors=17,16,", 1)
    with pytest.raises(ValueError, match="differ from the first"):
        read_anchor_layout(text)


def test_changed_slots_name_the_invalidated_rows():
    layout = AnchorLayout(anchors=np.array([[10, 14], [23, 27], [37, 58], [81, 82]], float),
                          masks=((2, 3), (1, 2)), layers=(16, 23), classes=(1, 1))
    new = np.array([[5, 5], [23, 27], [30, 40], [81, 82]], float)  # anchor 0 (unused) and 2 (both heads) move
    changes = anchor_changes(layout, new)
    assert [(c.layer, c.slot, c.index, c.rows) for c in changes] == [(16, 0, 2, (2, 3)), (23, 1, 2, (8, 9))]
    text = describe_anchor_changes(changes).splitlines()
    assert text[1:] == ["  layer 16 slot 0 (anchor 2): 37x58 -> 30x40; conv layer 15 rows 2,3",
                        "  layer 23 slot 1 (anchor 2): 37x58 -> 30x40; conv layer 22 rows 8,9"]
    assert describe_anchor_changes(anchor_changes(layout, layout.anchors)).startswith("anchors unchanged")
    with pytest.raises(ValueError, match="3 new anchors for a cfg with num=4"):
        anchor_changes(layout, new[:3])


# -- real data ------------------------------------------------------------------------------------------------
def test_coco_tiny_fit_with_yolov3_tiny_anchors(shared, cache_dir):
    shared("data", "coco-tiny")
    shapes = split_shapes(ROOT / "data" / "coco-tiny.yaml", 416, "train", cache_dir)
    assert shapes.shape == (699, 2)
    fit = model_anchor_fit(Darknet(TINY_CFG.read_text()), shapes)
    assert [round(r, 3) for r in fit.head_recall] == [0.571, 0.896]  # 399 and 626 of 699
    assert round(fit.recall, 3) == 0.918  # 642 of 699: poor
    assert round(fit.anchors_per_box, 3) == 2.979
    assert poor_fit_warning(fit) is not None
    fitted = fit_anchors(shapes, read_anchor_layout(TINY_CFG.read_text()), seed=0)
    assert fitted.before.recall == fit.recall
    assert fitted.after.recall > 0.99


def test_kangaroo_fit_with_yolov3_tiny_anchors(shared, cache_dir):
    shared("data", "kangaroo")
    shapes = split_shapes(ROOT / "data" / "kangaroo.yaml", 416, "train", cache_dir)
    assert shapes.shape == (214, 2)
    fit = model_anchor_fit(Darknet(TINY_CFG.read_text()), shapes)
    assert [round(r, 3) for r in fit.head_recall] == [1.0, 0.935]  # the stride 16 head misses 14 of 214
    assert fit.recall == 1.0 and round(fit.anchors_per_box, 3) == 4.150
    assert poor_fit_warning(fit) is None
