"""Where the workers of one machine run: `--workers-per-node N` processes, each given its own GPUs
(CUDA_VISIBLE_DEVICES: `--nproc-per-trial` of them) or, without GPUs, an equal share of the CPU threads and
`--device cpu` for train.py (unless the train.py arguments name a device)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass

from detect.tune.options import TuneOptions

log = logging.getLogger(__name__)

WORKER_ENV = "DETECT_TUNE_WORKER"  # "i/N" in a worker process that --workers-per-node started


@dataclass(frozen=True)
class Placement:
    env: dict  # what the worker's train.py runs see besides the environment: CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS
    device_args: tuple[str, ...]  # train.py arguments of the device


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES's list when set, else every GPU torch sees."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and not g.strip().startswith("-")]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def placements(workers: int, nproc: int, gpus: list[str], cpus: int, device_given: bool,
               threads_given: bool) -> list[Placement]:
    """One placement per worker: `nproc` GPUs each, or a share of the `cpus` threads."""
    if gpus:
        if workers * nproc > len(gpus):
            raise ValueError(f"--workers-per-node {workers} x --nproc-per-trial {nproc} need {workers * nproc} "
                             f"GPUs; this machine has {len(gpus)} ({','.join(gpus)})")
        return [Placement({"CUDA_VISIBLE_DEVICES": ",".join(gpus[i * nproc:(i + 1) * nproc])}, ())
                for i in range(workers)]
    env = {} if threads_given else {"OMP_NUM_THREADS": str(max(1, cpus // (workers * nproc)))}
    return [Placement(env, () if device_given else ("--device", "cpu"))] * workers


def own_placement(opts: TuneOptions) -> Placement:
    """This process's placement as worker 0 of 1 (a worker started by the parent finds its share in its env)."""
    return placements(1, opts.nproc_per_trial, visible_gpus(), os.cpu_count() or 1, opts.device_given,
                      "OMP_NUM_THREADS" in os.environ)[0]


def worker_argv(opts: TuneOptions) -> list[str]:
    """The command line of a worker process: the same search, trials only."""
    base = ["--hyp", str(opts.base_hyp)] if opts.base_hyp else []
    return [sys.executable, "-m", "detect.tune", *opts.argv, "--worker", "--", *opts.train_args, *base]


def run_workers(opts: TuneOptions) -> int:
    """Start --workers-per-node worker processes and wait for them; 0 when every one ended well. Ctrl-C reaches
    them from the terminal; a SIGTERM to this process is passed on to each."""
    plan = placements(opts.workers_per_node, opts.nproc_per_trial, visible_gpus(), os.cpu_count() or 1,
                      opts.device_given, "OMP_NUM_THREADS" in os.environ)
    procs = []
    for i, place in enumerate(plan):
        env = {**os.environ, **place.env, WORKER_ENV: f"{i}/{len(plan)}"}
        procs.append(subprocess.Popen(worker_argv(opts), env=env))
        log.info("worker %d (pid %d): %s", i, procs[-1].pid,
                 " ".join(f"{k}={v}" for k, v in place.env.items()) or "the environment as it is")

    terminated = []

    def forward(signum, frame):  # once: each worker stops its trial on one SIGTERM, and ignores more
        if not terminated:
            terminated.append(signum)
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, forward)
    interrupted = False
    try:
        while any(p.poll() is None for p in procs):
            try:
                for p in procs:
                    p.wait()
            except KeyboardInterrupt:  # Ctrl-C reached the workers too: they stop their trials; wait for them
                interrupted = True
    finally:
        signal.signal(signal.SIGTERM, previous)
    codes = [p.returncode for p in procs]
    if interrupted or terminated:
        return 130
    return next((c for c in codes if c != 0), 0)
