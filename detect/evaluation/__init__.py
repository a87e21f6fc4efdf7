"""Evaluation of the Predictor's detections (its NMS; Darknet's own for --metric darknet): COCO conversions
(coco), the COCOeval engines (cocoeval_engines), the evaluator whose COCOeval work the ranks share by category
(evaluator, sharded), the matches each rank makes of its own images (split_match), a model file run over a split
(model_eval), the model's classes put in a dataset's order (class_order); the metrics outside COCOeval on NumPy
arrays per image (per_image): the matching at one IoU (matching), PR / F1 curves (pr_curves), the confusion
matrix (confusion), VOC AP and Darknet's summary (voc_metrics), per-class confidence thresholds (thresholds);
Darknet's own `detector map` figures (darknet_map, darknet_map_score, darknet_map_run, darknet_map_report,
darknet_eval)."""
