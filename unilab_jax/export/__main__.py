"""``python -m unilab_jax.export``: starts the program, ``unilab_jax.cli.export``."""

import runpy

runpy.run_module("unilab_jax.cli.export", run_name="__main__")
