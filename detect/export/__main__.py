"""`python -m detect.export`."""

import sys

from detect.export.cli import main

sys.exit(main())
