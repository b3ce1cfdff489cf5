"""``python -m controllers``."""

import sys

from controllers.app import main

sys.exit(main())
