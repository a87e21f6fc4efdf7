"""Tensor helpers shared by training, evaluation, export and inference: box geometry and the
uint8-batch-to-model-input step. Imports nothing else of `detect`."""
