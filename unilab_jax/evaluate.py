"""``python -m unilab_jax.evaluate RUN``: the deterministic return of a trained policy; the
program is ``unilab_jax.cli.evaluate``."""

import sys
import types

from unilab_jax.cli.evaluate import build_parser, main

__all__ = ["build_parser", "main"]


class _CallableModule(types.ModuleType):
    """Importing this module sets the package attribute ``unilab_jax.evaluate`` to it, hiding
    the function ``unilab_jax.evaluate`` (``unilab_jax.policy.evaluate``) of the same name;
    calling the module calls that function, so ``unilab_jax.evaluate(policy)`` keeps working."""

    def __call__(self, *args, **kwargs):
        from unilab_jax.policy import evaluate

        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
