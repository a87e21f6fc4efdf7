"""Run a function in N gloo processes on the CPU (file-store init, no network beyond this machine).

    results = run_distributed(fn, world_size=2, args=(tmp_path,))

`fn(rank, world_size, *args)` runs in every process with a gloo group initialised and RANK/WORLD_SIZE set
(processes are not daemonic, so `fn` may start DataLoader workers); its return values come back in rank order. An exception in any process is re-raised here with that rank's
traceback. `timeout` bounds the whole run so a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import datetime
import io
import os
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _as_bytes(result) -> bytes:
    """The result as plain bytes: a tensor put on the queue as it is travels as a file descriptor that the parent
    fetches from this process later, which fails once this process has exited (a race on a busy machine)."""
    buffer = io.BytesIO()
    torch.save(result, buffer)
    return buffer.getvalue()


def _worker(rank, world_size, init_file, fn, args, queue):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world_size))
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=60))
        result = fn(rank, world_size, *args)
        queue.put((rank, True, _as_bytes(result)))
    except BaseException:
        queue.put((rank, False, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_distributed(fn, world_size: int = 2, args: tuple = (), timeout: float = 120.0) -> list:
    """Run `fn` in `world_size` processes; return results in rank order or raise the first failure."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        procs = [ctx.Process(target=_worker, args=(r, world_size, init_file, fn, args, queue))
                 for r in range(world_size)]
        for p in procs:
            p.start()
        results, failures = {}, {}
        try:
            for _ in range(world_size):
                rank, ok, payload = queue.get(timeout=timeout)
                if ok:
                    results[rank] = torch.load(io.BytesIO(payload), weights_only=False)
                else:
                    failures[rank] = payload
                if failures:
                    break  # one rank failed: do not wait for the others to time out
        finally:
            for p in procs:
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
        if failures:
            rank = min(failures)
            raise RuntimeError(f"rank {rank} of {world_size} failed:\n{failures[rank]}")
        return [results[r] for r in range(world_size)]
