"""Imported for its effect, before the first `import torch` of the inference entry points (predict, val, bench):
OpenMP threads sleep while they wait for each other (OMP_WAIT_POLICY=PASSIVE) after a short spin
(GOMP_SPINCOUNT=1000, about 10 microseconds), unless the user chose either.

Why PASSIVE: by default a thread that finishes its share of a parallel region spins until the others finish. On
a CPU shared with other processes, the thread it waits for may be off its core, and the spinning one keeps its
own core busy meanwhile; yolov3-tiny's CPU forward pass (about 60 parallel regions) then took several times
longer (README, "CPU inference").
Why the short spin: ncnn (the CPU engine; it shares PyTorch's OpenMP) runs a few hundred short regions a pass,
and a thread that went to sleep at once paid a wake-up on each: yolov3-tiny took 25.6 ms a pass with no spin,
22.7 with 1000 spins and 23.8 with 3000 on a quiet 2-core machine; with one core busy elsewhere, 33.9, 37.0 and
46.1 (PyTorch's packed path: 30.0 / 28.3 / 30.3 quiet, 52.8 / 54.4 / 60.0 busy).
OpenMP reads both variables once, when it loads (with torch), so they must be set before that.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "1000")
