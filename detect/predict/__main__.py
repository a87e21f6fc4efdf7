"""`python -m detect.predict`"""

import sys

from detect.predict.cli import main

sys.exit(main())
