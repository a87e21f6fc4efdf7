"""detect.engine.batch_probe: the search for the largest batch that fits, and the refusal on the CPU."""

import pytest
import torch

from detect.engine.batch_probe import largest_fitting
from detect.engine.options import parse_options


def _device(fixed_gib: float, per_image_gib: float, total_gib: float):
    """A fake device: a step of b images peaks at fixed + b * per_image GiB; above the total it runs out."""
    def peak(batch: int):
        used = fixed_gib + batch * per_image_gib
        return None if used > total_gib else used / total_gib
    return peak


def test_doubles_then_bisects_to_the_largest_batch_under_the_headroom():
    # 80 GiB, 2 GiB fixed, 0.5 GiB per image: the headroom (85% = 68 GiB) allows 132 images -> 128 (multiple of 8)
    batch, tried = largest_fitting(_device(2, 0.5, 80))
    assert batch == 128
    assert [b for b in tried if b <= 128][:5] == [8, 16, 32, 64, 128] and tried[256] is None  # 130 GiB: OOM
    # tight fit: 0.9 GiB per image on 40 GiB (34 GiB allowed: 35 images) -> 32
    assert largest_fitting(_device(2, 0.9, 40))[0] == 32
    # the headroom, not the out-of-memory edge, decides: 140 images fit in memory but only 132 under 85%
    assert largest_fitting(_device(2, 0.5, 72.1))[0] == 112


def test_nothing_fits_and_the_limit():
    assert largest_fitting(_device(50, 1, 40))[0] is None
    assert largest_fitting(_device(0, 0.001, 80), limit=512)[0] == 512
    # a split of 80 images per rank on a large GPU (an H200 found 1024 for coco-tiny's 80): the split caps it, and
    # the cap itself is tried once the doubling passes it
    batch, tried = largest_fitting(_device(1, 0.01, 140), limit=80)
    assert batch == 80 and sorted(tried) == [8, 16, 32, 64, 80]
    # a cap that does not fit is bisected down from
    assert largest_fitting(_device(2, 0.5, 80), limit=200)[0] == 128


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_auto_is_refused_without_a_gpu_naming_what_to_do():
    with pytest.raises(ValueError, match=r"--batch-size auto probes the GPU's memory, and this run has no GPU "
                                         r"\(--device auto\); give a number, e.g. --batch-size 8"):
        parse_options(["--batch-size", "auto"])
    assert parse_options(["--batch-size", "16"]).batch_size == 16
    with pytest.raises(SystemExit):
        parse_options(["--batch-size", "lots"])
