"""FastTD3 in PyTorch with UniLab's learner contract (reference §2.3), matched to `unilab_jax`.

Per critic step (`update_critic`): target-policy smoothing with the *online* actor,
`a' = clip(mu(s') + clip(policy_noise * N(0, 1), +-noise_clip), -1, 1)`; both target nets
project `r + bootstrap * gamma * Z'`; with clipped double Q (`use_cdq`) the projected
distribution with the lower expected value (per row; ties pick net 2, `where(v1 < v2, p1, p2)`)
is the target of both online nets; loss `CE_1 + CE_2`; AdamW (betas 0.9, 0.999, decay
`weight_decay`) with global-norm clipping. Per actor step: `-mean(min(Q1, Q2))` (the mean of
the two without CDQ). `soft_update_target`: Polyak averaging of the critic only; `actor_target`
exists for checkpoint compatibility and is never updated.

The maths is a transcription of `unilab_jax.algos.td3` (same order of operations);
`unilab.algos.torch.convert` moves the state to and from a `TD3State` exactly. The learner
keeps its hyperparameters as a `TD3Config` (`config`).

The constructor is the reference's (its parameters, order and class defaults; then ours:
`max_grad_norm`, `noise_correlation`, `world_size`, `use_symmetry`, `mirror`). Those defaults
differ from `TD3Config`'s, which are the reference's YAML recipe (tau 0.1, weight decay 0.1,
smoothing noise 0.2 clipped at 0.5, exploration log-std range [-1.6, -0.22], as the core's
presets): a learner built for one of our runs takes every value from its config
(`unilab.algos.torch.registry.build_learner`), never a class default. `policy_frequency` and
`max_iterations` are kept as attributes (the runner's own settings drive the schedule).
`normalize_obs(obs, update=False)` is the reference's. A batch without a key an update reads
raises `common.batch.MissingBatchKeyError` (a `KeyError`), as the reference.

Deliberate deviations from the reference, all matching the JAX core:
- `TD3Actor.noise_scales` is a plain tensor attribute, not a buffer: it is not in the actor's
  `state_dict`, so a weight sync (`actor.load_state_dict(learner.actor.state_dict())`) no longer
  overwrites the collector's per-env scales, and per-env resampling on `dones` persists. A
  reference checkpoint's `noise_scales` / `log_std_min` / `log_std_max` entries are ignored on
  load. The scales resize themselves when `explore` sees a different number of envs.
- Observation normalisation covers actor inputs (`obs_normalizer`) *and* critic inputs
  (`critic_normalizer`); the reference normalised actor inputs only. Statistics change only via
  `update_normalizers(obs, critic)` (freshly collected rows), not inside `update_critic` on
  replay samples; one epsilon (1e-2) for acting and learning.
- Clipping uses `max_grad_norm` (0 = off) instead of "10 whenever weight_decay > 0".
- A step is skipped when the loss *or* the gradient norm is non-finite; a skipped step still
  reports the computed metrics (the reference returned NaNs).
- `update_critic(batch, noise=None)` accepts the standard normal `[B, A]` smoothing draw.
- Symmetry augmentation (`use_symmetry=True` with `mirror`, the task's `MirrorMap`, required
  at construction; the reference offered it for FastSAC only) as in FastSAC and the JAX core:
  each update trains on the first half of its rows plus their mirrors (`common.symmetry`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch
from torch import nn

from unilab.algos.torch.common.batch import ACTOR_BATCH_KEYS, CRITIC_BATCH_KEYS
from unilab.algos.torch.common.learner_base import LearnerBase
from unilab.algos.torch.common.networks import (
    Critic,
    categorical_cross_entropy,
    categorical_projection,
    clipped_target_mass,
    expected_value,
)
from unilab.algos.torch.common.normalization import EmpiricalNormalization, ObsNormalizingLearner
from unilab.algos.torch.common.symmetry import augmented, check_symmetry_source
from unilab.algos.torch.common.updates import adamw, metrics_to_floats
from unilab_jax.algos.hyperparams import TD3Config
from unilab_jax.torch.actors import TD3Actor

if TYPE_CHECKING:
    from unilab_jax.envs.mirror import MirrorMap

__all__ = ["FastTD3Learner", "TD3Actor", "cdq_target"]

# The learner's keyword arguments that are TD3Config fields (the exploration range comes as
# log-stds, log_std_min / log_std_max).
_CONFIG_FIELDS = tuple(
    f.name for f in dataclasses.fields(TD3Config) if f.name not in ("std_min", "std_max")
)
Batch = Mapping[str, torch.Tensor]


def cdq_target(projected: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Clipped double Q on distributions: `[2, B, K]` projections, `[2, B]` their values.

    Per row, the distribution of the net with the lower expected value becomes the target of
    both nets; a tie picks net 2 (`where(v1 < v2, p1, p2)`, as the reference and the JAX core).
    """
    lower = torch.where((values[0] < values[1])[:, None], projected[0], projected[1])  # [B, K]
    return lower.expand_as(projected)


class FastTD3Learner(ObsNormalizingLearner, LearnerBase):
    """FastTD3 learner: `actor`, `actor_target`, twin C51 `qnet` / `qnet_target`, two AdamW.

    Batches are dicts of tensors with keys `obs, critic, actions, rewards, next_obs,
    next_critic, dones, truncated` (`common.batch`; the actor step reads `obs, critic`).
    Observations are raw; `actor` works on normalised inputs
    (`actor.explore(learner.obs_normalizer(obs), dones)`). `update_count` counts
    `update_critic` calls. `soft_update_target` leaves `actor_target` as it is.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        critic_obs_dim: int | None = None,
        num_envs: int = 1024,
        device: torch.device | str = "cpu",
        gamma: float = 0.97,
        tau: float = 0.01,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        actor_hidden_dim: int = 512,
        critic_hidden_dim: int = 1024,
        num_atoms: int = 101,
        v_min: float = -10.0,
        v_max: float = 10.0,
        init_scale: float = 0.01,
        log_std_min: float = -3.0,
        log_std_max: float = 0.0,
        weight_decay: float = 0.001,
        use_cdq: bool = True,
        policy_noise: float = 0.1,
        noise_clip: float = 0.2,
        policy_frequency: int = 2,
        max_iterations: int = 50000,
        obs_normalization: bool = True,
        max_grad_norm: float = 10.0,
        noise_correlation: float = 0.0,
        world_size: int = 1,
        use_symmetry: bool = False,
        mirror: MirrorMap | None = None,
    ) -> None:
        given = locals()  # the hyperparameters are TD3Config's fields, by name
        values = {name: given[name] for name in _CONFIG_FIELDS}
        self.config = TD3Config(
            **values, std_min=math.exp(log_std_min), std_max=math.exp(log_std_max)
        )
        self.config.validate()  # one line naming a setting that cannot work, before any net
        if policy_frequency < 1:
            raise ValueError(f"policy_frequency must be >= 1, got {policy_frequency}")
        self.device = torch.device(device)
        self.world_size = world_size
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.critic_obs_dim = obs_dim if critic_obs_dim is None else critic_obs_dim
        #: The reference's schedule settings, kept as attributes: the update schedule is the
        #: runner's (its own ``policy_frequency``; ``learn(max_iterations)``); a hand-written
        #: loop reads ``policy_frequency`` as the reference's did.
        self.policy_frequency = policy_frequency
        self.max_iterations = max_iterations
        self.update_count = 0
        self.use_symmetry = use_symmetry
        sizes = (obs_dim, self.critic_obs_dim, action_dim)
        check_symmetry_source(
            "FastTD3Learner", use_symmetry, mirror, None, sizes, accepts_contract=False
        )
        #: The task's mirror map (``unilab_jax.envs.load(name).mirror``), needed with
        #: ``use_symmetry``.
        self.mirror = mirror
        self.symmetry = None  # the reference's augmentation contract: FastSAC's only
        cfg = self.config
        self.actor = TD3Actor(
            obs_dim,
            action_dim,
            num_envs,
            init_scale,
            actor_hidden_dim,
            log_std_min,
            log_std_max,
            device,
            noise_correlation,
        )
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.qnet = Critic(
            self.critic_obs_dim, action_dim, num_atoms, v_min, v_max, critic_hidden_dim, device
        )
        self.qnet_target = copy.deepcopy(self.qnet).requires_grad_(False)
        self.obs_normalizer = self._make_normalizer(obs_dim, obs_normalization)
        self.critic_normalizer = self._make_normalizer(self.critic_obs_dim, obs_normalization)
        device, decay = self.device, cfg.weight_decay
        self.actor_optimizer = adamw(self.actor.parameters(), cfg.actor_lr, decay, device)
        self.q_optimizer = adamw(self.qnet.parameters(), cfg.critic_lr, decay, device)

    def _make_normalizer(self, dim: int, enabled: bool) -> nn.Module:
        return EmpiricalNormalization(dim, self.device) if enabled else nn.Identity()

    # --- losses ------------------------------------------------------------------------------

    def compute_critic_loss(
        self, batch: Batch, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Twin distributional loss; differentiable in `qnet` only.

        `noise`: standard normal `[B, A]` (scaled by `policy_noise` and clipped here). Returns
        `(loss, aux)` with aux `qf_max` / `qf_min` (net 1's projected target values, as the
        reference logs) and `target_probs [2, B, K]`.
        """
        b = self._normalized(batch)
        config = self.config
        support = self.qnet.q_support
        with torch.no_grad():
            mu = self.actor(b["next_obs"])
            if noise is None:
                noise = torch.randn_like(mu)
            clipped = torch.clamp(
                noise * config.policy_noise, -config.noise_clip, config.noise_clip
            )
            next_action = torch.clamp(mu + clipped, -1.0, 1.0)
            target_logits = torch.stack(self.qnet_target(b["next_critic"], next_action))
            next_probs = torch.softmax(target_logits, dim=-1)
            clip = clipped_target_mass(
                next_probs, b["rewards"], b["bootstrap"], config.gamma, config.v_min,
                config.v_max, support,
            )  # fmt: skip
            projected = categorical_projection(
                next_probs,
                b["rewards"],
                b["bootstrap"],
                config.gamma,
                config.v_min,
                config.v_max,
                support,
            )  # [2, B, K]
            values = expected_value(projected, support)  # [2, B]
            target_probs = cdq_target(projected, values) if config.use_cdq else projected
        logits = torch.stack(self.qnet(b["critic"], b["actions"]))  # [2, B, K]
        loss = torch.sum(torch.mean(categorical_cross_entropy(target_probs, logits), dim=-1))
        aux = {
            "qf_max": values[0].max(),
            "qf_min": values[0].min(),
            "target_clip_low": clip[0],
            "target_clip_high": clip[1],
            "target_probs": target_probs,
        }
        return loss, aux

    def compute_actor_loss(self, batch: Batch) -> torch.Tensor:
        """`-mean(min(Q1, Q2))` (mean of the two without CDQ); used for the actor only."""
        b = self._normalized(batch, ACTOR_BATCH_KEYS)
        logits = torch.stack(self.qnet(b["critic"], self.actor(b["obs"])))  # [2, B, K]
        q = expected_value(torch.softmax(logits, dim=-1), self.qnet.q_support)  # [2, B]
        q = torch.min(q, dim=0).values if self.config.use_cdq else torch.mean(q, dim=0)
        return -torch.mean(q)

    # --- the learner contract ----------------------------------------------------------------

    def update_critic(self, batch: Batch, noise: torch.Tensor | None = None) -> dict[str, float]:
        """One critic step. `noise`: optional standard normal `[B, A]` smoothing draw."""
        loss, aux = self.compute_critic_loss(augmented(self, batch, CRITIC_BATCH_KEYS), noise)
        grad_norm, _ = self._step(loss, self.qnet, self.q_optimizer)
        self.update_count += 1
        return metrics_to_floats(
            {
                "qf_loss": loss,
                "qf_max": aux["qf_max"],
                "qf_min": aux["qf_min"],
                "target_clip_low": aux["target_clip_low"],
                "target_clip_high": aux["target_clip_high"],
                "critic_grad_norm": grad_norm,
            }
        )

    def update_actor(self, batch: Batch, noise: torch.Tensor | None = None) -> dict[str, float]:
        """One actor step. `noise` is accepted for symmetry with FastSAC and unused."""
        del noise  # the deterministic actor loss draws no noise
        loss = self.compute_actor_loss(augmented(self, batch, ACTOR_BATCH_KEYS))
        grad_norm, _ = self._step(loss, self.actor, self.actor_optimizer)
        return metrics_to_floats({"actor_loss": loss, "actor_grad_norm": grad_norm})

    #: The checkpoint: the reference's keys plus `critic_normalizer`, which a reference
    #: checkpoint lacks (`OPTIONAL_CHECKPOINT_KEYS`).
    CHECKPOINT_KEYS = (
        "actor", "actor_target", "qnet", "qnet_target", "obs_normalizer", "critic_normalizer",
        "actor_optimizer", "q_optimizer", "update_count",
    )  # fmt: skip
