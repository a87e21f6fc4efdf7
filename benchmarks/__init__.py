"""Benchmarks that live beside the product, not in it: against rival tools, on generated COCO-sized data, over
many epochs, and research experiments. Run from a clone's root, `python -m benchmarks <name> ...`; they print
figures and never pass or fail. The installed package keeps the user's own questions (`python -m detect.bench`)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the clone's root: benchmarks/ is only ever run from a clone
SHARED = Path(os.environ.get("DETECT_SHARED", ROOT.parent / "shared"))  # weights and data kept beside the clone
