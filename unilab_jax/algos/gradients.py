"""The update mechanics that FastSAC and FastTD3 share, written once for any device count.

- `row_keys` / `row_normal`: per-row noise keyed by the *global* row index, so that an update
  gives the same result whatever the number of devices the batch is split over.
- `gradient_step`: value-and-grad, cross-device gradient mean, optional clipping, optimiser step,
  and the skip of a non-finite step; `polyak_update`; `reduce_metrics`.

Deviations from the reference (UniLab's torch learners):
- A step is skipped when the loss *or* the global gradient norm is non-finite (the reference
  checks the loss only; a finite loss with a NaN gradient would poison its parameters).
- The gradient-norm metric is always the pre-clipping global norm (the reference reports 0 for
  SAC when clipping is off).
- Metrics whose name ends in `_max` / `_min` are reduced across devices with `pmax` / `pmin`,
  every other metric with `pmean`, so that they do not depend on the device count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax import lax

__all__ = [
    "gradient_step",
    "pmean_if",
    "polyak_update",
    "reduce_metrics",
    "row_keys",
    "row_normal",
]

Array = jax.Array
Key = jax.Array
Params = Any


def pmean_if(tree: Any, axis_name: str | None) -> Any:
    """`lax.pmean` over `axis_name`, or the identity when there is no axis."""
    return tree if axis_name is None else lax.pmean(tree, axis_name)


def row_keys(key: Key, local_batch: int, axis_name: str | None = None) -> Array:
    """One PRNG key per row, `fold_in(key, global_row_index)`: `[local_batch]` keys.

    Under `shard_map` each device holds rows `axis_index * local_batch + arange(local_batch)` of
    the global batch (equal sizes per device), so a row gets the same noise on any mesh size.
    """
    rows = jnp.arange(local_batch, dtype=jnp.uint32)
    if axis_name is not None:
        rows = rows + lax.axis_index(axis_name).astype(jnp.uint32) * local_batch
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, rows)


@jax.named_scope("row_noise")  # a name in profiles (bench/speed/profile.py)
def row_normal(key: Key, local_batch: int, dim: int, axis_name: str | None = None) -> Array:
    """Standard normal noise `[local_batch, dim]`, drawn per global row (see `row_keys`)."""
    keys = row_keys(key, local_batch, axis_name)
    return jax.vmap(lambda k: jax.random.normal(k, (dim,), jnp.float32))(keys)


def _tree_select(pred: Array, on_true: Any, on_false: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def gradient_step(
    loss_fn: Callable[[Params], tuple[Array, Any]],
    params: Params,
    opt_state: optax.OptState,
    optimizer: optax.GradientTransformation,
    max_grad_norm: float,
    axis_name: str | None,
    lr_scale: Array | None = None,
) -> tuple[Params, optax.OptState, Array, Any, Array]:
    """One guarded optimiser step on `loss_fn(params) -> (loss, aux)`.

    Returns `(params, opt_state, loss, aux, grad_norm)`; `loss` and `grad_norm` are global
    (averaged over `axis_name`), `aux` is local. Gradients are averaged over the axis *before*
    clipping and the optimiser, as DDP does. Clipping follows `torch.nn.utils.clip_grad_norm_`
    (scale `min(1, max_norm / (norm + 1e-6))`); `max_grad_norm <= 0` disables it. When the loss or
    the gradient norm is non-finite, the old params and optimiser state are kept. `lr_scale`
    multiplies the optimiser's updates (a learning-rate schedule's share of the start value: an
    (W)Adam step is linear in its learning rate).
    """
    (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    grads = pmean_if(grads, axis_name)
    loss = pmean_if(loss, axis_name)
    grad_norm = optax.tree.norm(grads)
    if max_grad_norm > 0:
        scale = jnp.minimum(1.0, max_grad_norm / (grad_norm + 1e-6))
        grads = jax.tree.map(lambda g: g * scale, grads)
    updates, new_opt_state = optimizer.update(grads, opt_state, params)
    if lr_scale is not None:
        updates = jax.tree.map(lambda u: u * lr_scale, updates)
    new_params = optax.apply_updates(params, updates)
    # All devices see the same reduced loss and norm, so they all take (or skip) the step.
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
    params = _tree_select(finite, new_params, params)
    opt_state = _tree_select(finite, new_opt_state, opt_state)
    return params, opt_state, loss, aux, grad_norm


def polyak_update(target: Params, online: Params, tau: float) -> Params:
    """`target <- tau * online + (1 - tau) * target` (same operation order as torch's foreach)."""
    return jax.tree.map(lambda t, o: t * (1.0 - tau) + o * tau, target, online)


def reduce_metrics(metrics: dict[str, Array], axis_name: str | None) -> dict[str, Array]:
    """Combine scalar metrics across devices: `pmax` for `*_max`, `pmin` for `*_min`, else mean."""
    if axis_name is None:
        return metrics
    out = {}
    for name, value in metrics.items():
        if name.endswith("_max"):
            out[name] = lax.pmax(value, axis_name)
        elif name.endswith("_min"):
            out[name] = lax.pmin(value, axis_name)
        else:
            out[name] = lax.pmean(value, axis_name)
    return out
