"""``python -m vecgraph``: the vecgraph command."""

import sys

from .cli import main

sys.exit(main())
