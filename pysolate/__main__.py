"""``python -m pysolate``: the same as the ``pysolate`` console script."""

import sys

from ._cli import main

sys.exit(main())
