"""`python -m hil` is the `hil` command."""

import sys

from hil.cli import main

sys.exit(main())
