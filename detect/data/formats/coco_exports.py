"""What COCO exporters (Roboflow, Label Studio, CVAT) write that the COCO API or a class list does not expect.

- Annotation ids from 0 (Roboflow, Label Studio), repeated, or not integers: COCOeval records a match by the
  ground truth's id and reads 0 as "no match" (faster-coco-eval: any id below 1), and the COCO API keys
  annotations by id, so a box with id 0 is never matched and two boxes with one id merge. `cocoeval_ids` gives
  the ids evaluation hands to COCOeval.
- An image listed twice (merged CVAT exports): `unique_images` keeps its first entry, reported as
  `duplicate_image`.
- Roboflow's superclass: a category named after the dataset, the supercategory of the real ones, the category of
  no box. `class_categories` leaves it out of the classes, judging by the categories alone: every split of one
  export lists the same categories, so every split gets the same classes in the same order.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from detect.data.formats.class_selection import selection_advice
from detect.data.records.records import BadInputReport, first_few

log = logging.getLogger(__name__)

MAX_EXACT_ID = 2**53  # pycocotools keeps matched ids in float64 arrays


def _one(value) -> str:
    """A json value as the file writes it (0, "a1", null)."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _shown(values) -> str:
    """The first few json values, as the file writes them."""
    return first_few(_one(v) for v in values)


def cocoeval_ids(json_ids: Sequence) -> tuple[list, str]:
    """(ids for COCOeval, why they differ from the json's or ""): the json's own ids when they are unique
    integers from 1 (as in COCO's own files), else 1..n in the given order."""
    renumbered = list(range(1, len(json_ids) + 1))
    bad = [i for i in json_ids if isinstance(i, bool) or not isinstance(i, int)]
    if bad:
        return renumbered, f"annotation id(s) {_shown(bad)} not integers"
    low = [i for i in json_ids if i < 1]
    if low:
        return renumbered, (f"annotation id(s) {_shown(low)} below 1 (COCOeval reads id 0 as 'no match', so such a "
                            f"box could never be matched)")
    high = [i for i in json_ids if i >= MAX_EXACT_ID]
    if high:
        return renumbered, f"annotation id(s) {_shown(high)} beyond 2^53 (COCOeval keeps ids as float64)"
    repeated = [i for i, n in Counter(json_ids).items() if n > 1]
    if repeated:
        return renumbered, (f"annotation id(s) {_shown(repeated)} used more than once (the COCO API would merge "
                            f"their boxes)")
    return list(json_ids), ""


def unique_images(images: list[dict], anns: list, by_image: dict, images_dir: Path, ann_file: Path,
                  report: BadInputReport) -> list[dict]:
    """The image entries of a json, each image once: an entry with the id or the file name of an earlier one is
    left out, one `duplicate_image` each. A merged CVAT export lists an image twice with the same boxes under both
    ids; the annotations of a left-out entry with an id of its own are dropped with it, and the report says
    whether they were the kept entry's boxes."""
    kept, by_id, by_name = [], {}, {}
    for im in images:
        name = os.path.normpath(str(im.get("file_name")))
        first = by_id.get(im["id"], by_name.get(name))
        if first is None:
            kept.append(im)
            by_id[im["id"]], by_name[name] = im, im
            continue
        detail = _duplicate_detail(first, im, anns, by_image, ann_file)
        report.add("duplicate_image", images_dir / str(im.get("file_name")), detail)
    return kept


def _duplicate_detail(first: dict, im: dict, anns: list, by_image: dict, ann_file: Path) -> str:
    first_name, name = str(first.get("file_name")), str(im.get("file_name"))
    if im["id"] == first["id"]:
        n = len(by_image.get(im["id"], []))
        if os.path.normpath(first_name) == os.path.normpath(name):
            return (f"{ann_file.name} lists image id {_one(im['id'])} ({name!r}) twice: read once, with the "
                    f"{n} annotation(s) of that id")
        return (f"{ann_file.name} lists image id {_one(im['id'])} twice, as {first_name!r} and {name!r}: kept "
                f"{first_name!r}, whose boxes are the {n} annotation(s) of that id; {name!r} is left out "
                f"(give it an id of its own)")
    ids = _one(first["id"]), _one(im["id"])
    head = f"{ann_file.name} lists {name!r} twice, as image id {ids[0]} and {ids[1]}: kept id {ids[0]}"
    dropped = by_image.get(im["id"], [])
    if not dropped:
        return f"{head}; id {ids[1]} has no annotation"
    what = (f"the {len(dropped)} annotation(s) of id {ids[1]} (annotation id(s) "
            f"{_shown(anns[i].get('id') for i in dropped)}) are dropped with it")
    if _boxes(anns, dropped) == _boxes(anns, by_image.get(first["id"], [])):
        return f"{head}; {what}: the same boxes as id {ids[0]}'s"
    return (f"{head}; {what}, and they are NOT the same boxes as the {len(by_image.get(first['id'], []))} of id "
            f"{ids[0]}: check which entry is right")


def _boxes(anns: list, positions: list[int]) -> Counter:
    """The boxes of some annotations, ids aside: category, bbox and crowd flag as written."""
    return Counter(json.dumps([anns[i].get("category_id"), anns[i].get("bbox"), bool(anns[i].get("iscrowd"))])
                   for i in positions)


def class_categories(cats: list[dict], anns: list, ann_file: Path,
                     names: Sequence[str] | None) -> tuple[list[dict], list[dict]]:
    """(the categories that are classes, by id; the superclasses left out). A superclass is the supercategory of
    other categories, judged by the categories alone; a spec whose `names` count every category keeps it a
    class. A class with no annotation in this file is one warning: another split may have its boxes."""
    cats = sorted(cats, key=lambda c: c["id"])
    children: dict[str, list] = {}
    for c in cats:
        parent = c.get("supercategory")
        if isinstance(parent, str) and parent != c.get("name"):  # COCO's `person` is its own supercategory
            children.setdefault(parent, []).append(c.get("name"))
    is_super = [isinstance(c.get("name"), str) and c["name"] in children for c in cats]
    if names is not None and len(names) == len(cats):
        is_super = [False] * len(cats)  # the spec names every category: each is a class
    classes = [c for c, s in zip(cats, is_super) if not s]
    supers = [c for c, s in zip(cats, is_super) if s]
    if names is not None and len(names) != len(classes):
        keep = f"; {_superclass_list(supers)} left out as superclasses (list {len(cats)} names to keep them)"
        fix = selection_advice([str(c.get("name")) for c in classes], len(names), "the spec")
        fix = (f". `names` must name all {len(classes)} classes in category id order, or be left out (the json "
               f"names them); {fix}" if fix else "")
        raise ValueError(f"{ann_file}: has {len(classes)} classes (category ids "
                         f"{_shown(c['id'] for c in classes)}) but the spec lists {len(names)} names"
                         f"{keep if supers else ''}{fix}")
    if not classes:
        raise ValueError(f"{ann_file}: every category is the supercategory of another ({_superclass_list(supers)})"
                         f"; no class is left")
    used = {a.get("category_id") for a in anns}
    for c in supers:
        log.info(f"{ann_file}: category {_one(c['id'])} {c.get('name')!r} is not a class: it is the "
                 f"supercategory of {first_few(repr(n) for n in children[c.get('name')])}"
                 f"{' (its annotations are dropped)' if c['id'] in used else ', and no box is of it'}")
    unused = [c for c in classes if c["id"] not in used]
    if unused:
        log.warning(f"{ann_file}: {len(unused)} class(es) with no annotation in this file: {_class_list(unused)}; "
                    f"kept as classes (another split may have their boxes)")
    return classes, supers


def _superclass_list(cats: list[dict]) -> str:
    return first_few(f"category {_one(c['id'])} {c.get('name')!r}" for c in cats)


def _class_list(cats: list[dict]) -> str:
    return first_few(f"{_one(c['id'])} {c.get('name')!r}" for c in cats)


def report_unknown_categories(report: BadInputReport, path: Path, anns: list, unknown: list[int],
                              classes: list[dict], supers: list[dict], ann_file: Path) -> None:
    """`unknown_class` entries of one image: annotations of a superclass, and of no category of the json."""
    super_names = {c["id"]: c.get("name") for c in supers}
    of_super = [i for i in unknown if anns[i].get("category_id") in super_names]
    if of_super:
        cids = list(dict.fromkeys(anns[i]["category_id"] for i in of_super))
        report.add("unknown_class", path, f"{len(of_super)} annotation(s) of category "
                   f"{first_few(f'{_one(c)} {super_names[c]!r}' for c in cids)}, the supercategory of others "
                   f"in {ann_file.name} and so not a class (a spec whose `names` list every category keeps it one): "
                   f"annotation id(s) {_shown(anns[i].get('id') for i in of_super)}", count=len(of_super))
    rest = [i for i in unknown if anns[i].get("category_id") not in super_names]
    if rest:
        report.add("unknown_class", path, f"{len(rest)} annotation(s) with category_id "
                   f"{first_few(dict.fromkeys(_one(anns[i].get('category_id')) for i in rest))}, not among the "
                   f"{len(classes)} categories of {ann_file.name} (ids {first_few(c['id'] for c in classes)}): "
                   f"annotation id(s) {_shown(anns[i].get('id') for i in rest)}", count=len(rest))
