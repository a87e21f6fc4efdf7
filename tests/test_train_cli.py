"""train.py as users run it: option errors, fine-tuning, SyncBN policy, torchrun end to end and failure."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from detect.darknet.load import load_model
from detect.engine.options import parse_options
from detect.runtime import ddp
from tests.support.training import tiny_options

ROOT = Path(__file__).resolve().parents[1]


def test_invalid_flags_fail_before_training(tmp_path):
    with pytest.raises(ValueError, match="--img-size"):
        parse_options(["--img-size", "250"])
    with pytest.raises(FileNotFoundError, match="--weights nope.weights"):
        parse_options(["--weights", "nope.weights"])
    with pytest.raises(ValueError, match="--freeze"):
        parse_options(["--freeze", "head"])
    proc = subprocess.run([sys.executable, "train.py", "--batch-size", "0"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "--batch-size must be at least 1, got 0" in proc.stderr


def test_sync_bn_policy_and_conversion():
    assert not ddp.use_sync_bn("auto", torch.device("cpu"), 2)
    assert ddp.use_sync_bn("auto", torch.device("cuda", 0), 2)
    assert not ddp.use_sync_bn("auto", torch.device("cuda", 0), 1)
    with pytest.raises(ValueError, match="needs CUDA"):
        ddp.use_sync_bn("on", torch.device("cpu"), 2)
    model = load_model(str(ROOT / "cfg" / "yolo-mini.cfg"), num_classes=4).model
    n_bn = sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    converted = ddp.convert_sync_bn(model)
    assert sum(isinstance(m, torch.nn.SyncBatchNorm) for m in converted.modules()) == n_bn == 10


def _torchrun(args, tmp_path, env=None, timeout=300):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=full_env)
    return proc, time.monotonic() - start


def _tiny_args(tmp_path, epochs=1):
    o = tiny_options(tmp_path)
    return ["--data", o.data, "--hyp", o.hyp, "--img-size", "64", "--batch-size", "4", "--nbs", "8", "--epochs",
            str(epochs), "--workers", "0", "--project", o.project, "--name", "smoke", "--device", "cpu",
            "--cache-dir", o.cache_dir]


@pytest.mark.slow
def test_torchrun_two_processes_smoke(tmp_path):
    proc, _ = _torchrun(["train.py", *_tiny_args(tmp_path)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "runs" / "smoke"
    assert {"last.pt", "best.pt", "results.csv", "opts.yaml", "hyp.yaml"} <= {p.name for p in run_dir.iterdir()}
    assert "[rank 1]" not in proc.stdout  # INFO from rank 0 only


FAILING_RANK = """
import sys
from detect.engine import loss as loss_module
from detect import train

calls = [0]
original = loss_module.YoloLoss.__call__

def failing(self, *args, **kwargs):
    import os
    calls[0] += 1
    if os.environ["RANK"] == "1" and calls[0] == 2:
        raise RuntimeError("injected failure on rank 1")
    return original(self, *args, **kwargs)

loss_module.YoloLoss.__call__ = failing
sys.exit(train.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_failing_rank_ends_the_group_promptly(tmp_path):
    script = tmp_path / "failing_train.py"
    script.write_text(FAILING_RANK)
    proc, seconds = _torchrun([str(script), *_tiny_args(tmp_path, epochs=50)], tmp_path,
                              env={"PYTHONPATH": str(ROOT)})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "[rank 1] training failed: RuntimeError: injected failure on rank 1" in out
    assert seconds < 60, f"the group took {seconds:.0f} s to end"


@pytest.mark.slow
def test_sigterm_mid_epoch_saves_and_the_run_resumes(tmp_path):
    """A real SIGTERM to torchrun (which signals every rank and its loader workers) in the middle of epoch 2:
    the ranks finish the step, save last.pt and exit cleanly; --resume then completes the run."""
    args = ["train.py", "--epochs", "3", "--img-size", "128", "--batch-size", "8", "--workers", "1",
            "--device", "cpu", "--project", str(tmp_path / "runs"), "--name", "sig",
            "--cache-dir", str(tmp_path / "cache")]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    log = tmp_path / "train.log"
    results = tmp_path / "runs" / "sig" / "results.csv"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 240
        while not (results.exists() and len(results.read_text().splitlines()) >= 2):  # epoch 1 done
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1.0)  # inside epoch 2
        proc.send_signal(15)
        proc.wait(timeout=120)
    text = log.read_text()
    assert "stop requested (SIGTERM): saving" in text, text[-3000:]
    assert "training failed" not in text
    ckpt = torch.load(tmp_path / "runs" / "sig" / "last.pt", weights_only=True)
    assert ckpt["epoch"] == 1 and ckpt["batch_in_epoch"] > 0  # saved mid-epoch 2 (epochs count from 0)
    resumed, _ = _torchrun([*args, "--resume", str(tmp_path / "runs" / "sig" / "last.pt")], tmp_path)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    final = torch.load(tmp_path / "runs" / "sig" / "last.pt", weights_only=True)
    assert final["epoch"] == 3 and final["batch_in_epoch"] == 0


def _child_pids(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the rank processes through /proc")
def test_max_restarts_group_resumes_by_itself_after_kill_9(tmp_path):
    """kill -9 of rank 1 after epoch 1: torchrun restarts the group, which resumes from last.pt on its own and
    trains the remaining epochs exactly as an uninterrupted run would (same losses in results.csv)."""
    def launch(name, restarts):
        args = ["train.py", "--epochs", "2", "--img-size", "128", "--batch-size", "8", "--workers", "1", "--device",
                "cpu", "--project", str(tmp_path / "runs"), "--name", name, "--cache-dir", str(tmp_path / "cache")]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--max-restarts={restarts}",
               "--nproc_per_node=2", *args]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
        return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    straight = launch("straight", 0)
    assert straight.wait(timeout=300) == 0, straight.stdout.read()[-3000:]
    proc = launch("killed", 1)
    results = tmp_path / "runs" / "killed" / "results.csv"
    deadline = time.monotonic() + 240
    while not (results.exists() and len(results.read_text().splitlines()) >= 2):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(1.0)
    ranks = _child_pids(proc.pid)
    victim = next(p for p in ranks if b"RANK=1" in Path(f"/proc/{p}/environ").read_bytes().split(b"\0"))
    os.kill(victim, 9)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out[-3000:]
    assert "torchrun restarted the group: resuming from" in out
    losses = [line.split(",")[1:4] for line in results.read_text().splitlines()[1:]]
    expected = [line.split(",")[1:4] for line in
                (tmp_path / "runs" / "straight" / "results.csv").read_text().splitlines()[1:]]
    assert len(losses) == 2 and losses == expected


def test_weights_that_are_not_a_checkpoint_end_training_with_one_line_and_exit_2(tmp_path):
    from detect.train import main as train_main
    from tests.support.log_lines import log_lines

    bad = tmp_path / "x.pt"
    bad.write_bytes(os.urandom(256))
    opts = tiny_options(tmp_path, epochs=1)
    argv = ["--data", opts.data, "--hyp", opts.hyp, "--img-size", "64", "--batch-size", "4", "--epochs", "1",
            "--workers", "0", "--project", opts.project, "--device", "cpu", "--cache-dir", opts.cache_dir,
            "--weights", str(bad)]
    with log_lines("detect.train") as lines:
        assert train_main(argv) == 2
    failures = [line for line in lines if line.startswith("training failed")]
    assert len(failures) == 1 and failures[0].startswith(f"training failed: {bad} is not"), lines


def test_training_on_a_class_subset_and_as_one_class(tmp_path):
    """`classes:` in the spec and --single-cls reach the model and the checkpoints: the head predicts the chosen
    classes, named in order; boxes of the other classes are counted as not chosen."""
    from detect.darknet.pt_files import load_checkpoint
    from detect.train import main as train_main
    from tests.support.log_lines import log_lines

    opts = tiny_options(tmp_path, epochs=1)
    data = Path(opts.data)
    data.write_text(data.read_text() + "classes: [triangle, circle]\n")
    common = ["--data", opts.data, "--hyp", opts.hyp, "--img-size", "64", "--batch-size", "4", "--epochs", "1",
              "--max-batches", "1", "--workers", "0", "--project", opts.project, "--device", "cpu", "--no-plots",
              "--cache-dir", opts.cache_dir]
    with log_lines("detect.data.formats.class_selection") as lines:
        assert train_main([*common, "--name", "subset"]) == 0
    assert any("classes triangle, circle" in line and "class_not_chosen" in line for line in lines), lines
    loaded = load_model(weights=Path(opts.project) / "subset" / "last.pt")
    assert loaded.model.num_classes == 2
    assert load_checkpoint(Path(opts.project) / "subset" / "last.pt")["names"] == ["triangle", "circle"]
    assert train_main([*common, "--name", "one", "--single-cls"]) == 0
    assert load_model(weights=Path(opts.project) / "one" / "last.pt").model.num_classes == 1
    assert load_checkpoint(Path(opts.project) / "one" / "last.pt")["names"] == ["object"]
