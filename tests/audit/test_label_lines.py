"""Each label's file and line (detect.audit.label_lines): YOLO txt, Pascal VOC xml, COCO json."""

import cv2
import numpy as np

from detect.audit.label_lines import LabelFiles
from detect.data.loader import open_split

VOC_XML = """<annotation>
  <size><width>100</width><height>80</height><depth>3</depth></size>
  <object>
    <name>cat</name>
    <bndbox><xmin>10</xmin><ymin>10</ymin><xmax>40</xmax><ymax>40</ymax></bndbox>
  </object>
  <object>
    <name>dog</name>
    <difficult>0</difficult>
    <bndbox><xmin>50</xmin><ymin>20</ymin><xmax>90</xmax><ymax>70</ymax></bndbox>
  </object>
</annotation>
"""


def _image(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((80, 100, 3), 120, np.uint8))


def test_yolo_labels_are_found_by_line_even_after_blank_lines_and_clipping(tmp_path):
    _image(tmp_path / "images" / "a.jpg")
    (tmp_path / "labels").mkdir()
    # line 3 sticks out of the image a little: the record holds it clipped
    (tmp_path / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.25\n\n1 0.97 0.3 0.1 0.2\n")
    spec = tmp_path / "data.yaml"
    spec.write_text(f"path: {tmp_path}\nformat: yolo\nval: images\nnames: [cat, dog]\n")
    source = open_split(str(spec), "val", tmp_path / "cache")
    files = LabelFiles(source)
    record = source.records[0]
    assert files.file(0) == tmp_path / "labels" / "a.txt"
    assert [files.line(0, box) for box in record.boxes] == [1, 3]
    assert files.line(0, [0, 0, 5, 5]) is None  # no line holds this box


def test_voc_labels_are_the_lines_of_their_objects(tmp_path):
    _image(tmp_path / "images" / "a.jpg")
    (tmp_path / "annots").mkdir()
    (tmp_path / "annots" / "a.xml").write_text(VOC_XML)
    (tmp_path / "val.txt").write_text("a\n")
    spec = tmp_path / "data.yaml"
    spec.write_text(f"path: {tmp_path}\nformat: voc\nimages: images\nannotations: annots\ntrain: val.txt\n"
                    f"val: val.txt\nnames: [cat, dog]\n")
    source = open_split(str(spec), "val", tmp_path / "cache")
    files = LabelFiles(source)
    record = source.records[0]
    assert files.file(0) == tmp_path / "annots" / "a.xml"
    lines = {source.names[c]: files.line(0, box) for box, c in zip(record.boxes, record.classes)}
    assert lines == {"cat": 3, "dog": 7}


def test_a_coco_json_is_named_without_a_line(tmp_path):
    from tests.support.val_data import write_coco_dataset

    spec = write_coco_dataset(tmp_path / "coco")
    source = open_split(str(spec), "val", tmp_path / "cache")
    files = LabelFiles(source)
    assert files.file(0) == tmp_path / "coco" / "val.json"
    assert files.line(0, source.records[0].boxes[0]) is None
