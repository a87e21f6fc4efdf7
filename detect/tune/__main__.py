"""`python -m detect.tune`: detect.tune.cli."""

import sys

from detect.tune.cli import main

if __name__ == "__main__":
    sys.exit(main())
