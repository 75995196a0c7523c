"""Our learners against the REAL reference UniLab's (unilabsim/UniLab @ 9aa57115), by golden file.

``tests/golden/learners/<case>.npz`` (written by ``bench/reference/golden_learners.py`` in the
reference's own venv; layout in that folder's README) holds one update of the reference's
FastSAC (without and with symmetry), FastTD3 and FlashSAC: the weights and optimiser moments
before it and after each call, the batch, every random draw and the metrics. Each test loads a
case into (a) our torch facade's learner of the same algorithm, built with the recorded
arguments, and (b) the JAX core (through ``unilab.algos.torch.convert``), feeds the recorded
batch and draws (the ``noise`` arguments of both), runs ``update_critic``, ``update_actor`` and
the target update, and compares metrics and every recorded tensor by name.

Tolerance (float32 rounding of two different programs): every tensor and metric to
``RTOL = 1e-5`` of its own scale (``max|ours - ref| / max|ref|``), and the change each call made
(``after - before``) to ``STEP_RTOL`` of that change's scale, which checks the update itself
rather than the weights it moved.

The documented differences between our learners and the reference are applied here,
explicitly, where a case needs them (each named at its use):

- FastSAC: our ``obs_normalization`` works, the reference's flag did not exist / was a no-op: off.
  Symmetry: our update trains on the first half of its rows plus their mirrors (the reference
  doubled the batch it was given), so we are given ``[batch; batch]``. The gradient-norm metrics
  are compared only where the reference clips (it reports 0 otherwise; ours reports the norm).
- FastTD3: the reference clips at norm 10 whenever ``weight_decay > 0``: ours gets
  ``max_grad_norm=10``. It merges the sampled ``obs`` into its actor normaliser inside
  ``update_critic``, with a variance formula of its own (``reference_obs_merge`` checks both
  against the recorded statistics): ours continue from its merged statistics. It normalises no
  critic input: our critic normaliser gets identity statistics (mean 0, ``std + eps == 1``
  exactly). Its exploration buffers (``noise_scales``, ``log_std_*``) are collector state here;
  the JAX core keeps no ``actor_target``.
- FlashSAC: the parameter names differ (``flash_sac.reference_names``); the reference's actor
  samples all ``2B`` rows of ``[s; s']`` in ``update_actor`` and uses the first ``B``: we are
  given those ``B`` draws. Its target critic keeps BatchNorm statistics it never uses (ours
  keeps none). Its ``temperature`` metric is the value before the temperature step (ours
  reports ``alpha`` after it), its ``reward_scale_std`` is ``sqrt(var G)`` (ours reports the
  divisor). Ours has no learning-rate warm-up and one ``num_blocks``. Its reward statistics
  start from a prior count and reset the return one step early (the last test).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from unilab.algos.torch.common.normalization import EmpiricalNormalization
from unilab.algos.torch.convert import (
    jax_flash_sac_to_torch,
    jax_sac_to_torch,
    jax_td3_to_torch,
    torch_flash_sac_to_jax,
    torch_sac_to_jax,
    torch_td3_to_jax,
)
from unilab.algos.torch.fast_sac.learner import FastSACLearner
from unilab.algos.torch.fast_td3.learner import FastTD3Learner
from unilab.algos.torch.flash_sac.learner import FlashSACLearner
from unilab.algos.torch.flash_sac.networks import RewardStatistics
from unilab.algos.torch.flash_sac.reference_names import our_name
from unilab.algos.torch.hora.reference_names import our_actor_name
from unilab.algos.torch.hora.sac_learner import HoraSACLearner
from unilab_jax.algos.agent import Transition
from unilab_jax.algos.flash_sac import make_flash_sac
from unilab_jax.algos.normalizer import NORMALIZER_EPS, NormalizerState
from unilab_jax.algos.sac import make_sac
from unilab_jax.algos.td3 import make_td3
from unilab_jax.envs.mirror import SignedPermutation

torch.set_num_threads(1)

GOLDEN = Path(__file__).parent / "golden" / "learners"
RTOL = 1e-5
# The change one update makes is ~lr x weight, so the float32 rounding of the weights alone
# (2^-24 of them) is ~1e-4 of it, and FlashSAC's weight projection cancels further digits.
STEP_RTOL = 2e-3
# FlashSAC's actor samples with std ~ e^-6: the reference computes the Gaussian term from
# `(u - mean)^2 / var`, which keeps few digits of `u - mean = std * noise` in float32. Rerun in
# float64 (both programs, this golden state), its float32 actor gradient is up to 8e-5 off the
# exact one (ours 2e-6; the two float64 gradients agree to 4e-8, the float32 temperature the
# reference keeps), so its Adam moments of the actor carry ~4e-5 of that noise.
FLASH_RTOL = 1e-4
CALLS = ("update_critic", "update_actor", "soft_update_target")
KEY = jax.random.key(0)  # unused: every draw is given as `noise`


# --- the golden files -----------------------------------------------------------------------


@dataclass
class Golden:
    meta: dict[str, Any]
    batch: dict[str, torch.Tensor]
    states: dict[str, dict[str, np.ndarray]]  # stage -> every tensor at that stage
    draws: list[np.ndarray]
    arrays: dict[str, np.ndarray]

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.meta["constructor"]

    def metrics(self, call: str) -> dict[str, float]:
        return self.meta["metrics"].get(call, {})


@functools.cache
def load_golden(case: str) -> Golden:
    with np.load(GOLDEN / f"{case}.npz") as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta_json"]))
    batch = {
        k.split("/", 1)[1]: torch.from_numpy(v) for k, v in arrays.items() if k.startswith("batch/")
    }
    states, full = {}, {}
    for stage in meta["stages"]:
        prefix = f"state/{stage}/"
        full = {**full, **{k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}}
        states[stage] = full
    draws = [arrays[f"draws/{d['index']}"] for d in meta["draws"]]
    return Golden(meta, batch, states, draws, arrays)


def draw(golden: Golden, phase: str, rows: int | None = None) -> torch.Tensor:
    """The one standard normal draw the reference made in ``phase`` (its first ``rows`` rows)."""
    (entry,) = [d for d in golden.meta["draws"] if d["phase"] == phase]
    assert entry["fn"] in ("Tensor.normal_", "torch.randn_like"), entry
    value = golden.draws[entry["index"]]
    return torch.from_numpy(value if rows is None else value[:rows].copy())


def to_transition(batch: dict[str, torch.Tensor]) -> Transition:
    arr = lambda key: jnp.asarray(batch[key].numpy())  # noqa: E731
    return Transition(
        obs=arr("obs"), critic=arr("critic"), actions=arr("actions"), rewards=arr("rewards"),
        next_obs=arr("next_obs"), next_critic=arr("next_critic"), terminated=arr("dones"),
        truncated=arr("truncated"),
    )  # fmt: skip


# --- reference names <-> our tensors ---------------------------------------------------------
#
# A golden tensor is `component.param` or `optimizer/param/slot` (slot: exp_avg, exp_avg_sq,
# step). `Names` maps a reference parameter or buffer name to our torch name(s): one name, or
# one per ensemble member for the reference's batched `[E, ...]` tensors (FlashSAC's critic);
# `skip` gives the reason for a reference tensor we deliberately do not have.


@dataclass
class Names:
    table: Callable[[str], list[str] | str]
    optimizers: dict[str, str]  # reference optimiser -> ours
    # Why we have no tensor of this reference name (None: we have one).
    skip: Callable[[str], str | None] = lambda name: None


def _resolve(owner: Any, name: str) -> Any:
    node = owner
    for part in name.split("."):
        node = getattr(node, part)
    return node


def _params(learner: Any) -> dict[str, torch.Tensor]:
    out = {"log_alpha": learner.log_alpha} if hasattr(learner, "log_alpha") else {}
    for attr in ("actor", "qnet"):
        out.update({f"{attr}.{n}": p for n, p in getattr(learner, attr).named_parameters()})
    return out


def _targets(names: Names, ref_name: str) -> tuple[list[str], bool]:
    """Our names for a reference tensor name and whether they are ensemble members."""
    ours = names.table(ref_name)
    return ([ours], False) if isinstance(ours, str) else (ours, True)


def load_reference_state(learner: Any, names: Names, state: dict[str, np.ndarray]) -> None:
    """Write every golden tensor into ``learner`` (weights, statistics, optimiser moments)."""
    params = _params(learner)
    moments: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        if "/" in key:
            optimizer, ref_param, slot = key.split("/")
            ours, members = _targets(names, ref_param)
            for e, name in enumerate(ours):
                part = value[e] if members and slot != "step" else value
                moments.setdefault((names.optimizers[optimizer], name), {})[slot] = (
                    torch.tensor(float(part)) if slot == "step" else torch.from_numpy(part.copy())
                )
            continue
        if names.skip(key):
            continue
        ours, members = _targets(names, key)
        with torch.no_grad():
            for e, name in enumerate(ours):
                tensor = _resolve(learner, name)
                part = torch.from_numpy(np.array(value[e] if members else value))
                tensor.copy_(part.reshape(tensor.shape).to(tensor.dtype))
    for (optimizer, name), slots in moments.items():
        getattr(learner, optimizer).state[params[name]] = slots


def read_our_state(learner: Any, names: Names, like: dict[str, np.ndarray]) -> dict:
    """Our values of every golden tensor name in ``like`` (reference layout and dtype)."""
    params = _params(learner)
    out = {}
    for key, ref in like.items():
        if "/" in key:
            optimizer, ref_param, slot = key.split("/")
            ours, members = _targets(names, ref_param)
            state = getattr(learner, names.optimizers[optimizer]).state
            values = [state[params[name]][slot].detach().numpy() for name in ours]
        elif names.skip(key):
            continue
        else:
            ours, members = _targets(names, key)
            values = [_resolve(learner, name).detach().numpy() for name in ours]
        if slot_is_step := ("/" in key and key.endswith("/step")):
            assert len({float(v) for v in values}) == 1, (key, values)
        value = np.stack(values) if members and not slot_is_step else values[0]
        out[key] = np.asarray(value, np.float64).reshape(ref.shape)
    return out


# --- comparison ------------------------------------------------------------------------------


def _scale(x: np.ndarray) -> float:
    return float(np.max(np.abs(x))) if x.size else 0.0


def rel_err(ours: np.ndarray, ref: np.ndarray) -> float:
    ref = np.asarray(ref, np.float64)
    diff = _scale(np.asarray(ours, np.float64) - ref)
    return diff / _scale(ref) if _scale(ref) > 0 else diff


@dataclass
class Errors:
    value: float = 0.0
    step: float = 0.0
    metric: float = 0.0
    where: dict[str, str] | None = None

    def add(self, kind: str, err: float, name: str) -> None:
        self.where = self.where or {}
        if err >= getattr(self, kind):
            setattr(self, kind, err)
            self.where[kind] = name


def compare_stage(
    errors: Errors,
    stage: str,
    previous: str,
    ours: dict[str, np.ndarray],
    ours_before: dict[str, np.ndarray],
    golden: Golden,
) -> None:
    """Every tensor at ``stage``, and the change since ``previous`` of the changed ones."""
    want, want_before = golden.states[stage], golden.states[previous]
    for name, value in ours.items():
        ref = want[name]
        errors.add("value", rel_err(value, ref), f"{stage}:{name}")
        changed = not np.array_equal(ref, want_before[name])
        if changed and not name.endswith("/step"):
            err = rel_err(value - ours_before[name], ref.astype(np.float64) - want_before[name])
            errors.add("step", err, f"{stage}:{name}")
        elif not changed:  # what the reference left alone, ours left alone too
            assert np.array_equal(value, ours_before[name]), f"{stage}: {name} moved"


def compare_metrics(errors: Errors, call: str, ours: dict[str, float], want: dict) -> None:
    for name, ref in want.items():
        assert name in ours, f"{call}: no metric {name} in {sorted(ours)}"
        err = abs(ours[name] - ref) / max(abs(ref), 1e-6)
        errors.add("metric", err, f"{call}:{name}")


def check(errors: Errors, label: str, value_rtol: float) -> None:
    print(f"{label}: value {errors.value:.1e}  step {errors.step:.1e}  metric {errors.metric:.1e}")
    print(f"  worst: {errors.where}")
    assert errors.value <= value_rtol, (label, errors)
    assert errors.metric <= RTOL, (label, errors)
    assert errors.step <= STEP_RTOL, (label, errors)


# --- the algorithms --------------------------------------------------------------------------


@dataclass
class Case:
    """How one golden case runs on our side."""

    build: Callable[[Golden], Any]  # a facade learner, reference state loaded
    names: Names
    # (learner, golden) -> {call: our metrics}, running the three calls on the facade, with
    # `snapshot(call)` called after each.
    run_facade: Callable[..., dict[str, dict[str, float]]]
    run_core: Callable[..., dict[str, dict[str, float]]]
    metric_names: Callable[[Golden, str], dict[str, float]]  # the reference's, by our names
    value_rtol: float = RTOL


def _accepting(
    cls: type, given: dict[str, Any], renamed: dict[str, Any], handled: set[str]
) -> dict[str, Any]:
    """``cls``'s keyword arguments: every recorded one it shares with the reference, then
    ``renamed`` (settings we name or hold differently). Each recorded argument must be shared
    or in ``handled`` (the caller reads it into ``renamed`` or checks its value)."""
    import inspect

    accepted = set(inspect.signature(cls.__init__).parameters)
    unhandled = set(given) - accepted - handled
    assert not unhandled, f"{cls.__name__}: recorded arguments not passed on: {unhandled}"
    return {**{k: v for k, v in given.items() if k in accepted}, **renamed}


# FastSAC -------------------------------------------------------------------------------------

SAC_NAMES = Names(
    table=lambda name: name,  # our modules keep the reference's parameter names
    optimizers={
        "actor_optimizer": "actor_optimizer",
        "q_optimizer": "q_optimizer",
        "alpha_optimizer": "alpha_optimizer",
    },
)


@dataclass(frozen=True)
class Mirror:
    """The learner's view of a ``MirrorMap``: the obs, critic and action maps (the recorded
    augmentation has no qpos / qvel maps)."""

    obs: SignedPermutation
    critic: SignedPermutation
    action: SignedPermutation


def sac_mirror(golden: Golden) -> Mirror:
    """The reference augmentation (recorded as signed permutations) as our mirror map."""
    maps = golden.meta["symmetry"]["maps"]
    perm = {k: SignedPermutation(tuple(v["index"]), tuple(v["sign"])) for k, v in maps.items()}
    return Mirror(perm["obs"], perm["critic"], perm["action"])


def build_sac(golden: Golden) -> FastSACLearner:
    given = golden.kwargs
    assert given["use_tanh"] and not given["use_amp"] and not given["use_compile"]
    symmetry = given["use_symmetry"]
    # Deliberate difference: our obs_normalization really normalises (the reference has none).
    kwargs = _accepting(FastSACLearner, given, {"obs_normalization": False}, {"use_tanh"})
    learner = FastSACLearner(**kwargs, mirror=sac_mirror(golden) if symmetry else None)
    assert learner.target_entropy == golden.meta["target_entropy"]
    load_reference_state(learner, SAC_NAMES, golden.states["before"])
    return learner


def sac_batch(golden: Golden) -> dict[str, torch.Tensor]:
    # Deliberate difference (symmetry): our update trains on the first half of the rows it is
    # given plus their mirrors; the reference doubled the whole batch. Given [batch; batch],
    # ours trains on exactly the reference's [batch; mirror(batch)].
    if golden.kwargs.get("use_symmetry"):
        return {k: torch.cat([v, v]) for k, v in golden.batch.items()}
    return golden.batch


def run_sac_facade(learner, golden, snapshot):
    batch, out = sac_batch(golden), {}
    out["update_critic"] = learner.update_critic(batch, noise=draw(golden, "update_critic"))
    snapshot("update_critic")
    out["update_actor"] = learner.update_actor(batch, noise=draw(golden, "update_actor"))
    snapshot("update_actor")
    learner.soft_update_target()
    snapshot("soft_update_target")
    return out


@functools.cache
def sac_agent_fns(case: str):
    golden = load_golden(case)
    learner = CASES[case].build(golden)  # FastSAC's, or HORA-SAC's (make_sac reads its config)
    mirror = sac_mirror(golden) if golden.kwargs.get("use_symmetry") else None
    agent = make_sac(learner.config, learner.obs_dim, learner.critic_obs_dim, learner.action_dim,
                     mirror=mirror)  # fmt: skip
    return jax.jit(agent.update_critic), jax.jit(agent.update_actor), jax.jit(agent.update_target)


def run_sac_core(learner, golden, snapshot):
    critic, actor, target = sac_agent_fns(golden.meta["case"])
    state, batch, out = torch_sac_to_jax(learner), to_transition(sac_batch(golden)), {}
    noise = jnp.asarray(draw(golden, "update_critic").numpy())
    state, out["update_critic"] = critic(state, batch, KEY, noise=noise)
    snapshot("update_critic", lambda reader: jax_sac_to_torch(state, reader))
    noise = jnp.asarray(draw(golden, "update_actor").numpy())
    state, out["update_actor"] = actor(state, batch, KEY, noise=noise)
    snapshot("update_actor", lambda reader: jax_sac_to_torch(state, reader))
    state = target(state)
    snapshot("soft_update_target", lambda reader: jax_sac_to_torch(state, reader))
    return out


def sac_metrics(golden: Golden, call: str) -> dict[str, float]:
    want = dict(golden.metrics(call))
    if golden.kwargs["max_grad_norm"] <= 0:
        # Deliberate difference: the reference reports 0 without clipping; ours the norm.
        want.pop("critic_grad_norm", None)
        want.pop("actor_grad_norm", None)
    return want


SAC = Case(build_sac, SAC_NAMES, run_sac_facade, run_sac_core, sac_metrics)


# HORA-SAC ------------------------------------------------------------------------------------


# The reference's HoraSACActor names its modules actor_trunk / action_mean_head /
# action_logstd_head; ours (FastSAC's actor with the privileged encoder) net / fc_mu /
# fc_logstd (``hora.reference_names``, which converts a reference checkpoint on load).
# priv_encoder is named alike; the recorded case has no projection layer (its encoder ends at
# the embedding's width, as the recipe's 256-128-9 does).
def _hora_name(name: str) -> str:
    head, _, rest = name.partition(".")
    return f"actor.{our_actor_name(rest)}" if head == "actor" else name


HORA_NAMES = Names(table=_hora_name, optimizers=SAC_NAMES.optimizers)


def _hora_kwargs(golden: Golden) -> dict[str, Any]:
    given = golden.kwargs
    assert not given["use_amp"] and not given["use_compile"]
    renamed = {
        "obs_normalization": False,
        "priv_mlp_hidden_dims": tuple(given["priv_mlp_hidden_dims"]),
    }
    return _accepting(HoraSACLearner, given, renamed, set())


def build_hora(golden: Golden) -> HoraSACLearner:
    learner = HoraSACLearner(**_hora_kwargs(golden))
    assert learner.target_entropy == golden.meta["target_entropy"]
    load_reference_state(learner, HORA_NAMES, golden.states["before"])
    return learner


HORA = Case(build_hora, HORA_NAMES, run_sac_facade, run_sac_core, sac_metrics)


# FastTD3 -------------------------------------------------------------------------------------

TD3_NAMES = Names(
    table=lambda name: name,
    optimizers={"actor_optimizer": "actor_optimizer", "q_optimizer": "q_optimizer"},
    # The reference actor's exploration buffers: collector state / constructor settings here
    # (`TD3Actor.noise_scales` is no buffer, so a weight sync cannot overwrite it).
    skip=lambda name: (
        "exploration state"
        if name.rsplit(".", 1)[-1] in ("noise_scales", "log_std_min", "log_std_max")
        else None
    ),
)
_IDENTITY_STD = np.float32(1.0) - np.float32(NORMALIZER_EPS)  # std + eps == 1 exactly


def build_td3(golden: Golden) -> FastTD3Learner:
    given = golden.kwargs
    kwargs = _accepting(
        FastTD3Learner,
        given,
        # Deliberate difference: the reference clips at 10 whenever weight_decay > 0.
        {"max_grad_norm": 10.0 if given["weight_decay"] > 0 else 0.0, "noise_correlation": 0.0},
        # The update schedule's (`common.updates.run_updates`) and unused by the reference.
        {"policy_frequency", "max_iterations"},
    )
    learner = FastTD3Learner(**kwargs)
    load_reference_state(learner, TD3_NAMES, golden.states["before"])
    # Deliberate difference: the reference normalises no critic input; ours gets identity
    # statistics (x - 0) / (std + eps) with std + eps == 1 in float32: x itself.
    critic = learner.critic_normalizer
    with torch.no_grad():
        critic._mean.zero_()
        critic._std.fill_(float(_IDENTITY_STD))
        critic._var.fill_(float(_IDENTITY_STD * _IDENTITY_STD))
        critic.count.fill_(1.0)
    return learner


def reference_obs_merge(golden: Golden) -> dict[str, np.ndarray]:
    """The actor normaliser's statistics after the reference's ``update_critic``, checked
    against what we know of its merge.

    Two documented differences: the reference merges the *sampled* obs inside
    ``update_critic`` (ours are fed fresh rows, ``update_normalizers``), and its Welford step
    weights the correction term with the *post-merge* mean, ``(batch_mean - new_mean)^2 *
    n_a n_b / n``, where Chan's formula (ours) has the pre-merge one; its variance comes out
    lower whenever the mean moves. Ours merges the same mean and count; the variance is
    checked against the reference's formula, then the update continues from its statistics.
    """
    before, after = golden.states["before"], golden.states["update_critic"]
    x = golden.batch["obs"].numpy().astype(np.float64)
    n_a, n_b = float(before["obs_normalizer.count"]), float(x.shape[0])
    mean_a, var_a = before["obs_normalizer._mean"][0], before["obs_normalizer._var"][0]
    n = n_a + n_b
    mean = mean_a + (x.mean(0) - mean_a) * (n_b / n)
    var = (var_a * n_a + x.var(0) * n_b + (x.mean(0) - mean) ** 2 * (n_a * n_b / n)) / n
    assert rel_err(var, after["obs_normalizer._var"][0]) <= RTOL  # the reference's formula
    chan = EmpiricalNormalization(x.shape[1])
    with torch.no_grad():
        for name in ("_mean", "_var", "_std", "count"):
            getattr(chan, name).copy_(torch.from_numpy(np.array(before[f"obs_normalizer.{name}"])))
    chan.update(golden.batch["obs"])  # ours: same mean and count, Chan's variance
    assert rel_err(chan._mean.numpy(), after["obs_normalizer._mean"]) <= RTOL
    assert float(chan.count) == float(after["obs_normalizer.count"])
    delta = x.mean(0) - mean_a
    want = (var_a * n_a + x.var(0) * n_b + delta**2 * (n_a * n_b / n)) / n
    assert rel_err(chan._var.numpy()[0], want) <= RTOL
    return {k: after[f"obs_normalizer.{k}"] for k in ("_mean", "_var", "_std", "count")}


def run_td3_facade(learner, golden, snapshot):
    batch, out = golden.batch, {}
    # Deliberate difference: the reference merges the sampled obs into its actor normaliser
    # inside update_critic, by its own formula (`reference_obs_merge`); ours is fed rows
    # explicitly. The update continues from the reference's statistics.
    stats = reference_obs_merge(golden)
    with torch.no_grad():
        for name, value in stats.items():
            getattr(learner.obs_normalizer, name).copy_(torch.from_numpy(np.array(value)))
    out["update_critic"] = learner.update_critic(batch, noise=draw(golden, "update_critic"))
    snapshot("update_critic")
    out["update_actor"] = learner.update_actor(batch)
    snapshot("update_actor")
    learner.soft_update_target()
    snapshot("soft_update_target")
    return out


@functools.cache
def td3_agent_fns():
    learner = build_td3(load_golden("fast_td3"))
    agent = make_td3(learner.config, learner.obs_dim, learner.critic_obs_dim, learner.action_dim)
    return jax.jit(agent.update_critic), jax.jit(agent.update_actor), jax.jit(agent.update_target)


def run_td3_core(learner, golden, snapshot):
    critic, actor, target = td3_agent_fns()
    state, batch, out = torch_td3_to_jax(learner), to_transition(golden.batch), {}
    # As on the facade: the statistics of the reference's in-update merge (its formula).
    stats = reference_obs_merge(golden)
    obs_stats = NormalizerState(
        mean=jnp.asarray(stats["_mean"][0]), var=jnp.asarray(stats["_var"][0]),
        count=jnp.asarray(stats["count"], jnp.float32),
    )  # fmt: skip
    state = state.replace(obs_normalizer=obs_stats)
    noise = jnp.asarray(draw(golden, "update_critic").numpy())
    state, out["update_critic"] = critic(state, batch, KEY, noise=noise)
    snapshot("update_critic", lambda reader: jax_td3_to_torch(state, reader))
    state, out["update_actor"] = actor(state, batch, KEY)
    snapshot("update_actor", lambda reader: jax_td3_to_torch(state, reader))
    state = target(state)
    snapshot("soft_update_target", lambda reader: jax_td3_to_torch(state, reader))
    return out


def td3_metrics(golden: Golden, call: str) -> dict[str, float]:
    return dict(golden.metrics(call))


TD3 = Case(build_td3, TD3_NAMES, run_td3_facade, run_td3_core, td3_metrics)


# FlashSAC ------------------------------------------------------------------------------------


def flash_names(num_members: int = 2) -> Names:
    """The reference's FlashSAC names -> ours (the table in
    ``unilab.algos.torch.flash_sac.reference_names``)."""

    def table(name: str) -> list[str] | str:
        return our_name(name, num_members)

    return Names(
        table=table,
        optimizers={
            "actor_optimizer": "actor_optimizer",
            "critic_optimizer": "q_optimizer",
            "temperature_optimizer": "alpha_optimizer",
        },
        skip=flash_skip,
    )


def flash_skip(name: str) -> str | None:
    """The reference's FlashSAC tensors we have no counterpart of, and why."""
    if name.startswith("target_critic.") and ".running_" in name:
        # Its target critic runs in training mode (batch statistics) and keeps running
        # statistics it never reads; ours keeps none.
        return "unused target statistics"
    return {
        "actor.zeta_cdf": "exploration: our actor's hold_probs",
        "target_critic.predictor.support": "the learner's one support",
        "reward_normalizer.g_r": "each env's carried return: only observe_rewards reads it",
    }.get(name)


FLASH_NAMES = flash_names()


def build_flash(golden: Golden) -> FlashSACLearner:
    given = golden.kwargs
    peak = given["learning_rate_peak"]
    # Settings we hold differently, checked to be ones we implement.
    assert given["learning_rate_init"] == peak and given["learning_rate_warmup_steps"] == 0
    assert given["actor_num_blocks"] == given["critic_num_blocks"]
    assert given["temp_target_entropy"] is None and given["actor_bc_alpha"] == 0.0
    assert given["n_step"] == 1 and not given["obs_normalization"]
    assert not given["use_amp"] and not given["use_compile"]  # neither here (CUDA-only there)
    num_envs = golden.arrays["reward_feed/rewards"].shape[1]
    renamed = dict(
        num_envs=num_envs,
        actor_lr=peak,  # the reference steps all three optimisers at learning_rate_peak
        critic_lr=peak,
        alpha_lr=peak,
        lr_decay_steps=given["learning_rate_decay_steps"],
        lr_final_ratio=given["learning_rate_end"] / peak,
        alpha_init=given["temp_initial_value"],
        target_entropy_std=given["temp_target_sigma"],
        num_blocks=given["actor_num_blocks"],
        v_min=given["critic_min_v"],
        v_max=given["critic_max_v"],
        g_max=given["normalized_g_max"],
        reward_scaling=given["normalize_reward"],
        noise_repeat_max=given["actor_noise_zeta_max"],
        noise_repeat_exponent=given["actor_noise_zeta_mu"],
        # The reference's fixed settings (layers.py / learner.py at the recorded commit).
        use_autotune=True, weight_decay=0.0, max_grad_norm=0.0, num_q_networks=2,
        batch_norm_momentum=0.01, log_std_min=-10.0, log_std_max=2.0,
    )  # fmt: skip
    handled = {
        "actor_num_blocks", "critic_num_blocks", "critic_min_v", "critic_max_v",
        "temp_initial_value", "temp_target_sigma", "temp_target_entropy", "actor_bc_alpha",
        "actor_noise_zeta_mu", "actor_noise_zeta_max", "learning_rate_init",
        "learning_rate_peak", "learning_rate_end", "learning_rate_warmup_steps",
        "learning_rate_decay_steps", "normalize_reward", "normalized_g_max", "n_step",
        "obs_normalization", "use_amp", "use_compile",
    }  # fmt: skip
    learner = FlashSACLearner(**_accepting(FlashSACLearner, given, renamed, handled))
    assert math.isclose(learner.target_entropy, golden.meta["target_entropy"], rel_tol=1e-12)
    load_reference_state(learner, FLASH_NAMES, golden.states["before"])
    learner.sync_learning_rates()  # each optimiser's rate at its recorded step count
    lrs = golden.meta["learning_rates"]["before"]
    for ref, ours in FLASH_NAMES.optimizers.items():
        got = getattr(learner, ours).param_groups[0]["lr"]
        assert math.isclose(got, lrs[ref], rel_tol=RTOL), (ref, got, lrs[ref])
    return learner


def run_flash_facade(learner, golden, snapshot):
    batch, out, rows = golden.batch, {}, golden.batch["rewards"].shape[0]
    out["update_critic"] = learner.update_critic(batch, noise=draw(golden, "update_critic"))
    # The reference logs sqrt(var G) of its reward statistics; ours logs the divisor.
    out["update_critic"]["reward_scale_std"] = math.sqrt(float(learner.reward_stats.var))
    snapshot("update_critic")
    alpha_before = float(learner.alpha)
    # Deliberate difference: the reference's actor samples all 2B rows of [s; s'] and uses
    # the first B; ours samples those B.
    out["update_actor"] = learner.update_actor(batch, noise=draw(golden, "update_actor", rows))
    out["update_actor"]["alpha_before"] = alpha_before
    snapshot("update_actor")
    learner.soft_update_target()
    snapshot("soft_update_target")
    return out


@functools.cache
def flash_agent_fns():
    learner = build_flash(load_golden("flash_sac"))
    agent = make_flash_sac(learner.config, learner.obs_dim, learner.critic_obs_dim,
                           learner.action_dim, num_envs=learner.reward_stats.num_envs)  # fmt: skip
    return jax.jit(agent.update_critic), jax.jit(agent.update_actor), jax.jit(agent.update_target)


def run_flash_core(learner, golden, snapshot):
    critic, actor, target = flash_agent_fns()
    state, batch, out = torch_flash_sac_to_jax(learner), to_transition(golden.batch), {}
    rows = golden.batch["rewards"].shape[0]
    noise = jnp.asarray(draw(golden, "update_critic").numpy())
    state, out["update_critic"] = critic(state, batch, KEY, noise=noise)
    out["update_critic"] = {
        **out["update_critic"],
        "reward_scale_std": math.sqrt(float(state.rewards.var)),
    }
    snapshot("update_critic", lambda reader: jax_flash_sac_to_torch(state, reader))
    alpha_before = float(jnp.exp(state.log_alpha))
    noise = jnp.asarray(draw(golden, "update_actor", rows).numpy())
    state, out["update_actor"] = actor(state, batch, KEY, noise=noise)
    out["update_actor"] = {**out["update_actor"], "alpha_before": alpha_before}
    snapshot("update_actor", lambda reader: jax_flash_sac_to_torch(state, reader))
    state = target(state)
    snapshot("soft_update_target", lambda reader: jax_flash_sac_to_torch(state, reader))
    return out


def flash_metrics(golden: Golden, call: str) -> dict[str, float]:
    """The reference's metric names -> ours."""
    renames = {
        "critic_loss": "qf_loss",
        "actor_entropy": "policy_entropy",
        "temperature_loss": "alpha_loss",
        "temperature": "alpha_before",  # the reference reports it before the step
    }
    return {renames.get(k, k): v for k, v in golden.metrics(call).items()}


FLASH = Case(build_flash, FLASH_NAMES, run_flash_facade, run_flash_core, flash_metrics, FLASH_RTOL)


# --- the tests -------------------------------------------------------------------------------


def run_case(case: Case, name: str, backend: str) -> Errors:
    golden = load_golden(name)
    learner = case.build(golden)
    # Every golden tensor we have a counterpart of (optimiser state: always).
    like = {k: v for k, v in golden.states["before"].items() if "/" in k or not case.names.skip(k)}
    errors = Errors()
    ours_before = read_our_state(learner, case.names, like)
    compare_stage(errors, "before", "before", ours_before, ours_before, golden)
    ours: dict[str, dict[str, np.ndarray]] = {"before": ours_before}
    reader = case.build(golden) if backend == "core" else None

    def snapshot(stage: str, write: Callable[[Any], None] | None = None) -> None:
        source = learner
        if write is not None:
            write(reader)
            source = reader
        ours[stage] = read_our_state(source, case.names, like)
        previous = ("before", *CALLS)[list(CALLS).index(stage)]
        compare_stage(errors, stage, previous, ours[stage], ours[previous], golden)

    run = case.run_facade if backend == "facade" else case.run_core
    metrics = run(learner, golden, snapshot)
    for call in ("update_critic", "update_actor"):
        ours_metrics = {k: float(v) for k, v in metrics[call].items()}
        compare_metrics(errors, call, ours_metrics, case.metric_names(golden, call))
    return errors


CASES = {
    "fast_sac": SAC,
    "fast_sac_symmetry": SAC,
    "fast_td3": TD3,
    "flash_sac": FLASH,
    "hora_sac": HORA,
}


@pytest.mark.parity
@pytest.mark.parametrize("backend", ["facade", "core"])
@pytest.mark.parametrize("name", list(CASES))
def test_one_update_matches_the_reference(name: str, backend: str) -> None:
    errors = run_case(CASES[name], name, backend)
    check(errors, f"{name}/{backend}", CASES[name].value_rtol)


def test_golden_files_record_what_the_readme_lists() -> None:
    for name in CASES:
        path = GOLDEN / f"{name}.npz"
        assert path.stat().st_size < 1 << 20, path
        golden = load_golden(name)
        meta = golden.meta
        assert meta["commit"] == "9aa57115" and meta["call_order"] == list(CALLS)
        assert set(golden.batch) == {
            "obs", "critic", "actions", "rewards", "next_obs", "next_critic", "dones", "truncated"
        }  # fmt: skip
        assert [d["phase"] for d in meta["draws"]] == (
            ["update_critic"] if name == "fast_td3" else ["update_critic", "update_actor"]
        )
        for call in CALLS:  # each call changed something, and the target update only targets
            assert meta["changed"][call], (name, call)
        target = "target_critic." if name == "flash_sac" else "qnet_target."
        assert all(k.startswith(target) for k in meta["changed"]["soft_update_target"])


def test_flash_sac_reward_statistics_follow_the_reference_feed() -> None:
    """The reward statistics FlashSAC scales by, fed the recorded env steps (``[S, N]``).

    Two documented differences, applied here: the reference's running statistics start from
    a prior of count 1e-4 (mean 0, variance 1; ours from count 0), and its return recursion
    ``G_t = gamma (1 - d_t) G_{t-1} + r_t`` drops the past at the step that *ends* an episode
    (ours, ``G_t = r_t + gamma (1 - d_{t-1}) G_{t-1}``, at the step after): ours is fed each
    step's end one step earlier, which gives the same returns.
    """
    golden = load_golden("flash_sac")
    gamma = golden.kwargs["gamma"]
    rewards = torch.from_numpy(golden.arrays["reward_feed/rewards"])
    dones = torch.from_numpy(golden.arrays["reward_feed/dones"])
    assert dones[1:].any(), "the feed should end episodes"
    stats = RewardStatistics(rewards.shape[1])
    prior = golden.arrays["reward_feed/before/rms.count"]
    assert float(prior) == np.float32(1e-4)
    stats.count.fill_(float(prior))  # the reference's prior count
    shifted = torch.cat([dones[1:], torch.zeros_like(dones[:1])])  # its step ends, one earlier
    stats.observe(rewards, shifted, gamma)
    want = golden.states["before"]
    pairs = {"mean": "rms.mean", "var": "rms.var", "count": "rms.count", "abs_max": "g_r_max"}
    for ours, ref in pairs.items():
        value = getattr(stats, ours).numpy()
        assert rel_err(value, want[f"reward_normalizer.{ref}"].reshape(value.shape)) <= RTOL, ours
    # Its carried return is the last G itself; ours is already discounted (no end follows).
    assert rel_err(stats.carried.numpy() / gamma, want["reward_normalizer.g_r"]) <= RTOL


def _networks_and_moments(
    state: dict[str, np.ndarray], networks: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, dict[str, dict[str, torch.Tensor]]]]:
    """A golden stage's ``networks`` as state dicts in their recorded order (with the update
    count the checkpoints carry), and each optimiser's moments per parameter name, in the
    order they were recorded (its parameters' order)."""
    tensor = lambda v: torch.from_numpy(np.array(v))  # noqa: E731
    out: dict[str, Any] = {name: {} for name in networks}
    optimisers: dict[str, dict[str, dict[str, torch.Tensor]]] = {}
    for key, value in state.items():
        if "/" in key:
            optimizer, param, slot = key.split("/")
            optimisers.setdefault(optimizer, {}).setdefault(param, {})[slot] = tensor(value)
        elif key.split(".", 1)[0] in out:
            head, name = key.split(".", 1)
            out[head][name] = tensor(value)
    out["update_count"] = 7
    return out, optimisers


def reference_flash_checkpoint(state: dict[str, np.ndarray]) -> dict[str, Any]:
    """A golden FlashSAC stage in the layout of the reference's ``model_<it>.pt``: one state
    dict per network in its recorded order, optimiser states keyed by parameter index (the
    order its optimiser keys were recorded in), the temperature, the reward statistics."""
    tensor = lambda v: torch.from_numpy(np.array(v))  # noqa: E731
    out, optimisers = _networks_and_moments(state, ("actor", "critic", "target_critic"))
    out["temperature"] = {"log_temp": tensor(state["temperature.log_temp"])}
    for optimizer, params in optimisers.items():
        out[optimizer] = {"state": dict(enumerate(params.values())), "param_groups": []}
    out["reward_normalizer"] = {
        "rms": {k: tensor(state[f"reward_normalizer.rms.{k}"]) for k in ("mean", "var", "count")},
        "g_r": tensor(state["reward_normalizer.g_r"]),
        "g_r_max": tensor(state["reward_normalizer.g_r_max"]),
    }
    return out


def test_a_reference_flash_sac_checkpoint_loads_into_our_learner() -> None:
    """``FlashSACLearner.load_state_dict`` reads a reference checkpoint whole: every tensor
    the golden file recorded after the reference's update (weights, BatchNorm statistics,
    each critic member, optimiser moments and steps, temperature, reward statistics) is then
    ours exactly, and our next update runs from it."""
    golden = load_golden("flash_sac")
    stage = golden.states["soft_update_target"]
    learner = build_flash(golden)  # the recorded sizes, at the state before the update
    learner.load_state_dict(reference_flash_checkpoint(stage))
    ours = read_our_state(learner, FLASH_NAMES, stage)
    assert len(ours) > 150
    for key, ours_value in ours.items():
        np.testing.assert_array_equal(ours_value, np.asarray(stage[key], np.float64), key)
    assert learner.update_count == 7
    assert math.isfinite(learner.update_critic(golden.batch)["qf_loss"])
    for support in (torch.linspace(-1.0, 1.0, 21), torch.linspace(-5.0, 5.0, 51)):
        wrong = build_flash(golden)  # other bounds, other atoms: refused, named
        wrong.support = support
        with pytest.raises(ValueError, match="value support"):
            wrong.load_state_dict(reference_flash_checkpoint(stage))


def reference_sac_checkpoint(state: dict[str, np.ndarray], learner: Any) -> dict[str, Any]:
    """A golden FastSAC-layout stage (HORA-SAC's) in the layout of the reference's
    ``model_<it>.pt``: one state dict per network in its recorded order, each optimiser's
    moments keyed by parameter index in the order its keys were recorded (its parameters'
    order), one parameter group over them with our optimiser's hyperparameters."""
    out, optimisers = _networks_and_moments(state, ("actor", "qnet", "qnet_target"))
    out["log_alpha"] = torch.from_numpy(np.array(state["log_alpha"]))
    for optimizer, params in optimisers.items():
        (group,) = getattr(learner, optimizer).state_dict()["param_groups"]
        out[optimizer] = {
            "state": dict(enumerate(params.values())),
            "param_groups": [{**group, "params": list(range(len(params)))}],
        }
    return out


def test_a_reference_hora_sac_checkpoint_loads_into_our_learner() -> None:
    """``HoraSACLearner.load_state_dict`` reads a reference HORA-SAC checkpoint whole: its
    actor's modules renamed and the actor optimiser's moments moved from the reference's
    parameter order (encoder first) to ours (trunk first). Every tensor the golden file
    recorded after the reference's update is then ours exactly. An actor of another layout is
    refused, naming the parameters."""
    golden = load_golden("hora_sac")
    stage = golden.states["soft_update_target"]
    learner = build_hora(golden)
    learner.load_state_dict(reference_sac_checkpoint(stage, learner))
    ours = read_our_state(learner, HORA_NAMES, stage)
    assert len(ours) > 100
    for key, ours_value in ours.items():
        np.testing.assert_array_equal(ours_value, np.asarray(stage[key], np.float64), key)
    assert learner.update_count == 7
    assert math.isfinite(learner.update_critic(golden.batch)["qf_loss"])
    wider = HoraSACLearner(**{**_hora_kwargs(golden), "priv_mlp_hidden_dims": (64, 9)})
    with pytest.raises(ValueError, match="priv_mlp_hidden_dims"):
        wider.load_state_dict(reference_sac_checkpoint(stage, wider))
