"""Latency measured side by side: every backend runs once per round, in turn (A, B, C, A, B, C, ...), so load from
other processes on a shared machine falls on all of them alike; figures are medians with p10/p90."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Timing:
    median: float  # milliseconds
    p10: float
    p90: float
    runs: int
    mean: float


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks of an ascending list."""
    position = fraction * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(milliseconds: list[float]) -> Timing:
    values = sorted(milliseconds)
    return Timing(percentile(values, 0.5), percentile(values, 0.1), percentile(values, 0.9), len(values),
                  sum(values) / len(values))


def timed(run: Callable[[], object]) -> Callable[[], float]:
    """A runner for `interleave` from a function that does one pass: it returns the pass's milliseconds."""
    def runner() -> float:
        start = time.perf_counter()
        run()
        return (time.perf_counter() - start) * 1000
    return runner


def interleave(runners: dict[str, Callable[[], float]], rounds: int, warmup: int = 2) -> dict[str, Timing]:
    """Each runner does one pass and returns its milliseconds (a child process times itself); `warmup` rounds
    are not counted (first-call kernel and layout choices)."""
    for _ in range(warmup):
        for run in runners.values():
            run()
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            times[name].append(run())
    return {name: summarize(values) for name, values in times.items()}


def measure_matmul_tflops(device: torch.device, n: int = 8192, iters: int = 20) -> float:
    """Median TFLOP/s of an n x n x n bf16 matrix product on random data (the practical tensor-core peak)."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return 2 * n ** 3 / sorted(times)[len(times) // 2] / 1e12
