"""python -m pgrecall.cli"""

import sys

from . import main

sys.exit(main())
