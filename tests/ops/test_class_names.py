"""Class identity (detect.ops.class_names): the name key with Darknet's and COCO's spellings as one class, the
mapping of one name list onto another, its one-line refusal, and cfg/coco.names spelt as COCO's jsons."""

import json

import pytest

from detect.ops.class_names import (
    COCO_NAMES,
    DARKNET_SYNONYMS,
    are_class_ids,
    map_names,
    match_names,
    name_key,
    read_coco_names,
)
from tests.conftest import shared_path


def test_name_key_ignores_case_underscores_and_spaces():
    assert name_key("Traffic_Light") == name_key("traffic  light") == name_key(" TRAFFIC light ") == "traffic light"
    assert name_key("cat") != name_key("cats")


@pytest.mark.parametrize("darknet, coco", sorted(DARKNET_SYNONYMS.items()))
def test_darknet_spellings_are_cocos_classes(darknet, coco):
    assert name_key(darknet) == name_key(coco) == name_key(coco.replace(" ", "_").upper())


def test_the_six_synonyms():
    assert {name_key(d) for d in DARKNET_SYNONYMS} == {"motorcycle", "airplane", "couch", "potted plant",
                                                       "dining table", "tv"}


def test_match_names_maps_by_name_and_leaves_missing_none():
    model = ["person", "motorbike", "tvmonitor", "cat"]
    assert match_names(model, ["tv", "cat", "motorcycle"]) == [2, 3, 1]
    assert match_names(model, ["dog", "Person"]) == [None, 0]


def test_map_names_refuses_the_first_missing_name_in_one_line():
    model = ["person", "bicycle", "car"]
    assert map_names(model, ["car", "person"]) == [2, 0]
    with pytest.raises(ValueError) as e:
        map_names(model, ["car", "zebra", "giraffe"], "--weights m.pt", "data.yaml")
    assert str(e.value) == "data.yaml's class 1 'zebra' is not a class of --weights m.pt (person, bicycle, car)"
    with pytest.raises(ValueError, match=r"\(c0, c1, c2, c3, c4, c5, c6, c7, \.\.\. \(20 in all\)\)$"):
        map_names([f"c{k}" for k in range(20)], ["c3", "dog"])


def test_class_ids_are_no_names():
    assert are_class_ids(["0", "1", "2"]) and not are_class_ids(["1", "0"]) and not are_class_ids(["a"])


def test_coco_names_are_spelt_as_cocos_jsons():
    """cfg/coco.names (what predict prints for the official weights) is the COCO json's names, in its order."""
    names = read_coco_names()
    assert names is not None and len(names) == 80 and COCO_NAMES.name == "coco.names"
    assert names[3:5] == ["motorcycle", "airplane"] and names[62] == "tv"
    ann = shared_path("data", "coco-tiny", "annotations", "instances_val2017.json")
    categories = sorted(json.loads(ann.read_text())["categories"], key=lambda c: c["id"])
    assert names == [c["name"] for c in categories]
