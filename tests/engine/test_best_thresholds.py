"""best.pt carries per-class thresholds chosen from the evaluation that made it best (detect.engine.setup,
trainer_state.write_checkpoint), and the API uses them."""

import torch

from detect.api import Detector
from detect.evaluation.thresholds import SHRINK_K
from detect.inference.class_conf import ClassConf
from tests.support.training import TINY_DATA, train_tiny


def test_best_pt_gets_the_thresholds_of_its_evaluation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY_DATA.replace("path: gen", f"path: {tmp_path / 'gen'}"))
    (tmp_path / "hyp.yaml").write_text("")
    assert train_tiny("--epochs", "1", "--max-batches", "1") == 0
    best = tmp_path / "runs" / "r" / "best.pt"
    stored = torch.load(best, weights_only=True)
    chosen = ClassConf.from_dict(stored["class_conf"], best)
    assert len(chosen.conf) == len(stored["names"]) and all(0 <= c < 1 for c in chosen.conf)
    assert chosen.chosen_on == f"the val split of {tmp_path / 'tiny.yaml'}" and chosen.shrink == SHRINK_K
    assert sum(chosen.instances) > 0  # the boxes of the synthetic val split
    assert "class_conf" not in torch.load(tmp_path / "runs" / "r" / "last.pt", weights_only=True)
    assert Detector.load(best, device="cpu").settings.class_conf == chosen.conf
