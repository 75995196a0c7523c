"""FastSAC in PyTorch with UniLab's learner contract (reference §2.1), matched to `unilab_jax`.

Per critic step (`update_critic`): `a', logpi' ~ pi(.|s')` from the *current* actor;
`r' = r - gamma * bootstrap * alpha * logpi'` (entropy folded into the reward); each *target*
net i projects its own next distribution (no min over critics); loss
`sum_i mean_b CE(target_i, max(log_softmax(online_i), -30))`; AdamW(0.9, 0.95, wd). Then, with
`use_autotune`, the temperature step `-alpha * mean(logpi' + target_entropy)` (AdamW with no
decay, i.e. Adam). Per actor step: `mean(alpha * logpi - mean_i Q_i(s, a))`.
`soft_update_target`: Polyak averaging of the critic only (no target actor).

The update maths is a transcription of `unilab_jax.algos.sac` (same formulas, same operation
order, same 1e-6 constants); `unilab.algos.torch.convert` moves weights, optimiser moments and
normaliser statistics between the two exactly. The learner keeps its hyperparameters as a
`SACConfig` (`config`).

Subclasses (HORA-SAC's `HoraSACLearner`) change the actor through three hooks: `config_cls`
(with `_more_config`), `_build_actor`, and `_actor_input`, the actor's rows of a normalised
batch (FastSAC: `obs` / `next_obs` themselves).

The constructor is the reference's (its parameters, order and defaults; then ours:
`obs_normalization`, `noise_correlation`, `mirror`). Its defaults are the reference's class
defaults, which are `SACConfig`'s except `obs_normalization`: off here, as the reference's
FastSAC has no normaliser, on in the core's config and presets. A learner built for one of our
runs takes every value from its config (`unilab.algos.torch.registry.build_learner`). A batch
without a key an update reads raises `common.batch.MissingBatchKeyError` (a `KeyError`), as
the reference; `use_symmetry=True` without `mirror` or `symmetry_augmentation` fails here, at
construction; an `amp_dtype` other than auto / fp16 / bf16 too (`resolve_amp_dtype`), on every
device.

Deliberate deviations from the reference, all matching the JAX core:
- `obs_normalization=True` (ours) really normalises: one `EmpiricalNormalization` for actor
  inputs (`obs_normalizer`) and one for critic inputs (`critic_normalizer`); the reference had
  none. Statistics change only through `update_normalizers(obs, critic)`, which the runner
  calls with freshly collected observations, never inside `update_critic`.
- `use_tanh=False` (a Gaussian without squashing) is refused (`ValueError`): there is one SAC
  actor, the core's tanh-squashed one, shared by the collector, the "mjx" backend,
  `load_policy` and exports.
- A step (critic, actor or temperature) is skipped when its loss *or* its gradient norm is
  non-finite; metrics still report the computed values.
- `critic_grad_norm` / `actor_grad_norm` are always the pre-clipping global norm.
- `update_critic(batch, noise=None)` / `update_actor(batch, noise=None)` accept the standard
  normal `[B, A]` draw, so a test can feed both frameworks the same noise.
- Symmetry augmentation (`use_symmetry=True` with `mirror`, the task's `MirrorMap`, or the
  reference's `symmetry_augmentation` contract) trains each update on the first half of the
  rows it is given plus their mirrors, as the JAX core does: a gradient step sees as many rows
  as `update_critic` was given (the reference's runner halved `batch_size` and its learner
  doubled the batch back; `common.symmetry`). An explicit `noise` `[B, A]` covers the
  augmented rows.
- AMP as the reference: `use_amp=True` autocasts on CUDA / XPU only (elsewhere it is ignored
  and `learner.use_amp` is False, there too), in bf16 (`amp_dtype` auto / bf16) or in fp16,
  whose losses a `torch.amp.GradScaler` (`learner.scaler`) scales (`guarded_step`'s `scaler`:
  gradients unscaled before norm and clipping; a step with an overflow skipped and the scale
  halved). The reference used a scaler on CUDA only; ours on XPU's fp16 too. The CPU tests
  run both autocast paths on CPU torch by adding "cpu" to `AMP_DEVICES`. `use_compile` (CUDA
  only) and `world_size > 1` (gradient all-reduce; `torch.distributed` must be initialised)
  follow the reference but are not exercised by the CPU tests.
- The checkpoint adds `obs_normalizer` and `critic_normalizer` to the reference's keys.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from unilab.algos.torch.common.batch import ACTOR_BATCH_KEYS, CRITIC_BATCH_KEYS
from unilab.algos.torch.common.learner_base import LearnerBase
from unilab.algos.torch.common.networks import (
    DistributionalQNetwork,
    categorical_cross_entropy,
    categorical_projection,
    clipped_target_mass,
    expected_value,
)
from unilab.algos.torch.common.normalization import EmpiricalNormalization, ObsNormalizingLearner
from unilab.algos.torch.common.symmetry import augmented, check_symmetry_source
from unilab.algos.torch.common.updates import (
    AMP_DEVICES,
    metrics_to_floats,
    resolve_amp_dtype,
    sac_optimizers,
    temperature_step,
)
from unilab_jax.algos.hyperparams import SACConfig
from unilab_jax.torch.actors import SACActor, sample_tanh_gaussian

if TYPE_CHECKING:
    from unilab_jax.envs.mirror import MirrorMap

__all__ = [
    "DistributionalQNetwork",
    "FastSACLearner",
    "SACActor",
    "SACCritic",
    "resolve_amp_dtype",
    "sample_tanh_gaussian",
]

_DEFAULTS = SACConfig()
# The learner's keyword arguments that are SACConfig fields. Not among them: betas (the
# default) and the core's learning-rate decay (the reference's learner has no schedule, so this
# one keeps constant rates).
_NOT_ARGS = ("betas", "lr_decay_steps", "lr_final_ratio")
_CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(SACConfig) if f.name not in _NOT_ARGS)
Batch = Mapping[str, torch.Tensor]


class SACCritic(nn.Module):
    """`num_q_networks` independent C51 nets (`qnets.i`), LayerNorm + SiLU."""

    def __init__(
        self,
        n_obs: int,
        n_act: int,
        num_atoms: int = _DEFAULTS.num_atoms,
        v_min: float = _DEFAULTS.v_min,
        v_max: float = _DEFAULTS.v_max,
        hidden_dim: int = _DEFAULTS.critic_hidden_dim,
        num_q_networks: int = _DEFAULTS.num_q_networks,
        use_layer_norm: bool = _DEFAULTS.use_layer_norm,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.qnets = nn.ModuleList(
            DistributionalQNetwork(
                n_obs,
                n_act,
                num_atoms,
                v_min,
                v_max,
                hidden_dim,
                activation="silu",
                use_layer_norm=use_layer_norm,
                norm_slot=True,
                device=device,
            )
            for _ in range(num_q_networks)
        )
        self.register_buffer("q_support", torch.linspace(v_min, v_max, num_atoms, device=device))

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Logits of every net, stacked: `[E, B, K]`."""
        return torch.stack([qnet(obs, actions) for qnet in self.qnets])

    def get_value(self, probs: torch.Tensor) -> torch.Tensor:
        """Expected value of `[..., K]` probabilities over the support."""
        return expected_value(probs, self.q_support)


class FastSACLearner(ObsNormalizingLearner, LearnerBase):
    """FastSAC learner: `actor`, `qnet`, `qnet_target`, `log_alpha`, three optimisers.

    Batches are dicts of tensors with keys `obs, critic, actions, rewards, next_obs,
    next_critic, dones, truncated` (`common.batch`; the actor step reads `obs, critic`).
    Observations are raw; the learner normalises them itself, while `actor` works on normalised
    inputs (act with `actor.explore(learner.obs_normalizer(obs))`). `update_count` counts
    `update_critic` calls.
    """

    #: The hyperparameter dataclass of ``config``: ``SACConfig``, or a subclass of it whose
    #: extra fields ``_more_config`` fills (HORA-SAC's ``HoraSACConfig``).
    config_cls: type[SACConfig] = SACConfig

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        critic_obs_dim: int | None = None,
        device: torch.device | str = "cpu",
        gamma: float = 0.97,
        tau: float = 0.125,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 3e-4,
        alpha_init: float = 0.001,
        target_entropy_ratio: float = 0.0,
        actor_hidden_dim: int = 512,
        critic_hidden_dim: int = 768,
        num_atoms: int = 101,
        v_min: float = -20.0,
        v_max: float = 20.0,
        num_q_networks: int = 2,
        use_layer_norm: bool = True,
        use_tanh: bool = True,
        log_std_max: float = 0.0,
        log_std_min: float = -5.0,
        weight_decay: float = 0.001,
        max_grad_norm: float = 0.0,
        use_autotune: bool = True,
        use_symmetry: bool = False,
        use_amp: bool = False,
        amp_dtype: str = "auto",
        use_compile: bool = False,
        symmetry_augmentation: Any = None,
        world_size: int = 1,
        obs_normalization: bool = False,
        noise_correlation: float = 0.0,
        mirror: MirrorMap | None = None,
    ) -> None:
        given = locals()  # the hyperparameters are SACConfig's fields, by name (betas: default)
        if not use_tanh:
            raise ValueError(
                "FastSACLearner(use_tanh=False) is not supported: there is one SAC actor, the "
                "JAX core's tanh-squashed Gaussian, which the collector's copy, the 'mjx' "
                "backend, checkpoints read by load_policy and exported policies all share (an "
                "unsquashed one would act differently in each); pass use_tanh=True (actions "
                "tanh(u) * action_scale + action_bias)"
            )
        values = {name: given[name] for name in _CONFIG_FIELDS}
        self.config = self.config_cls(**values, **self._more_config())
        self.config.validate()  # one line naming a setting that cannot work, before any net
        self.device = torch.device(device)
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.critic_obs_dim = obs_dim if critic_obs_dim is None else critic_obs_dim
        self.target_entropy = -action_dim * target_entropy_ratio
        self.world_size = world_size
        self.use_tanh = use_tanh
        self.use_symmetry = use_symmetry
        sizes = (obs_dim, self.critic_obs_dim, action_dim)
        check_symmetry_source("FastSACLearner", use_symmetry, mirror, symmetry_augmentation, sizes)
        #: The task's mirror map (``unilab_jax.envs.load(name).mirror``) or None; with
        #: ``use_symmetry`` a learner has it or ``symmetry``.
        self.mirror = mirror
        #: The reference's augmentation contract (``symmetry_augmentation``) or None.
        self.symmetry = symmetry_augmentation
        self.update_count = 0
        self._build_networks()
        optimizers = sac_optimizers(self, self.config.betas)
        self.actor_optimizer, self.q_optimizer, self.alpha_optimizer = optimizers
        self._set_up_amp_and_compile(use_amp, amp_dtype, use_compile)

    def _more_config(self) -> dict[str, Any]:
        """Values of ``config_cls``'s fields beyond ``SACConfig``'s (none for FastSAC)."""
        return {}

    def _build_actor(self) -> nn.Module:
        """The actor the config describes (FastSAC: ``SACActor`` on the observation)."""
        cfg = self.config
        return SACActor(
            self.obs_dim,
            self.action_dim,
            cfg.actor_hidden_dim,
            cfg.use_layer_norm,
            cfg.log_std_min,
            cfg.log_std_max,
            self.device,
            cfg.noise_correlation,
        )

    def _build_networks(self) -> None:
        """Actor, critic ensemble and its target, temperature and the two normalisers."""
        cfg, device = self.config, self.device
        self.actor = self._build_actor()
        self.qnet = SACCritic(
            self.critic_obs_dim,
            self.action_dim,
            cfg.num_atoms,
            cfg.v_min,
            cfg.v_max,
            cfg.critic_hidden_dim,
            cfg.num_q_networks,
            cfg.use_layer_norm,
            device,
        )
        self.qnet_target = copy.deepcopy(self.qnet).requires_grad_(False)
        # Shape [1], as the reference stores it (the JAX state holds a scalar).
        self.log_alpha = torch.tensor(
            [math.log(cfg.alpha_init)], dtype=torch.float32, device=device, requires_grad=True
        )
        self.obs_normalizer = self._make_normalizer(self.obs_dim, cfg.obs_normalization)
        self.critic_normalizer = self._make_normalizer(self.critic_obs_dim, cfg.obs_normalization)

    def _set_up_amp_and_compile(self, use_amp: bool, amp_dtype: str, use_compile: bool) -> None:
        """The reference's rules: autocast on CUDA / XPU only (`use_amp` is ignored, and False,
        elsewhere), `torch.compile` on CUDA only; fp16 scales its losses (`scaler`)."""
        self.amp_dtype = amp_dtype
        self._amp_dtype = resolve_amp_dtype(amp_dtype)  # checked on every device, as the reference
        self._amp = bool(use_amp) and self.device.type in AMP_DEVICES
        self.use_amp = self._amp
        #: fp16 autocast's loss scaler (``torch.amp.GradScaler``, one for both optimisers, as
        #: the reference's on CUDA), else None (bf16 has float32's range: none needed).
        self.scaler = None
        if self._amp and self._amp_dtype == torch.float16:
            self.scaler = torch.amp.GradScaler(self.device.type)
        self.use_compile = bool(use_compile) and self.device.type == "cuda"
        if self.use_compile:
            options = {"triton.cudagraphs": False}
            self.compute_critic_loss = torch.compile(self.compute_critic_loss, options=options)
            self.compute_actor_loss = torch.compile(self.compute_actor_loss, options=options)

    def _make_normalizer(self, dim: int, enabled: bool) -> nn.Module:
        return EmpiricalNormalization(dim, self.device) if enabled else nn.Identity()

    def _autocast(self) -> contextlib.AbstractContextManager:
        if not self._amp:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self._amp_dtype)

    @property
    def alpha(self) -> torch.Tensor:
        """The current temperature `exp(log_alpha)` as a scalar (no gradient)."""
        return self.log_alpha.detach().exp().reshape(())

    # --- the actor's input ---------------------------------------------------------------------

    def _actor_input(self, b: Mapping[str, torch.Tensor], next: bool = False) -> torch.Tensor:
        """The actor's rows of a normalised batch ``b`` (``_normalized``): ``b["obs"]``, or
        ``b["next_obs"]`` with ``next`` (a privileged actor adds columns of the critic's)."""
        return b["next_obs"] if next else b["obs"]

    def actor_input(self, obs: torch.Tensor, critic: torch.Tensor | None = None) -> torch.Tensor:
        """What ``actor`` reads for raw env observations ``obs [M, obs_dim]`` (and ``critic
        [M, critic_obs_dim]``, which FastSAC's actor does not read): ``obs`` normalised with
        the running statistics, as in training."""
        del critic
        with torch.no_grad():
            return self.obs_normalizer(obs)

    def actor_input_statistics(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(mean, std)`` of every column of ``actor``'s input, with which the collector
        normalises it as ``actor_input`` does (``(x - mean) / (std + eps)``); None without
        ``obs_normalization``."""
        if not isinstance(self.obs_normalizer, EmpiricalNormalization):
            return None
        return self.obs_normalizer.mean, self.obs_normalizer.std

    # --- losses ------------------------------------------------------------------------------

    def compute_critic_loss(
        self, batch: Batch, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Distributional critic loss; differentiable in `qnet` only.

        Returns `(loss, aux)` with aux `next_log_prob [B]`, `target_q_max`, `target_q_min`, the
        clipped target mass `target_clip_low` / `target_clip_high`, `target_probs [E, B, K]`.
        """
        b = self._normalized(batch)
        config = self.config
        support = self.qnet.q_support
        with torch.no_grad(), self._autocast():
            next_action, next_log_prob, _ = self.actor.get_actions_and_log_probs(
                self._actor_input(b, next=True), noise
            )
            soft_rewards = b["rewards"] - config.gamma * b["bootstrap"] * self.alpha * next_log_prob
            target_logits = self.qnet_target(b["next_critic"], next_action).float()
            next_probs = torch.softmax(target_logits, dim=-1)
            clip = clipped_target_mass(
                next_probs, soft_rewards, b["bootstrap"], config.gamma, config.v_min,
                config.v_max, support,
            )  # fmt: skip
            target_probs = categorical_projection(
                next_probs,
                soft_rewards,
                b["bootstrap"],
                config.gamma,
                config.v_min,
                config.v_max,
                support,
            )  # [E, B, K]: target net i is the target of online net i
        with self._autocast():
            logits = self.qnet(b["critic"], b["actions"]).float()  # [E, B, K]
        ce = categorical_cross_entropy(target_probs, logits, log_prob_floor=-30.0)  # [E, B]
        loss = torch.sum(torch.mean(ce, dim=-1))
        values = expected_value(target_probs, support)  # [E, B]
        aux = {
            "next_log_prob": next_log_prob.float(),
            "target_q_max": values.max(),
            "target_q_min": values.min(),
            "target_clip_low": clip[0],
            "target_clip_high": clip[1],
            "target_probs": target_probs,
        }
        return loss, aux

    def compute_actor_loss(
        self, batch: Batch, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """`mean(alpha * logpi - mean_i Q_i)`; the gradient is only used for the actor."""
        b = self._normalized(batch, ACTOR_BATCH_KEYS)
        with self._autocast():
            actions, log_prob, log_std = self.actor.get_actions_and_log_probs(
                self._actor_input(b), noise
            )
            logits = self.qnet(b["critic"], actions).float()  # [E, B, K]
        probs = torch.softmax(logits, dim=-1)
        q = torch.mean(expected_value(probs, self.qnet.q_support), dim=0)  # [B]
        log_prob = log_prob.float()
        loss = torch.mean(self.alpha * log_prob - q)
        aux = {
            "policy_entropy": -torch.mean(log_prob).detach(),
            "action_std": torch.mean(torch.exp(log_std.float())).detach(),
        }
        return loss, aux

    # --- the learner contract ----------------------------------------------------------------

    def update_critic(self, batch: Batch, noise: torch.Tensor | None = None) -> dict[str, float]:
        """One critic step, then (with `use_autotune`) one temperature step.

        `noise`: optional standard normal `[B, A]` for the next-action sample.
        """
        loss, aux = self.compute_critic_loss(augmented(self, batch, CRITIC_BATCH_KEYS), noise)
        grad_norm, _ = self._step(loss, self.qnet, self.q_optimizer)
        alpha_loss = torch.zeros((), device=self.device)
        if self.config.use_autotune:
            # -alpha * mean(logpi' + H_target): the mean first, as the JAX core computes it.
            error = torch.mean(aux["next_log_prob"] + self.target_entropy).detach()
            alpha_loss = temperature_step(self, error)
        self.update_count += 1
        return metrics_to_floats(
            {
                "qf_loss": loss,
                "critic_grad_norm": grad_norm,
                "target_q_max": aux["target_q_max"],
                "target_q_min": aux["target_q_min"],
                "target_clip_low": aux["target_clip_low"],
                "target_clip_high": aux["target_clip_high"],
                "alpha_loss": alpha_loss,
                "alpha": self.alpha,
            }
        )

    def update_actor(self, batch: Batch, noise: torch.Tensor | None = None) -> dict[str, float]:
        """One actor step. `noise`: optional standard normal `[B, A]` for the action sample."""
        loss, aux = self.compute_actor_loss(augmented(self, batch, ACTOR_BATCH_KEYS), noise)
        grad_norm, _ = self._step(loss, self.actor, self.actor_optimizer)
        return metrics_to_floats({"actor_loss": loss, "actor_grad_norm": grad_norm, **aux})

    #: The checkpoint: the reference's keys plus the two normalisers, which a reference
    #: checkpoint lacks (`OPTIONAL_CHECKPOINT_KEYS`).
    CHECKPOINT_KEYS = (
        "actor", "qnet", "qnet_target", "log_alpha", "actor_optimizer", "q_optimizer",
        "alpha_optimizer", "update_count", "obs_normalizer", "critic_normalizer",
    )  # fmt: skip
