"""Decoded images kept between epochs (`--cache ram|disk`): every image of a split decoded once and resized as
the dataset would resize it (`kind`: "train" at long side img_size as TrainDataset does, "eval" as the
letterbox does), stored as uint8 in one flat file with an index, read back by memory map.

- `disk`: the file lives beside the label cache (`<cache-dir>/images/`), keyed by a fingerprint of the
  records, their files' sizes and modification times, the size and the kind: a changed file gives a new key
  and a rebuild. Built on global rank 0, then on each other node's leader where the folder is node-local
  (`dist.node_leaders_first`, as the label cache).
- `ram`: the same file in shared memory (/dev/shm): one copy per node, mapped by the node's ranks and by
  their (forked) loader workers, never a copy per process. Once every rank has mapped it the file is
  unlinked, so the memory goes back to the system when the run ends, whatever way it ends.
The size is computed before anything is written and checked against free memory (ram) or disk space (disk).
An image that cannot be decoded is left out of the cache with one warning; the dataset then reads the file
and reports it as any unreadable image.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from detect.data.records.cache import Fingerprint
from detect.runtime import dist

log = logging.getLogger(__name__)

MODES = ("ram", "disk")
CHOICES = ("auto", *MODES, "off")  # what --cache accepts; auto and off resolve to a mode or none (resolve_mode)
# --cache auto (train.py's default): ram when the decoded split takes at most this share of MemAvailable. A small
# dataset then is decoded once rather than every epoch, which frees a loader worker's core for the step (the main
# job on 2 cores: 103 -> 97 s, the same figures; docs/benchmarks.md "Loader defaults"); COCO-sized sets stay off.
AUTO_RAM_SHARE = 0.25
IMAGE_CACHE_VERSION = 1
SHARED_MEMORY = Path("/dev/shm")
HEADROOM = 1.1  # the cache may use at most 1 / HEADROOM of what is free


class ImageCache:
    """Read-only access to a built cache: `get(i)` -> (image HxWx3 uint8, scale from the original) or None."""

    def __init__(self, data_path: Path, index: dict[str, np.ndarray]):
        self.data_path = Path(data_path)
        self.offsets, self.shapes = index["offsets"], index["shapes"]
        self.scales, self.ok = index["scales"], index["ok"]
        self._data = None

    @property
    def nbytes(self) -> int:
        return int(self.offsets[-1])

    def open(self) -> ImageCache:
        """Map the file now (before a `ram` cache's file is unlinked)."""
        if self._data is None and self.nbytes:
            self._data = np.memmap(self.data_path, dtype=np.uint8, mode="r", shape=(self.nbytes,))
        return self

    def __len__(self) -> int:
        return len(self.ok)

    def get(self, index: int) -> tuple[np.ndarray, float] | None:
        if not self.ok[index]:
            return None
        self.open()
        h, w = (int(v) for v in self.shapes[index])
        start = int(self.offsets[index])
        # a read-only view of the shared pages: augmentation makes new arrays (as for the per-worker buffer's
        # images, which samples share too), so no copy is needed, and one that wrote would fail loudly
        image = self._data[start:start + h * w * 3].reshape(h, w, 3)
        return image, float(self.scales[index])


def image_cache_key(records: Sequence, img_size: int, kind: str) -> str:
    fp = Fingerprint("image-cache", IMAGE_CACHE_VERSION, int(img_size), kind)
    for r in records:
        fp.add(r.path).add_file_stat(Path(r.path))
    return fp.hexdigest()


def estimate_bytes(records: Sequence, img_size: int) -> int:
    """The cache's size: every image at long side `img_size` (within a row or column of the real size)."""
    total = 0
    for r in records:
        scale = img_size / max(r.width, r.height)
        total += (round(r.width * scale) + 1) * (round(r.height * scale) + 1) * 3
    return total


def free_bytes(mode: str, folder: Path) -> int:
    if mode == "ram":
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return shutil.disk_usage(folder).free


def check_room(mode: str, folder: Path, needed: int, what: str) -> None:
    free = free_bytes(mode, folder)
    if needed * HEADROOM > free:
        where = "free memory (MemAvailable)" if mode == "ram" else f"free space in {folder}"
        other = "--cache disk" if mode == "ram" else "a --cache-dir on a larger disk"
        raise ValueError(f"--cache {mode}: the decoded images of {what} need {needed / 2**30:.2f} GiB, "
                         f"{where} is {free / 2**30:.2f} GiB; use {other}, a smaller --img-size, or no --cache")


def build_image_cache(records: Sequence, decode: Callable[[int], tuple[np.ndarray, float]], data_path: Path,
                      threads: int | None = None) -> dict[str, np.ndarray]:
    """Decode every record (`decode(i)` -> (image, scale), in a thread pool: OpenCV releases the GIL), write
    the images in record order to `data_path` atomically and return the index (also saved beside it)."""
    n = len(records)
    offsets, shapes = np.zeros(n + 1, np.int64), np.zeros((n, 2), np.int32)
    scales, ok = np.zeros(n, np.float64), np.zeros(n, bool)
    failed: list[str] = []
    tmp = data_path.with_name(f".{data_path.name}.{os.getpid()}.tmp")

    def load(i):
        try:
            return decode(i)
        except OSError as e:
            return e

    with open(tmp, "wb") as f, ThreadPoolExecutor(threads or min(8, os.cpu_count() or 1)) as pool:
        for i, out in enumerate(pool.map(load, range(n))):
            if isinstance(out, OSError):
                failed.append(str(records[i].path))
                offsets[i + 1] = offsets[i]
                continue
            image, scale = out
            f.write(np.ascontiguousarray(image).tobytes())
            shapes[i], scales[i], ok[i] = image.shape[:2], scale, True
            offsets[i + 1] = offsets[i] + image.size
    index = {"offsets": offsets, "shapes": shapes, "scales": scales, "ok": ok}
    np.savez(index_path(data_path), **index)
    os.replace(tmp, data_path)  # last: a data file is only ever complete
    if failed:
        log.warning("image cache: %d image(s) could not be decoded and are read from their files instead "
                    "(reported there): %s%s", len(failed), ", ".join(failed[:5]), " ..." if len(failed) > 5 else "")
    return index


def index_path(data_path: Path) -> Path:
    return data_path.with_name(data_path.name + ".index.npz")


def _load_index(data_path: Path) -> dict[str, np.ndarray] | None:
    try:
        with np.load(index_path(data_path)) as z:
            index = {k: z[k] for k in ("offsets", "shapes", "scales", "ok")}
    except (OSError, KeyError, ValueError):
        return None
    if not data_path.is_file() or data_path.stat().st_size != int(index["offsets"][-1]):
        return None
    return index


def resolve_mode(mode: str | None, records: Sequence, img_size: int, label: str) -> str | None:
    """The cache a run uses: ram/disk as asked; None for off (or None); for auto, ram when the split's decoded size
    fits AUTO_RAM_SHARE of free memory, else none. Rank 0 decides for every rank (the build is collective)."""
    if mode not in (*CHOICES, None):
        raise ValueError(f"--cache must be one of {', '.join(CHOICES)}, got {mode!r}")
    if mode != "auto":
        return None if mode in (None, "off") else mode
    needed, free = estimate_bytes(records, img_size), free_bytes("ram", SHARED_MEMORY)
    chosen = dist.broadcast_object("ram" if needed <= AUTO_RAM_SHARE * free else None)
    log.info("image cache auto: %s (%s, %d images: %.2f GiB decoded, %.1f GiB of memory free)",
             chosen or "off", label, len(records), needed / 2**30, free / 2**30)
    return chosen


def open_image_cache(records: Sequence, decode: Callable, img_size: int, kind: str, mode: str,
                     cache_dir: Path, label: str) -> ImageCache:
    """The split's image cache, built where it is missing or stale (collective: every rank calls it)."""
    if mode not in MODES:
        raise ValueError(f"--cache must be ram or disk, got {mode!r}")
    folder = SHARED_MEMORY if mode == "ram" else Path(cache_dir) / "images"
    key = image_cache_key(records, img_size, kind)
    data_path = folder / f"detect-{label}-{kind}{img_size}-{key[:16]}.u8"
    with dist.node_leaders_first():
        index = _load_index(data_path)
        if index is None:
            folder.mkdir(parents=True, exist_ok=True)
            check_room(mode, folder, estimate_bytes(records, img_size), f"{label} ({len(records)} images)")
            log.info("image cache (%s): decoding %d images of %s at %d ...", mode, len(records), label, img_size)
            index = build_image_cache(records, decode, data_path)
        cache = ImageCache(data_path, index).open()
    log.info("image cache (%s): %s, %d images, %.2f GiB", mode, data_path, int(index["ok"].sum()),
             cache.nbytes / 2**30)
    if mode == "ram":
        dist.barrier()  # every rank of every node has mapped it
        if int(os.environ.get("LOCAL_RANK", "0") or 0) == 0:
            for path in (data_path, index_path(data_path)):
                path.unlink(missing_ok=True)
    return cache
