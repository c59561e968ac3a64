"""``python -m agtool._cli``: the ``agtool`` command, as the console script runs it."""

import sys

from . import main

sys.exit(main())
