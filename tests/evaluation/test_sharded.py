"""COCOeval shared by the ranks (detect.evaluation.sharded) on the default engine gives pycocotools'
single-process numbers exactly: the 12 stats and every class's AP, on a generated 5,000-image split, on a VOC
split with difficult boxes and on coco-tiny with the real yolov3-tiny weights, for 1, 2 and 3 ranks."""

import numpy as np
import pytest
import torch

from benchmarks.scale_data import fake_detections, generate_split, write_pool
from detect.data.loader import open_split
from detect.evaluation.coco import detections_to_rows, rows_to_results
from detect.evaluation.cocoeval_engines import DEFAULT_BACKEND, summary_stats
from detect.evaluation.evaluator import CocoEvaluator
from detect.evaluation.sharded import deal_categories
from tests.conftest import ROOT, shared_path
from tests.support.coco_oracles import coco_evaluate
from tests.support.difficult_voc import kangaroo_with_difficult_boxes
from tests.support.distributed import run_distributed


def reference(source, rows: np.ndarray) -> tuple[list[float], dict[str, tuple[float, float]]]:
    """pycocotools in one process: the 12 stats and {class: (AP50, AP)}."""
    image_ids = [r.image_id for r in source.records]
    stats, per_class = coco_evaluate(source.coco_ground_truth(), rows_to_results(rows), image_ids, source.names,
                                     source.category_ids, backend="pycocotools")
    return stats, {c.name: (c.ap50, c.ap) for c in per_class}


def generated_rows(source, per_image: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = [detections_to_rows(torch.from_numpy(fake_detections(r.boxes, r.classes, per_image, len(source.names),
                                                                rng)), r.image_id, source.category_ids)
            for r in source.records]
    return np.concatenate(rows)


def _shard(rank: int, world: int, spec, split: str, rows: np.ndarray, backend: str, cache_dir):
    source = open_split(spec, split, cache_dir)
    evaluator = CocoEvaluator(source, backend=backend)
    for image_id in [r.image_id for r in source.records][rank::world]:
        evaluator.add_rows(rows[rows[:, 0] == image_id], image_id)
    result = evaluator.compute()
    return result.stats, {c.name: (c.ap50, c.ap) for c in result.per_class}, result.match is not None


def assert_same(got, want) -> None:
    (stats, classes), (ref_stats, ref_classes) = got, want
    assert stats == ref_stats
    assert classes == ref_classes


def test_categories_are_dealt_by_instances_the_same_everywhere():
    # loads: 100 | 50 + 40 + 5 + 1 (5 has no ground truth and weighs 1)
    assert deal_categories({1: 100, 2: 50, 3: 40, 4: 5}, [5, 4, 3, 2, 1], 2) == [[1], [2, 3, 4, 5]]
    assert deal_categories({1: 3}, [1, 2], 3) == [[1], [2], []]  # a rank may own nothing


def test_summary_stats_equal_cocoevals_own_summarize(tmp_path):
    """summary_stats on the arrays equals COCOeval.summarize() (no category at all: -1 kept)."""
    from pycocotools.cocoeval import COCOeval

    from detect.evaluation.cocoeval_engines import load_rows

    spec, source = _generated(tmp_path, 60)
    rows = generated_rows(source, 30)
    gt = source.coco_ground_truth()
    evaluator = COCOeval(gt, load_rows(gt, rows), "bbox")
    evaluator.evaluate()
    evaluator.accumulate()
    evaluator.summarize()
    assert summary_stats(evaluator.eval["precision"], evaluator.eval["recall"]) == list(evaluator.stats)


def _generated(tmp_path, images: int):
    pool = write_pool(tmp_path / "pool", 0)
    split = generate_split(tmp_path, "val", images, pool, 7)
    spec = tmp_path / "gen.yaml"
    spec.write_text(f"path: {tmp_path}\nformat: coco\ntrain: val\nval: val\ntrain_annotations: val.json\n"
                    f"val_annotations: val.json\n")
    assert split.num_images == images
    return spec, open_split(spec, "val", tmp_path / "cache")


@pytest.mark.slow
def test_a_generated_5000_image_split_gives_pycocotools_numbers_on_1_2_3_ranks(tmp_path):
    spec, source = _generated(tmp_path, 5000)
    rows = generated_rows(source, 12)
    want = reference(source, rows)
    for world in (1, 2, 3):
        outputs = run_distributed(_shard, world, args=(spec, "val", rows, DEFAULT_BACKEND, tmp_path / "cache"),
                                  timeout=300)
        for stats, classes, has_rows in outputs:
            assert_same((stats, classes), want)
        assert [o[2] for o in outputs] == [True] + [False] * (world - 1)  # the matches on rank 0 only


def test_a_voc_split_with_difficult_boxes_gives_pycocotools_numbers(tmp_path):
    spec = kangaroo_with_difficult_boxes(tmp_path / "voc")
    source = open_split(spec, "val", tmp_path / "cache")
    assert sum(int(r.difficult.sum()) for r in source.records) >= 5, "the test needs difficult boxes"
    rows = generated_rows(source, 20, seed=3)
    want = reference(source, rows)
    for world in (1, 2):
        for stats, classes, _ in run_distributed(_shard, world, args=(spec, "val", rows, DEFAULT_BACKEND,
                                                                       tmp_path / "cache")):
            assert_same((stats, classes), want)


@pytest.mark.slow
def test_coco_tiny_with_the_real_weights_gives_pycocotools_numbers(tmp_path):
    from detect.darknet.load import for_inference, load_model
    from detect.data.loader import build_eval_loader
    from detect.evaluation.evaluator import evaluate

    shared_path("data", "coco-tiny")  # skipped without ../shared, before the spec that points there is opened
    spec = ROOT / "data" / "coco-tiny.yaml"
    source = open_split(spec, "val", tmp_path / "cache")
    model = for_inference(load_model(shared_path("darknet-cfg/yolov3-tiny.cfg"),
                                     shared_path("weights/yolov3-tiny.weights"), exact=True).model,
                          torch.device("cpu"))
    loader = build_eval_loader(source, "val", 320, 8, 0, model.max_stride, 0, 1)
    result = evaluate(model, loader, CocoEvaluator(source), torch.device("cpu"))
    rows = result.rows
    assert result.backend == DEFAULT_BACKEND and len(rows) > 1000 and result.map50 > 0.3
    want = reference(source, rows)
    assert_same((result.stats, {c.name: (c.ap50, c.ap) for c in result.per_class}), want)
    for world in (2, 3):
        for stats, classes, _ in run_distributed(_shard, world, args=(spec, "val", rows, DEFAULT_BACKEND,
                                                                       tmp_path / "cache")):
            assert_same((stats, classes), want)


@pytest.mark.parametrize("backend", ["pycocotools", "faster-coco-eval"])
def test_a_rank_evaluates_its_categories_a_group_at_a_time_with_the_same_numbers(tmp_path, backend):
    """The COCO-API engines take groups of at most max_rows detections (a bigger category alone): the numbers of
    one run."""
    from detect.evaluation.coco import ground_truth_counts
    from detect.evaluation.cocoeval_engines import chunk_categories
    from detect.evaluation.sharded import sharded_cocoeval

    rows = np.array([[0, 0, 0, 1, 1, 0.5, c] for c in [1] * 5 + [2] * 3 + [3] * 9 + [4]])
    assert chunk_categories(rows, [1, 2, 3, 4, 5], 8) == [[1, 2], [3], [4, 5]]
    _, source = _generated(tmp_path, 60)
    rows = generated_rows(source, 30)
    gt, ids = source.coco_ground_truth(), [r.image_id for r in source.records]
    instances = {cid: n for cid, (_, n) in ground_truth_counts(gt, ids).items()}
    one = sharded_cocoeval(gt, rows, ids, source.category_ids, instances, backend)
    grouped = sharded_cocoeval(gt, rows, ids, source.category_ids, instances, backend, max_rows=40)
    assert np.array_equal(one.precision, grouped.precision) and np.array_equal(one.recall, grouped.recall)
    assert summary_stats(one.precision, one.recall)[1] > 0.1
