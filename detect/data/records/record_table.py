"""The records of a split as a few flat arrays: what loader workers read for every sample.

A list of one Python object per image (path string, box and class arrays) is touched by every sample a
worker draws, and touching an object writes its reference count, so the pages holding 118k of them are
copied into each forked worker one by one over an epoch (copy-on-write). `RecordTable` keeps the same data in
nine numpy arrays (paths as one UTF-8 byte buffer with offsets, sizes, ids, box offsets, boxes, classes,
difficult flags): a worker reads them without writing to them, so nothing is copied. It is a read-only
sequence of `ImageRecord`s, each made on access with views into the arrays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from detect.data.records.records import ImageRecord


class RecordTable(Sequence):
    def __init__(self, paths: np.ndarray, path_offsets: np.ndarray, sizes: np.ndarray, image_ids: np.ndarray,
                 box_offsets: np.ndarray, boxes: np.ndarray, classes: np.ndarray, difficult: np.ndarray):
        self.paths, self.path_offsets = paths, path_offsets  # uint8 UTF-8 bytes, int64 [n + 1]
        self.sizes, self.image_ids = sizes, image_ids  # int64 [n, 2] (width, height), int64 [n]
        self.box_offsets = box_offsets  # int64 [n + 1]: image i's boxes are rows [box_offsets[i], [i + 1])
        self.boxes, self.classes, self.difficult = boxes, classes, difficult
        for array in (paths, path_offsets, sizes, image_ids, box_offsets, boxes, classes, difficult):
            array.flags.writeable = False

    @classmethod
    def from_records(cls, records: Sequence[ImageRecord]) -> RecordTable:
        encoded = [str(r.path).encode() for r in records]
        lengths = np.array([len(e) for e in encoded], dtype=np.int64)
        counts = np.array([len(r.classes) for r in records], dtype=np.int64)
        return cls(np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), _offsets(lengths),
                   np.array([(r.width, r.height) for r in records], dtype=np.int64).reshape(-1, 2),
                   np.array([r.image_id for r in records], dtype=np.int64), _offsets(counts),
                   _concat([r.boxes for r in records], (0, 4), np.float32),
                   _concat([r.classes for r in records], (0,), np.int64),
                   _concat([r.difficult for r in records], (0,), bool))

    def __len__(self) -> int:
        return len(self.image_ids)

    def path(self, index: int) -> str:
        return bytes(self.paths[self.path_offsets[index]:self.path_offsets[index + 1]]).decode()

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"record {index} of {n}")
        i = index % n
        a, b = self.box_offsets[i], self.box_offsets[i + 1]
        width, height = self.sizes[i]
        return ImageRecord(self.path(i), int(width), int(height), self.boxes[a:b], self.classes[a:b],
                           int(self.image_ids[i]), self.difficult[a:b])

    def __iter__(self) -> Iterator[ImageRecord]:
        return (self[i] for i in range(len(self)))

    @property
    def nbytes(self) -> int:
        arrays = (self.paths, self.path_offsets, self.sizes, self.image_ids, self.box_offsets, self.boxes,
                  self.classes, self.difficult)
        return sum(a.nbytes for a in arrays)


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _concat(parts: list, empty_shape: tuple, dtype) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(empty_shape, dtype)
