"""The CPU inference backends `python -m detect.bench model` times side by side on one input: the PyTorch model
(unfused, fused, and the packed path predict and val use), onnxruntime and OpenCV's DNN module on an ONNX export,
and OpenCV's Darknet importer in a child process (OpenCV 4.x from `--opencv-path`; 5.x dropped the importer).

Every backend yields the model's [N, P, 5+K] rows, so each one's result is compared with the unfused model's.
`predict_models` gives the models predict's own path (detect.inference.predictor) runs on real images."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from detect.darknet import Darknet
from detect.darknet.load import for_inference
from detect.export.onnx_export import OnnxExportOptions, export_onnx

from .onnx_model import export_onnx_bytes
from .timing import timed

DARKNET_CLASS_THRESHOLD = 0.2  # OpenCV's Darknet [yolo] layer zeroes objectness x class below this


@dataclass
class Backend:
    name: str
    run: Callable[[], float]  # one forward pass; returns its milliseconds
    output: Callable[[], np.ndarray]  # [N, P, 5+K] rows in the model's layout and columns
    note: str = ""
    close: Callable[[], None] = field(default=lambda: None)


def torch_backends(model: Darknet, x: torch.Tensor) -> list[Backend]:
    """The model as loaded (unfused), fused with plain NCHW convolutions, and `for_inference` (fused, packed)."""
    fused = copy.deepcopy(model).fuse().eval()
    packed = for_inference(copy.deepcopy(model), torch.device("cpu"))
    backends = []
    for name, candidate, note in (("torch-unfused", model, "nn.Conv2d + BatchNorm2d"),
                                  ("torch-fused", fused, "BatchNorm folded, NCHW, plain nn.Conv2d"),
                                  ("torch-packed", packed, "for_inference: fused, oneDNN-packed, NHWC")):
        def forward(candidate=candidate):
            with torch.inference_mode():
                return candidate(x)
        backends.append(Backend(name, timed(forward), lambda forward=forward: forward().numpy(), note))
    return backends


def ncnn_backend(model: Darknet, x: torch.Tensor, threads: int) -> Backend:
    """The model as predict, val and the API run it on the CPU by default (detect.inference.ncnn_model)."""
    from detect.inference.ncnn_model import load_ncnn_model, ncnn_version

    compiled = load_ncnn_model(model, threads, x.shape[-1])

    def forward():
        return compiled(x)
    return Backend("ncnn", timed(forward), lambda: forward().numpy(),
                   f"ncnn {ncnn_version()}, float32, Winograd (the tools' CPU default)")


def openvino_backend(model: Darknet, x: torch.Tensor, threads: int) -> Backend:
    """The model as predict, val and the API run it on the CPU where ncnn cannot (detect.inference.openvino_model)."""
    from detect.inference.openvino_model import load_openvino_model, openvino_version

    compiled = load_openvino_model(model, x.shape[-1], threads, cache_root=None)

    def forward():
        return compiled(x)
    return Backend("openvino", timed(forward), lambda: forward().numpy(),
                   f"OpenVINO {openvino_version()}, float32 (the CPU engine where ncnn cannot run a model)")


def onnxruntime_options(threads: int):
    """onnxruntime's session options: `threads` threads that sleep while they wait, as PyTorch's do under
    OMP_WAIT_POLICY=PASSIVE. Its threads spin by default after a run, and took the cores from whichever
    backend ran next: about 25 ms more on a 35 ms yolov3-tiny pass, 2 threads on 2 cores."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def onnxruntime_backend(onnx_bytes: bytes, x: np.ndarray, threads: int) -> Backend:
    import onnxruntime

    session = onnxruntime.InferenceSession(onnx_bytes, onnxruntime_options(threads),
                                           providers=["CPUExecutionProvider"])

    def forward():
        return session.run(None, {"images": x})[0]
    return Backend("onnxruntime", timed(forward), forward, f"onnxruntime {onnxruntime.__version__}, ONNX export")


def opencv_onnx_backend(onnx_path: Path, x: np.ndarray, threads: int) -> Backend:
    """OpenCV's DNN module as installed (cv2 5.x here), in this process."""
    import cv2

    cv2.setNumThreads(threads)
    net = cv2.dnn.readNetFromONNX(str(onnx_path))

    def forward():
        net.setInput(x)
        return net.forward()
    return Backend("opencv-onnx", timed(forward), forward, f"cv2 {cv2.__version__} readNetFromONNX, in process")


class OpenCVWorker:
    """detect.bench.opencv_worker in a child process whose cv2 comes from `opencv_path` first."""

    def __init__(self, opencv_path: str, input_path: Path, threads: int, fmt: str, files: list[str]):
        # the child finds detect where this process did (a clone, an editable install or site-packages): this
        # process's own path, after the OpenCV to time
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([opencv_path, *(entry for entry in sys.path if entry)]))
        command = [sys.executable, "-m", "detect.bench.opencv_worker", "--input", str(input_path),
                   "--threads", str(threads), fmt, *files]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        reply = self._read()
        if not reply.startswith("ready "):
            self.close()
            raise RuntimeError(reply.removeprefix("error ") or "the OpenCV worker exited without a reply")
        self.version = reply.split()[1]

    def _read(self) -> str:
        return self.process.stdout.readline().strip()

    def ask(self, line: str) -> str:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        reply = self._read()
        if not reply or reply.startswith("error"):
            raise RuntimeError(f"OpenCV worker: {reply or 'exited'}")
        return reply

    def run(self) -> float:
        return float(self.ask("run"))

    def outputs(self, path: Path) -> list[np.ndarray]:
        self.ask(f"save {path}")
        with np.load(path) as saved:
            return [saved[f"arr_{i}"] for i in range(len(saved.files))]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=30)


def darknet_rows(outputs: list[np.ndarray], model: Darknet, height: int, width: int) -> np.ndarray:
    """OpenCV's Darknet [yolo] outputs (per head: rows y, x, anchor; boxes relative to the input; class columns
    objectness x class, zeroed below 0.2) in the model's layout; class columns left as OpenCV gives them."""
    rows = []
    for head, out in zip(model.heads, outputs):
        grid_h, grid_w = height // round(head.stride[0]), width // round(head.stride[1])
        out = out.reshape(grid_h, grid_w, head.num_anchors, -1).transpose(2, 0, 1, 3).reshape(-1, out.shape[-1])
        rows.append(out * np.array([width, height, width, height] + [1] * (out.shape[1] - 4), np.float32))
    return np.concatenate(rows)[None]


def darknet_comparable(rows: np.ndarray) -> np.ndarray:
    """The model's rows with class columns as OpenCV's Darknet importer gives them (see `darknet_rows`)."""
    scores = rows[..., 5:] * rows[..., 4:5]
    return np.concatenate([rows[..., :5], np.where(scores > DARKNET_CLASS_THRESHOLD, scores, 0)], -1)


def worker_backend(name: str, worker: OpenCVWorker, workdir: Path, convert=None) -> Backend:
    def output():
        outs = worker.outputs(workdir / f"{name}.npz")
        return convert(outs) if convert else outs[0]
    return Backend(name, worker.run, output, f"cv2 {worker.version} in a child process", worker.close)


def opencv_worker_backends(opencv_path: str, model: Darknet, weights: Path, onnx_path: Path, x: np.ndarray,
                           threads: int, workdir: Path) -> tuple[list[Backend], list[str]]:
    """OpenCV from `opencv_path`: the Darknet importer on (cfg, weights) and the ONNX importer; the second list
    holds a line for each that could not start."""
    input_path = workdir / "input.npy"
    np.save(input_path, x)
    cfg_path = workdir / "model.cfg"
    cfg_path.write_text(model.cfg_text)
    height, width = x.shape[2:]
    backends, problems = [], []
    for name, fmt, files, convert in (
            ("opencv-darknet", "darknet", [str(cfg_path), str(weights)],
             lambda outs: darknet_rows(outs, model, height, width)),
            ("opencv-onnx-child", "onnx", [str(onnx_path)], None)):
        try:
            worker = OpenCVWorker(opencv_path, input_path, threads, fmt, files)
        except (RuntimeError, OSError) as error:
            problems.append(f"{name}: not run ({error})")
            continue
        backends.append(worker_backend(name, worker, workdir, convert))
    return backends, problems


def predict_models(model: Darknet, size: int, threads: int,
                   workdir: Path) -> tuple[dict[str, tuple], list[str]]:
    """name -> (Runner for the Predictor, note), each as a tool would load it: `for_inference`
    (predict's `--backend torch`), the same unpacked, the model as loaded, the ncnn and OpenVINO models
    (predict's CPU engines), and a --dynamic ONNX export on onnxruntime; the list holds a line for each that
    could not be made."""
    models = {"torch-packed": (for_inference(copy.deepcopy(model), torch.device("cpu")),
                               "for_inference: fused, oneDNN-packed, NHWC (predict's --backend torch)"),
              "torch-fused": (for_inference(copy.deepcopy(model), torch.device("cpu"), pack=False),
                              "for_inference(pack=False): fused, plain nn.Conv2d"),
              "torch-unfused": (model, "nn.Conv2d + BatchNorm2d")}
    problems = []
    try:
        from detect.inference.ncnn_model import load_ncnn_model

        models["ncnn"] = (load_ncnn_model(model, threads, size), "ncnn, float32 (predict's default on the CPU)")
    except Exception as error:  # noqa: BLE001 - a runtime that cannot load the model is reported, not fatal
        problems.append(f"ncnn: not run ({type(error).__name__}: {error})")
    try:
        from detect.inference.openvino_model import load_openvino_model

        models["openvino"] = (load_openvino_model(model, size, threads, cache_root=None),
                              "OpenVINO, float32 (predict's engine where ncnn cannot run the model)")
    except Exception as error:  # noqa: BLE001 - a runtime that cannot load the model is reported, not fatal
        problems.append(f"openvino: not run ({type(error).__name__}: {error})")
    try:
        import onnxruntime

        from detect.inference.onnx_metadata import OnnxMetadata
        from detect.inference.onnx_runtime import OnnxModel, session_runner

        path = workdir / "dynamic.onnx"
        export_onnx(model, path, OnnxExportOptions(img_size=(size, size), dynamic=True))
        session = onnxruntime.InferenceSession(str(path), onnxruntime_options(threads),
                                               providers=["CPUExecutionProvider"])
        metadata = OnnxMetadata.from_props(session.get_modelmeta().custom_metadata_map, path)
        models["onnxruntime"] = (OnnxModel(session_runner(session), metadata, path),
                                 f"onnxruntime {onnxruntime.__version__}, detect.export --dynamic")
    except Exception as error:  # noqa: BLE001 - a runtime that cannot load the model is reported, not fatal
        problems.append(f"onnxruntime: not run ({type(error).__name__}: {error})")
    return models, problems


def int8_backends(onnx_path: Path, data: str, x: np.ndarray, threads: int, workdir: Path) -> list[Backend]:
    """The int8 graph `detect.export --int8 --data DATA` writes (calibrated on DATA's training images) of the same
    float export, on OpenVINO (what the tools run it on) and on onnxruntime."""
    from detect.export.quantize import (
        DEFAULT_CALIBRATION_IMAGES,
        calibration_images,
        quantize_int8,
    )
    from detect.inference.openvino_model import compile_onnx

    int8_path = workdir / "model-int8.onnx"
    quantize_int8(onnx_path, int8_path, calibration_images(data, DEFAULT_CALIBRATION_IMAGES), tuple(x.shape[2:]))
    ort = onnxruntime_backend(int8_path.read_bytes(), x, threads)
    run, _, version = compile_onnx(int8_path, threads)
    return [Backend("openvino-int8", timed(lambda: run(x)), lambda: run(x),
                    f"OpenVINO {version}, detect.export --int8 --data {data} (the tools' engine for it)"),
            Backend("onnxruntime-int8", ort.run, ort.output, f"{ort.note}, detect.export --int8 --data {data}")]


def build_backends(model: Darknet, x: torch.Tensor, threads: int, workdir: Path, weights: Path,
                   opencv_path: str | None, int8_data: str | None = None) -> tuple[list[Backend], list[str]]:
    """Every backend that can run here on input `x` [1, 3, H, W]; lines saying why the others did not."""
    backends = torch_backends(model, x)
    problems = []
    blob = x.numpy()
    onnx_bytes = export_onnx_bytes(copy.deepcopy(model).fuse().eval(), *x.shape[:1], *x.shape[2:])
    onnx_path = workdir / "model.onnx"
    onnx_path.write_bytes(onnx_bytes)
    makers = [("ncnn", lambda: ncnn_backend(model, x, threads)),
              ("openvino", lambda: openvino_backend(model, x, threads)),
              ("onnxruntime", lambda: onnxruntime_backend(onnx_bytes, blob, threads)),
              ("opencv-onnx", lambda: opencv_onnx_backend(onnx_path, blob, threads))]
    if int8_data:
        makers.insert(2, ("int8", lambda: int8_backends(onnx_path, int8_data, blob, threads, workdir)))
    for name, make in makers:
        try:
            made = make()
            backends += made if isinstance(made, list) else [made]
        except Exception as error:  # noqa: BLE001 - a runtime that cannot load the model is reported, not fatal
            problems.append(f"{name}: not run ({type(error).__name__}: {error})")
    if opencv_path:
        extra, lines = opencv_worker_backends(opencv_path, model, weights, onnx_path, blob, threads, workdir)
        backends += extra
        problems += lines
    return backends, problems
