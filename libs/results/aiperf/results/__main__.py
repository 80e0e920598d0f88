"""`python -m aiperf.results serve --base DIR [--port 8081]` (see `aiperf.results.serve`)."""

import sys

from aiperf.results.serve import main

sys.exit(main())
