"""COCOeval shared by the ranks, category by category.

Each rank ends the inference holding its own images' detections as [n, 7] rows. The categories are dealt to
the ranks (balanced by ground-truth instances, the same deal on every rank); one all-to-all hands every rank
the rows of its categories from all ranks (arrays, no dict per detection), each rank runs COCOeval's
matching and accumulation over all images for its categories only (detect.evaluation.cocoeval_engines),
and the per-category precision and recall slices (about 100 KB per category) are gathered, so every rank
assembles the same arrays the single-process run would and computes the same 12 numbers and per-class APs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detect.evaluation.cocoeval_engines import DEFAULT_BACKEND, MAX_ROWS_AT_ONCE, evaluate_categories
from detect.runtime import dist


@dataclass
class ShardedOutcome:
    precision: np.ndarray  # [T, R, K, A, M], K in sorted category-id order
    recall: np.ndarray  # [T, K, A, M]
    category_ids: list[int]  # sorted, the K axis
    rank_seconds: list[float]  # each rank's COCOeval time
    rank_rows: list[int]  # detections each rank evaluated


def deal_categories(instances: dict[int, int], category_ids: Sequence[int], world: int) -> list[list[int]]:
    """The categories of each rank: largest ground-truth count first to the least loaded rank (ties to the
    lowest rank), so every rank computes the same deal; categories without ground truth weigh 1."""
    load = [0] * world
    owned: list[list[int]] = [[] for _ in range(world)]
    for cid in sorted((int(c) for c in category_ids), key=lambda c: (-instances.get(c, 0), c)):
        rank = min(range(world), key=lambda r: (load[r], r))
        owned[rank].append(cid)
        load[rank] += max(instances.get(cid, 0), 1)
    return [sorted(cats) for cats in owned]


def _rows_by_owner(rows: np.ndarray, owned: list[list[int]]) -> list[np.ndarray]:
    if len(owned) == 1 or not len(rows):
        return [rows] + [rows[:0]] * (len(owned) - 1)
    category = rows[:, 6].astype(np.int64)
    owner = np.full(int(category.max()) + 1, -1, dtype=np.int64)  # category id -> its rank
    for rank, cats in enumerate(owned):
        owner[[c for c in cats if c < len(owner)]] = rank
    of_row = owner[category]
    return [rows[of_row == rank] for rank in range(len(owned))]


def _evaluate_share(coco_gt, rows: np.ndarray, image_ids, cats: list[int], backend: str, max_rows: int):
    """(chunks [(cats, precision, recall)], seconds, error) of this rank's categories."""
    from detect.evaluation.coco import by_image

    if not cats:
        return [], 0.0, None
    tick = time.perf_counter()
    try:
        chunks = [(cats, *evaluate_categories(coco_gt, by_image(rows), image_ids, cats, backend, max_rows))]
    except Exception as e:  # every rank must hear of it at the gather below, not wait for a lost rank
        return [], 0.0, f"{type(e).__name__}: {e}"
    return chunks, time.perf_counter() - tick, None


def sharded_cocoeval(coco_gt, rows: np.ndarray, image_ids: Sequence[int], category_ids: Sequence[int],
                     instances: dict[int, int], backend: str = DEFAULT_BACKEND,
                     max_rows: int = MAX_ROWS_AT_ONCE) -> ShardedOutcome:
    """Collective. `rows`: this rank's detections; `image_ids`: every evaluated image (all ranks');
    `instances`: ground-truth count per category id (the deal). The same outcome on every rank."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    owned = deal_categories(instances, category_ids, world)
    incoming = dist.exchange_objects(_rows_by_owner(rows, owned))
    received = [r for r in incoming if len(r)]
    mine = np.concatenate(received) if received else np.zeros((0, 7))
    rank = dist.get_rank() if dist.is_initialized() else 0
    del incoming
    parts = dist.all_gather_object(_evaluate_share(coco_gt, mine, image_ids, owned[rank], backend, max_rows)
                                   + (len(mine),))
    failures = [f"rank {r}: {p[2]}" for r, p in enumerate(parts) if p[2] is not None]
    if failures:
        raise RuntimeError("COCO evaluation failed on " + "; ".join(failures))
    all_ids = sorted(int(c) for c in category_ids)
    axis = {cid: k for k, cid in enumerate(all_ids)}
    _, p0, r0 = next(chunk for part in parts for chunk in part[0])
    precision = np.full(p0.shape[:2] + (len(all_ids),) + p0.shape[3:], -1.0)
    recall = np.full(r0.shape[:1] + (len(all_ids),) + r0.shape[2:], -1.0)
    for chunks, _seconds, _error, _n in parts:
        for cats, p, r in chunks:
            for k, cid in enumerate(cats):
                precision[:, :, axis[cid]] = p[:, :, k]
                recall[:, axis[cid]] = r[:, k]
    return ShardedOutcome(precision, recall, all_ids, [p[1] for p in parts], [p[3] for p in parts])
