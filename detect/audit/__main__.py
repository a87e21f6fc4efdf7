"""`python -m detect.audit`"""

import sys

from detect.audit.cli import main

sys.exit(main())
