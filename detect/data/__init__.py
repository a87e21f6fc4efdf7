"""The data pipeline: dataset specs, sources (COCO json, YOLO txt, synthetic), the label cache,
augmentation, DDP samplers and the loader builders (see docs/architecture.md, detect.data)."""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "AugmentConfig": "detect.data.augment_config",
    "build_eval_loader": "detect.data.loader",
    "build_train_loader": "detect.data.loader",
    "open_split": "detect.data.loader",
    "resolve_spec": "detect.data.loader",
    "MultiScale": "detect.data.multiscale",
    "ImageRecord": "detect.data.records",
    "DatasetSource": "detect.data.sources",
    "DataSpec": "detect.data.spec",
    "load_data_spec": "detect.data.spec",
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
