"""Imported for its effect, before the first `import torch` of the inference entry points (predict, val, bench):
OpenMP threads sleep while they wait for each other (OMP_WAIT_POLICY=PASSIVE) after a short spin
(GOMP_SPINCOUNT=1000, about 10 microseconds), unless the user chose either.

Why PASSIVE: by default a thread that finishes its share of a parallel region spins until the others finish. On
a CPU shared with other processes, the thread it waits for may be off its core, and the spinning one keeps its
own core busy meanwhile; yolov3-tiny's CPU forward pass (about 60 parallel regions) then took several times
longer (docs/benchmarks.md, "Threads").
Why the short spin: ncnn (the CPU engine; it shares PyTorch's OpenMP) runs a few hundred short regions a pass,
and a thread that went to sleep at once paid a wake-up on each; a thousand spins was the fastest of the counts
measured, quiet and with a core busy elsewhere (docs/benchmarks.md, "Threads").
OpenMP reads both variables once, when it loads (with torch), so they must be set before that.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "1000")
