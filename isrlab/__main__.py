"""`python -m isrlab`: the `isrlab` console script, for an environment without it."""

import sys

from isrlab.cli import main

sys.exit(main())
