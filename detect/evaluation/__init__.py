"""Evaluation: decode + NMS (postprocess), COCO conversions and COCOeval (coco), the sharded
evaluator (evaluator); the metrics outside COCOeval, on NumPy arrays per image (per_image): the matching at one
IoU (matching), PR / F1 curves (pr_curves), the confusion matrix (confusion), VOC AP and Darknet's summary
(voc_metrics)."""
