"""The tune's command line: its own flags, the train.py arguments after `--` checked by train.py's parser (with
the flags the search owns refused), and where the workers of one machine run."""

import pytest

from detect.tune.cli import main
from detect.tune.launch import placements, worker_argv
from detect.tune.options import tune_options
from tests.support.tuning import TINY_TRAIN, tune_folder


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tune_folder(tmp_path))
    return tmp_path


def test_a_search_command_line(folder):
    opts = tune_options(["--study", "s", "--space", "space.yaml", "--trials", "5", "--epochs", "10", "--", *TINY_TRAIN])
    assert opts.study_dir == folder / "runs" / "tune" / "s"
    assert opts.storage == f"sqlite:///{folder / 'runs' / 'tune' / 's' / 'study.db'}"
    short = tune_options(["--study", "s", "--space", "space.yaml", "--", *(w if w != "--hyp" else "--hy"
                                                                            for w in TINY_TRAIN)])
    assert short.base_hyp == folder / "hyp.yaml" and short.train_args == opts.train_args  # train.py's --hy is --hyp
    assert list(opts.space) == ["lr0", "momentum", "mosaic"]
    assert opts.base_hyp == folder / "hyp.yaml" and "--hyp" not in opts.train_args
    assert opts.train_args[:2] == ("--data", "tiny.yaml") and not opts.device_given
    assert (opts.prune_after, opts.grace_s, opts.pruner) == (2, 60, "median")  # a quarter of 10 epochs; 3 x 20 s
    argv = worker_argv(opts)
    assert argv[argv.index("--worker") + 1] == "--" and argv[-2:] == ["--hyp", str(folder / "hyp.yaml")]


@pytest.mark.parametrize("argv, message", [
    (["--", "--epochs", "3"], "--epochs after --: the search sets these for every trial"),
    (["--", "--project", "p", "--name", "n"], "--project, --name after --"),
    (["--", "--hyp", "cfg"], "--hyp cfg cannot be searched over"),
    (["--", "--no-such-flag"], "the train.py arguments after -- are not valid"),
    (["--", "--data", "missing.yaml"], "--data missing.yaml: no such file"),
    (["--pruner", "threshold"], "--pruner threshold needs --prune-below F"),
    (["--trials", "0"], "--trials must be at least 1, got 0"),
    (["--seed", "-1"], r"--seed must be in 0\.\.4294967295, got -1"),
    (["--space", "nope.yaml"], "--space .*nope.yaml: no such file"),
])
def test_mistakes_are_refused_before_anything_runs(folder, argv, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        tune_options(argv)


def test_the_command_says_error_and_exits_2(folder, capsys):
    assert main(["--trials", "0"]) == 2
    assert capsys.readouterr().err.strip() == "python -m detect.tune: error: --trials must be at least 1, got 0"
    assert not (folder / "runs").exists()


def test_workers_get_their_own_gpus_or_a_share_of_the_cpu():
    gpus = ["0", "1", "2", "3"]
    assert [p.env for p in placements(2, 2, gpus, 16, False, False)] == [{"CUDA_VISIBLE_DEVICES": "0,1"},
                                                                         {"CUDA_VISIBLE_DEVICES": "2,3"}]
    assert placements(4, 1, gpus, 16, False, False)[3].device_args == ()
    with pytest.raises(ValueError, match="--workers-per-node 3 x --nproc-per-trial 2 need 6 GPUs; this machine has 4"):
        placements(3, 2, gpus, 16, False, False)
    cpu = placements(2, 1, [], 8, False, False)
    assert [(p.env, p.device_args) for p in cpu] == [({"OMP_NUM_THREADS": "4"}, ("--device", "cpu"))] * 2
    assert placements(3, 1, [], 2, True, True)[0] == placements(1, 1, [], 2, True, True)[0]
    assert placements(3, 1, [], 2, True, True)[0].env == {} and placements(3, 1, [], 2, True, False)[0].env == {
        "OMP_NUM_THREADS": "1"}


def test_storage_urls_keep_odd_folder_names_and_log_lines_hide_passwords(tmp_path):
    from sqlalchemy.engine import make_url

    from detect.tune.options import shown_url, sqlite_url

    path = tmp_path / "what?" / "50%20 off" / "study.db"
    assert make_url(sqlite_url(path)).database == str(path)
    from detect.tune.storage import open_storage

    open_storage(sqlite_url(path), 10, 30)
    assert path.is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["what?"]  # no stray escaped folder
    assert shown_url("postgresql://tuner:s3cret@db.lan:5432/studies") == "postgresql://tuner:***@db.lan:5432/studies"


def test_a_second_sigterm_does_not_interrupt_the_stop_of_the_first():
    import signal

    from detect.tune.cli import _raise_interrupt

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            _raise_interrupt(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # the next one finds train.py saving: ignored
    finally:
        signal.signal(signal.SIGTERM, previous)
