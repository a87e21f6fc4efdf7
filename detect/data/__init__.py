"""The data pipeline, one stage per sub-package (docs/architecture.md, detect.data):

records/       what is known of each image: records and their table, the label cache, the image cache, image files
formats/       dataset specs and the formats they name, each read into records (COCO, YOLO, VOC, Darknet, synthetic)
augmentation/  training images changed: host and device augmentation, mosaic, resize modes, multi-scale
sampling/      which images each rank reads: DDP batch samplers, repeat-factor sampling
datasets.py    records to samples (decoded, augmented, with targets); loader.py: a split to a train or eval loader
"""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "AugmentConfig": "detect.data.augmentation.augment_config",
    "build_eval_loader": "detect.data.loader",
    "build_train_loader": "detect.data.loader",
    "open_split": "detect.data.loader",
    "resolve_spec": "detect.data.loader",
    "MultiScale": "detect.data.augmentation.multiscale",
    "ImageRecord": "detect.data.records.records",
    "DatasetSource": "detect.data.formats.sources",
    "DataSpec": "detect.data.formats.spec",
    "load_data_spec": "detect.data.formats.spec",
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
