"""``python -m unilab_jax.cli <command> ...``: the ``unilab-jax`` console script."""

from unilab_jax.cli import main

raise SystemExit(main())
