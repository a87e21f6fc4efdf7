"""The audit's pictures: a contact sheet of the top issues, and one annotated image per issue on request.

Each crop shows the label's box in orange and the model's box (its suggestion, or what it found for `missing`)
in green, around both with a margin, captioned with the rank, kind, class (label -> model where they differ)
and score. The whole-image pictures also show the image's other labels thinly in grey, for context.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from detect.audit.scoring import Issue
from detect.data.records.images import load_image
from detect.plots.mosaics import draw_label
from detect.plots.render import save_jpeg

LABEL_COLOUR = (255, 140, 0)  # RGB orange: what the label says
MODEL_COLOUR = (40, 200, 60)  # RGB green: what the model sees
CONTEXT_COLOUR = (170, 170, 170)
CELL = 256  # pixels of each crop of the sheet
COLUMNS = 6
MARGIN = 0.6  # of the boxes' extent, on each side of the crop


def caption(rank: int, issue: Issue, names) -> str:
    label = names[issue.cls]
    if issue.kind == "missing":
        what = f"no label for {label}"
    elif issue.kind == "class" and issue.suggested_class is not None:
        what = f"{label} -> {names[issue.suggested_class]}"
    else:
        what = label
    return f"#{rank} {issue.kind} {what} {issue.score:.2f}"


def _boxes(issue: Issue) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(label box, model box) as arrays, None where there is none."""
    label = None if issue.kind == "missing" else np.array(issue.box, float)
    model = np.array(issue.suggested_box, float) if issue.suggested_box is not None else None
    return label, model


def _rgb(path: str) -> np.ndarray | None:
    try:
        return load_image(path)[..., ::-1]
    except (OSError, ValueError):
        return None


def _draw(canvas: np.ndarray, box: np.ndarray, colour, offset: np.ndarray, scale: float, width: int) -> None:
    import cv2

    x1, y1, x2, y2 = ((box - np.tile(offset, 2)) * scale).round().astype(int).tolist()
    cv2.rectangle(canvas, (x1, y1), (x2, y2), colour, width)


def crop_cell(image: np.ndarray | None, issue: Issue, rank: int, names) -> np.ndarray:
    """One CELL x CELL tile of the sheet."""
    import cv2

    cell = np.full((CELL, CELL, 3), 114, np.uint8)
    label, model = _boxes(issue)
    if image is not None:
        both = np.stack([b for b in (label, model) if b is not None])
        lo, hi = both[:, :2].min(0), both[:, 2:].max(0)
        pad = np.maximum((hi - lo) * MARGIN, 16)
        h, w = image.shape[:2]
        lo = np.maximum(lo - pad, 0).astype(int)
        hi = np.minimum(hi + pad, [w, h]).astype(int)
        crop = image[lo[1]:max(hi[1], lo[1] + 1), lo[0]:max(hi[0], lo[0] + 1)]
        scale = CELL / max(crop.shape[:2])
        resized = cv2.resize(crop, (max(round(crop.shape[1] * scale), 1), max(round(crop.shape[0] * scale), 1)),
                             interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        cell[:resized.shape[0], :resized.shape[1]] = resized
        for box, colour in ((model, MODEL_COLOUR), (label, LABEL_COLOUR)):
            if box is not None:
                _draw(cell, box, colour, lo, scale, 2)
    else:
        draw_label(cell, "image unreadable", 4, CELL // 2, (60, 60, 60))
    draw_label(cell, caption(rank, issue, names), 0, CELL, (30, 30, 30))
    cv2.rectangle(cell, (0, 0), (CELL - 1, CELL - 1), (255, 255, 255), 1)
    return cell


def draw_sheet(issues: list[Issue], records, names, path: Path, top: int) -> Path | None:
    """The first `top` issues as a grid of crops under a legend; None when there is no issue."""
    shown = issues[:top]
    if not shown:
        return None
    cache: dict[int, np.ndarray | None] = {}
    cells = []
    for rank, issue in enumerate(shown, 1):
        if issue.image not in cache:
            cache = {issue.image: _rgb(records[issue.image].path)}  # issues of one image often come together
        cells.append(crop_cell(cache[issue.image], issue, rank, names))
    columns = min(COLUMNS, len(cells))
    rows = math.ceil(len(cells) / columns)
    legend_height = 24
    sheet = np.full((legend_height + rows * CELL, columns * CELL, 3), 255, np.uint8)
    draw_label(sheet, "label", 4, 20, LABEL_COLOUR)
    draw_label(sheet, "model", 52, 20, MODEL_COLOUR)
    draw_label(sheet, f"top {len(cells)} of {len(issues)} issues, most likely first (issues.csv)", 110, 20,
               (230, 230, 230))
    for i, cell in enumerate(cells):
        r, c = divmod(i, columns)
        sheet[legend_height + r * CELL:legend_height + (r + 1) * CELL, c * CELL:(c + 1) * CELL] = cell
    return save_jpeg(sheet, path)


def draw_issue_image(issue: Issue, rank: int, record, names, path: Path) -> Path | None:
    """The whole image of one issue: its other labels thin and grey, the label and the model's box, a caption."""
    image = _rgb(record.path)
    if image is None:
        return None
    canvas = np.ascontiguousarray(image)
    thickness = max(2, round(max(canvas.shape[:2]) / 400))
    for box in np.asarray(record.boxes, float).reshape(-1, 4):
        _draw(canvas, box, CONTEXT_COLOUR, np.zeros(2), 1.0, 1)
    label, model = _boxes(issue)
    for box, colour in ((model, MODEL_COLOUR), (label, LABEL_COLOUR)):
        if box is not None:
            _draw(canvas, box, colour, np.zeros(2), 1.0, thickness)
    draw_label(canvas, caption(rank, issue, names), 0, canvas.shape[0], (30, 30, 30))
    return save_jpeg(canvas, path)
