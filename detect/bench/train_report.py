"""The table `python -m detect.bench train` prints: one row per configuration, one data-included column (and
% of the bf16 peak) per loader, and the profiler's split of a step under it."""

from __future__ import annotations

from pathlib import Path

from detect.bench.step_split import format_split


def included_label(name: str) -> str:
    return f"{name} img/s"


def format_header(loaders: list[str], peak_tflops) -> str:
    """The column names: one data-included column (and % of peak) per loader, in the rows' order."""
    included = "".join(f" {included_label(n):>9s}" for n in loaders) or f" {'incl img/s':>9s}"
    line = f"{'cfg':18s} {'img':>5s} {'batch':>6s} {'variant':16s} {'excl img/s':>9s}{included} "
    line += f"{'mem GiB':>8s} {'GFLOPs':>8s}"
    if peak_tflops:
        line += f" {'TFLOP/s':>9s} {'excl':>7s}" + "".join(f" {n:>7s}" for n in loaders)
    return line


def format_row(cfg, img, batch, variant_name, row, gflops, peak_tflops) -> str:
    line = f"{Path(cfg).name:18s} {img:5d} {batch:6d} {variant_name:16s} {row['excluded']:9.1f}"
    included = row.get("included", {})
    line += "".join(f" {v:{max(9, len(included_label(n)))}.1f}" for n, v in included.items()) or f" {'-':>9s}"
    line += f" {row['memory']:8.2f} {gflops:8.2f}"
    if peak_tflops:
        def percent(images_s):
            return 100 * 3 * gflops * images_s / 1000 / peak_tflops

        line += f" {3 * gflops * row['excluded'] / 1000:9.1f} {percent(row['excluded']):6.1f}%"
        line += "".join(f" {percent(v):{max(7, len(n)) - 1}.1f}%" for n, v in included.items())
    return line


def format_splits(row) -> list[str]:
    """The step splits of a row, data excluded first."""
    splits = row.get("splits", {})
    lines = [format_split("data excluded", splits["excluded"])] if "excluded" in splits else []
    return lines + [format_split(f"data included ({k})", v) for k, v in splits.items() if k != "excluded"]
