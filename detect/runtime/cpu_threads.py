"""Imported for its effect, before the first `import torch` of the inference entry points (predict, val, bench):
PyTorch's OpenMP threads sleep while they wait for each other (OMP_WAIT_POLICY=PASSIVE) unless the user chose.

Why: by default a thread that finishes its share of a parallel region spins until the others finish. On a CPU
shared with other processes, the thread it waits for may be off its core, and the spinning one keeps its own
core busy meanwhile; yolov3-tiny's CPU forward pass (about 60 parallel regions) then took several times longer
(README, "CPU inference"). OpenMP reads the variable once, when torch loads it, so it must be set before that.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
