"""Dispatch `python -m detect.bench <what> ...` to the benchmark module `detect.bench.<what>`: what a user asks
of a model on their own machine, its speed and its memory. Comparisons with other tools, generated COCO-sized
data, soaks and experiments live outside the package (`python -m benchmarks` in a clone)."""

import sys

import detect.runtime.cpu_threads  # noqa: F401  (before any benchmark imports torch: OMP_WAIT_POLICY as predict and val)
from detect.runtime.commands import dispatch

BENCHMARKS = {
    "model": "parameters, GFLOPs and forward latency of a cfg",
    "data": "training-loader throughput and memory per worker",
    "train": "training-step throughput and peak memory",
    "val": "inference, NMS and COCOeval throughput",
}


def main(argv=None) -> int:
    return dispatch(argv, "detect.bench", BENCHMARKS, "python -m detect.bench",
                    "against other tools, on generated COCO-sized data, soaks: python -m benchmarks, from a clone's root")


if __name__ == "__main__":
    sys.exit(main())
