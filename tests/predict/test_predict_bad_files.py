"""detect.predict with files it cannot read: each skipped with one line naming it, counted at the end."""

import cv2
import numpy as np

from detect.predict import main
from tests.support.log_lines import log_lines
from tests.support.val_data import write_tiny_checkpoint


def _folder_with_bad_files(tmp_path, good: bool):
    folder = tmp_path / "photos"
    folder.mkdir()
    if good:
        cv2.imwrite(str(folder / "good.png"), np.full((40, 60, 3), 120, np.uint8))
    (folder / "garbage.jpg").write_bytes(b"\x00\x01 these bytes are no JPEG")
    (folder / "empty.png").write_bytes(b"")
    (folder / "clip.mp4").write_bytes(b"no video either")
    (folder / "notes.txt").write_text("not an image, and not named like one")
    return folder


def _run(tmp_path, folder):
    weights = write_tiny_checkpoint(tmp_path)
    args = ["--weights", str(weights), "--source", str(folder), "--img-size", "64", "--device", "cpu",
            "--project", str(tmp_path / "runs")]
    with log_lines("detect.predict") as lines:
        code = main(args)
    return code, lines


def test_undecodable_files_are_skipped_and_counted(tmp_path, capsys):
    folder = _folder_with_bad_files(tmp_path, good=True)
    code, lines = _run(tmp_path, folder)
    out = capsys.readouterr().out
    assert code == 0
    assert "image 4/4" in out and "good.png" in out
    assert "1 of 4 files processed; 3 skipped (could not be read)" in out
    skipped = [line for line in lines if line.startswith("skipped ")]
    assert skipped == [f"skipped {folder / 'clip.mp4'}: OpenCV cannot open this video",
                       f"skipped {folder / 'empty.png'}: zero-byte file",
                       f"skipped {folder / 'garbage.jpg'}: not an image OpenCV can decode (26 bytes)"]
    assert any("1 file(s) neither image nor video ignored: notes.txt" in line for line in lines)
    assert [p.name for p in (tmp_path / "runs" / "exp" / "labels").iterdir()] == ["good.txt"]


def test_nothing_readable_is_an_error(tmp_path, capsys):
    folder = _folder_with_bad_files(tmp_path, good=False)
    code, lines = _run(tmp_path, folder)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len([line for line in lines if line.startswith("skipped ")]) == 3
    assert err[-1] == f"error: --source {folder}: none of its 3 file(s) could be read (see above)"
