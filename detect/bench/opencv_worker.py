"""A child process of `python -m detect.bench model` that runs one network in OpenCV's DNN module, so an OpenCV
other than the installed one (4.x, which still reads Darknet cfg files; cv2 4 and 5 cannot share a process) can
be timed side by side with the benchmark's own backends. Imports numpy and cv2 only.

    python -m detect.bench.opencv_worker --input x.npy --threads 2 darknet CFG WEIGHTS
    python -m detect.bench.opencv_worker --input x.npy --threads 2 onnx MODEL.onnx

Protocol on stdin/stdout, one line each: the worker prints `ready <cv2 version>`; then `run` -> `<ms>` (one forward
pass, timed inside the worker), `save PATH` -> `saved` (the outputs of the last pass as an .npz, one array per
output), `quit`. A failure prints `error <message>` and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m detect.bench.opencv_worker")
    parser.add_argument("--input", required=True, help=".npy float32 [N, 3, H, W] input in [0, 1], RGB")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("format", choices=["darknet", "onnx"])
    parser.add_argument("files", nargs="+", help="darknet: CFG WEIGHTS; onnx: MODEL")
    return parser.parse_args(argv)


def load_net(cv2, fmt: str, files: list[str]):
    if fmt == "darknet":
        if not hasattr(cv2.dnn, "readNetFromDarknet"):
            raise RuntimeError(f"OpenCV {cv2.__version__} has no Darknet importer (removed in 5.x)")
        return cv2.dnn.readNetFromDarknet(*files)
    return cv2.dnn.readNetFromONNX(files[0])


def serve(net, blob: np.ndarray) -> None:
    names = net.getUnconnectedOutLayersNames()
    outputs = []
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "run":
            start = time.perf_counter()
            net.setInput(blob)
            outputs = net.forward(names)
            print(f"{(time.perf_counter() - start) * 1000:.4f}", flush=True)
        elif command == "save":
            np.savez(argument, *outputs)
            print("saved", flush=True)
        elif command == "quit":
            return
        else:
            print(f"error unknown command {command!r}", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import cv2

        cv2.setNumThreads(args.threads)
        net = load_net(cv2, args.format, args.files)
        net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
        blob = np.load(args.input)
    except Exception as error:  # noqa: BLE001 - any failure is reported to the parent as this backend's result
        print(f"error {type(error).__name__}: {error}".replace("\n", " "), flush=True)
        return 1
    print(f"ready {cv2.__version__}", flush=True)
    serve(net, blob)
    return 0


if __name__ == "__main__":
    sys.exit(main())
