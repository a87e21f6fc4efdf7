"""The shipped files are package resources: named by file name from any folder, a local file of the same name
first, a clone's cfg/ and data/ the same files; no module of `detect` finds files through its own path."""

import re
from pathlib import Path

import pytest

from detect.darknet.cfg import read_cfg_source
from detect.data.formats.spec import load_data_spec
from detect.engine.config import read_hyp_file
from detect.engine.options import DEFAULT_CFG, DEFAULT_DATA, parse_options
from detect.runtime.assets import asset, asset_dir, find_user_file, shipped_names

ROOT = Path(__file__).resolve().parents[2]


def test_the_clone_folders_are_the_shipped_ones():
    assert (ROOT / "cfg").resolve() == asset_dir("cfg").resolve()
    assert (ROOT / "data").resolve() == asset_dir("data").resolve()
    assert DEFAULT_CFG == asset("cfg", "yolo-mini.cfg") and DEFAULT_CFG.is_file()
    assert DEFAULT_DATA == asset("data", "synthetic.yaml") and DEFAULT_DATA.is_file()
    assert {"yolov3-tiny.cfg", "yolov4.cfg", "yolo-mini.cfg"} <= set(shipped_names("cfg", (".cfg",)))


def test_a_shipped_file_is_named_by_its_file_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for value in ("yolov3-tiny.cfg", "cfg/yolov3-tiny.cfg"):
        assert find_user_file(value, "cfg") == asset("cfg", "yolov3-tiny.cfg")
        assert read_cfg_source(value)[2] == asset("cfg", "yolov3-tiny.cfg")
    assert load_data_spec("synthetic.yaml").format == "synthetic"
    assert load_data_spec("data/coco.yaml", {"path": str(tmp_path)}).path == tmp_path.resolve()
    assert read_hyp_file("hyp.yaml") == read_hyp_file(asset("cfg", "hyp.yaml"))
    opts = parse_options(["--cfg", "yolov3-tiny.cfg", "--data", "coco.yaml", "--hyp", "cfg/hyp.yaml"])
    assert (opts.cfg, opts.data, opts.hyp) == (str(asset("cfg", "yolov3-tiny.cfg")), str(asset("data", "coco.yaml")),
                                               str(asset("cfg", "hyp.yaml")))


def test_a_local_file_of_that_name_comes_first_and_a_missing_one_lists_the_shipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yolov3-tiny.cfg").write_text("[net]\nwidth=32\nheight=32\n")
    assert find_user_file("yolov3-tiny.cfg", "cfg") == Path("yolov3-tiny.cfg")
    assert find_user_file("other/yolov3-tiny.cfg", "cfg") == Path("other/yolov3-tiny.cfg")  # a path is a path
    with pytest.raises(FileNotFoundError, match=r"cfg file not found: nope.cfg; shipped cfg files .*yolov3-tiny.cfg"):
        read_cfg_source("nope.cfg")
    with pytest.raises(FileNotFoundError, match=r"--data nope.yaml: no such file; shipped data files .*coco.yaml"):
        parse_options(["--data", "nope.yaml"])
    with pytest.raises(FileNotFoundError, match=r"data spec nope.yaml not found; shipped data files"):
        load_data_spec("nope.yaml")


def test_no_module_finds_files_through_its_own_path():
    """A wheel installs detect/ alone: the clone around it is not there (detect.runtime.assets finds shipped files)."""
    pattern = re.compile(r"__file__|\.parents\[\d+\]")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "detect").rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, f"find files with detect.runtime.assets instead: {found}"
