"""``python -m bench.reference``: the bench beside the real UniLab (``beside.py``)."""

import sys

from bench.reference.beside import main

sys.exit(main())
