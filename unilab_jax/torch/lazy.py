"""Torch modules defined on first use, so that importing the core never imports torch.

A module of torch layers writes each class's methods in a plain mixin (no torch base) whose
methods read ``torch``, ``nn`` and ``F`` as module globals, declares those three as ``None``,
and hands its table of classes to ``define_on_first_use``, which gives the module's
``__getattr__``::

    torch: Any = None  # bound on first use (unilab_jax.torch.lazy)
    nn: Any = None
    __getattr__ = define_on_first_use(__name__, {"SACActor": (_SACActorMethods, "Module")})

The first access of a listed name imports torch, binds ``torch`` / ``nn`` / ``F`` in the module
and builds every listed class as ``type(name, (mixin, torch.nn.<base>), ...)`` into the module's
namespace, in the table's order. Later lookups find the classes there directly: a method that
builds another listed class finds it by its global name, TorchScript resolves ``torch`` from the
methods' globals, and pickle finds each class as ``module.<name>``. Module-level functions that
need torch import it in their body instead (they may run before any class is built).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["define_on_first_use", "no_grad"]

_LOCK = threading.Lock()


def define_on_first_use(
    module_name: str, classes: dict[str, tuple[type, str]]
) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module_name``: ``classes`` maps each class's name to its methods'
    mixin and the name of its ``torch.nn`` base (``"Module"``, ``"BatchNorm1d"``)."""

    def __getattr__(name: str) -> Any:
        if name not in classes:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        namespace = vars(sys.modules[module_name])
        with _LOCK:
            if name not in namespace:
                _build(module_name, namespace, classes)
        return namespace[name]

    return __getattr__


def _build(module_name: str, namespace: dict[str, Any], classes: dict[str, tuple[type, str]]):
    """Bind torch in ``namespace`` and build every class of ``classes`` into it."""
    import torch

    namespace.update(torch=torch, nn=torch.nn, F=torch.nn.functional)
    for name, (methods, base) in classes.items():
        attributes = {"__module__": module_name, "__qualname__": name, "__doc__": methods.__doc__}
        namespace[name] = type(name, (methods, getattr(torch.nn, base)), attributes)


def no_grad(method: Callable) -> Callable:
    """``torch.no_grad()`` as a decorator that imports torch when called, not when applied."""

    @functools.wraps(method)
    def without_grad(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.no_grad():
            return method(*args, **kwargs)

    return without_grad
