"""Dispatch `python -m benchmarks <what> ...` (from a clone's root) to the benchmark module `benchmarks.<what>`."""

import sys

import detect.runtime.cpu_threads  # noqa: F401  (before any benchmark imports torch: OMP_WAIT_POLICY as predict and val)
from detect.runtime.commands import dispatch

BENCHMARKS = {
    "audit": "detect.audit against injected label errors (coco-tiny, kangaroo): box/image AP vs cleanlab",
    "finetune": "a default fine-tune end to end (torchrun train.py + detect.val), figures per epoch",
    "coco_eval": "COCO evaluation at COCO's and Objects365's size: each COCOeval engine alone vs the evaluator",
    "scale": "COCO-sized split (118k/5k, generated): label cache, loader worker memory, evaluation gather/COCOeval",
    "imbalance": "rare classes (a coco-tiny split): plain vs repeat-factor sampling vs class weights, per-class AP",
    "soak": "many epochs of training (2 processes + loader workers): RSS, fds, img/s per epoch; eval memory",
    "thresholds": "per-class confidence thresholds vs one threshold: F1, P, R per class, chosen and scored apart",
    "rival_train": "time to accuracy: the main job against ultralytics YOLO11n from scratch, side by side",
    "track": "our ByteTrack vs ultralytics' on the same detections: IDF1, HOTA, MOTA per sequence, ms per frame",
}


def main(argv=None) -> int:
    return dispatch(argv, "benchmarks", BENCHMARKS, "python -m benchmarks",
                    "(from a clone's root) a model's own speed and memory: python -m detect.bench {model,data,train,val}")


if __name__ == "__main__":
    sys.exit(main())
