"""Shared test set-up: JAX's persistent compilation cache, LLVM at -O1, offline wandb, float32
CPU."""

import os
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
# The CLI tests give the sizes they test; per-task presets are tested on their own.
os.environ["UNILAB_JAX_PRESET"] = "none"
# The suite's compiled programs persist between runs and between clones on this machine (a
# clean clone in CI compiles only what changed since the last run); UNILAB_JAX_TEST_CACHE names
# another folder (e.g. an empty one, for a cold run).
_CACHE = Path(
    os.environ.get("UNILAB_JAX_TEST_CACHE", Path.home() / ".cache" / "unilab_jax" / "test-xla")
)
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_CACHE))
# The suite compiles more than it runs: LLVM at -O1 instead of XLA's default level took a fifth
# less CPU on compile-bound tests and ran the pendulum learning test faster too (2-core CPU,
# cold caches: test_loop's NaN + compile-once tests 121 -> 98 s of CPU, SAC pendulum learning
# 102 -> 83 s wall; -O0 halved compiles but ran that learning test 1.8x slower). No fast-math
# either way, so the numbers are the same. Subprocesses the tests start inherit it.
_LLVM_LEVEL = "--xla_backend_optimization_level=1"
if _LLVM_LEVEL not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_LLVM_LEVEL}".strip()

import jax  # noqa: E402

jax.config.update("jax_compilation_cache_dir", str(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(options) -> folder``: a fresh tmpfs (``"size=512k"``, ``"ro"``) for real file
    system faults (a full disk, a read-only mount); unmounted afterwards. CI runs as root;
    where mounting is not allowed the test is skipped, saying so."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        folder = tmp_path / f"tmpfs{len(mounted)}"
        folder.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
        )
        if proc.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=True)
