"""``python -m tether`` is the ``tether`` command."""

import sys

from tether.cli import main

sys.exit(main())
