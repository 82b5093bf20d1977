"""`python -m ds4sync.cli`: the same as the `ds4sync` command."""

import sys

from ds4sync.cli import main

sys.exit(main())
