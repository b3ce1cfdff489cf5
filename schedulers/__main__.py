"""``python -m schedulers``."""

import sys

from schedulers.app import main

sys.exit(main())
