"""``python -m mmtoolkit`` — the same as the ``mmtoolkit`` command."""

import sys

from mmtoolkit.cli import main

sys.exit(main())
