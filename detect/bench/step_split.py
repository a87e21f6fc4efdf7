"""Where one training step's time goes, from a few steps under `torch.profiler` (`python -m detect.bench train
--profile N`).

Per step: the wall time; the host time blocked on the loader; the host time inside `Trainer.train_step`, and
of that the forward, the loss with its target assignment (and the assignment alone:
`detect.engine.assign.assign_padded`), the backward, and the optimiser step with the EMA; on CUDA the summed
kernel time (device compute), the rest of the wall time (device idle) and the number of kernels launched. On the
CPU the parts are the step itself; on CUDA they are the host's time to queue them. The profiler adds a little
host time to every operator, so compare the wall time with the timed figure before trusting the split.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import warnings
from dataclasses import dataclass

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

LOADER_WAIT = "loader wait"
ASSIGN = "assign targets"
FORWARD = "forward"
LOSS = "loss"
BACKWARD = "backward"
OPTIMIZER = "optimizer and EMA"
PARTS = (FORWARD, LOSS, ASSIGN, BACKWARD, OPTIMIZER)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepSplit:
    """Milliseconds per step over `steps` steps; the device figures are None on the CPU."""

    steps: int
    wall_ms: float
    loader_wait_ms: float
    host_ms: float
    parts_ms: dict  # PARTS -> ms per step (the loss includes the assignment)
    device_ms: float | None
    kernels: float | None

    @property
    def assign_ms(self) -> float:
        return self.parts_ms[ASSIGN]

    @property
    def idle_ms(self) -> float | None:
        return None if self.device_ms is None else self.wall_ms - self.device_ms


def _labelled(fn, label: str):
    """`fn` inside a profiler range named `label`, so its own time can be read from the profile."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with record_function(label):
            return fn(*args, **kwargs)
    return wrapper


def _is_kernel(event) -> bool:
    """A device event that is a kernel (not a copy, a fill, nor the device-side copy of a named range)."""
    kind = getattr(event, "activity_type", None)  # recent torch names the kind; older ones need the name
    if kind is not None:
        return kind == "kernel"
    return not (event.is_user_annotation or event.name.startswith(("Memcpy", "Memset")))


def _step_loop(bench, it, steps: int) -> tuple[float, float, float]:
    """(wall, loader wait, host in train_step) seconds over `steps` steps, the device synchronised around."""
    wait = host = 0.0
    bench.sync()
    start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        with record_function(LOADER_WAIT):
            images, targets = next(it)[:2]
        t1 = time.perf_counter()
        bench.step(images, targets)  # no synchronisation inside: the host time is what the host spends
        t2 = time.perf_counter()
        wait, host = wait + t1 - t0, host + t2 - t1
    bench.sync()
    return time.perf_counter() - start, wait, host


@contextlib.contextmanager
def _labelled_parts(bench):
    """For the window: the step's parts inside profiler ranges named by PARTS, everything restored after."""
    from detect.engine import loss as loss_module

    setup = bench.trainer.setup
    model = setup.ddp_model
    ranges = []

    def enter(*_):
        ranges.append(record_function(FORWARD))
        ranges[-1].__enter__()

    def leave(*_):
        ranges.pop().__exit__(None, None, None)

    hooks = [model.register_forward_pre_hook(enter), model.register_forward_hook(leave)]
    # the loss calls the names it imported, the trainer its own method, Tensor.backward torch.autograd's function
    original_assign, original_backward = loss_module.assign_padded, torch.autograd.backward
    loss_module.assign_padded = _labelled(original_assign, ASSIGN)
    torch.autograd.backward = _labelled(original_backward, BACKWARD)
    loss = setup.loss
    setup.loss = _labelled(loss, LOSS)  # what the trainer calls (padding, the assignment and the loss)
    bench.trainer._optimizer_step = _labelled(bench.trainer._optimizer_step, OPTIMIZER)
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
        loss_module.assign_padded, torch.autograd.backward = original_assign, original_backward
        setup.loss = loss
        del bench.trainer._optimizer_step


def profile_steps(bench, batches, steps: int) -> StepSplit:
    """`steps` steps of `bench` (detect.bench.train.Bench) on `batches` under the profiler, split."""
    # kineto writes its start/stop stages (and on the CPU a failed GPU query) to stderr unless told otherwise;
    # read when the profiler first starts, and left alone when the user set it
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    cuda = bench.ctx.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    it = iter(batches)
    with _labelled_parts(bench), warnings.catch_warnings():
        # some torch versions warn that events of earlier cycles are dropped: one window has no earlier cycle
        warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle")
        with profile(activities=activities) as prof:
            wall, wait, host = _step_loop(bench, it, steps)
    events = prof.events()
    parts = {name: sum(e.cpu_time_total for e in events if e.device_type == DeviceType.CPU and e.name == name)
             / 1000 / steps for name in PARTS}
    device_ms = kernels = None
    if cuda:
        found = [e for e in events if e.device_type == DeviceType.CUDA and _is_kernel(e)]
        device_ms = sum(e.time_range.elapsed_us() for e in found) / 1000 / steps
        kernels = len(found) / steps
        if not found:
            log.warning("the profiler recorded no CUDA kernels (CUPTI unavailable?): KINETO_LOG_LEVEL=0 says why")
    ms = 1000 / steps
    return StepSplit(steps, wall * ms, wait * ms, host * ms, parts, device_ms, kernels)


def format_split(label: str, split: StepSplit) -> str:
    """One line: `label` (which batches) and the figures per step; '-' where the CPU has none."""
    def opt(value, unit=" ms", digits=2):
        return "-" if value is None else f"{value:.{digits}f}{unit}"

    return (f"  split {label}: {split.steps} steps, per step: wall {split.wall_ms:.2f} ms, "
            f"loader wait {split.loader_wait_ms:.2f} ms, host {split.host_ms:.2f} ms ("
            + ", ".join(f"{name} {split.parts_ms[name]:.2f} ms" for name in PARTS)
            + f"), device compute {opt(split.device_ms)}, "
            f"device idle {opt(split.idle_ms)}, kernel launches {opt(split.kernels, '', 0)}")
