"""Dataset specs and the formats they name: COCO json, YOLO txt, Pascal VOC xml, Darknet obj.data, other tools' exports and data.yaml, the synthetic set; each read into records."""
