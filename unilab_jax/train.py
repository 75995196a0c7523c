"""``python -m unilab_jax.train``: ``unilab-jax train`` (its program: ``unilab_jax.cli.train``)."""

import sys

from unilab_jax.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
