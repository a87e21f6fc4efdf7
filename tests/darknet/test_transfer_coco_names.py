"""Fine-tuning the official COCO .weights onto data with COCO's own names (data/coco-tiny.yaml's json): all 80
classes' rows are copied, the six classes Darknet spells otherwise (tvmonitor, aeroplane, ...) included."""

import torch

from detect.darknet.load import load_model
from detect.data.formats.spec import read_class_names
from tests.conftest import ROOT, shared_path


def _official(names):
    return load_model(shared_path("darknet-cfg", "yolov3-tiny.cfg"), shared_path("weights", "yolov3-tiny.weights"),
                      names=names, img_size=416)


def test_official_weights_onto_coco_json_names_copy_all_80_classes():
    shared_path("data", "coco-tiny")
    names = read_class_names(ROOT / "data" / "coco-tiny.yaml")  # the json's: "tv", "airplane", "couch", ...
    assert len(names) == 80 and {"tv", "airplane", "motorcycle", "couch", "potted plant", "dining table"} <= set(names)
    heads = _official(names).report["heads"]
    for head in heads:
        assert head["initialised"] == [] and len(head["matched"]) == 80 and head["class_rows"] == 240
        assert head["whole"] and head["initialised_rows"] == 0


def test_darknet_spellings_in_another_order_take_their_own_rows():
    """A class list in Darknet's spelling, reversed: every class's rows come from the same class of the file."""
    darknet = ["tvmonitor", "aeroplane", "sofa", "motorbike", "pottedplant", "diningtable", "person"]
    coco = read_class_names(ROOT / "cfg" / "coco.names")
    source = _official(coco).model.eval()
    loaded = _official(darknet)
    model, report = loaded.model.eval(), loaded.report["heads"]
    assert all(h["initialised"] == [] and h["matched"] == darknet for h in report)
    x = torch.rand(1, 3, 416, 416, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs, mine = source(x), model(x)
    columns = [coco.index(n) for n in ("tv", "airplane", "couch", "motorcycle", "potted plant", "dining table",
                                       "person")]
    torch.testing.assert_close(mine[..., :5], theirs[..., :5])
    torch.testing.assert_close(mine[..., 5:], theirs[..., [5 + c for c in columns]])
