"""Where a label was written: its file and line, so that the user can go and fix it.

YOLO txt and Darknet lists: the image's label file under the split's rule (detect.data.formats.label_location),
and the line whose box is the label's (the records keep validated boxes, not lines: a clipped box is still
found, by IoU). Pascal VOC: the image's xml and the line of the label's `<object>`. A COCO json: the json; its
line is left empty (one annotation per line is not how jsons are written), the annotation's `bbox` is in the row.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from detect.data.formats.yolo_labels import parse_label_text
from detect.ops.boxes_np import box_iou

FOUND_IOU = 0.5  # a line whose box overlaps the label's less is not its line


class LabelFiles:
    """record index -> (label file, line of a label box) for one opened split."""

    def __init__(self, source):
        self.source = source
        self.format = source.spec.format
        self._files = self._file_finder()

    def _file_finder(self):
        spec, split = self.source.spec, self.source.split
        if self.format == "coco":
            json_file = spec.annotations(split)
            return lambda record: json_file
        if self.format == "voc":
            from detect.data.formats import voc

            xml_of = {str(item.image.resolve()): item.xml for item in voc.split_items(spec, split) if item.image}
            return lambda record: xml_of.get(str(Path(record.path).resolve()))
        from detect.data.formats.label_location import DARKNET_RULES, YOLO_RULES, rule_path

        rules = DARKNET_RULES if self.format == "darknet" else YOLO_RULES

        def find(record):
            for rule in rules:
                candidate = rule_path(record.path, rule)
                if candidate is not None and candidate.is_file():
                    return candidate
            return None
        return find

    def file(self, index: int) -> Path | None:
        return self._files(self.source.records[index])

    def line(self, index: int, box) -> int | None:
        """The line of `box` (xyxy pixels, a label of record `index`) in its label file, when it has lines."""
        path = self.file(index)
        if path is None or self.format == "coco":
            return None
        record = self.source.records[index]
        try:
            lines, boxes = (_voc_boxes(path) if self.format == "voc" else
                            _yolo_boxes(path, record.width, record.height))
        except (OSError, ValueError):
            return None
        if not len(boxes):
            return None
        iou = box_iou(np.asarray([box], float), boxes)[0]
        best = int(iou.argmax())
        return int(lines[best]) if iou[best] >= FOUND_IOU else None


@functools.lru_cache(maxsize=4096)
def _yolo_boxes(path: Path, width: int, height: int) -> tuple[list[int], np.ndarray]:
    lines: list[int] = []
    _, cxcywh = parse_label_text(path.read_text(encoding="utf-8-sig"), line_numbers=lines)
    scale = np.array([width, height] * 2, float)
    return lines, np.concatenate([cxcywh[:, :2] - cxcywh[:, 2:] / 2, cxcywh[:, :2] + cxcywh[:, 2:] / 2], 1) * scale


@functools.lru_cache(maxsize=4096)
def _voc_boxes(path: Path) -> tuple[list[int], np.ndarray]:
    from detect.data.formats.voc import parse_annotation

    text = path.read_text(encoding="utf-8", errors="replace")
    starts = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r"<object[\s>]", text)]
    boxes = parse_annotation(path).boxes
    return starts[:len(boxes)], boxes
