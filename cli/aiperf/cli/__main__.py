"""`python -m aiperf.cli ...` is the `aiperf` command."""

import sys

from aiperf.cli.main import main

sys.exit(main())
