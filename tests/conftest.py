"""Shared test set-up: JAX's persistent compilation cache, offline wandb, float32 CPU."""

import os
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
_CACHE = Path(
    os.environ.get("UNILAB_JAX_TEST_CACHE", Path(__file__).resolve().parents[1] / ".jax_cache")
)
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_CACHE))

import jax  # noqa: E402

jax.config.update("jax_compilation_cache_dir", str(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
