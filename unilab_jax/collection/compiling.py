"""Compiling the device programs off the critical path: JAX's persistent compilation cache, and
compiles run in a background thread while something else runs.

``use_compilation_cache`` turns the cache on when ``Trainer`` is built (a rerun of the same
shapes skips most of its compile); ``Background`` is how ``Trainer`` compiles the first
block's step beside init, and how the MJX collection (``collection.mjx``) compiles the
evaluator beside what is left of it. It sits in ``collection``, with the programs it
compiles, so that ``collection`` and ``training`` above it both use it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

__all__ = ["DEFAULT_COMPILATION_CACHE", "Background", "use_compilation_cache"]


#: Where JAX keeps compiled programs between runs unless told otherwise; the environment
#: variable UNILAB_JAX_COMPILATION_CACHE names another folder, or "0" to turn it off.
DEFAULT_COMPILATION_CACHE = Path.home() / ".cache" / "unilab_jax" / "xla"


def use_compilation_cache() -> str | None:
    """Turn on JAX's persistent compilation cache, so a rerun of the same shapes skips most of
    its compile (measured: 42 s -> 6 s). A cache configured already (``jax_compilation_cache_dir``
    or ``JAX_COMPILATION_CACHE_DIR``) is kept; ``UNILAB_JAX_COMPILATION_CACHE=0`` turns it off.
    Returns the folder in use, or None."""
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    choice = os.environ.get("UNILAB_JAX_COMPILATION_CACHE", "")
    if choice.lower() in ("0", "off", "false", "no"):
        return None
    folder = Path(choice) if choice else DEFAULT_COMPILATION_CACHE
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # an unwritable home: compile every time rather than fail
    jax.config.update("jax_compilation_cache_dir", str(folder))
    return str(folder)


class Background:
    """``fn()`` in a daemon thread (a compile); ``result()`` waits for it and returns its
    value or raises its error; ``seconds`` is how long ``fn`` itself took."""

    def __init__(self, fn: Callable[[], Any], name: str) -> None:
        self._box: dict[str, Any] = {}
        self.seconds = 0.0

        def run() -> None:
            start = time.perf_counter()
            try:
                self._box["value"] = fn()
            except BaseException as err:  # noqa: BLE001 (re-raised by result())
                self._box["error"] = err
            self.seconds = time.perf_counter() - start

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def result(self) -> Any:
        self._thread.join()
        if "error" in self._box:
            raise self._box["error"]
        return self._box["value"]
