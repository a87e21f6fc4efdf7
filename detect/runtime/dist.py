"""Everything torch.distributed: the only module in the package that imports it.

Works the same under `torchrun` (RANK/WORLD_SIZE/LOCAL_RANK in the environment), under plain `python`
(a single process, no process group) and in tests that create a gloo group themselves.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from detect.runtime.commands import spelt
from detect.runtime.liveness import Beacon, is_peer_failure, start_beacon

log = logging.getLogger(__name__)

# Long enough for rank 0 to build a COCO-sized label cache or run COCOeval while the others wait,
# short enough that a real hang still ends the job (`train.py --dist-timeout SECONDS` changes it).
DEFAULT_TIMEOUT_S = 30 * 60


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None  # None when no process group is used
    node_rank: int = 0  # torchrun's GROUP_RANK: which node (launch) this process belongs to
    beacon: Beacon | None = field(default=None, compare=False)  # liveness and progress in the group's store

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def env_rank() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from the torchrun environment; (0, 1, 0) without it."""
    try:
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError as e:
        raise RuntimeError(f"RANK/WORLD_SIZE/LOCAL_RANK must be integers: {e}") from None
    return rank, world, local


class DeviceUnavailable(ValueError):
    """A --device this machine does not have: the user's choice to fix, so the tools print it as one line."""


def resolve_device(requested: str, local_rank: int, flag: str = "--device") -> torch.device:
    """`auto` picks the local GPU when CUDA is present, else the CPU; `cuda` without CUDA is an error. `flag`
    names the option in the errors (the API's device=)."""
    if not isinstance(requested, str) or (requested not in ("auto", "cpu", "cuda")
                                          and not requested.startswith("cuda:")):
        raise ValueError(f"{flag.rstrip('=')} must be auto, cpu, cuda or cuda:N, got {requested!r}")
    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise DeviceUnavailable(f"{spelt(flag, requested)} was requested but CUDA is not available on this "
                                f"machine; use {spelt(flag, 'cpu')} (or auto)")
    n = torch.cuda.device_count()
    if requested.startswith("cuda:"):
        index = requested.split(":", 1)[1]
        if not index.isdigit() or int(index) >= n:
            raise DeviceUnavailable(f"{spelt(flag, requested)}: this machine has {n} GPU(s), cuda:0 to "
                                    f"cuda:{n - 1}")
        return torch.device(requested)
    if local_rank >= n:
        raise DeviceUnavailable(f"local rank {local_rank} has no GPU: this node has {n}; lower --nproc_per_node")
    return torch.device("cuda", local_rank)


def init_distributed(device: str = "auto", timeout_s: float = DEFAULT_TIMEOUT_S) -> DistContext:
    """Set up the process group from the torchrun environment (NCCL on CUDA, gloo otherwise). `timeout_s` bounds
    every collective: a rank that does not arrive within it ends the group (see `explain_failure`)."""
    rank, world, local = env_rank()
    dev = resolve_device(device, local)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world == 1:
        return DistContext(0, 1, 0, dev, None)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    warn_restart_store()
    if not dist.is_initialized():
        kwargs = {"device_id": dev} if dev.type == "cuda" else {}
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    node = int(os.environ.get("GROUP_RANK", "0") or 0)
    beacon = start_beacon(_group_store(), rank, world, node, timeout_s)
    return DistContext(rank, world, local, dev, backend, node, beacon)


def warn_restart_store() -> None:
    """torchrun shares its rendezvous store with the process group by default; after a restart the new group can
    then read the dead group's addresses and fail to connect (pytorch/pytorch#135712). Say how to avoid it."""
    restarts = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0)
    shared = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    if restarts > 0 and shared and env_rank()[0] == 0:
        log.warning("torchrun --max-restarts %d with its shared rendezvous store: a restarted group may fail to "
                    "connect (pytorch#135712); launch with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun ...",
                    restarts)


def _group_store():
    """The default group's key-value store (torch keeps it private; None where it is not reachable)."""
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:
        return None


def post_progress(ctx: DistContext, position: int, label: str) -> None:
    """Tell the group where this rank is (before a collective), so that a hang elsewhere can be named."""
    beacon = getattr(ctx, "beacon", None)
    if beacon is not None:
        beacon.post(position, label)


def explain_failure(ctx: DistContext | None, exc: BaseException) -> str | None:
    """For a collective that timed out or lost a peer: which rank(s) failed the group and how (None for any
    other error). Waits a few seconds to watch the other ranks' heartbeats."""
    if ctx is None or not ctx.distributed or not is_peer_failure(exc):
        return None
    if ctx.beacon is None:
        return "a rank did not arrive at a collective (hung, crashed or its node lost); see the other ranks' logs"
    return ctx.beacon.explain() or None  # every rank alive and arrived: nothing to add to the error itself


def destroy(ctx: DistContext | None = None) -> None:
    if ctx is not None and ctx.beacon is not None:
        ctx.beacon.close()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def is_main_process() -> bool:
    return get_rank() == 0


def barrier() -> None:
    if is_initialized() and get_world_size() > 1:
        dist.barrier()


def broadcast_object(obj, src: int = 0):
    """Rank `src`'s object on every rank (identity without a process group)."""
    if not is_initialized() or get_world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def objects_to_main(obj):
    """Rank 0 yields every rank's object in rank order, one at a time (its own first), never holding two others'
    at once; the other ranks send theirs when asked and yield nothing. Collective: run it to its end everywhere."""
    rank = get_rank()
    for src in range(get_world_size()):
        box = [obj]
        if rank == 0 and src != 0:
            dist.recv_object_list(box, src=src)
        elif rank == src != 0:
            dist.send_object_list(box, dst=0)
        if rank == 0:
            yield box[0]


def all_gather_object(obj) -> list:
    """Every rank's object, in rank order, on every rank."""
    if not is_initialized() or get_world_size() == 1:
        return [obj]
    out = [None] * get_world_size()
    dist.all_gather_object(out, obj)
    return out


def gather_object_to_main(obj) -> list | None:
    """Every rank's object, in rank order, on rank 0 only (None elsewhere)."""
    if not is_initialized() or get_world_size() == 1:
        return [obj]
    out = [None] * get_world_size() if get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


def exchange_objects(outgoing: list) -> list:
    """All-to-all: `outgoing[r]` goes to rank r; returns what every rank sent this one, in rank order. Each
    rank holds only its own share (one scatter per source rank), never every rank's whole list."""
    world = get_world_size() if is_initialized() else 1
    if len(outgoing) != world:
        raise ValueError(f"exchange_objects needs one object per rank ({world}), got {len(outgoing)}")
    if world == 1:
        return list(outgoing)
    incoming = []
    for src in range(world):
        box = [None]
        dist.scatter_object_list(box, outgoing if get_rank() == src else None, src=src)
        incoming.append(box[0])
    return incoming


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """In-place sum across ranks; returns `t` for chaining."""
    if is_initialized() and get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_reduce_mean(t: torch.Tensor) -> torch.Tensor:
    return all_reduce_sum(t).div_(get_world_size()) if get_world_size() > 1 else t


class RemoteRankError(RuntimeError):
    """Raised on the waiting ranks when rank 0 failed inside `rank0_first`."""


@contextlib.contextmanager
def rank0_first():
    """Run the body on rank 0 first while the other ranks wait, then on the others.

    Rank 0 broadcasts whether its body succeeded; if it failed, every other rank raises `RemoteRankError`
    carrying rank 0's message at once instead of waiting for a timeout. A no-op without a process group.
    """
    if not is_initialized() or get_world_size() == 1:
        yield
        return
    if get_rank() == 0:
        try:
            yield
        except BaseException as e:
            broadcast_object(f"{type(e).__name__}: {e}")
            raise
        broadcast_object(None)
    else:
        failure = broadcast_object(None)
        if failure is not None:
            raise RemoteRankError(f"rank 0 failed while the other ranks waited: {failure}")
        yield


def _stage_of_this_rank() -> int:
    """0: global rank 0; 1: the first process of every other node (LOCAL_RANK 0); 2: everyone else."""
    if get_rank() == 0:
        return 0
    return 1 if env_rank()[2] == 0 else 2


def _end_stage(failure: str | None) -> None:
    """Every rank learns whether some rank of the stage that just ran failed; the others raise at once."""
    failures = [f for f in all_gather_object(failure) if f is not None]
    if failures and failure is None:
        raise RemoteRankError(f"another rank failed while this one waited: {failures[0]}")


@contextlib.contextmanager
def node_leaders_first():
    """Run the body on global rank 0, then on the first process of each other node, then on the rest.

    For files on each node's own disk (label cache, generated data): rank 0 builds them; each other node's leader
    then finds them (a shared folder: rank 0's files are there, nothing to do) or builds its node's copy (a
    node-local folder); the remaining processes only read. A failure in any stage reaches every rank at the end
    of that stage (`RemoteRankError`), as with `rank0_first`. A no-op without a process group.
    """
    if not is_initialized() or get_world_size() == 1:
        yield
        return
    mine = _stage_of_this_rank()
    for _ in range(mine):  # the stages before this rank's
        _end_stage(None)
    try:
        yield
    except BaseException as e:
        _end_stage(f"{type(e).__name__}: {e}")
        raise
    for _ in range(mine, 3):
        _end_stage(None)
