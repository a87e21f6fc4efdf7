"""Small generated datasets for the data tests (synthetic shapes in COCO format, in tmp folders)."""

import pytest

from detect.data.formats.spec import spec_from_dict


@pytest.fixture(scope="module")
def small_synthetic(tmp_path_factory):
    """(spec, cache_dir) of a 23 train / 17 val synthetic dataset: sizes not divisible by 2 or 3."""
    cache_dir = tmp_path_factory.mktemp("cache")
    spec = spec_from_dict({"format": "synthetic", "seed": 3, "train_images": 23, "val_images": 17},
                          "small-synthetic.yaml")
    return spec, cache_dir
