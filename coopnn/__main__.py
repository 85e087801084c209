"""`python -m coopnn`: the `coopnn` command line (`coopnn.cli`)."""

import sys

from coopnn.cli import main

sys.exit(main())
