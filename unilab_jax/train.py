"""``python -m unilab_jax.train``: the training command line.

The program is ``unilab_jax.cli.train``; this module starts it (and keeps its names).
"""

import sys

from unilab_jax.cli.train import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
