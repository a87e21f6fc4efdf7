"""Train a Darknet .cfg detector: `python train.py --help`; `torchrun --nproc_per_node=2 train.py` for DDP."""

import sys

from detect.train import main

if __name__ == "__main__":
    sys.exit(main())
