"""Dispatch `python -m detect.bench <what> ...` to the benchmark module `detect.bench.<what>`."""

import importlib
import sys

import detect.runtime.cpu_threads  # noqa: F401  (before any benchmark imports torch: OMP_WAIT_POLICY as predict and val)

BENCHMARKS = {
    "model": "parameters, GFLOPs and forward latency of a cfg",
    "data": "training-loader throughput and memory per worker",
    "train": "training-step throughput and peak memory",
    "val": "inference, NMS and COCOeval throughput",
    "finetune": "a default fine-tune end to end (torchrun train.py + detect.val), figures per epoch",
    "scale": "COCO-sized split (118k/5k, generated): label cache, loader worker memory, evaluation gather/COCOeval",
    "imbalance": "rare classes (a coco-tiny split): plain vs repeat-factor sampling vs class weights, per-class AP",
    "soak": "many epochs of training (2 processes + loader workers): RSS, fds, img/s per epoch; eval memory",
    "thresholds": "per-class confidence thresholds vs one threshold: F1, P, R per class, chosen and scored apart",
    "track": "our ByteTrack vs ultralytics' on the same detections: IDF1, HOTA, MOTA per sequence, ms per frame",
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in BENCHMARKS:
        lines = "\n".join(f"  {k:9s} {v}" for k, v in BENCHMARKS.items())
        print(f"usage: python -m detect.bench <benchmark> [options]\n\nbenchmarks:\n{lines}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"detect.bench.{argv[0]}")
    return module.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
