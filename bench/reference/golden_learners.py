"""Record golden files of one learner update from the REAL reference UniLab's off-policy learners
(``unilabsim/UniLab`` @ 9aa57115): FastSAC (with and without symmetry), FastTD3, FlashSAC and
HORA-SAC (FastSAC whose actor encodes the critic observation's privileged tail).

Runs ONLY in the reference's own virtual environment (its top-level package is also called
``unilab``; never import this file from our test suite)::

    /work/ref/venv/bin/python bench/reference/golden_learners.py --out tests/golden/learners

For each case it builds the reference learner standalone on CPU at small widths with fixed
seeds, moves it away from its initialisation (a seeded perturbation of every weight and
statistic, then a few warm-up updates by the reference itself, so the optimisers carry moments
and the schedules have moved), and then records one update: ``update_critic``,
``update_actor``, ``soft_update_target`` on one batch, with

- every parameter and buffer by name (targets, normalisers, log-alpha / temperature, BatchNorm
  statistics, reward statistics) and every optimiser's moments and step counts, before the
  update and after each call (a tensor is stored at a stage only when it changed there);
- the batch, the metrics each call returns, and every random draw the calls make, in call
  order (``torch.Tensor.normal_`` / ``uniform_`` and ``torch.randn`` / ``randn_like`` / ``rand``
  / ``rand_like`` / ``normal`` / ``randint`` / ``multinomial`` are wrapped while they run);
- for FastSAC with ``use_symmetry=True``, the augmentation: the reference's own
  ``G1SymmetryAugmentation`` on a four-actuator MJCF, whose mirrors are written out as signed
  permutations.

The file layout is documented in ``tests/golden/learners/README.md``; the reference's classes
are imported and called, nothing of their source is copied here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

REF_COMMIT = "9aa57115"
DEFAULT_REF_ROOT = "/work/ref/UniLab"
REGENERATE = (
    "/work/ref/venv/bin/python bench/reference/golden_learners.py --out tests/golden/learners"
)
CALL_ORDER = ("update_critic", "update_actor", "soft_update_target")
STAGES = ("before", "update_critic", "update_actor", "soft_update_target")
OBS, CRITIC, ACT, BATCH = 10, 13, 4, 16
WARMUP_UPDATES = 3

# A four-actuator stand-in for G1's legs: the reference's G1SymmetryAugmentation pairs
# left/right actuators by name and flips roll/yaw joints.
_MJCF = """
<mujoco>
  <worldbody>
    <body name="base">
      <freejoint/>
      <geom type="sphere" size="0.1"/>
      <body name="l"><joint name="left_hip_pitch_joint" axis="0 1 0"/>
        <geom type="sphere" size="0.05"/>
        <body name="l2"><joint name="left_hip_roll_joint" axis="1 0 0"/>
          <geom type="sphere" size="0.05"/></body></body>
      <body name="r"><joint name="right_hip_pitch_joint" axis="0 1 0"/>
        <geom type="sphere" size="0.05"/>
        <body name="r2"><joint name="right_hip_roll_joint" axis="1 0 0"/>
          <geom type="sphere" size="0.05"/></body></body>
    </body>
  </worldbody>
  <actuator>
    <motor name="left_hip_pitch_joint" joint="left_hip_pitch_joint"/>
    <motor name="left_hip_roll_joint" joint="left_hip_roll_joint"/>
    <motor name="right_hip_pitch_joint" joint="right_hip_pitch_joint"/>
    <motor name="right_hip_roll_joint" joint="right_hip_roll_joint"/>
  </actuator>
</mujoco>
"""
OBS_LAYOUTS = {
    "obs": (("gyro", 3), ("gravity", 3), ("dof_pos", 4)),
    "critic": (("linvel", 3), ("gyro", 3), ("gravity", 3), ("dof_pos", 4)),
}


# --------------------------------------------------------------------------- random draws
class DrawLog:
    """Wraps torch's sampling functions; while ``active``, logs each call and its result."""

    _FUNCTIONS = ("randn", "randn_like", "rand", "rand_like", "normal", "randint", "multinomial")
    _METHODS = ("normal_", "uniform_", "random_", "bernoulli_", "exponential_")

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.values: list[np.ndarray] = []
        self.phase: str | None = None

    def _record(self, fn: str, out: Any, args: dict[str, Any]) -> None:
        if self.phase is None:
            return
        value = out.detach().cpu().numpy().copy()
        self.calls.append(
            {
                "index": len(self.values),
                "phase": self.phase,
                "fn": fn,
                "shape": list(value.shape),
                "dtype": str(value.dtype),
                "args": args,
            }
        )
        self.values.append(value)

    @contextlib.contextmanager
    def installed(self) -> Iterator[DrawLog]:
        import torch

        saved: list[tuple[Any, str, Any]] = []

        def wrap_function(name: str) -> None:
            original = getattr(torch, name)

            def wrapper(*args, **kwargs):
                out = original(*args, **kwargs)
                self._record(f"torch.{name}", out, _describe(args, kwargs))
                return out

            saved.append((torch, name, original))
            setattr(torch, name, wrapper)

        def wrap_method(name: str) -> None:
            original = getattr(torch.Tensor, name)

            def wrapper(tensor, *args, **kwargs):
                out = original(tensor, *args, **kwargs)
                self._record(f"Tensor.{name}", out, _describe(args, kwargs))
                return out

            saved.append((torch.Tensor, name, original))
            setattr(torch.Tensor, name, wrapper)

        for name in self._FUNCTIONS:
            wrap_function(name)
        for name in self._METHODS:
            wrap_method(name)
        try:
            yield self
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)


def _describe(args: tuple, kwargs: dict) -> dict[str, Any]:
    """JSON-able summary of a sampling call's arguments (tensors by shape)."""

    def one(value: Any) -> Any:
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            return {"tensor": list(value.shape)}
        if isinstance(value, (int, float, bool, str)) or value is None:
            return value
        if isinstance(value, (tuple, list)):
            return [one(v) for v in value]
        return repr(value)

    out = {f"arg{i}": one(a) for i, a in enumerate(args)}
    out.update({k: one(v) for k, v in kwargs.items() if k not in ("generator", "out")})
    return out


# --------------------------------------------------------------------------- state capture
def _tensor(value: Any) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone().numpy()
    return np.asarray(value)


def optimizer_snapshot(optimizer, names: dict[int, str]) -> dict[str, np.ndarray]:
    """``{param_name/step|exp_avg|exp_avg_sq: array}`` of a torch Adam/AdamW optimiser."""
    out = {}
    for group in optimizer.param_groups:
        for param in group["params"]:
            for key, value in optimizer.state.get(param, {}).items():
                out[f"{names[id(param)]}/{key}"] = _tensor(value)
    return out


def optimizer_hyperparameters(optimizer) -> list[dict[str, Any]]:
    groups = []
    for group in optimizer.param_groups:
        entry = {}
        for key, value in group.items():
            if key == "params":
                continue
            if hasattr(value, "item"):
                value = value.item()
            if isinstance(value, tuple):
                value = list(value)
            entry[key] = value
        entry["optimizer"] = type(optimizer).__name__
        groups.append(entry)
    return groups


class Case:
    """One recorded learner: how to snapshot it and what its update calls are."""

    def __init__(
        self,
        name: str,
        learner: Any,
        modules: dict[str, Any],
        tensors: dict[str, Callable[[], Any]],
        optimizers: dict[str, tuple[Any, dict[int, str]]],
    ) -> None:
        self.name = name
        self.learner = learner
        self.modules = modules
        self.tensors = tensors
        self.optimizers = optimizers

    def snapshot(self) -> dict[str, np.ndarray]:
        out = {}
        for prefix, module in self.modules.items():
            for key, value in module.state_dict().items():
                out[f"{prefix}.{key}"] = _tensor(value)
        for key, getter in self.tensors.items():
            out[key] = _tensor(getter())
        for prefix, (optimizer, names) in self.optimizers.items():
            for key, value in optimizer_snapshot(optimizer, names).items():
                out[f"{prefix}/{key}"] = value
        return out


def param_names(prefix: str, module) -> dict[int, str]:
    return {id(p): f"{prefix}.{name}" for name, p in module.named_parameters()}


# --------------------------------------------------------------------------- perturbation
def perturb_(module, generator, scale: float) -> None:
    """Add seeded noise to every floating parameter and buffer (not the constant buffers)."""
    import torch

    constants = {"q_support", "support", "action_scale", "action_bias", "zeta_cdf"}
    with torch.no_grad():
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            leaf = name.rsplit(".", 1)[-1]
            if leaf in constants or not tensor.is_floating_point():
                continue
            noise = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype)
            if leaf == "running_var" or leaf in ("noise_scales",):
                tensor.mul_(torch.exp(0.3 * noise))  # stays positive
            else:
                tensor.add_(scale * noise)


def make_batch(generator, batch: int = BATCH) -> dict[str, Any]:
    """A replay batch with terminations, time-outs and one row that is both."""
    import torch

    def normal(*shape, std=1.0):
        return std * torch.randn(*shape, generator=generator)

    dones = (torch.rand(batch, generator=generator) < 0.25).float()
    truncated = (torch.rand(batch, generator=generator) < 0.2).float()
    dones[0], truncated[0] = 1.0, 1.0  # terminated and truncated: bootstraps
    dones[1], truncated[1] = 1.0, 0.0  # a true termination
    rewards = normal(batch, std=2.0)
    rewards[2] = 40.0  # beyond every support: the projection clips
    return {
        "obs": normal(batch, OBS),
        "critic": normal(batch, CRITIC),
        "actions": torch.rand(batch, ACT, generator=generator) * 1.9 - 0.95,
        "rewards": rewards,
        "next_obs": normal(batch, OBS),
        "next_critic": normal(batch, CRITIC),
        "dones": dones,
        "truncated": truncated,
    }


# --------------------------------------------------------------------------- the learners
def build_fast_sac(use_symmetry: bool, generator) -> tuple[Case, dict[str, Any], dict]:
    import torch

    from unilab.algos.torch.fast_sac.learner import FastSACLearner

    kwargs: dict[str, Any] = dict(
        obs_dim=OBS,
        action_dim=ACT,
        critic_obs_dim=CRITIC,
        device="cpu",
        gamma=0.97,
        tau=0.125,
        actor_lr=3e-4,
        critic_lr=3e-4,
        alpha_lr=3e-4,
        alpha_init=0.001,
        target_entropy_ratio=0.5,
        actor_hidden_dim=32,
        critic_hidden_dim=64,
        num_atoms=21,
        v_min=-20.0,
        v_max=20.0,
        num_q_networks=2,
        use_layer_norm=True,
        use_tanh=True,
        log_std_max=0.0,
        log_std_min=-5.0,
        weight_decay=0.001,
        # With symmetry the case also clips (and reports the gradient norm); without, the
        # reference default: no clipping, and the norm reported as 0.
        max_grad_norm=0.5 if use_symmetry else 0.0,
        use_autotune=True,
        use_symmetry=use_symmetry,
        use_amp=False,
        use_compile=False,
    )
    extra: dict[str, Any] = {}
    augmentation = None
    if use_symmetry:
        augmentation, extra["symmetry"] = build_symmetry()
    learner = FastSACLearner(**kwargs, symmetry_augmentation=augmentation)
    perturb_(learner.actor, generator, 0.05)
    perturb_(learner.qnet, generator, 0.05)
    learner.qnet_target.load_state_dict(learner.qnet.state_dict())
    perturb_(learner.qnet_target, generator, 0.02)
    with torch.no_grad():
        learner.log_alpha.fill_(math.log(0.05))
    case = Case(
        "fast_sac_symmetry" if use_symmetry else "fast_sac",
        learner,
        {"actor": learner.actor, "qnet": learner.qnet, "qnet_target": learner.qnet_target},
        {"log_alpha": lambda: learner.log_alpha},
        {
            "actor_optimizer": (learner.actor_optimizer, param_names("actor", learner.actor)),
            "q_optimizer": (learner.q_optimizer, param_names("qnet", learner.qnet)),
            "alpha_optimizer": (learner.alpha_optimizer, {id(learner.log_alpha): "log_alpha"}),
        },
    )
    extra["target_entropy"] = learner.target_entropy
    return case, kwargs, extra


def build_hora_sac(generator) -> tuple[Case, dict[str, Any], dict]:
    """HORA-SAC (``unilab.algos.torch.hora.sac_learner.HoraSACLearner``): FastSAC's case with
    the privileged actor, whose encoder reads the critic's last ``CRITIC - OBS`` columns. The
    encoder's widths end at the embedding's (16, 4 -> embedding 4), as the recipe's 256-128-9
    does (no projection layer)."""
    import torch

    from unilab.algos.torch.hora.sac_learner import HoraSACLearner

    kwargs: dict[str, Any] = dict(
        obs_dim=OBS,
        critic_obs_dim=CRITIC,
        priv_info_dim=CRITIC - OBS,
        action_dim=ACT,
        device="cpu",
        actor_hidden_dim=32,
        priv_info_embed_dim=4,
        priv_mlp_hidden_dims=[16, 4],
        gamma=0.97,
        tau=0.125,
        actor_lr=4.5e-4,
        critic_lr=4.5e-4,
        alpha_lr=3e-4,
        alpha_init=0.001,
        target_entropy_ratio=0.0,
        critic_hidden_dim=64,
        num_atoms=21,
        v_min=-20.0,
        v_max=20.0,
        num_q_networks=2,
        use_layer_norm=True,
        log_std_max=0.0,
        log_std_min=-5.0,
        weight_decay=0.001,
        max_grad_norm=0.0,
        use_autotune=True,
        use_amp=False,
        use_compile=False,
    )
    learner = HoraSACLearner(**kwargs)
    perturb_(learner.actor, generator, 0.05)
    perturb_(learner.qnet, generator, 0.05)
    learner.qnet_target.load_state_dict(learner.qnet.state_dict())
    perturb_(learner.qnet_target, generator, 0.02)
    with torch.no_grad():
        learner.log_alpha.fill_(math.log(0.05))
    case = Case(
        "hora_sac",
        learner,
        {"actor": learner.actor, "qnet": learner.qnet, "qnet_target": learner.qnet_target},
        {"log_alpha": lambda: learner.log_alpha},
        {
            "actor_optimizer": (learner.actor_optimizer, param_names("actor", learner.actor)),
            "q_optimizer": (learner.q_optimizer, param_names("qnet", learner.qnet)),
            "alpha_optimizer": (learner.alpha_optimizer, {id(learner.log_alpha): "log_alpha"}),
        },
    )
    return case, kwargs, {"target_entropy": learner.target_entropy}


def build_symmetry() -> tuple[Any, dict[str, Any]]:
    """The reference's G1 augmentation on a four-actuator model, and its signed permutations."""
    import mujoco
    import torch
    from unilab.envs.locomotion.g1.symmetry import G1SymmetryAugmentation

    model = mujoco.MjModel.from_xml_string(_MJCF)
    augmentation = G1SymmetryAugmentation(model, dict(OBS_LAYOUTS), device="cpu")

    def as_signed_permutation(fn: Callable[[Any], Any], dim: int) -> dict[str, list]:
        matrix = fn(torch.eye(dim)).numpy()  # row i: the mirror of unit vector e_i
        out = matrix.T  # out[j, i]: coefficient of x[i] in mirrored x[j]
        index = [int(np.argmax(np.abs(row))) for row in out]
        sign = [float(out[j, index[j]]) for j in range(dim)]
        rebuilt = np.zeros_like(out)
        rebuilt[np.arange(dim), index] = sign
        assert np.array_equal(rebuilt, out), "the mirror is not a signed permutation"
        return {"index": index, "sign": sign}

    maps = {
        "obs": as_signed_permutation(lambda x: augmentation.mirror_obs(x, obs_group="obs"), OBS),
        "critic": as_signed_permutation(
            lambda x: augmentation.mirror_obs(x, obs_group="critic"), CRITIC
        ),
        "action": as_signed_permutation(augmentation.mirror_action, ACT),
    }
    description = {
        "class": "unilab.envs.locomotion.g1.symmetry.G1SymmetryAugmentation",
        "actuators": [
            mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(model.nu)
        ],
        "obs_layouts": {k: [list(p) for p in v] for k, v in OBS_LAYOUTS.items()},
        "batch_multiplier": augmentation.batch_multiplier,
        "maps": maps,
        "rule": "mirror(x)[..., j] = sign[j] * x[..., index[j]]; update_critic trains on "
        "cat([batch, mirror(batch)]) (rewards, dones, truncated repeated), update_actor on "
        "cat([obs, mirror(obs)]) and cat([critic, mirror(critic)])",
    }
    return augmentation, description


def build_fast_td3(generator) -> tuple[Case, dict[str, Any], dict]:
    import torch

    from unilab.algos.torch.fast_td3.learner import FastTD3Learner

    kwargs: dict[str, Any] = dict(
        obs_dim=OBS,
        action_dim=ACT,
        critic_obs_dim=CRITIC,
        num_envs=8,
        device="cpu",
        gamma=0.97,
        tau=0.1,
        actor_lr=3e-4,
        critic_lr=3e-4,
        actor_hidden_dim=32,
        critic_hidden_dim=64,
        num_atoms=21,
        v_min=-10.0,
        v_max=10.0,
        init_scale=0.01,
        log_std_min=-1.6,
        log_std_max=-0.22,
        weight_decay=0.1,
        use_cdq=True,
        policy_noise=0.2,
        noise_clip=0.5,
        policy_frequency=2,
        max_iterations=50000,
        obs_normalization=True,
    )
    learner = FastTD3Learner(**kwargs)
    for module in (learner.actor, learner.qnet):
        perturb_(module, generator, 0.05)
    with torch.no_grad():  # an output layer that saturates some actions (tanh, then clamp)
        learner.actor.fc_mu[0].weight.mul_(30.0)
    learner.qnet_target.load_state_dict(learner.qnet.state_dict())
    perturb_(learner.qnet_target, generator, 0.02)
    # Prior statistics, so the update merges into a non-empty normaliser.
    learner.obs_normalizer.update(1.5 * torch.randn(24, OBS, generator=generator) + 0.3)
    case = Case(
        "fast_td3",
        learner,
        {
            "actor": learner.actor,
            "actor_target": learner.actor_target,
            "qnet": learner.qnet,
            "qnet_target": learner.qnet_target,
            "obs_normalizer": learner.obs_normalizer,
        },
        {},
        {
            "actor_optimizer": (learner.actor_optimizer, param_names("actor", learner.actor)),
            "q_optimizer": (learner.q_optimizer, param_names("qnet", learner.qnet)),
        },
    )
    return case, kwargs, {}


def build_flash_sac(generator) -> tuple[Case, dict[str, Any], dict]:
    import torch

    from unilab.algos.torch.flash_sac.learner import FlashSACLearner

    kwargs: dict[str, Any] = dict(
        obs_dim=OBS,
        action_dim=ACT,
        critic_obs_dim=CRITIC,
        device="cpu",
        gamma=0.97,
        tau=0.05,
        actor_lr=3e-4,
        critic_lr=3e-4,
        actor_hidden_dim=16,
        critic_hidden_dim=16,
        actor_num_blocks=2,
        critic_num_blocks=2,
        num_atoms=21,
        critic_min_v=-5.0,
        critic_max_v=5.0,
        temp_initial_value=0.01,
        temp_target_sigma=0.15,
        temp_target_entropy=None,
        actor_bc_alpha=0.0,
        actor_noise_zeta_mu=2.0,
        actor_noise_zeta_max=16,
        learning_rate_init=3e-4,
        learning_rate_peak=3e-4,
        learning_rate_end=1.5e-4,
        learning_rate_warmup_steps=0,
        learning_rate_decay_steps=10,
        normalize_reward=True,
        normalized_g_max=5.0,
        n_step=1,
        obs_normalization=False,
        use_amp=False,
        use_compile=False,
    )
    learner = FlashSACLearner(**kwargs)
    for module in (learner.actor, learner.critic):
        perturb_(module, generator, 0.1)
        module.normalize_parameters()
    learner.target_critic.load_state_dict(learner.critic.state_dict())
    perturb_(learner.target_critic, generator, 0.05)
    learner.target_critic.normalize_parameters()
    with torch.no_grad():
        learner.temperature.log_temp.fill_(math.log(0.05))
    # Reward statistics from a short feed of 8 envs over 6 steps, with episode ends.
    feed_rewards = 3.0 * torch.randn(6, 8, generator=generator) + 1.0
    feed_dones = (torch.rand(6, 8, generator=generator) < 0.25).float()
    before = {k: _tensor(v) for k, v in _reward_stats(learner).items()}
    learner.update_reward_stats(feed_rewards, feed_dones)
    extra = {
        "target_entropy": learner.target_entropy,
        "reward_feed": {
            "rewards": _tensor(feed_rewards),
            "dones": _tensor(feed_dones),
            "stats_before": before,
        },
    }
    case = Case(
        "flash_sac",
        learner,
        {
            "actor": learner.actor,
            "critic": learner.critic,
            "target_critic": learner.target_critic,
            "temperature": learner.temperature,
        },
        {f"reward_normalizer.{k}": (lambda k=k: _reward_stats(learner)[k]) for k in _REWARD_KEYS},
        {
            "actor_optimizer": (learner.actor_optimizer, param_names("actor", learner.actor)),
            "critic_optimizer": (learner.critic_optimizer, param_names("critic", learner.critic)),
            "temperature_optimizer": (
                learner.temperature_optimizer,
                param_names("temperature", learner.temperature),
            ),
        },
    )
    return case, kwargs, extra


_REWARD_KEYS = ("rms.mean", "rms.var", "rms.count", "g_r", "g_r_max")


def _reward_stats(learner) -> dict[str, Any]:
    normalizer = learner.reward_normalizer
    return {
        "rms.mean": normalizer.rms.mean,
        "rms.var": normalizer.rms.var,
        "rms.count": normalizer.rms.count,
        "g_r": normalizer.g_r,
        "g_r_max": normalizer.g_r_max,
    }


def learning_rates(case: Case) -> dict[str, float]:
    return {
        name: float(optimizer.param_groups[0]["lr"])
        for name, (optimizer, _) in case.optimizers.items()
    }


# --------------------------------------------------------------------------- recording
def record(case: Case, kwargs: dict[str, Any], extra: dict, seed: int, out_dir: Path) -> Path:
    import torch

    generator = torch.Generator().manual_seed(seed + 1)
    learner = case.learner
    for _ in range(WARMUP_UPDATES):  # the reference's own updates: moments, schedules, stats
        warm = make_batch(generator)
        learner.update_critic(warm)
        learner.update_actor(warm)
        learner.soft_update_target()

    batch = make_batch(generator)
    arrays: dict[str, np.ndarray] = {f"batch/{k}": _tensor(v) for k, v in batch.items()}
    metrics: dict[str, dict[str, float]] = {}
    lrs = {"before": learning_rates(case)}
    previous = case.snapshot()
    arrays.update({f"state/before/{k}": v for k, v in previous.items()})
    changed: dict[str, list[str]] = {}
    log = DrawLog()
    with log.installed():
        for call in CALL_ORDER:
            log.phase = call
            result = getattr(learner, call)(batch) if call != "soft_update_target" else None
            if call == "soft_update_target":
                learner.soft_update_target()
            log.phase = None
            if result is not None:
                metrics[call] = {k: float(v) for k, v in result.items()}
            current = case.snapshot()
            diff = [
                k
                for k, v in current.items()
                if k not in previous or not np.array_equal(v, previous[k], equal_nan=True)
            ]
            changed[call] = diff
            arrays.update({f"state/{call}/{k}": current[k] for k in diff})
            lrs[call] = learning_rates(case)
            previous = current
    for i, value in enumerate(log.values):
        arrays[f"draws/{i}"] = value
    for call, values in metrics.items():
        for name, value in values.items():
            arrays[f"metrics/{call}/{name}"] = np.asarray(value, np.float64)
    if "reward_feed" in extra:
        feed = extra.pop("reward_feed")
        arrays["reward_feed/rewards"] = feed["rewards"]
        arrays["reward_feed/dones"] = feed["dones"]
        for k, v in feed["stats_before"].items():
            arrays[f"reward_feed/before/{k}"] = v
        extra["reward_feed"] = (
            "before the warm-up: update_reward_stats(reward_feed/rewards [S, N], "
            "reward_feed/dones [S, N]) on the fresh normaliser reward_feed/before/*"
        )

    meta = {
        "reference": "github.com/unilabsim/UniLab",
        "commit": REF_COMMIT,
        "case": case.name,
        "class": f"{type(learner).__module__}.{type(learner).__qualname__}",
        "constructor": kwargs,
        "call_order": list(CALL_ORDER),
        "stages": list(STAGES),
        "changed": changed,
        "metrics": metrics,
        "draws": log.calls,
        "learning_rates": lrs,
        "optimizers": {
            name: optimizer_hyperparameters(optimizer)
            for name, (optimizer, _) in case.optimizers.items()
        },
        "seed": seed,
        "warmup_updates": WARMUP_UPDATES,
        "torch": torch.__version__,
        "num_threads": torch.get_num_threads(),
        "regenerate": REGENERATE,
        **extra,
    }
    arrays["meta_json"] = np.asarray(json.dumps(meta, indent=1, sort_keys=True))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{case.name}.npz"
    np.savez_compressed(path, **arrays)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output folder (tests/golden/learners)")
    parser.add_argument("--ref-root", default=os.environ.get("UNILAB_REF_ROOT", DEFAULT_REF_ROOT))
    args = parser.parse_args()

    import torch

    import unilab

    source = Path(unilab.__file__).resolve()
    if Path(args.ref_root).resolve() not in source.parents:
        sys.exit(f"`unilab` is {source}, not the reference under {args.ref_root}: wrong venv")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    builders = {
        "fast_sac": (lambda g: build_fast_sac(False, g), 1),
        "fast_sac_symmetry": (lambda g: build_fast_sac(True, g), 2),
        "fast_td3": (build_fast_td3, 3),
        "flash_sac": (build_flash_sac, 4),
        "hora_sac": (build_hora_sac, 5),
    }
    for name, (build, seed) in builders.items():
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        case, kwargs, extra = build(generator)
        path = record(case, kwargs, extra, seed, Path(args.out))
        print(f"{name}: {path} ({path.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
