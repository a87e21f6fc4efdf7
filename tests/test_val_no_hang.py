"""detect.val failing in the middle of a run with loader workers exits promptly: the workers ignore SIGTERM, and
a loader a traceback still held kept multiprocessing's exit handler waiting for them forever."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.val_data import val_args, write_coco_dataset, write_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 120

# The evaluation raises at its second batch (workers running, batches prefetched), through main() (the command)
# or run() (the Python entry, where the exception reaches the interpreter's exit).
SCRIPT = """
import sys

import detect.evaluation.evaluator as evaluator

original = evaluator.CocoEvaluator.process
batches = []


def failing(self, pred, metas):
    batches.append(len(metas))
    if len(batches) == 2:
        raise RuntimeError("injected failure at the second batch")
    original(self, pred, metas)


evaluator.CocoEvaluator.process = failing
import detect.val

entry, argv = sys.argv[1], sys.argv[2:]
sys.exit(detect.val.main(argv) if entry == "main" else detect.val.run(detect.val.parse_args(argv)))
"""


def _run_to_the_end(command: list[str], env: dict) -> subprocess.CompletedProcess:
    """Run `command` in its own session; a hang past TIMEOUT_S kills the session (its workers too) and fails."""
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"still running {TIMEOUT_S} s after the failure (workers left open):\n{err[-2000:]}")
    return subprocess.CompletedProcess(command, process.returncode, out, err)


@pytest.mark.parametrize("entry", ["main", "run"])
def test_val_exits_after_an_error_with_loader_workers(tmp_path, entry):
    spec = write_coco_dataset(tmp_path / "data")
    weights = write_tiny_checkpoint(tmp_path)
    script = tmp_path / "failing_val.py"
    script.write_text(SCRIPT)
    argv = val_args(spec, weights, tmp_path, "--batch", "1", "--backend", "torch")
    argv[argv.index("--workers") + 1] = "2"
    env = {**os.environ, "DETECT_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    done = _run_to_the_end([sys.executable, str(script), entry, *argv], env)
    assert done.returncode == 1, done.stderr[-2000:]
    if entry == "main":  # the command: one line, no traceback
        lines = [line for line in done.stderr.splitlines() if "injected failure" in line]
        assert lines == ["error: detect.val failed: RuntimeError: injected failure at the second batch"]
        assert "Traceback" not in done.stderr
    else:  # the Python entry raises as it was
        assert done.stderr.rstrip().endswith("RuntimeError: injected failure at the second batch")
