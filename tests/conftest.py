import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DETECT_SHARED", ROOT.parent / "shared"))


def shared_path(*parts) -> Path:
    """A path under ../shared, or skip the test when that material is absent (it is never in git)."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not present (../shared material)")
    return p


@pytest.fixture
def shared():
    return shared_path


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` need CUDA: skipped cleanly where there is none (CI, CPU machines)."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
