"""COCO conversion, COCOeval wrapping and sharded evaluation on synthetic data (1, 2 and 3 gloo ranks)."""

import numpy as np
import pytest
import torch
from pycocotools.coco import COCO

from detect.evaluation.coco import (
    detections_to_rows,
    format_class_table,
    rows_to_results,
    sort_rows,
)
from detect.evaluation.evaluator import CocoEvaluator, evaluate, write_results_json
from detect.inference.options import EVALUATION
from tests.support.coco_oracles import coco_evaluate
from tests.support.distributed import run_distributed

NAMES = ["cat", "dog", "bird"]
CATEGORY_IDS = [3, 7, 11]  # not contiguous: the mapping must be applied
INPUT = 64  # square letterbox size of the synthetic loader


def _coco(images, annotations):
    gt = COCO()
    gt.dataset = {"images": images, "annotations": annotations,
                  "categories": [{"id": c, "name": n} for c, n in zip(CATEGORY_IDS, NAMES)]}
    gt.createIndex()
    return gt


def _ann(ann_id, image_id, cat, box):
    return {"id": ann_id, "image_id": image_id, "category_id": cat, "bbox": box, "area": box[2] * box[3],
            "iscrowd": 0}


def test_detections_to_rows_maps_categories_and_rounds():
    det = torch.tensor([[10.0, 20.0, 40.123456, 60.0, 0.8765432, 2.0], [0.0, 0.0, 5.0, 5.0, 0.5, 0.0]])
    rows = detections_to_rows(det, image_id=42, category_ids=CATEGORY_IDS)
    assert rows.shape == (2, 7)
    assert rows[0].tolist() == pytest.approx([42, 10.0, 20.0, 30.123, 40.0, 0.87654, 11])
    results = rows_to_results(rows)
    assert results[1] == {"image_id": 42, "category_id": 3, "bbox": [0.0, 0.0, 5.0, 5.0], "score": 0.5}
    assert detections_to_rows(torch.zeros(0, 6), 1, CATEGORY_IDS).shape == (0, 7)
    shuffled = sort_rows(rows[::-1].copy())
    assert shuffled[:, 5].tolist() == pytest.approx([0.87654, 0.5])


def test_coco_evaluate_perfect_and_half_recall():
    images = [{"id": 1, "width": 200, "height": 200}, {"id": 2, "width": 200, "height": 200}]
    anns = [_ann(1, 1, 3, [10, 10, 100, 100]), _ann(2, 2, 3, [50, 50, 120, 120]), _ann(3, 1, 7, [0, 0, 150, 150])]
    gt = _coco(images, anns)
    perfect = [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 0.9}
               for a in anns]
    stats, per_class = coco_evaluate(gt, perfect, [1, 2], NAMES, CATEGORY_IDS)
    assert stats[0] == pytest.approx(1.0) and stats[1] == pytest.approx(1.0)
    assert stats[3] == 0.0  # no small objects: pycocotools' -1 is reported as 0
    assert [(c.name, c.images, c.instances) for c in per_class] == [("cat", 2, 2), ("dog", 1, 1)]
    # one of the two cats found: precision 1 up to recall 0.5 -> 51 of COCO's 101 recall points
    stats, per_class = coco_evaluate(gt, perfect[:1] + perfect[2:], [1, 2], NAMES, CATEGORY_IDS)
    assert per_class[0].ap50 == pytest.approx(51 / 101) and per_class[0].ap == pytest.approx(51 / 101)
    assert per_class[1].ap50 == pytest.approx(1.0)
    assert stats[0] == pytest.approx((51 / 101 + 1.0) / 2)
    assert "cat" in format_class_table(per_class, 2, stats)


def test_coco_evaluate_without_detections_is_zero():
    gt = _coco([{"id": 1, "width": 50, "height": 50}], [_ann(1, 1, 7, [0, 0, 10, 10])])
    stats, per_class = coco_evaluate(gt, [], [1], NAMES, CATEGORY_IDS)
    assert stats == [0.0] * 12
    assert [(c.name, c.images, c.instances, c.ap50, c.ap) for c in per_class] == [("dog", 1, 1, 0.0, 0.0)]


# ---- sharded evaluation with a synthetic loader and a small deterministic detector ----------------------------

class TinyDetector(torch.nn.Module):
    """A fixed random conv head decoded like a YOLO head: [N, P, 5+K] in input pixels."""

    def __init__(self, num_classes=3, stride=8, silent=False):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.stride, self.num_classes, self.silent = stride, num_classes, silent
        self.anchors = torch.tensor([[12.0, 16.0], [30.0, 24.0]])
        self.conv = torch.nn.Conv2d(3, 2 * (5 + num_classes), stride, stride)
        with torch.no_grad():
            self.conv.weight.copy_(torch.randn(self.conv.weight.shape, generator=g) * 0.3)
            self.conv.bias.zero_()

    def forward(self, x):
        n, _, h, w = x.shape
        raw = self.conv(x).view(n, 2, 5 + self.num_classes, h // self.stride, w // self.stride)
        raw = raw.permute(0, 1, 3, 4, 2)
        gy, gx = torch.meshgrid(torch.arange(h // self.stride), torch.arange(w // self.stride), indexing="ij")
        xy = (raw[..., :2].sigmoid() + torch.stack((gx, gy), -1)) * self.stride
        wh = raw[..., 2:4].clamp(-3, 3).exp() * self.anchors[None, :, None, None]
        scores = raw[..., 4:].sigmoid()
        if self.silent:
            scores = torch.zeros_like(scores)
        return torch.cat((xy, wh, scores), -1).reshape(n, -1, 5 + self.num_classes)


class SyntheticSource:
    names, category_ids = NAMES, CATEGORY_IDS

    def __init__(self, sizes, seed=0):
        rng = np.random.default_rng(seed)
        self.sizes = sizes
        self.images = [{"id": 100 + i, "height": h, "width": w} for i, (h, w) in enumerate(sizes)]
        self.annotations = []
        for img in self.images:
            for _ in range(3):
                bw, bh = rng.uniform(0.15, 0.5) * img["width"], rng.uniform(0.15, 0.5) * img["height"]
                x, y = rng.uniform(0, img["width"] - bw), rng.uniform(0, img["height"] - bh)
                cat = int(rng.choice(CATEGORY_IDS))
                self.annotations.append(_ann(len(self.annotations) + 1, img["id"], cat, [x, y, bw, bh]))

    def coco_ground_truth(self):
        return _coco(self.images, self.annotations)


class SyntheticEvalLoader:
    """Square-letterboxed batches over the whole set, whole batches dealt round-robin to ranks."""

    def __init__(self, source, batch_size, rank, world_size):
        g = torch.Generator().manual_seed(1)
        pixels = torch.randint(0, 256, (len(source.sizes), 3, INPUT, INPUT), generator=g, dtype=torch.uint8)
        batches = [range(i, min(i + batch_size, len(source.sizes))) for i in range(0, len(source.sizes), batch_size)]
        self.batches = [(pixels[list(b)], torch.zeros(0, 6), [self._meta(source, i) for i in b])
                        for k, b in enumerate(batches) if k % world_size == rank]

    @staticmethod
    def _meta(source, i):
        h, w = source.sizes[i]
        ratio = INPUT / max(h, w)
        return {"image_id": source.images[i]["id"], "orig_size": (h, w), "ratio": ratio,
                "pad": ((INPUT - w * ratio) / 2, (INPUT - h * ratio) / 2)}

    def __iter__(self):
        return iter(self.batches)


SIZES = [(48, 64), (64, 40), (64, 64), (30, 64), (64, 50), (56, 64), (64, 64)]


def _evaluate_shard(rank, world_size, num_images, silent):
    torch.manual_seed(1234 + rank)  # different global RNG state per rank must not matter
    source = SyntheticSource(SIZES[:num_images])
    loader = SyntheticEvalLoader(source, batch_size=2, rank=rank, world_size=world_size)
    result = evaluate(TinyDetector(silent=silent), loader, CocoEvaluator(source), "cpu",
                      settings=EVALUATION.settings(conf=0.01))  # the Predictor's NMS, the evaluator scores
    match = result.match
    matches = None if match is None else [a.tolist() for a in (match.image_ids, *match.matched(), match.confusion)]
    return result.stats, [tuple(c.__dict__.values()) for c in result.per_class], result.num_images, \
        len(result.results), matches


def test_evaluate_single_process_gives_metrics_and_results():
    stats, per_class, num_images, num_results, matches = _evaluate_shard(0, 1, 7, False)
    assert num_images == 7 and num_results > 0 and 0 < len(matches[1]) <= num_results  # maxDets cut
    assert len(stats) == 12 and 0 < stats[1] <= 1 and 0 <= stats[0] <= stats[1]
    assert sum(c[2] for c in per_class) == 21  # three ground-truth boxes per image


def test_evaluate_model_without_detections_gives_zero():
    stats, per_class, num_images, num_results, _ = _evaluate_shard(0, 1, 7, True)
    assert stats == [0.0] * 12 and num_results == 0 and num_images == 7
    assert all(c[3] == 0.0 and c[4] == 0.0 for c in per_class)


@pytest.mark.slow
def test_same_metrics_for_world_size_1_2_3():
    reference = _evaluate_shard(0, 1, 7, False)
    for world_size in (2, 3):  # 4 batches of 2 (last one 1): uneven shards
        outputs = run_distributed(_evaluate_shard, world_size, args=(7, False))
        for rank, (stats, per_class, num_images, _, matches) in enumerate(outputs):
            assert stats == reference[0] and per_class == reference[1] and num_images == 7
            # each rank holds its own detections; rank 0 the matches of all, as one process has them
            assert matches == (reference[4] if rank == 0 else None)
        assert sum(o[3] for o in outputs) == reference[3]


def _results_json(rank, world_size, path):
    source = SyntheticSource(SIZES)
    loader = SyntheticEvalLoader(source, batch_size=2, rank=rank, world_size=world_size)
    result = evaluate(TinyDetector(silent=False), loader, CocoEvaluator(source, keep_results=False), "cpu",
                      settings=EVALUATION.settings(conf=0.01))
    write_results_json(path, result.rows, chunk=100)  # chunks of 100 dicts: several per rank
    return len(result.rows)


@pytest.mark.slow
def test_results_json_streams_every_ranks_detections_into_one_file(tmp_path):
    """results.json from 2 ranks (rank 0 writes its rows, then rank 1's) holds exactly the detections one process
    writes, each image's in the same order."""
    import json

    one = _results_json(0, 1, tmp_path / "one.json")
    counts = run_distributed(_results_json, 2, args=(tmp_path / "two.json",))
    single, shared = (json.loads((tmp_path / name).read_text()) for name in ("one.json", "two.json"))
    assert len(single) == one == sum(counts) and min(counts) > 0 and not list(tmp_path.glob("*.tmp"))
    assert _per_image(shared) == _per_image(single)


def _per_image(results: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in results:
        out.setdefault(r["image_id"], []).append(r)
    return out


def _evaluate_twice(rank, world_size, num_images):
    return _evaluate_shard(rank, world_size, num_images, False), _evaluate_shard(rank, world_size, num_images, True)


@pytest.mark.slow
def test_rank_without_images_and_no_detections_distributed():
    # 3 images in batches of 2 -> 2 batches for 3 ranks: rank 2 has none
    reference = _evaluate_shard(0, 1, 3, False)
    outputs = run_distributed(_evaluate_twice, 3, args=(3,))
    assert all(normal[0] == reference[0] and normal[2] == 3 for normal, _ in outputs)
    assert all(silent[0] == [0.0] * 12 and silent[2] == 3 for _, silent in outputs)


def test_the_predictor_owns_nms_and_the_evaluator_only_scores():
    """The evaluator ran its own NMS on the loader path (a second owner of the thresholds): now the Predictor's
    settings alone decide the detections, and the evaluator takes no NMS setting."""
    source = SyntheticSource(SIZES)
    loader = SyntheticEvalLoader(source, batch_size=2, rank=0, world_size=1)
    one_each = evaluate(TinyDetector(silent=False), loader, CocoEvaluator(source), "cpu",
                        settings=EVALUATION.settings(conf=0.01, max_det=1))
    assert np.bincount(one_each.rows[:, 0].astype(int)).max() == 1 and one_each.num_images == 7
    assert one_each.timings["nms"] > 0  # the Predictor's postprocess, timed by the loop
    with pytest.raises(TypeError):
        CocoEvaluator(source, conf_thres=0.01)
