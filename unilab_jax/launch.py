"""``python -m unilab_jax.launch``: one training run over several local processes.

The program is ``unilab_jax.cli.launch``; this module starts it (and keeps its names).
"""

import sys

from unilab_jax.cli.launch import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
