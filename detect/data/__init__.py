"""The data pipeline: dataset specs, sources (COCO json, YOLO txt, synthetic), the label cache,
augmentation, DDP samplers and the loader builders (see docs/architecture.md, detect.data)."""

from detect.data.augment import AugmentConfig
from detect.data.loader import build_eval_loader, build_train_loader, open_split, resolve_spec
from detect.data.multiscale import MultiScale
from detect.data.records import ImageRecord
from detect.data.sources import DatasetSource
from detect.data.spec import DataSpec, load_data_spec

__all__ = ["AugmentConfig", "DataSpec", "DatasetSource", "ImageRecord", "MultiScale", "build_eval_loader",
           "build_train_loader", "load_data_spec", "open_split", "resolve_spec"]
