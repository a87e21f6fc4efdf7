"""A trial's run watched through its results.csv: each evaluated epoch reported once as its row appears, a stop
asked after a report sent as one SIGTERM (on which train.py saves and exits 0), and the run folder locked while a
process runs in it. A stand-in for train.py writes the rows, so this takes seconds."""

import fcntl
import os
import sys

from detect.tune.trial_run import LOCK_NAME, read_fitness, run_training, train_command

# rows as train.py writes them (the whole file replaced each time); epoch 2 is not evaluated: no fitness
FAKE_TRAIN = r"""
import os, signal, sys, time
run = sys.argv[1]
def stopped(signum, frame):
    open(os.path.join(run, "got_sigterm"), "w").close()
    sys.exit(0)
signal.signal(signal.SIGTERM, stopped)
rows = "epoch,box,fitness,note\n"
for epoch, fitness in ((1, "0.1"), (2, ""), (3, "0.3"), (4, "0.4"), (5, "0.5")):
    time.sleep(0.3)
    rows += f"{epoch},0.05,{fitness},\n"
    with open(os.path.join(run, "tmp.csv"), "w") as f:
        f.write(rows)
    os.replace(os.path.join(run, "tmp.csv"), os.path.join(run, "results.csv"))
"""


def _locked(run_dir) -> bool:
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_rows_are_reported_once_and_a_stop_is_one_sigterm(tmp_path):
    run_dir = tmp_path / "trial_000"
    reported, locked_while_running = [], []

    def report(epoch, fitness):
        reported.append((epoch, fitness))
        locked_while_running.append(_locked(run_dir))

    result = run_training([sys.executable, "-c", FAKE_TRAIN, str(run_dir)], run_dir, report,
                          should_stop=lambda: reported[-1][0] >= 3, poll_s=0.05)
    assert reported == result.rows == [(1, 0.1), (3, 0.3)]
    assert result.stopped and result.returncode == 0 and (run_dir / "got_sigterm").exists()
    assert locked_while_running == [True, True] and not _locked(run_dir)
    assert (run_dir / "train.log").read_text().startswith(f"$ {sys.executable} -c ")


def test_a_run_to_its_end_reports_every_evaluated_epoch(tmp_path):
    run_dir = tmp_path / "trial_001"
    result = run_training([sys.executable, "-c", FAKE_TRAIN, str(run_dir)], run_dir, lambda e, f: None,
                          should_stop=lambda: False, poll_s=0.05)
    assert result.rows == [(1, 0.1), (3, 0.3), (4, 0.4), (5, 0.5)] and not result.stopped
    assert result.returncode == 0 and not (run_dir / "got_sigterm").exists()
    assert read_fitness(run_dir / "results.csv") == (result.rows, "")
    assert read_fitness(run_dir / "missing.csv") == ([], "")


def test_the_train_command_of_a_new_run_and_of_a_resumed_one(tmp_path):
    run_dir, hyp = tmp_path / "s" / "trial_007", tmp_path / "s" / "trial_007" / "trial_hyp.yaml"
    new = train_command(1, run_dir, hyp, 10, ("--data", "d.yaml"), ("--device", "cpu"))
    assert new[3:] == ["--data", "d.yaml", "--hyp", str(hyp), "--epochs", "10", "--project", str(tmp_path / "s"),
                       "--name", "trial_007", "--exist-ok", "--device", "cpu"]
    assert new[1:3] == ["-m", "detect.train"]  # the installed package's command: no clone's train.py needed
    resumed = train_command(2, run_dir, hyp, 10, ("--data", "d.yaml"), (), resume=True)
    assert resumed[1:7] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "detect.train"]
    assert resumed[7:] == ["--resume", str(run_dir / "last.pt"), "--epochs", "10"]
