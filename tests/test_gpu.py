"""The CUDA path on a real GPU (skipped without one): an NCCL DDP training step under AMP (bf16, fp16 with the
scaler, fp32) and channels_last on coco-tiny, EMA, exact resume, SyncBatchNorm against one process over the
global batch, `detect.val` against the CPU, and the default job under torchrun.

Tolerances, stated once: fp32 comparisons run with TF32 off (PyTorch's cuDNN default is on) and agree to 1e-4
relative; a resumed bf16 run agrees with the uninterrupted one to 1e-3 of the weights' norm (cuDNN's and the
loss's atomic additions are not bit-reproducible between two runs, and bf16 rounding amplifies that).
"""

from __future__ import annotations

import datetime
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from detect.engine.config import LossConfig
from detect.engine.options import TrainOptions
from detect.engine.setup import build_trainer
from detect.runtime import ddp, dist
from detect.runtime.precision import autocast
from tests.conftest import ROOT
from tests.support.distributed import run_distributed
from tests.support.training import StopAtStep

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

GPU_HYP = "lr0: 0.01\nwarmup_epochs: 0\nwarmup_min_steps: 1\nema_tau: 5\nmosaic: 0.5\n"


@pytest.fixture
def no_tf32():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def gpu_options(shared, tmp, **changes) -> TrainOptions:
    shared("data", "coco-tiny")
    hyp = tmp / "hyp.yaml"
    hyp.write_text(GPU_HYP)
    base = dict(cfg=str(ROOT / "cfg" / "yolov3-tiny.cfg"), data=str(ROOT / "data" / "coco-tiny.yaml"),
                hyp=str(hyp), img_size=320, batch_size=8, nbs=8, epochs=3, max_batches=4, workers=2,
                device="cuda", project=str(tmp / "runs"), name="gpu", exist_ok=True, cache_dir=str(tmp / "cache"))
    base.update(changes)
    return TrainOptions(**base)


def flat_params(model) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten() for p in model.parameters()]).cpu()


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp(min=1e-12))


# ---- one NCCL process: DDP step, AMP, channels_last, EMA ------------------------------------------------------

@pytest.fixture
def nccl_group(tmp_path):
    torch.distributed.init_process_group("nccl", init_method=f"file://{tmp_path / 'nccl-init'}", rank=0,
                                         world_size=1, timeout=datetime.timedelta(seconds=120),
                                         device_id=torch.device("cuda", 0))
    yield
    torch.distributed.destroy_process_group()


@pytest.mark.parametrize("amp", ["bf16", "fp16", "off"])
def test_nccl_ddp_steps_with_amp_and_channels_last(amp, shared, tmp_path, nccl_group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    # the whole of coco-tiny's train split for 4 epochs at a constant lr: 40 steps from scratch
    options = gpu_options(shared, tmp_path, amp=amp, epochs=4, max_batches=None, schedule="constant")
    trainer = build_trainer(options, dist.init_distributed("cuda"))
    s = trainer.setup
    s.ddp_model = DDP(s.model, device_ids=[0], gradient_as_bucket_view=True)  # the NCCL process group's DDP
    s.evaluate_fn, s.progress = None, False
    expected = {"bf16": torch.bfloat16, "fp16": torch.float16, "off": None}[amp]
    assert s.amp_dtype == expected and s.scaler.is_enabled() == (amp == "fp16")
    assert s.model.layers[0].conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert s.optimizer.param_groups[0]["fused"]
    rows = []
    for _ in range(4):
        rows.append(trainer.train_epoch())
        trainer.state.epoch += 1
        trainer.state.batch_in_epoch = 0
    totals = [r["box"] + r["obj"] + r["cls"] for r in rows]
    print(f"amp {amp}: loss per epoch {[round(t, 4) for t in totals]}, scale "
          f"{s.scaler.get_scale() if s.scaler.is_enabled() else '-'}")
    assert all(math.isfinite(t) for t in totals) and trainer.state.nonfinite_total == 0
    assert totals[-1] < 0.9 * totals[0]
    with autocast(s.ctx.device, s.amp_dtype):  # the heads' raw maps come out in the autocast dtype
        raw = s.ddp_model(torch.rand(2, 3, 320, 320, device="cuda").contiguous(memory_format=torch.channels_last))
    assert raw[0].dtype == (expected or torch.float32)
    assert s.ema.updates == trainer.state.step == 40
    ema, model = flat_params(s.ema.module), flat_params(s.model)
    assert torch.isfinite(ema).all() and 0 < relative(ema, model) < 0.5


# ---- checkpoint and exact resume ----------------------------------------------------------------------------

@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_a_queued_step_has_no_host_synchronisation(amp, shared, tmp_path):
    """Forward, padded loss, flags, backward, clipping, the fused optimiser and the EMA are queued without the host
    waiting once (CUDA's sync debug mode raises on any synchronising call); only the lagged flag read waits."""
    trainer = build_trainer(gpu_options(shared, tmp_path, amp=amp), dist.init_distributed("cuda"))
    setup = trainer.setup
    try:
        trainer._set_train_mode()
        batches = setup.train_loader.epoch(0)
        trainer.train_step(*next(batches)[:2], 0, last_of_window=True)  # first step: capacity and buffers made
        images, targets = next(batches)[:2]
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            parts, flags = trainer._micro_step(images, targets, 1, sync=True)
            trainer._optimizer_step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        trainer._pending = flags
        trainer.flush()
        assert torch.isfinite(parts).all() and trainer.state.nonfinite_total == 0 and trainer.state.step == 2
    finally:
        setup.train_loader.close()


def _run(shared, tmp, name, stop_at=None, resume=None):
    opts = gpu_options(shared, tmp, name=name, amp="bf16", resume=resume, eval_interval=100)
    trainer = build_trainer(opts, dist.init_distributed("cuda"), StopAtStep)
    trainer.stop_at = stop_at
    state = trainer.fit()
    trainer.setup.train_loader.close()
    return flat_params(trainer.setup.model), flat_params(trainer.setup.ema.module), state, trainer.setup.optimizer


def test_resume_on_gpu_equals_uninterrupted_run(shared, tmp_path):
    straight, straight_ema, state, optimizer = _run(shared, tmp_path, "straight")
    again, _, _, _ = _run(shared, tmp_path, "again")
    _, _, stopped, _ = _run(shared, tmp_path, "cut", stop_at=6)
    resumed, resumed_ema, resumed_state, resumed_optimizer = _run(
        shared, tmp_path, "cut", resume=str(tmp_path / "runs" / "cut" / "last.pt"))
    # "SIGTERM" after step 6 is agreed on at the next micro-batch: the run stops after step 7, inside epoch 2
    assert (stopped.epoch, stopped.step, stopped.batch_in_epoch) == (1, 7, 3)
    assert (resumed_state.epoch, resumed_state.step) == (state.epoch, state.step) == (3, 12)
    assert resumed_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
    run_to_run, resume_error = relative(again, straight), relative(resumed, straight)
    print(f"bf16, 12 steps: two uninterrupted runs differ by {run_to_run:.2e}, the resumed run by "
          f"{resume_error:.2e} (relative to the weights' norm); EMA {relative(resumed_ema, straight_ema):.2e}")
    assert resume_error < 1e-3 and relative(resumed_ema, straight_ema) < 1e-3


# ---- SyncBatchNorm: two processes sharing the GPU over gloo ---------------------------------------------------

def _global_batch():
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(8, 3, 64, 64, generator=gen)
    images[4:] = images[4:] * 0.5 + 0.5  # the second rank's half is brighter: its local statistics differ
    per_image = 3
    targets = torch.cat([torch.arange(8).repeat_interleave(per_image)[:, None].float(),
                         torch.randint(0, 4, (8 * per_image, 1), generator=gen).float(),
                         torch.rand(8 * per_image, 2, generator=gen) * 0.6 + 0.2,
                         torch.rand(8 * per_image, 2, generator=gen) * 0.3 + 0.1], 1)
    return images, targets


def _grads_and_stats(rank: int, world: int, sync_bn: bool):
    """One forward/backward of this rank's half of the global batch; (gradients, BN running stats) as numpy."""
    from detect.darknet.model import Darknet
    from detect.engine.loss import YoloLoss

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = Darknet(str(ROOT / "cfg" / "yolo-mini.cfg"), img_size=64, num_classes=4)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.momentum = 1.0  # running statistics = this step's batch statistics
    model.to(device).train()
    images, targets = _global_batch()
    share = images.shape[0] // world
    mine = (targets[:, 0] >= rank * share) & (targets[:, 0] < (rank + 1) * share)
    local_targets = targets[mine].clone()
    local_targets[:, 0] -= rank * share
    if sync_bn:
        model = ddp.convert_sync_bn(model)
    ctx = dist.DistContext(rank, world, rank, device, "gloo" if world > 1 else None)
    wrapped = ddp.wrap_ddp(model, ctx)
    loss_fn = YoloLoss.for_model(model, LossConfig())
    loss, _ = loss_fn(wrapped(images[rank * share:(rank + 1) * share].to(device)), local_targets, (64, 64))
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()]).cpu().numpy()
    stats = torch.cat([b.flatten() for n, b in model.named_buffers() if "running" in n]).cpu().numpy()
    return grads, stats


def _sync_and_plain(rank, world):
    return _grads_and_stats(rank, world, True), _grads_and_stats(rank, world, False)


def test_sync_batchnorm_equals_one_process_over_the_global_batch(no_tf32):
    reference_grads, reference_stats = (torch.from_numpy(a) for a in _grads_and_stats(0, 1, sync_bn=False))
    results = run_distributed(_sync_and_plain, 2, timeout=300)
    for rank, ((grads, stats), (plain_grads, plain_stats)) in enumerate(results):
        grads, stats = torch.from_numpy(grads), torch.from_numpy(stats)
        g, s = relative(grads, reference_grads), relative(stats, reference_stats)
        pg = relative(torch.from_numpy(plain_grads), reference_grads)
        ps = relative(torch.from_numpy(plain_stats), reference_stats)
        print(f"rank {rank}: SyncBN vs one process: gradients {g:.2e}, running stats {s:.2e}; "
              f"plain BN: gradients {pg:.2e}, running stats {ps:.2e}")
        assert g < 1e-4 and s < 1e-4  # SyncBatchNorm sees the global batch
        assert pg > 1e-2 and ps > 1e-2  # per-process BatchNorm does not


# ---- evaluation: the GPU gives the CPU's figures -------------------------------------------------------------

def test_val_on_gpu_matches_cpu(shared, tmp_path, no_tf32):
    from detect.val import parse_args, run

    def val(device, amp="off"):
        return run(parse_args(["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")),
                               "--weights", str(shared("weights", "yolov3-tiny.weights")),
                               "--data", str(ROOT / "data" / "coco-tiny.yaml"), "--img", "416", "--device", device,
                               "--amp", amp, "--workers", "4", "--project", str(tmp_path / "runs")]))

    cpu = val("cpu")
    figures = {amp: val("cuda", amp) for amp in ("off", "fp16", "bf16")}
    print(f"cpu {cpu.map:.4f}/{cpu.map50:.4f}; " + ", ".join(
        f"cuda {amp} {r.map:.4f}/{r.map50:.4f}" for amp, r in figures.items()))
    assert cpu.map >= 0.244 and cpu.num_images == 80
    assert abs(figures["off"].map - cpu.map) <= 0.001 and abs(figures["off"].map50 - cpu.map50) <= 0.001
    for amp in ("fp16", "bf16"):
        assert abs(figures[amp].map - cpu.map) <= 0.003 and abs(figures[amp].map50 - cpu.map50) <= 0.003


# ---- the default job ---------------------------------------------------------------------------------------

def test_default_job_under_torchrun_on_gpu(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "train.py",
           "--epochs", "2", "--project", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "4"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "AMP torch.bfloat16" in proc.stdout
    rows = (tmp_path / "runs" / "exp" / "results.csv").read_text().splitlines()
    assert len(rows) == 3 and float(rows[-1].split(",")[5]) >= 0  # header + 2 epochs, each evaluated
    ckpt = torch.load(tmp_path / "runs" / "exp" / "last.pt", map_location="cpu", weights_only=True)
    assert np.isfinite(torch.cat([v.float().flatten() for v in ckpt["ema"].values()]).numpy()).all()


def test_batch_size_auto_finds_a_batch_that_fits(shared, tmp_path):
    import yaml

    shared("data", "coco-tiny")
    cmd = [sys.executable, "train.py", "--cfg", "cfg/yolov3-tiny.cfg", "--data", "data/coco-tiny.yaml",
           "--img-size", "320", "--batch-size", "auto", "--epochs", "1", "--max-batches", "2", "--device", "cuda",
           "--project", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), "--no-plots"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if "--batch-size auto:" in x)
    chosen = yaml.safe_load((tmp_path / "runs" / "exp" / "opts.yaml").read_text())["batch_size"]
    assert isinstance(chosen, int) and chosen >= 8 and chosen % 8 == 0 and f"auto: {chosen} per process" in line


# ---- augmentation painted on the GPU ---------------------------------------------------------------------------

def test_device_painting_on_cuda_equals_the_cpu_painting(shared):
    from detect.data.augmentation.augment_config import AugmentConfig
    from detect.data.augmentation.device_paint import paint_batch, paint_uint8
    from detect.data.datasets import TrainDataset, collate_train, collate_train_device
    from detect.data.loader import open_split

    shared("data", "coco-tiny")
    source = open_split(ROOT / "data" / "coco-tiny.yaml", "train")
    device = TrainDataset(source, 416, AugmentConfig(mixup=0.5, mosaic9=0.3, degrees=5), seed=1, buffer_images=128)
    host = TrainDataset(source, 416, device.augment, seed=1, buffer_images=128)
    device.on_device = True
    keys = [(2, i) for i in range(0, 80, 5)]
    batch = collate_train_device([device[k] for k in keys])
    on_cpu = paint_uint8(batch[0]).int()
    on_gpu = (paint_batch(batch[0].pin_memory(), torch.device("cuda")) * 255).round().int().cpu()
    host_images = collate_train([host[k] for k in keys])[0].int()
    gpu_vs_cpu, gpu_vs_host = (on_gpu - on_cpu).abs(), (on_gpu - host_images).abs()
    print(f"CUDA vs CPU painting: max {int(gpu_vs_cpu.max())}, > 1 level {(gpu_vs_cpu > 1).float().mean():.5%}; "
          f"CUDA vs host pipeline: mean {gpu_vs_host.float().mean():.3f}, > 2 levels {(gpu_vs_host > 2).float().mean():.4%}")
    assert (gpu_vs_cpu > 1).float().mean() < 1e-4 and gpu_vs_host.float().mean() < 0.5


def test_short_coco_tiny_run_with_cache_ram_augments_on_the_gpu(shared, tmp_path):
    shared("data", "coco-tiny")
    cmd = [sys.executable, "train.py", "--cfg", "cfg/yolov3-tiny.cfg", "--data", "data/coco-tiny.yaml",
           "--img-size", "416", "--batch-size", "16", "--epochs", "3", "--workers", "8", "--cache", "ram",
           "--augment-on", "device",
           "--device", "cuda", "--project", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "augmented on the device" in proc.stdout and "image cache" in (proc.stdout + proc.stderr).lower()
    rows = (tmp_path / "runs" / "exp" / "results.csv").read_text().splitlines()
    print("\n".join(rows))
    assert len(rows) == 4 and (tmp_path / "runs" / "exp" / "best.pt").exists()
    assert (tmp_path / "runs" / "exp" / "train_batch0.jpg").stat().st_size > 10_000
