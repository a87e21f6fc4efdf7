"""The package as people install it: a wheel built from this tree, installed into a folder of its own (not the
editable clone), and its console scripts run from an empty folder: the default job, detect-val on its best.pt,
detect-predict with a cfg named by its file name. Shipped files are package resources, never the clone's."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import shared_path

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the installed package's folder, its console scripts' folder, an environment that imports it first)."""
    build = tmp_path_factory.mktemp("build")
    source = build / "source"  # a copy: building writes build/ and egg-info beside the sources
    shutil.copytree(ROOT / "detect", source / "detect", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(build / "wheel"), str(source)],
                   check=True, capture_output=True)
    wheel = next((build / "wheel").glob("detect-*.whl"))
    target = build / "site"
    subprocess.run(pip + ["install", "--no-deps", "--target", str(target), str(wheel)], check=True,
                   capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DETECT_CACHE", "PYTHONPATH")}
    env.update(PYTHONPATH=str(target), XDG_CACHE_HOME=str(build / "user-cache"))
    found = subprocess.run([sys.executable, "-c", "import detect; print(detect.__file__)"], env=env,
                           cwd=tmp_path_factory.mktemp("elsewhere"), capture_output=True, text=True, check=True)
    assert Path(found.stdout.strip()).parent == target / "detect"  # the wheel's copy, not the clone's
    return target, target / "bin", env


def run(command: list[str], cwd: Path, env: dict) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{command[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def test_the_wheel_ships_its_cfgs_and_specs_and_not_the_lab(installed):
    target, _, _ = installed
    shipped = {p.relative_to(target / "detect" / "assets").as_posix()
               for p in (target / "detect" / "assets").rglob("*") if p.is_file()}
    assert {"cfg/yolo-mini.cfg", "cfg/yolov3-tiny.cfg", "cfg/coco.names", "cfg/hyp.yaml", "cfg/tune-space.yaml",
            "data/synthetic.yaml", "data/coco.yaml"} <= shipped
    assert not (target / "benchmarks").exists() and not (target / "tests").exists()


def test_default_job_then_val_from_an_empty_folder(installed, tmp_path):
    _, scripts, env = installed
    out = run([str(scripts / "detect-train"), "--epochs", "2"], tmp_path, env)
    best = tmp_path / "runs" / "train" / "exp" / "best.pt"
    assert best.is_file(), out[-2000:]
    assert "epoch 2:" in out
    # the synthetic set is generated under the user's cache, not beside the installed package
    assert any((Path(env["XDG_CACHE_HOME"]) / "detect").glob("synthetic-*"))
    out = run([str(scripts / "detect-val"), "--weights", str(best), "--data", "synthetic.yaml"], tmp_path, env)
    assert "synthetic val: 100 images" in out and "Average Precision  (AP) @[ IoU=0.50:0.95" in out
    assert (tmp_path / "runs" / "val" / "exp").is_dir()


def test_predict_with_a_cfg_named_by_file_name(installed, tmp_path):
    weights = shared_path("weights", "yolov3-tiny.weights")
    images = shared_path("data", "coco-tiny", "val2017")
    _, scripts, env = installed
    image = tmp_path / "img.jpg"
    shutil.copy(sorted(images.glob("*.jpg"))[0], image)
    out = run([str(scripts / "detect-predict"), "--cfg", "yolov3-tiny.cfg", "--weights", str(weights),
               "--source", "img.jpg"], tmp_path, env)
    assert "image 1/1 img.jpg:" in out and "COCO's 80" in out
    assert (tmp_path / "runs" / "predict" / "exp" / "img.jpg").is_file()
    out = run([sys.executable, "-m", "detect.train", "--help"], tmp_path, env)  # `python -m detect.train` runs too
    assert "--cfg" in out
