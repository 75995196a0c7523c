"""``python -m unilab_jax.cli <command> ...``: the ``unilab-jax`` console script."""

import sys

from unilab_jax.cli import main

sys.exit(main())
