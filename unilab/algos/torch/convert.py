"""Exact conversion between the torch learners and the JAX agent states (`SACState`, `TD3State`).

The whole mapping is one table per algorithm, built by `sac_mapping(learner)` /
`td3_mapping(learner)`: rows `(torch name, jax path, transform)`.

- torch names: a tensor reached by attributes from the learner (`"qnet.qnets.1.net.0.weight"`,
  `"log_alpha"`, `"obs_normalizer._var"`), an optimiser moment
  (`"q_optimizer.exp_avg[qnet.qnets.1.net.0.weight]"`, `exp_avg_sq`) or an optimiser's step
  count (`"q_optimizer.step"`).
- jax paths: attribute / key / index steps into the state; a trailing integer picks an ensemble
  member of a batched leaf (`("critic_params", "params", "dense_0", "kernel", 1)`: member 1 of
  `[E, in, out]`). Adam moments sit in the first element of optax's chain,
  `(ScaleByAdamState(count, mu, nu), EmptyState, ...)`, with `mu` / `nu` shaped like the params.
- transforms: `"transpose"` (torch `Linear.weight [out, in]` is the flax kernel `[in, out]`
  transposed), `"copy"` (same values, reshaped and cast: `[1, D]` normaliser buffers vs `[D]`,
  `log_alpha [1]` vs `[]`, torch's float step vs optax's int32 count) and `"sqrt"` (the torch
  normaliser's cached `_std = sqrt(var)`, written torch-side only).

Everything is float32 on both sides, so weights, moments and statistics survive a round trip bit
for bit. Not mapped: the C51 support buffers and the actor's `action_scale` / `action_bias`
(constants), TD3's `actor_target` (never updated; left as it is) and its per-env exploration
scales (collector state, `TD3ExploreState` in JAX), and hyperparameters (the JAX agent must be
built from `learner.config`, which `init_jax_sac` / `init_jax_td3` do). An optimiser whose JAX
count is 0 has an empty torch state, as a fresh torch optimiser does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any, Literal

import jax
import numpy as np
import torch

from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.fast_td3.learner import FastTD3Learner
from unilab_jax.algos.sac import SACState, make_sac
from unilab_jax.algos.td3 import TD3State, make_td3

__all__ = [
    "Row",
    "init_jax_sac",
    "init_jax_td3",
    "jax_sac_to_torch",
    "jax_td3_to_torch",
    "sac_mapping",
    "td3_mapping",
    "torch_sac_to_jax",
    "torch_td3_to_jax",
]

Transform = Literal["transpose", "copy", "sqrt"]
JaxPath = tuple[str | int, ...]


@dataclasses.dataclass(frozen=True)
class Row:
    """One torch tensor <-> one JAX leaf (or one ensemble member of a leaf)."""

    torch_name: str
    jax_path: JaxPath
    transform: Transform


# --- the tables -------------------------------------------------------------------------------


def _linear(torch_prefix: str, jax_prefix: JaxPath, member: int | None = None) -> list[Row]:
    m = () if member is None else (member,)
    return [
        Row(f"{torch_prefix}.weight", (*jax_prefix, "kernel", *m), "transpose"),
        Row(f"{torch_prefix}.bias", (*jax_prefix, "bias", *m), "copy"),
    ]


def _layer_norm(torch_prefix: str, jax_prefix: JaxPath, member: int | None = None) -> list[Row]:
    m = () if member is None else (member,)
    return [
        Row(f"{torch_prefix}.weight", (*jax_prefix, "scale", *m), "copy"),
        Row(f"{torch_prefix}.bias", (*jax_prefix, "bias", *m), "copy"),
    ]


def _trunk(
    torch_net: str, jax_prefix: JaxPath, stride: int, layer_norm: bool, member: int | None
) -> list[Row]:
    """Three hidden layers; torch `net.{stride * i}` is the Linear, `+ 1` the LayerNorm."""
    rows = []
    for i in range(3):
        rows += _linear(f"{torch_net}.{stride * i}", (*jax_prefix, f"dense_{i}"), member)
        if layer_norm:
            rows += _layer_norm(f"{torch_net}.{stride * i + 1}", (*jax_prefix, f"norm_{i}"), member)
    return rows


def _normalizer(name: str) -> list[Row]:
    return [
        Row(f"{name}._mean", (name, "mean"), "copy"),
        Row(f"{name}._var", (name, "var"), "copy"),
        Row(f"{name}.count", (name, "count"), "copy"),
        Row(f"{name}._std", (name, "var"), "sqrt"),
    ]


def _optimizer(optimizer: str, params: Iterable[Row], opt_state: str) -> list[Row]:
    """Adam moments of every parameter row, plus the step count of the optimiser."""
    rows = []
    for row in params:
        inner = row.jax_path[1:]  # mu / nu mirror the params tree below the state field
        rows.append(
            Row(
                f"{optimizer}.exp_avg[{row.torch_name}]",
                (opt_state, 0, "mu", *inner),
                row.transform,
            )
        )
        rows.append(
            Row(
                f"{optimizer}.exp_avg_sq[{row.torch_name}]",
                (opt_state, 0, "nu", *inner),
                row.transform,
            )
        )
    rows.append(Row(f"{optimizer}.step", (opt_state, 0, "count"), "copy"))
    return rows


def sac_mapping(learner: FastSACLearner) -> list[Row]:
    """The FastSAC table: actor, critic, target critic, log-alpha, optimisers, normalisers."""
    config = learner.config
    ln = config.use_layer_norm
    actor = _trunk("actor.net", ("actor_params", "params", "trunk"), 3, ln, None)
    actor += _linear("actor.fc_mu", ("actor_params", "params", "mu"))
    actor += _linear("actor.fc_logstd", ("actor_params", "params", "log_std"))

    def critic(torch_root: str, jax_field: str) -> list[Row]:
        rows = []
        for e in range(config.num_q_networks):
            net = f"{torch_root}.qnets.{e}.net"
            rows += _trunk(net, (jax_field, "params"), 3, ln, e)
            rows += _linear(f"{net}.9", (jax_field, "params", "logits"), e)
        return rows

    qnet = critic("qnet", "critic_params")
    log_alpha = [Row("log_alpha", ("log_alpha",), "copy")]
    rows = actor + qnet + critic("qnet_target", "target_critic_params") + log_alpha
    rows += _optimizer("actor_optimizer", actor, "actor_opt_state")
    rows += _optimizer("q_optimizer", qnet, "critic_opt_state")
    rows += _optimizer("alpha_optimizer", log_alpha, "alpha_opt_state")
    if config.obs_normalization:
        rows += _normalizer("obs_normalizer") + _normalizer("critic_normalizer")
    return rows


def td3_mapping(learner: FastTD3Learner) -> list[Row]:
    """The FastTD3 table: actor, twin critic, target critic, optimisers, normalisers."""
    actor = _trunk("actor.net", ("actor_params", "params", "trunk"), 2, False, None)
    actor += _linear("actor.fc_mu.0", ("actor_params", "params", "mu"))

    def critic(torch_root: str, jax_field: str) -> list[Row]:
        rows = []
        for e, name in enumerate(("qnet1", "qnet2")):
            net = f"{torch_root}.{name}.net"
            rows += _trunk(net, (jax_field, "params"), 2, False, e)
            rows += _linear(f"{net}.6", (jax_field, "params", "logits"), e)
        return rows

    qnet = critic("qnet", "critic_params")
    rows = actor + qnet + critic("qnet_target", "target_critic_params")
    rows += _optimizer("actor_optimizer", actor, "actor_opt_state")
    rows += _optimizer("q_optimizer", qnet, "critic_opt_state")
    if learner.config.obs_normalization:
        rows += _normalizer("obs_normalizer") + _normalizer("critic_normalizer")
    return rows


# --- resolving names and paths ----------------------------------------------------------------

_MOMENT = re.compile(r"^(\w+)\.(exp_avg|exp_avg_sq)\[(.+)\]$")
_STEP = re.compile(r"^(\w+_optimizer)\.step$")


def _torch_tensor(learner: Any, name: str) -> torch.Tensor:
    node = learner
    for part in name.split("."):
        node = getattr(node, part)
    return node


def _jax_node(tree: Any, path: JaxPath) -> Any:
    """Follow `path` through dataclasses / NamedTuples (attributes), dicts and tuples / arrays."""
    node = tree
    for step in path:
        if isinstance(step, int) or isinstance(node, dict):
            node = node[step]
        else:
            node = getattr(node, step)
    return node


def _read_torch(learner: Any, name: str) -> np.ndarray:
    """The float32 / count value behind a torch name (a missing Adam state reads as zeros)."""
    if match := _MOMENT.match(name):
        optimizer_name, moment, param_name = match.groups()
        param = _torch_tensor(learner, param_name)
        state = getattr(learner, optimizer_name).state.get(param, {})
        value = state.get(moment, torch.zeros_like(param))
    elif match := _STEP.match(name):
        optimizer = getattr(learner, match.group(1))
        steps = {float(s["step"]) for s in optimizer.state.values() if "step" in s}
        if len(steps) > 1:
            raise ValueError(f"{name}: parameters are at different steps {sorted(steps)}")
        value = torch.tensor(steps.pop() if steps else 0.0)
    else:
        value = _torch_tensor(learner, name)
    return value.detach().cpu().numpy()


def _write_torch(learner: Any, name: str, value: np.ndarray) -> None:
    if match := _MOMENT.match(name):
        optimizer_name, moment, param_name = match.groups()
        param = _torch_tensor(learner, param_name)
        state = getattr(learner, optimizer_name).state[param]
        state[moment] = torch.from_numpy(np.array(value)).reshape(param.shape).to(param)
    elif match := _STEP.match(name):
        optimizer = getattr(learner, match.group(1))
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
        tensor = _torch_tensor(learner, name)
        with torch.no_grad():
            tensor.copy_(torch.from_numpy(np.array(value)).reshape(tensor.shape))


def _to_jax_layout(row: Row, value: np.ndarray, target: np.ndarray) -> np.ndarray:
    if row.transform == "transpose":
        value = value.T
    if value.size != target.size or (row.transform == "transpose" and value.shape != target.shape):
        raise ValueError(f"{row.torch_name}: torch {value.shape} vs jax {target.shape}")
    return value.reshape(target.shape)


def _torch_to_jax(learner: Any, rows: list[Row], state: Any) -> Any:
    # Writable host copies of every leaf; rows write into them in place, then back to devices.
    host = jax.tree.map(np.array, state)
    for row in rows:
        if row.transform == "sqrt":
            continue  # derived on the torch side only
        target = _jax_node(host, row.jax_path)
        target[...] = _to_jax_layout(row, _read_torch(learner, row.torch_name), target)
    return jax.tree.map(
        lambda new, old: jax.device_put(new.astype(old.dtype), old.sharding), host, state
    )


def _jax_to_torch(state: Any, rows: list[Row], learner: Any) -> None:
    host = jax.tree.map(np.asarray, state)  # one device-to-host copy per leaf
    # Step rows go last: a zero count clears the moments written before it.
    ordered = sorted(rows, key=lambda row: bool(_STEP.match(row.torch_name)))
    for row in ordered:
        value = np.asarray(_jax_node(host, row.jax_path))
        if row.transform == "transpose":
            value = value.T
        elif row.transform == "sqrt":
            value = np.sqrt(value)  # correctly rounded, as the normaliser's own update
        _write_torch(learner, row.torch_name, value)


# --- public API -------------------------------------------------------------------------------


def init_jax_sac(learner: FastSACLearner, key: jax.Array | None = None) -> SACState:
    """A fresh `SACState` of the same shapes and config as `learner` (weights not copied)."""
    agent = make_sac(learner.config, learner.obs_dim, learner.critic_obs_dim, learner.action_dim)
    return agent.init(jax.random.key(0) if key is None else key)


def init_jax_td3(learner: FastTD3Learner, key: jax.Array | None = None) -> TD3State:
    """A fresh `TD3State` of the same shapes and config as `learner` (weights not copied)."""
    agent = make_td3(learner.config, learner.obs_dim, learner.critic_obs_dim, learner.action_dim)
    return agent.init(jax.random.key(0) if key is None else key)


def torch_sac_to_jax(learner: FastSACLearner, jax_agent_state: SACState | None = None) -> SACState:
    """`jax_agent_state` with every mapped leaf replaced by the learner's values.

    Without a state, one is built from `learner.config` (`init_jax_sac`) as the template.
    """
    state = init_jax_sac(learner) if jax_agent_state is None else jax_agent_state
    return _torch_to_jax(learner, sac_mapping(learner), state)


def jax_sac_to_torch(state: SACState, learner: FastSACLearner) -> None:
    """Load a `SACState` into `learner` in place (weights, moments, steps, statistics)."""
    _jax_to_torch(state, sac_mapping(learner), learner)


def torch_td3_to_jax(learner: FastTD3Learner, jax_agent_state: TD3State | None = None) -> TD3State:
    """`jax_agent_state` with every mapped leaf replaced by the learner's values."""
    state = init_jax_td3(learner) if jax_agent_state is None else jax_agent_state
    return _torch_to_jax(learner, td3_mapping(learner), state)


def jax_td3_to_torch(state: TD3State, learner: FastTD3Learner) -> None:
    """Load a `TD3State` into `learner` in place (`actor_target` and noise scales untouched)."""
    _jax_to_torch(state, td3_mapping(learner), learner)
