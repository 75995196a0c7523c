"""Exact tables between torch tensors and JAX leaves, and the copies both ways.

A table is a list of rows ``(torch name, jax path, transform)``:

- torch names: a tensor reached by attributes from the torch object (``"actor.net.0.weight"``,
  ``"log_alpha"``, ``"obs_normalizer._var"``), an optimiser moment
  (``"q_optimizer.exp_avg[qnet.qnets.1.net.0.weight]"``, ``exp_avg_sq``) or an optimiser's
  step count (``"q_optimizer.step"``).
- jax paths: attribute / key / index steps into the JAX tree; a trailing integer picks an
  ensemble member of a batched leaf (``("critic_params", "params", "dense_0", "kernel", 1)``:
  member 1 of ``[E, in, out]``). Adam moments sit in the first element of optax's chain,
  ``(ScaleByAdamState(count, mu, nu), EmptyState, ...)``, with ``mu`` / ``nu`` shaped like the
  params.
- transforms: ``"transpose"`` (torch ``Linear.weight [out, in]`` is the flax kernel ``[in, out]``
  transposed), ``"copy"`` (same values, reshaped and cast: ``[1, D]`` normaliser buffers vs
  ``[D]``, ``log_alpha [1]`` vs ``[]``, torch's float step vs optax's int32 count) and
  ``"sqrt"`` (a cached ``std = sqrt(var)``, written torch-side only).

Everything is float32 on both sides, so values survive a round trip bit for bit. The actors'
tables come from the actors (``unilab_jax.torch.actors``, ``jax_rows``); the facade's
``unilab.algos.torch.convert`` builds the learners' tables (critics, temperature, optimisers,
normalisers) from the same row builders.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

__all__ = [
    "JaxPath",
    "Row",
    "jax_node",
    "jax_to_torch",
    "layer_norm_rows",
    "linear_rows",
    "normalizer_rows",
    "optimizer_rows",
    "torch_to_jax",
    "trunk_rows",
]

Transform = Literal["transpose", "copy", "sqrt"]
JaxPath = tuple[str | int, ...]


@dataclasses.dataclass(frozen=True)
class Row:
    """One torch tensor <-> one JAX leaf (or one ensemble member of a leaf)."""

    torch_name: str
    jax_path: JaxPath
    transform: Transform


# --- row builders ------------------------------------------------------------------------------


def linear_rows(torch_prefix: str, jax_prefix: JaxPath, member: int | None = None) -> list[Row]:
    """A ``Linear``'s weight and bias <-> a flax ``Dense``'s kernel and bias."""
    m = () if member is None else (member,)
    return [
        Row(f"{torch_prefix}.weight", (*jax_prefix, "kernel", *m), "transpose"),
        Row(f"{torch_prefix}.bias", (*jax_prefix, "bias", *m), "copy"),
    ]


def layer_norm_rows(torch_prefix: str, jax_prefix: JaxPath, member: int | None = None) -> list[Row]:
    """A ``LayerNorm``'s weight and bias <-> a flax ``LayerNorm``'s scale and bias."""
    m = () if member is None else (member,)
    return [
        Row(f"{torch_prefix}.weight", (*jax_prefix, "scale", *m), "copy"),
        Row(f"{torch_prefix}.bias", (*jax_prefix, "bias", *m), "copy"),
    ]


def trunk_rows(
    torch_net: str,
    jax_prefix: JaxPath,
    stride: int,
    layer_norm: bool,
    member: int | None,
    layers: int = 3,
) -> list[Row]:
    """``layers`` hidden layers; torch ``net.{stride * i}`` is the Linear, ``+ 1`` the
    LayerNorm."""
    rows = []
    for i in range(layers):
        rows += linear_rows(f"{torch_net}.{stride * i}", (*jax_prefix, f"dense_{i}"), member)
        if layer_norm:
            rows += layer_norm_rows(
                f"{torch_net}.{stride * i + 1}", (*jax_prefix, f"norm_{i}"), member
            )
    return rows


def normalizer_rows(name: str) -> list[Row]:
    """An ``EmpiricalNormalization`` <-> a JAX ``RunningStats`` of the same name."""
    return [
        Row(f"{name}._mean", (name, "mean"), "copy"),
        Row(f"{name}._var", (name, "var"), "copy"),
        Row(f"{name}.count", (name, "count"), "copy"),
        Row(f"{name}._std", (name, "var"), "sqrt"),
    ]


def optimizer_rows(optimizer: str, params: Iterable[Row], opt_state: str) -> list[Row]:
    """Adam moments of every parameter row, plus the step count of the optimiser."""
    rows = []
    for row in params:
        inner = row.jax_path[1:]  # mu / nu mirror the params tree below the state field
        for moment, slot in (("exp_avg", "mu"), ("exp_avg_sq", "nu")):
            rows.append(
                Row(f"{optimizer}.{moment}[{row.torch_name}]", (opt_state, 0, slot, *inner),
                    row.transform)
            )  # fmt: skip
    rows.append(Row(f"{optimizer}.step", (opt_state, 0, "count"), "copy"))
    return rows


# --- resolving names and paths ----------------------------------------------------------------

_MOMENT = re.compile(r"^(\w+)\.(exp_avg|exp_avg_sq)\[(.+)\]$")
_STEP = re.compile(r"^(\w+_optimizer)\.step$")


def _torch_tensor(owner: Any, name: str) -> Any:
    node = owner
    for part in name.split("."):
        node = getattr(node, part)
    return node


def jax_node(tree: Any, path: JaxPath) -> Any:
    """Follow ``path`` through dataclasses / NamedTuples (attributes), dicts and tuples /
    arrays."""
    node = tree
    for step in path:
        if isinstance(step, int) or isinstance(node, dict):
            node = node[step]
        else:
            node = getattr(node, step)
    return node


def _read_torch(owner: Any, name: str) -> np.ndarray:
    """The float32 / count value behind a torch name (a missing Adam state reads as zeros)."""
    import torch

    if match := _MOMENT.match(name):
        optimizer_name, moment, param_name = match.groups()
        param = _torch_tensor(owner, param_name)
        state = getattr(owner, optimizer_name).state.get(param, {})
        value = state.get(moment, torch.zeros_like(param))
    elif match := _STEP.match(name):
        optimizer = getattr(owner, match.group(1))
        steps = {float(s["step"]) for s in optimizer.state.values() if "step" in s}
        if len(steps) > 1:
            raise ValueError(f"{name}: parameters are at different steps {sorted(steps)}")
        value = torch.tensor(steps.pop() if steps else 0.0)
    else:
        value = _torch_tensor(owner, name)
    return value.detach().cpu().numpy()


def _write_torch(owner: Any, name: str, value: np.ndarray) -> None:
    import torch

    if match := _MOMENT.match(name):
        optimizer_name, moment, param_name = match.groups()
        param = _torch_tensor(owner, param_name)
        state = getattr(owner, optimizer_name).state[param]
        state[moment] = torch.from_numpy(np.array(value)).reshape(param.shape).to(param)
    elif match := _STEP.match(name):
        optimizer = getattr(owner, match.group(1))
        count = float(value)
        for group in optimizer.param_groups:
            on_device = group.get("fused") or group.get("capturable")
            for param in group["params"]:
                if count == 0:
                    # optax count 0 means untouched: a fresh torch optimiser has no state.
                    optimizer.state.pop(param, None)
                    continue
                device = param.device if on_device else torch.device("cpu")
                optimizer.state[param]["step"] = torch.tensor(count, device=device)
    else:
        tensor = _torch_tensor(owner, name)
        if value.size != tensor.numel():
            raise ValueError(f"{name}: jax {list(value.shape)} vs torch {list(tensor.shape)}")
        with torch.no_grad():
            tensor.copy_(torch.from_numpy(np.array(value)).reshape(tensor.shape))


def _to_jax_layout(row: Row, value: np.ndarray, target: np.ndarray) -> np.ndarray:
    if row.transform == "transpose":
        value = value.T
    if value.size != target.size or (row.transform == "transpose" and value.shape != target.shape):
        raise ValueError(f"{row.torch_name}: torch {value.shape} vs jax {target.shape}")
    return value.reshape(target.shape)


def torch_to_jax(owner: Any, rows: list[Row], state: Any) -> Any:
    """``state`` (a JAX tree) with every row's leaf replaced by ``owner``'s torch value."""
    import jax

    # Writable host copies of every leaf; rows write into them in place, then back to devices.
    host = jax.tree.map(np.array, state)
    for row in rows:
        if row.transform == "sqrt":
            continue  # derived on the torch side only
        target = jax_node(host, row.jax_path)
        target[...] = _to_jax_layout(row, _read_torch(owner, row.torch_name), target)
    return jax.tree.map(
        lambda new, old: jax.device_put(new.astype(old.dtype), old.sharding), host, state
    )


def jax_to_torch(state: Any, rows: list[Row], owner: Any) -> None:
    """Write every row's JAX leaf of ``state`` into ``owner``'s torch tensor, in place."""
    import jax

    host = jax.tree.map(np.asarray, state)  # one device-to-host copy per leaf
    # Step rows go last: a zero count clears the moments written before it.
    ordered = sorted(rows, key=lambda row: bool(_STEP.match(row.torch_name)))
    for row in ordered:
        value = np.asarray(jax_node(host, row.jax_path))
        if row.transform == "transpose":
            value = value.T
        elif row.transform == "sqrt":
            value = np.sqrt(value)  # correctly rounded, as the normaliser's own update
        _write_torch(owner, row.torch_name, value)
