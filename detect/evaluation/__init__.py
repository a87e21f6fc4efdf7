"""Evaluation: decode + NMS (postprocess), COCO conversions and COCOeval (coco), the sharded
evaluator (evaluator)."""
