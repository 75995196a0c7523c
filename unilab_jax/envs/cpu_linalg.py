"""Work-around for the forced-host-device LAPACK deadlock of jaxlib 0.10.2 on CPU.

The problem
-----------
On the CPU, jaxlib 0.10.2 lowers ``cholesky_p`` (``jnp.linalg.cholesky``,
``jax.scipy.linalg.cho_factor``) to the LAPACK FFI call ``lapack_?potrf_ffi`` and
``triangular_solve_p`` (``cho_solve``) to ``lapack_?trsm_ffi``. For a large enough batch the
kernel splits the batch with ``jax::ParallelBatchMap``: it queues chunks on XLA's intra-op
("tf_XLAEigen") thread pool and blocks until they finish. That pool has one thread per
schedulable core. When several devices (``--xla_force_host_platform_device_count=N``, or
``jax_num_cpu_devices``) execute such a kernel at the same time, every pool thread can end up
blocked in a kernel waiting for chunks that only a pool thread could run: a deadlock at 0%
CPU. One device hangs too, for a large enough model and batch: G1WalkFlat (nv = 35) at 256
envs stopped at 0% CPU on its second step on this 2-core machine (several kernels of one
program run concurrently on the same pool). MJX (3.17, ``impl="jax"``)
reaches these primitives through ``jax.scipy.linalg.cho_factor`` / ``cho_solve`` in
``mjx/_src/smooth.py`` (``factor_m`` / ``solve_m``, dense mass matrix), ``mjx/_src/solver.py``
(Newton solver: the Hessian) and ``mjx/_src/forward.py`` (implicit integrators), i.e. every
``mjx.step`` of a model with a dense ``M`` and the Newton solver. On this 2-core machine,
CheetahRun (nv = 9) hangs at 2048 envs per device and runs at 512 (``bench/speed/deadlock.py``).
This module reaches into ``jax._src`` (lowering registration); it is written for the pinned
jax 0.10.2 and must be re-checked when the pin moves.

The fix
-------
Lower both primitives on the CPU to code with no LAPACK call, so nothing blocks inside the
thread pool:

* ``cholesky_p``: for matrices up to ``max_unrolled`` (default 32) a column-by-column
  Cholesky--Banachiewicz written in ``jnp`` and unrolled at trace time (elementwise over the
  batch; XLA fuses it); larger matrices use the HLO ``cholesky`` op, which XLA:CPU expands
  into plain loops (``CholeskyExpander``).
* ``triangular_solve_p``: the HLO ``triangular_solve`` op (XLA's ``TriangularSolveExpander``).

This is only a change of *lowering*: the primitives, their batching, JVP and transpose rules
are untouched, GPU/TPU lowerings are untouched, and the maths is the same factorisation
(results agree with LAPACK to float32 rounding; see ``bench/speed/deadlock.py``).
Non-positive-definite inputs give NaNs, as LAPACK's path does (jax turns a failed ``potrf``
into NaNs too).

In the library: every MJX environment built on a CPU backend (``Env``, the Playground / Brax
adapters) and the ``Trainer`` call ``install_on_cpu()``. With more than one device it installs
the whole fix. One device hangs too, so there matrices up to 32 x 32 take the LAPACK-free
path and larger ones keep LAPACK, which is 5x faster for them: Go1JoystickFlat (nv = 18)
stopped for good at 0% CPU within its first MJX steps of 1024 envs on one device with LAPACK
(every try), and runs at 7,266 env steps/s with the fix; G1WalkFlat (nv = 35) runs at 451 ms
per step of 1024 envs with LAPACK against 2,236 with XLA's expansion and 2,337 unrolled (the
one G1 hang on one device seen, at 256 envs, remains possible there). Measured on 1 device
earlier: the fix costs nothing for CheetahRun (140.1 vs 140.0 ms per step at 1024 envs) and is
faster for the 1- and 2-dof tasks. Use elsewhere: call ``install()``
once, before the functions that contain a Cholesky are traced
(lowerings are looked up when a function is lowered, and jax caches the lowering of inner
jitted functions such as ``jnp.linalg.cholesky``; ``install()`` therefore also clears jax's
in-memory caches). Installing is for the life of the process. The persistent
compilation cache needs no care: its key is the lowered program, which differs.

Reportedly (third-party reading of jax's ``jaxlib/cpu/lapack_kernels.cc``, not verified here)
open-source jaxlib builds from 0.11.1 no longer run LAPACK batches on the thread pool, which
would make this unnecessary there; the pinned jax is 0.10.2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax._src.interpreters import mlir
from jax._src.lax import linalg as lax_linalg

__all__ = ["install", "install_on_cpu", "installed", "pure_cholesky"]

_ORIGINAL = {
    "cholesky": lax_linalg._cholesky_cpu_lowering,
    "triangular_solve": lax_linalg._triangular_solve_cpu_lower,
}
_state: dict[str, tuple | None] = {"installed": None}  # (max_unrolled, large) when active


def pure_cholesky(a: jnp.ndarray) -> jnp.ndarray:
    """Lower Cholesky factor of the lower triangle of ``a`` ``[..., n, n]``, in plain ``jnp``.

    Cholesky--Banachiewicz by columns: column ``j`` is ``a[:, j]`` minus the sum over the
    earlier columns ``k`` of ``L[:, k] * L[j, k]``, divided by its diagonal entry's square
    root; rows above ``j`` are zero. The loop is unrolled at trace time, O(n^2) vector ops of
    length ``n`` that act elementwise over the batch, which suits small ``n`` (MJX's mass
    matrices and Newton Hessians)."""
    n = a.shape[-1]
    if n == 0:
        return a
    rows = jnp.arange(n)
    cols: list[jnp.ndarray] = []
    for j in range(n):
        col = a[..., :, j]  # reads a[j:, j], the lower triangle; rows < j are masked below
        for k in range(j):
            col = col - cols[k] * cols[k][..., j : j + 1]
        diag = jnp.sqrt(col[..., j : j + 1])
        cols.append(jnp.where(rows >= j, col / diag, 0.0))
    return jnp.stack(cols, axis=-1)


def _make_cholesky_lowering(max_unrolled: int, large: str):
    unrolled = mlir.lower_fun(pure_cholesky, multiple_results=False)
    larger = lax_linalg._cholesky_lowering if large == "hlo" else _ORIGINAL["cholesky"]

    def lowering(ctx, operand):
        (aval,) = ctx.avals_in
        if aval.shape[-1] <= max_unrolled and jnp.issubdtype(aval.dtype, jnp.floating):
            return unrolled(ctx, operand)
        return larger(ctx, operand)

    return lowering


def _make_triangular_solve_lowering(max_unrolled: int, large: str):
    if large == "hlo":
        return lax_linalg._triangular_solve_lowering

    def lowering(ctx, a, b, **params):
        small = ctx.avals_in[0].shape[-1] <= max_unrolled
        fn = lax_linalg._triangular_solve_lowering if small else _ORIGINAL["triangular_solve"]
        return fn(ctx, a, b, **params)

    return lowering


def install(max_unrolled: int = 32, large: str = "hlo") -> None:
    """Register the LAPACK-free CPU lowerings of ``cholesky_p`` and ``triangular_solve_p``.

    ``max_unrolled``: largest matrix order factorised by the unrolled ``jnp`` Cholesky (and,
    with ``large="lapack"``, solved by XLA's triangular solve). Larger matrices: ``"hlo"``
    XLA's HLO ``cholesky`` / ``triangular_solve`` expansions (no LAPACK at all; 0 always uses
    them), ``"lapack"`` jax's own LAPACK kernels. Calling it again with the same settings does
    nothing (and keeps jax's caches)."""
    if large not in ("hlo", "lapack"):
        raise ValueError(f"large must be 'hlo' or 'lapack', got {large!r}")
    if _state["installed"] == (max_unrolled, large):
        return
    mlir.register_lowering(
        lax_linalg.cholesky_p, _make_cholesky_lowering(max_unrolled, large), platform="cpu"
    )
    mlir.register_lowering(
        lax_linalg.triangular_solve_p,
        _make_triangular_solve_lowering(max_unrolled, large),
        platform="cpu",
    )
    _state["installed"] = (max_unrolled, large)
    jax.clear_caches()


def install_on_cpu() -> None:
    """On a CPU backend: ``install()`` when the run has more than one device (forced host
    devices, or several processes: the same lowering everywhere, so their results match a
    one-process run of as many devices); on one device ``install(large="lapack")``: matrices up
    to 32 x 32 without LAPACK (Go1JoystickFlat, nv = 18, hung for good on its first MJX steps
    at 1024 envs on one device with LAPACK; 7,266 env steps/s with the unrolled Cholesky),
    larger ones with jax's LAPACK kernels, which are 5x faster there (G1WalkFlat, nv = 35: 451
    against 2,236 ms per MJX step of 1024 envs, the unrolled Cholesky no better at 2,337).
    GPU/TPU runs are left alone."""
    if jax.default_backend() != "cpu":
        return
    if jax.device_count() > 1:
        install()
    else:
        install(large="lapack")


def installed() -> bool:
    """Whether ``install()`` is in effect."""
    return _state["installed"] is not None
