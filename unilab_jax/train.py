"""``unilab_jax.train``: the library's training function, and ``python -m unilab_jax.train``.

``from unilab_jax import train`` gives this module, which is callable as
:func:`unilab_jax.training.trainer.train` (``train(config, algo, log_dir=...)``: the run's
``TrainResult``); run as a program it is ``unilab-jax train`` (its program:
``unilab_jax.cli.train``). One name serves both because the package's ``train`` attribute is
this module whenever it has been imported, whichever way it was imported first."""

import sys
import types

from unilab_jax.cli.train import main


class _Train(types.ModuleType):
    """This module, callable as the library's ``train``."""

    def __call__(self, *args, **kwargs):
        from unilab_jax.training.trainer import train

        return train(*args, **kwargs)


sys.modules[__name__].__class__ = _Train

if __name__ == "__main__":
    sys.exit(main())
