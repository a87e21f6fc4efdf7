"""Tensor helpers shared by training, evaluation, export and inference: box geometry (on tensors and NumPy
arrays), the uint8-batch-to-model-input step, test-time augmentation, the tiles of sliced inference, and class
identity (whether two class names are one class; COCO's names). Imports nothing of `detect` but the shipped files
(detect.runtime.assets)."""
