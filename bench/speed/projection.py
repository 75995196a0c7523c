"""The C51 projection three ways, side by side: the library's scatter-add, a dense kernel, a band.

All three compute ``categorical_projection`` (``unilab_jax/algos/c51.py``): every source atom
``j`` of a row sends its probability ``p_j`` to the support points around its target position
``b_j = clip((clip(r + bootstrap * gamma * z_j, v_min, v_max) - v_min) / dz, 0, K - 1)`` with the
triangular weight ``max(0, 1 - |b_j - i|)``.

* ``scatter`` (the library): two flat scatter-adds into ``[rows * K]``, as the reference's
  ``index_add_``.
* ``dense``: the ``[B, K, K]`` weight matrix and one ``einsum``.
* ``band``: a gather per output atom. For a bootstrapped row ``b_j = c + gamma * j`` between the
  edges, so output atom ``i`` receives from at most ``floor(2 / gamma) + 2`` consecutive
  source atoms, which it gathers; the mass clipped at either edge is summed apart, and a
  terminal row (``bootstrap == 0``, all mass at one position) is split between two atoms.
  Valid only for a 0/1 ``bootstrap`` (what ``bootstrap_mask`` gives).

The script checks that all three agree, then times each (jitted, the two critics' ``[2, B, K]``
of FastSAC / FastTD3), alternating them, at the batch sizes given. On CPU gathers and scatters
are loops over elements, so the fewer elements touched the better; on a GPU the scatter uses
atomics and the ranking may differ: run it there too.

    python -m bench.speed.projection                     # batch 512 and 8192, gamma 0.97 and 0.99
    python -m bench.speed.projection --batch-size 32768 --no-record
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

try:
    from bench.common import add_common_args, ensure_repo_on_path, markdown_table, record_section
except ModuleNotFoundError:  # run as a script: python bench/speed/projection.py
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.common import add_common_args, ensure_repo_on_path, markdown_table, record_section

ensure_repo_on_path()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from unilab_jax.algos.c51 import categorical_projection, make_support  # noqa: E402


def _positions(rewards, bootstrap, gamma, v_min, v_max, num_atoms):
    """``b`` exactly as the library computes it: ``[B, K]``, non-decreasing along the atoms."""
    z = make_support(v_min, v_max, num_atoms)
    dz = (v_max - v_min) / (num_atoms - 1)
    tz = jnp.clip(rewards[:, None] + (bootstrap * gamma)[:, None] * z, v_min, v_max)
    return jnp.clip((tz - v_min) / dz, 0.0, num_atoms - 1.0)


def dense_projection(next_probs, rewards, bootstrap, gamma, v_min, v_max):
    num_atoms = next_probs.shape[-1]
    b = _positions(rewards, bootstrap, gamma, v_min, v_max, num_atoms)  # [B, K]
    atoms = jnp.arange(num_atoms, dtype=jnp.float32)
    weights = jnp.maximum(0.0, 1.0 - jnp.abs(b[:, :, None] - atoms))  # [B, K_src, K_out]
    return jnp.einsum("...bj,bji->...bi", next_probs, weights)


def band_projection(next_probs, rewards, bootstrap, gamma, v_min, v_max):
    num_atoms = next_probs.shape[-1]
    dz = (v_max - v_min) / (num_atoms - 1)
    b = _positions(rewards, bootstrap, gamma, v_min, v_max, num_atoms)  # [B, K]
    atoms = jnp.arange(num_atoms, dtype=jnp.float32)
    at_low, at_high = b <= 0.0, b >= num_atoms - 1.0
    low_mass = jnp.sum(jnp.where(at_low, next_probs, 0.0), axis=-1)  # [E, B]
    high_mass = jnp.sum(jnp.where(at_high, next_probs, 0.0), axis=-1)
    # Between the edges b_j = c + gamma * j: atom i hears from j in ((i-1-c)/gamma, (i+1-c)/gamma).
    c = (rewards - v_min + gamma * v_min) / dz  # [B]
    width = min(num_atoms, math.floor(2.0 / gamma) + 2)
    first = jnp.floor((atoms - 1.0 - c[:, None]) / gamma)  # [B, K_out]
    src = first[..., None] + jnp.arange(width, dtype=jnp.float32)  # [B, K_out, W]
    in_range = (src >= 0) & (src <= num_atoms - 1)
    index = jnp.clip(src, 0, num_atoms - 1).astype(jnp.int32).reshape(src.shape[0], -1)
    b_src = jnp.take_along_axis(b, index, axis=-1).reshape(src.shape)
    between = jnp.take_along_axis(~(at_low | at_high), index, axis=-1).reshape(src.shape)
    weights = jnp.where(
        between & in_range, jnp.maximum(0.0, 1.0 - jnp.abs(b_src - atoms[:, None])), 0.0
    )
    p_index = jnp.broadcast_to(index, next_probs.shape[:-1] + index.shape[-1:])
    p_src = jnp.take_along_axis(next_probs, p_index, axis=-1)
    band = jnp.sum(p_src.reshape(next_probs.shape[:-1] + src.shape[-2:]) * weights, axis=-1)
    band = band + jnp.where(atoms == 0, low_mass[..., None], 0.0)
    band = band + jnp.where(atoms == num_atoms - 1, high_mass[..., None], 0.0)
    total = jnp.sum(next_probs, axis=-1, keepdims=True)  # terminal rows: all mass at b[:, 0]
    terminal = total * jnp.maximum(0.0, 1.0 - jnp.abs(b[:, :1] - atoms))
    return jnp.where((bootstrap > 0)[:, None], band, terminal)


FORMS = {"scatter": categorical_projection, "dense": dense_projection, "band": band_projection}


def measure(batch: int, gamma: float, repeats: int, num_atoms: int = 101) -> list[list]:
    v_min, v_max = -20.0, 20.0
    rng = np.random.default_rng(0)
    probs = jax.nn.softmax(jnp.asarray(rng.normal(size=(2, batch, num_atoms)) * 2, jnp.float32))
    # Rewards that push some target atoms past both edges; 5% terminal rows.
    rewards = jnp.asarray(rng.uniform(-3.0, 3.0, size=batch), jnp.float32)
    bootstrap = jnp.asarray((rng.uniform(size=batch) > 0.05).astype(np.float32))
    fns = {
        name: jax.jit(lambda p, r, bs, f=f: f(p, r, bs, gamma, v_min, v_max))
        for name, f in FORMS.items()
    }
    outs = {name: fn(probs, rewards, bootstrap).block_until_ready() for name, fn in fns.items()}
    calls = max(1, int(100_000 // batch))  # about 0.1 s per timed block at the scatter's speed
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):  # alternate the forms, so drifting load hits all of them
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                out = fn(probs, rewards, bootstrap)
            out.block_until_ready()
            times[name].append((time.perf_counter() - start) / calls)
    base = float(np.median(times["scatter"]))
    rows = []
    for name in fns:
        ms = float(np.median(times[name])) * 1e3
        diff = float(jnp.max(jnp.abs(outs[name] - outs["scatter"])))
        rows.append([batch, gamma, name, f"{ms:.3f}", f"{ms / (base * 1e3):.2f}x", f"{diff:.1e}"])
        print(f"batch {batch:6d} gamma {gamma}: {name:8s} {ms:9.3f} ms  {rows[-1][4]:>7s} "
              f"of scatter, max |diff| {diff:.1e}")  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, nargs="+", default=[512, 8192])
    parser.add_argument("--gamma", type=float, nargs="+", default=[0.97, 0.99])
    add_common_args(parser, repeats=7)
    args = parser.parse_args()
    rows = [r for b in args.batch_size for g in args.gamma for r in measure(b, g, args.repeats)]
    table = markdown_table(
        ["batch", "gamma", "form", "ms per call", "vs scatter", "max abs diff to scatter"], rows
    )
    print(table)
    if not args.no_record:
        record_section(
            "projection",
            "C51 projection: scatter vs dense vs band gather (`bench/speed/projection.py`)",
            table,
            notes=[
                "Two critics' `[2, B, 101]` targets, support [-20, 20], 5% terminal rows; "
                f"median of {args.repeats} alternated blocks; jitted, inputs on the device."
            ],
        )


if __name__ == "__main__":
    main()
