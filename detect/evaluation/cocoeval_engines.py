"""The COCOeval engines, run over any subset of the categories: ultrafast-pycocotools (Rust, the default),
faster-coco-eval (C++) or pycocotools (the reference), all giving pycocotools' numbers, VOC `difficult` boxes
matched by IoU.

ultrafast-pycocotools gives pycocotools' precision and recall arrays bit for bit (the project's tests check
them with np.array_equal on real detections, crowd regions and score ties) in about a second at COCO val's size,
with no Python object per detection. It matches every ground truth in Rust, though, so the IoU override that
makes a VOC difficult box a box rather than a crowd region cannot reach it: the categories with a difficult box
among the evaluated images go through pycocotools (`cocoeval_class`), the others through ultrafast. faster-coco-eval
can differ from pycocotools in the last bit of a precision where a category's first detection is its only one
(tp / (tp + fp) against pycocotools' tp / (tp + fp + eps)); it stays selectable.

COCOeval's work is independent per category: the matching of an image's detections to its ground truth, the
`maxDets` cut and the accumulation over images all happen within one category. So a run over a subset of the
categories gives exactly the precision and recall slices the run over all of them would, and the evaluation
can be shared by ranks category by category (detect.evaluation.sharded).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Sequence

import numpy as np

log = logging.getLogger(__name__)

ULTRAFAST = "ultrafast-pycocotools"
BACKENDS = (ULTRAFAST, "faster-coco-eval", "pycocotools")
DEFAULT_BACKEND = ULTRAFAST

# detections the COCO-API engines (pycocotools, faster-coco-eval) take at once: they hold a Python dict of about
# 1 KB per detection, so a rank evaluates its categories a group at a time (ultrafast holds arrays: no limit)
MAX_ROWS_AT_ONCE = 120_000


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"--coco-backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def quiet(fn, *args):
    """Call a COCO API function, moving what it prints to the debug log."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        out = fn(*args)
    if buffer.getvalue().strip():
        log.debug("COCO API: %s", buffer.getvalue().strip())
    return out


def _base_class(backend: str):
    if backend == ULTRAFAST:
        raise ValueError(f"{ULTRAFAST} cannot match difficult boxes by IoU: evaluate_categories routes their "
                         f"categories through pycocotools")
    if backend == "pycocotools":
        from pycocotools.cocoeval import COCOeval

        return COCOeval
    try:
        from faster_coco_eval import COCOeval_faster
    except ImportError:  # a dependency of the package; only a broken install lacks it
        raise ValueError("the faster-coco-eval package is missing (pip install faster-coco-eval), or choose "
                         "--coco-backend pycocotools") from None
    return COCOeval_faster


def cocoeval_class(backend: str = DEFAULT_BACKEND):
    """A COCOeval of `backend` that matches ground truth flagged `difficult` (VOC difficult objects, see
    detect.data.formats.sources) by IoU; COCO's own crowd regions keep intersection over the detection's area.

    A difficult box is a crowd box (`iscrowd` 1), because COCOeval ignores only those: a detection matched to
    it is neither a true nor a false positive, it may match any number of detections, and missing it costs no
    recall, all as in the VOC devkit. Matched as a crowd, though, any small detection inside it would be
    ignored, where VOC counts one with IoU below the threshold as a false positive. Both engines compute the
    IoUs in Python through `computeIoU`, which this overrides.
    """
    from pycocotools import mask as mask_utils

    base = _base_class(check_backend(backend))

    class DifficultAwareCOCOeval(base):
        def _pair(self, imgId, catId):
            """(ground truth, detections) of one image and category, in either engine's store."""
            if hasattr(self, "_gts"):  # pycocotools
                return self._gts[imgId, catId], self._dts[imgId, catId]
            return (self.gt_dataset.get_instances([imgId], [catId], True)[0][0],
                    self.dt_dataset.get_instances([imgId], [catId], True)[0][0])

        def computeIoU(self, imgId, catId):  # the engines' names
            if not self.params.useCats:
                return super().computeIoU(imgId, catId)
            gts, dts = self._pair(imgId, catId)
            if not gts or not dts or not any(g.get("difficult") for g in gts):
                return super().computeIoU(imgId, catId)
            # the detections in COCOeval's order: by score, stable, at most the largest maxDets
            dts = sorted(dts, key=lambda d: -d["score"])[:self.params.maxDets[-1]]
            crowd = [int(bool(g["iscrowd"]) and not g.get("difficult")) for g in gts]
            return mask_utils.iou([d["bbox"] for d in dts], [g["bbox"] for g in gts], crowd)

    return DifficultAwareCOCOeval


def check_ground_truth_ids(coco_gt) -> None:
    """Raise where an engine would score the ground truth wrongly without a word: both record a match by the
    ground truth's id and read 0 as "no match" (faster-coco-eval: any id below 1), so a box with such an id is
    never matched, and the COCO API keys annotations by id, so two boxes with one id merge."""
    ids, count = coco_gt.anns.keys(), len(coco_gt.dataset.get("annotations", []))
    fix = "give every annotation its own id from 1 (DatasetSource.coco_ground_truth() numbers a json's so)"
    if len(ids) != count:
        raise ValueError(f"{count - len(ids)} of the {count} ground-truth annotations share an id with another "
                         f"(the COCO API merges them): {fix}")
    try:
        low = min(ids, default=1)
    except TypeError:  # ids of mixed types
        kinds = ", ".join(sorted({type(i).__name__ for i in ids}))
        raise ValueError(f"ground-truth annotation ids of mixed types ({kinds}): {fix}") from None
    if not isinstance(low, (int, float)) or low < 1:
        raise ValueError(f"ground-truth annotation id {low!r}: COCOeval could never match that box; {fix}")


def load_rows(coco_gt, rows: np.ndarray):
    """COCO results from [n, 7] rows (image_id, x, y, w, h, score, category_id), no dict per detection on our
    side; an empty result set where there are no rows (the COCO API cannot load an empty list)."""
    if len(rows):
        return quiet(coco_gt.loadRes, np.ascontiguousarray(rows, dtype=np.float64))
    from pycocotools.coco import COCO

    empty = COCO()
    empty.dataset = {"images": list(coco_gt.dataset["images"]),
                     "categories": list(coco_gt.dataset["categories"]), "annotations": []}
    quiet(empty.createIndex)
    return empty


def evaluate_categories(coco_gt, rows: np.ndarray, image_ids: Sequence[int], category_ids: Sequence[int],
                        backend: str = DEFAULT_BACKEND,
                        max_rows: int = MAX_ROWS_AT_ONCE) -> tuple[np.ndarray, np.ndarray]:
    """COCOeval (bbox) over `image_ids` and the sorted `category_ids`: precision [T, R, K, A, M] and recall
    [T, K, A, M] with K in sorted category order (-1 where a category has no ground truth). `rows`: [n, 7]
    (detections_to_rows) of these categories, in sort_rows' order (COCOeval breaks score ties by input order).

    With ultrafast, the categories with a difficult box go through pycocotools (see the module's docstring); the
    COCO-API engines take groups of at most `max_rows` detections. Categories are independent in COCOeval, so
    the pieces put together are the arrays one run over all of them gives."""
    check_ground_truth_ids(coco_gt)
    cats = sorted(int(c) for c in category_ids)
    images = sorted(int(i) for i in image_ids)
    if check_backend(backend) == ULTRAFAST:
        slow = sorted(difficult_categories(coco_gt, images, cats))
        fast = [c for c in cats if c not in set(slow)]
        pieces = [(fast, *_ultrafast(coco_gt, _of(rows, fast, cats), images, fast))] if fast else []
        pieces += [(group, *_coco_api(coco_gt, _of(rows, group, cats), images, group, "pycocotools"))
                   for group in chunk_categories(rows, slow, max_rows)]
    else:
        pieces = [(group, *_coco_api(coco_gt, _of(rows, group, cats), images, group, backend))
                  for group in chunk_categories(rows, cats, max_rows)]
    if len(pieces) == 1:
        return pieces[0][1], pieces[0][2]
    return _assemble(pieces, cats)


def _of(rows: np.ndarray, group: list[int], cats: list[int]) -> np.ndarray:
    return rows if group == cats or not len(rows) else rows[np.isin(rows[:, 6], group)]


def _assemble(pieces, cats: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """precision and recall over `cats` from [(their categories, precision, recall)]."""
    axis = {c: k for k, c in enumerate(cats)}
    _, p0, r0 = pieces[0]
    precision = np.full(p0.shape[:2] + (len(cats),) + p0.shape[3:], -1.0)
    recall = np.full(r0.shape[:1] + (len(cats),) + r0.shape[2:], -1.0)
    for group, p, r in pieces:
        index = [axis[c] for c in group]
        precision[:, :, index] = p
        recall[:, index] = r
    return precision, recall


def chunk_categories(rows: np.ndarray, cats: list[int], max_rows: int) -> list[list[int]]:
    """`cats` in consecutive groups of at most `max_rows` detections (a category with more stays alone)."""
    counts = dict(zip(*np.unique(rows[:, 6].astype(np.int64), return_counts=True))) if len(rows) else {}
    groups, current, size = [], [], 0
    for cid in cats:
        n = int(counts.get(cid, 0))
        if current and size + n > max_rows:
            groups.append(current)
            current, size = [], 0
        current.append(cid)
        size += n
    return groups + ([current] if current else [])


def difficult_categories(coco_gt, image_ids: Sequence[int], category_ids: Sequence[int]) -> set[int]:
    """The categories among `category_ids` with a ground-truth box flagged `difficult` in `image_ids`."""
    images, cats = set(image_ids), set(category_ids)
    return {int(a["category_id"]) for a in coco_gt.dataset.get("annotations", [])
            if a.get("difficult") and a["image_id"] in images and int(a["category_id"]) in cats}


def _coco_api(coco_gt, rows, image_ids, category_ids, backend: str):
    evaluator = cocoeval_class(backend)(coco_gt, load_rows(coco_gt, rows), "bbox")
    if backend == "faster-coco-eval":
        evaluator.print_function = lambda *args, **kwargs: None
    evaluator.params.imgIds = list(image_ids)
    evaluator.params.catIds = list(category_ids)
    quiet(evaluator.evaluate)
    quiet(evaluator.accumulate)
    return np.asarray(evaluator.eval["precision"]), np.asarray(evaluator.eval["recall"])


def _ultrafast(coco_gt, rows, image_ids, category_ids):
    from ultrafast_pycocotools import COCOeval

    ground_truth = _ultrafast_ground_truth(coco_gt)
    evaluator = COCOeval(ground_truth, quiet(ground_truth.loadRes, np.ascontiguousarray(rows, dtype=np.float64)),
                         "bbox", print_function=lambda *args: None)
    evaluator.params.imgIds = list(image_ids)
    evaluator.params.catIds = list(category_ids)
    evaluator.evaluate()
    evaluator.accumulate()
    return np.asarray(evaluator.eval["precision"]), np.asarray(evaluator.eval["recall"])


def _ultrafast_ground_truth(coco_gt):
    """ultrafast's index of the ground truth, made once per pycocotools COCO (held on it)."""
    index = getattr(coco_gt, "_ultrafast_index", None)
    if index is None:
        _share_cores_between_ranks()
        try:
            from ultrafast_pycocotools import COCO
        except ImportError:  # a dependency of the package; only a broken install lacks it
            raise ValueError(f"the {ULTRAFAST} package is missing (pip install {ULTRAFAST}), or choose "
                             f"--coco-backend pycocotools") from None
        index = quiet(lambda: COCO(coco_gt.dataset, verbose=False))
        coco_gt._ultrafast_index = index
    return index


def _share_cores_between_ranks() -> None:
    """ultrafast's Rust threads (rayon, sized once at its first parallel call): this process's share of the
    cores, so the ranks on one machine do not each start a thread per core. An explicit RAYON_NUM_THREADS wins."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    local_ranks = max(int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1), 1)
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(cores // local_ranks, 1)))


# COCOeval's summarize(): (AP or AR, IoU threshold index or None for all, area index, maxDets index)
SUMMARY_SLICES = (
    (True, None, 0, 2), (True, 0, 0, 2), (True, 5, 0, 2), (True, None, 1, 2), (True, None, 2, 2),
    (True, None, 3, 2), (False, None, 0, 0), (False, None, 0, 1), (False, None, 0, 2), (False, None, 1, 2),
    (False, None, 2, 2), (False, None, 3, 2),
)


def summary_stats(precision: np.ndarray, recall: np.ndarray) -> list[float]:
    """The 12 numbers COCOeval.summarize() computes from the accumulated arrays (COCO's default parameters:
    IoU 0.50:0.05:0.95, areas all/small/medium/large, maxDets 1/10/100); -1 where nothing is defined."""
    stats = []
    for is_ap, iou, area, max_det in SUMMARY_SLICES:
        values = precision[:, :, :, area, max_det] if is_ap else recall[:, :, area, max_det]
        if iou is not None:
            values = values[iou]
        defined = values[values > -1]
        stats.append(float(np.mean(defined)) if defined.size else -1.0)
    return stats
