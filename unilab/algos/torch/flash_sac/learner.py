"""FlashSAC in PyTorch with the facade's learner contract, matched to `unilab_jax.algos.flash_sac`.

Per critic step (`update_critic`), on rewards divided by `max(sqrt(var G + 1e-8), max|G| /
g_max)` (`reward_stats`, each env's running discounted return, fed by `observe_rewards`):
`a', logpi' ~ pi(.|s')` from the actor on its running statistics; current and next rows go
through each critic as one batch of 2B (both halves share the batch's BatchNorm statistics);
the target critic's next half, per row the member of lowest expected value, is projected at
`r + gamma * bootstrap * (z - alpha * logpi')` onto the fixed support; both online members
regress onto it (mean cross-entropy over members and rows). Per actor step (`update_actor`):
the actor on `[s; s']` in training mode, loss `mean(alpha * logpi - min_i Q_i(s, a))` with the
critics on their running statistics, then (with `use_autotune`) the temperature step
`-alpha * (mean logpi + target_entropy)`. Adam (AdamW with `weight_decay`) whose learning rate
decays on a cosine from its start to `lr_final_ratio` of it over `lr_decay_steps` of its own
steps; after every actor or critic optimiser step the weights are projected back onto their
norm bounds (`networks.project_weights_`). `soft_update_target`: Polyak averaging of the
critic's parameters (the target keeps no BatchNorm statistics: it normalises with the batch's).

The maths is a transcription of the JAX core (same formulas, operation order and constants);
`unilab.algos.torch.convert` moves every weight, BatchNorm statistic, optimiser moment and
count, the temperature and the reward statistics between the two exactly. The learner keeps
its hyperparameters as a `FlashSACConfig` (`config`).

This module is the update itself. Where the other parts live, beside it:
- `reference_arguments.py`: the constructor's arguments, the reference's (`FlashSACLearner` of
  UniLab 9aa57115: its arguments, order and class defaults, which are `FlashSACConfig`'s
  values) then ours, each mapped onto `FlashSACConfig`; the settings refused at construction.
- `reference_names.py`: a reference checkpoint's state-dict names, converted on load.
- `networks.py`: the critic ensemble, weight projection, tanh-Gaussian sample, reward
  statistics and learning-rate schedule (the actor: `unilab_jax.torch.flash_actor`).

Deviations, and where the torch side necessarily differs from the JAX one:
- Learning rates follow the optimiser's own step count: after every step (and every load)
  each optimiser's rate is set to the schedule's value for its next step
  (`sync_learning_rates`, `networks.cosine_lr`: float32 as optax); optax keeps a second,
  always equal count for the schedule, which the converter fills from the Adam count.
- A step whose loss or gradient norm is non-finite is skipped and, as in JAX, the BatchNorm
  statistics its forward pass moved are restored; the weights are projected either way.
- `update_critic(batch, noise=None)` / `update_actor(batch, noise=None)` take the standard
  normal `[B, A]` draw, so a test can feed both frameworks the same noise. (The reference's
  actor step draws for all `2B` rows of `[s; s']` and uses the first `B`; ours draws `B`.)
- The Gaussian log-density is written from the draw, `-(n^2 + 2 log std + log 2 pi) / 2`;
  the reference's `Normal.log_prob(u)` takes `(u - mean)^2 / std^2`, which at this actor's
  small stds keeps few float32 digits (its actor gradient was up to 8e-5 off the exact one).
- Metrics: the reference's names, `critic_loss` and `reward_scale_std` (`sqrt(var G)`; 1
  without `normalize_reward`) from `update_critic`, `actor_loss`, `actor_entropy`,
  `temperature` (before the temperature step) and `temperature_loss` from `update_actor`; and
  ours beside them, shared with FastSAC and the JAX core: `qf_loss`, `policy_entropy`,
  `alpha_loss` (the same values), `alpha` (after the step), `reward_scale` (the divisor), the
  gradient norms, `action_std` and the target's range and clipped mass. The reward statistics
  differ from the reference's as `unilab_jax.algos.reward_scaling` says; they are fed by
  `observe_rewards` (the reference's `update_reward_stats` counted an episode's end one step
  later) and kept as `reward_stats` (the reference's `reward_normalizer`).
- The facade's collector explores as the JAX loop does: uniform random actions until the
  first actor step, then the Zeta-held noise (`FlashSACActor.explore`). The actor's `updates`
  buffer carries the actor optimiser's step count (`sync_learning_rates` sets it after every
  step and load), so the collector's copy learns it with the weights, and a resumed run
  does not restart the warm-up.
- No observation normaliser (the input BatchNorm normalises): `obs_normalizer` /
  `critic_normalizer` are `nn.Identity` (the reference's `obs_normalizer` with
  `obs_normalization=False` too), and `update_normalizers` does nothing. No symmetry
  augmentation, AMP or `torch.compile`.
- A batch without a key an update reads raises `common.batch.MissingBatchKeyError` (a
  `KeyError`), as the reference. The facade's runners and `sample_offpolicy_actions` accept the
  reference's `algo_type="flashsac"` beside our `"flash_sac"`.
- `world_size > 1` averages gradients across ranks; BatchNorm statistics stay per rank (the
  JAX core spans them over devices), and the runner broadcasts rank 0's reward statistics.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from unilab.algos.torch.common.batch import CRITIC_BATCH_KEYS, require_batch_keys
from unilab.algos.torch.common.learner_base import LearnerBase
from unilab.algos.torch.common.networks import (
    bootstrap_mask,
    categorical_cross_entropy,
    categorical_projection,
    clipped_target_mass,
    expected_value,
)
from unilab.algos.torch.common.updates import (
    metrics_to_floats,
    sac_optimizers,
    temperature_step,
)
from unilab.algos.torch.flash_sac.networks import (
    FlashSACCritic,
    RewardStatistics,
    cosine_lr,
    project_weights_,
    running_stats,
    sample_tanh_gaussian,
    without_running_stats,
)
from unilab.algos.torch.flash_sac.reference_arguments import config_from_arguments
from unilab.algos.torch.flash_sac.reference_names import (
    is_reference_checkpoint,
    learner_state_from_reference,
)
from unilab_jax.algos.hyperparams import FlashSACConfig
from unilab_jax.torch.flash_actor import FlashSACActor

__all__ = ["FlashSACActor", "FlashSACCritic", "FlashSACLearner"]

_DEFAULTS = FlashSACConfig()
Batch = Mapping[str, torch.Tensor]
#: The keys FlashSAC's actor step reads, the reference's (it runs the actor on `[s; s']`).
FLASH_ACTOR_BATCH_KEYS = ("obs", "next_obs", "actions", "critic")


class FlashSACLearner(LearnerBase):
    """FlashSAC learner: `actor`, `qnet`, `qnet_target`, `log_alpha`, `reward_stats`, three
    optimisers.

    Batches are dicts of tensors with keys `obs, critic, actions, rewards, next_obs,
    next_critic, dones, truncated` (`common.batch`; the actor step reads
    `FLASH_ACTOR_BATCH_KEYS`); rewards raw (the learner scales them). `num_envs`: the envs
    whose returns `observe_rewards` follows (the runner resizes it to its own); None (the
    default, as the reference takes none): sized by the first rewards observed.
    `update_count` counts `update_critic` calls. The reference's arguments come first, in its
    order and with its defaults; `reference_arguments.py` gives how each maps onto `config`.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        critic_obs_dim: int | None = None,
        device: torch.device | str = "cpu",
        gamma: float = 0.99,
        tau: float = 0.01,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        actor_hidden_dim: int = 128,
        critic_hidden_dim: int = 256,
        actor_num_blocks: int = 2,
        critic_num_blocks: int = 2,
        num_atoms: int = 101,
        critic_min_v: float = -5.0,
        critic_max_v: float = 5.0,
        temp_initial_value: float = 0.01,
        temp_target_sigma: float = 0.15,
        temp_target_entropy: float | None = None,
        actor_bc_alpha: float = 0.0,
        actor_noise_zeta_mu: float = 2.0,
        actor_noise_zeta_max: int = 16,
        learning_rate_init: float = 3e-4,
        learning_rate_peak: float | None = 3e-4,
        learning_rate_end: float = 1.5e-4,
        learning_rate_warmup_steps: int = 0,
        learning_rate_decay_steps: int = 500_000,
        normalize_reward: bool = True,
        normalized_g_max: float = 5.0,
        n_step: int = 1,
        obs_normalization: bool = False,
        use_amp: bool = False,
        amp_dtype: str = "auto",
        use_compile: bool = False,
        *,
        num_envs: int | None = None,
        world_size: int = 1,
        alpha_lr: float | None = None,
        use_autotune: bool = _DEFAULTS.use_autotune,
        weight_decay: float = _DEFAULTS.weight_decay,
        max_grad_norm: float = _DEFAULTS.max_grad_norm,
        num_q_networks: int = _DEFAULTS.num_q_networks,
        batch_norm_momentum: float = _DEFAULTS.batch_norm_momentum,
        log_std_min: float = _DEFAULTS.log_std_min,
        log_std_max: float = _DEFAULTS.log_std_max,
        lr_decay_steps: int | None = None,
        lr_final_ratio: float | None = None,
        alpha_init: float | None = None,
        target_entropy_std: float | None = None,
        num_blocks: int | None = None,
        v_min: float | None = None,
        v_max: float | None = None,
        g_max: float | None = None,
        reward_scaling: bool | None = None,
        noise_repeat_max: int | None = None,
        noise_repeat_exponent: float | None = None,
    ) -> None:
        given = dict(locals())
        self.device = torch.device(device)
        self.config, target_entropy = config_from_arguments(
            given, _signature_defaults(), action_dim, self.device
        )
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.critic_obs_dim = obs_dim if critic_obs_dim is None else critic_obs_dim
        self.world_size = world_size
        # The reference's attributes of what it would not do here (CPU) or what is refused.
        self.use_amp = False
        self.amp_dtype = amp_dtype
        self.use_compile = False
        self.n_step = 1
        self.actor_bc_alpha = 0.0
        if target_entropy is None:
            # The entropy of a Gaussian of std `target_entropy_std` in every action dimension.
            std = self.config.target_entropy_std
            target_entropy = 0.5 * action_dim * math.log(2.0 * math.pi * math.e * std**2)
        self.target_entropy = target_entropy
        self.update_count = 0
        self._build_networks(num_envs)
        self.actor_optimizer, self.q_optimizer, self.alpha_optimizer = sac_optimizers(self)

    @property
    def gamma(self) -> float:
        """The discount (`config.gamma`), the reference's attribute."""
        return self.config.gamma

    @property
    def tau(self) -> float:
        """The target's Polyak rate (`config.tau`), the reference's attribute."""
        return self.config.tau

    def _build_networks(self, num_envs: int | None) -> None:
        """Actor, critic ensemble and its target (projected, as the JAX init), temperature,
        reward statistics, and the identity normalisers."""
        cfg, device = self.config, self.device
        self.actor = FlashSACActor.from_config(cfg, self.obs_dim, self.action_dim, device)
        self.qnet = FlashSACCritic(
            self.critic_obs_dim, self.action_dim, cfg.critic_hidden_dim, cfg.num_blocks,
            cfg.num_atoms, cfg.num_q_networks, cfg.batch_norm_momentum, device,
        )  # fmt: skip
        # As the JAX init: standard normal weights (projected, each output unit's weights are
        # a uniform random direction) and zero biases.
        for module in (self.actor, self.qnet):
            for layer in module.modules():
                if isinstance(layer, nn.Linear):
                    nn.init.normal_(layer.weight)
                    if layer.bias is not None:
                        nn.init.zeros_(layer.bias)
            project_weights_(module)
        self.qnet_target = without_running_stats(copy.deepcopy(self.qnet)).requires_grad_(False)
        self.log_alpha = torch.tensor(
            [math.log(cfg.alpha_init)], dtype=torch.float32, device=device, requires_grad=True
        )  # shape [1] as FastSAC's (the JAX state holds a scalar)
        self.reward_stats = RewardStatistics(num_envs, device)
        self.support = torch.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms, device=device)
        self.obs_normalizer = nn.Identity()
        self.critic_normalizer = nn.Identity()

    @property
    def alpha(self) -> torch.Tensor:
        """The current temperature `exp(log_alpha)` as a scalar (no gradient)."""
        return self.log_alpha.detach().exp().reshape(())

    # --- the statistics the runner feeds -------------------------------------------------------

    def update_normalizers(self, obs: torch.Tensor, critic: torch.Tensor | None = None) -> None:
        """Nothing: FlashSAC has no running observation normaliser."""
        del obs, critic

    def observe_rewards(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        """Merge collected env steps (`[S, num_envs]` rewards and episode ends, in order) into
        the reward statistics (`unilab_jax.algos.agent.Agent.observe_rewards`)."""
        self.reward_stats.observe(rewards, dones, self.config.gamma)

    def reward_scale(self) -> torch.Tensor:
        """The current divisor of the rewards (1 before any return was seen)."""
        return self.reward_stats.scale(self.config.g_max)

    # --- losses ------------------------------------------------------------------------------

    def _prepared(
        self, batch: Batch, keys: tuple[str, ...] = CRITIC_BATCH_KEYS
    ) -> dict[str, torch.Tensor]:
        """The entries ``keys`` of the batch, rewards ``[B]`` scaled (with `reward_scaling`),
        the bootstrap mask from ``dones`` / ``truncated``. A missing key raises
        ``common.batch.MissingBatchKeyError``, as the reference (no fallback)."""
        require_batch_keys(batch, keys, type(self).__name__)
        out = {key: batch[key] for key in keys if key not in ("rewards", "dones", "truncated")}
        if "rewards" in keys:
            rewards = batch["rewards"].reshape(-1).to(torch.float32)
            out["rewards"] = (
                rewards / self.reward_scale() if self.config.reward_scaling else rewards
            )
        if "dones" in keys:
            dones = batch["dones"].reshape(-1)
            out["bootstrap"] = bootstrap_mask(dones, batch["truncated"].reshape(-1))
        return out

    @torch.no_grad()
    def _target(self, b: dict[str, torch.Tensor], obs2, act2, next_log_prob) -> tuple:
        """The projected soft target `[B, K]` from the lowest target member per row, and the
        clipped target mass."""
        cfg, n = self.config, b["rewards"].shape[0]
        next_probs = torch.softmax(self.qnet_target(obs2, act2, train=True)[:, n:], dim=-1)
        lowest = torch.argmin(expected_value(next_probs, self.support), dim=0)  # [B]
        index = lowest[None, :, None].expand(1, *next_probs.shape[1:])
        next_probs = torch.gather(next_probs, 0, index)[0]  # [B, K]
        soft_rewards = b["rewards"] - cfg.gamma * b["bootstrap"] * self.alpha * next_log_prob
        args = (soft_rewards, b["bootstrap"], cfg.gamma, cfg.v_min, cfg.v_max, self.support)
        return categorical_projection(next_probs, *args), clipped_target_mass(next_probs, *args)

    def compute_critic_loss(
        self, batch: Batch, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Cross-entropy of every member against the soft target on `[s; s']` rows (moves the
        critic's BatchNorm statistics). Returns `(loss, aux)`: the target's range and clipped
        mass."""
        b = self._prepared(batch)
        n = b["rewards"].shape[0]
        with torch.no_grad():
            next_mean, next_log_std = self.actor.mean_and_log_std(b["next_obs"])
            if noise is None:
                noise = torch.randn_like(next_mean)
            next_action, next_log_prob = sample_tanh_gaussian(next_mean, next_log_std, noise)
        obs2 = torch.cat([b["critic"], b["next_critic"]])
        act2 = torch.cat([b["actions"], next_action])
        target_probs, (clip_low, clip_high) = self._target(b, obs2, act2, next_log_prob)
        logits = self.qnet(obs2, act2, train=True)
        loss = torch.mean(categorical_cross_entropy(target_probs, logits[:, :n]))
        values = expected_value(target_probs, self.support)
        aux = {
            "target_q_max": values.max(),
            "target_q_min": values.min(),
            "target_clip_low": clip_low,
            "target_clip_high": clip_high,
        }
        return loss, aux

    def compute_actor_loss(
        self, batch: Batch, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """`mean(alpha * logpi - min_i Q_i)` over the current rows; the actor runs on `[s; s']`
        in training mode (moves its BatchNorm statistics). Aux: `log_prob [B]`, entropy, std."""
        b = self._prepared(batch, FLASH_ACTOR_BATCH_KEYS)
        n = b["obs"].shape[0]
        mean, log_std = self.actor.mean_and_log_std(torch.cat([b["obs"], b["next_obs"]]), True)
        if noise is None:
            noise = torch.randn_like(mean[:n])
        action, log_prob = sample_tanh_gaussian(mean[:n], log_std[:n], noise)
        logits = self.qnet(b["critic"], action, train=False)  # [E, B, K]
        q = torch.min(expected_value(torch.softmax(logits, dim=-1), self.support), dim=0).values
        loss = torch.mean(self.alpha * log_prob - q)
        aux = {
            "log_prob": log_prob.detach(),
            "policy_entropy": -torch.mean(log_prob).detach(),
            "action_std": torch.mean(torch.exp(log_std[:n])).detach(),
        }
        return loss, aux

    # --- the learner contract ----------------------------------------------------------------

    def _projected_step(
        self, module: nn.Module, optimizer: torch.optim.Optimizer,
        loss_fn: Callable[[], tuple[torch.Tensor, dict[str, torch.Tensor]]],
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:  # fmt: skip
        """One guarded step of `module` on `loss_fn()` and the next step's rates, then its
        weights projected; the BatchNorm statistics the forward pass moved are restored when
        the step is skipped. Returns `(loss, aux, grad_norm)`."""
        saved = [stat.clone() for stat in running_stats(module)]
        loss, aux = loss_fn()
        grad_norm, stepped = self._step(loss, module, optimizer)
        self.sync_learning_rates()
        if not stepped:
            with torch.no_grad():
                for stat, old in zip(running_stats(module), saved, strict=True):
                    stat.copy_(old)
        project_weights_(module)
        return loss, aux, grad_norm

    def sync_learning_rates(self) -> None:
        """Set each optimiser's learning rate to the cosine schedule's value at the steps it
        has taken (the rate of its next step, as optax's schedule count gives it), and the
        actor's ``updates`` to its optimiser's steps."""
        cfg = self.config
        for optimizer, base_lr in (
            (self.actor_optimizer, cfg.actor_lr),
            (self.q_optimizer, cfg.critic_lr),
            (self.alpha_optimizer, cfg.alpha_lr),
        ):
            steps = {float(s["step"]) for s in optimizer.state.values() if "step" in s}
            step = int(steps.pop()) if steps else 0
            lr = cosine_lr(base_lr, step, cfg.lr_decay_steps, cfg.lr_final_ratio)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if optimizer is self.actor_optimizer:
                self.actor.updates.fill_(step)  # 0: the collector still warms up

    def update_critic(self, batch: Batch, noise: torch.Tensor | None = None) -> dict[str, float]:
        """One critic step. `noise`: optional standard normal `[B, A]` for the next action."""
        loss, aux, grad_norm = self._projected_step(
            self.qnet, self.q_optimizer, lambda: self.compute_critic_loss(batch, noise)
        )  # fmt: skip
        self.update_count += 1
        # The reference's names first (`reward_scale_std`: sqrt(var G), 1 without scaling),
        # then ours (`qf_loss` is `critic_loss`; `reward_scale`: the rewards' divisor).
        scale_std = torch.sqrt(self.reward_stats.var) if self.config.reward_scaling else 1.0
        metrics = {"critic_loss": loss, "reward_scale_std": scale_std, "qf_loss": loss}
        metrics.update(critic_grad_norm=grad_norm, **aux, reward_scale=self.reward_scale())
        return metrics_to_floats(metrics)

    def update_actor(self, batch: Batch, noise: torch.Tensor | None = None) -> dict[str, float]:
        """One actor step, then (with `use_autotune`) one temperature step. `noise`: optional
        standard normal `[B, A]` for the action sample."""
        loss, aux, grad_norm = self._projected_step(
            self.actor, self.actor_optimizer, lambda: self.compute_actor_loss(batch, noise)
        )  # fmt: skip
        log_prob = aux.pop("log_prob")
        alpha_before = self.alpha
        alpha_loss = torch.zeros((), device=self.device)
        if self.config.use_autotune:
            # -alpha * (mean logpi + H_target): the mean first, as the JAX core computes it.
            error = torch.mean(log_prob) + self.target_entropy
            alpha_loss = temperature_step(self, error)
            self.sync_learning_rates()
        # The reference's names first (`temperature`: before the temperature step), then ours
        # (`policy_entropy` is `actor_entropy`, `alpha_loss` is `temperature_loss`; `alpha`:
        # after the step).
        metrics = {
            "actor_loss": loss,
            "actor_entropy": aux["policy_entropy"],
            "temperature": alpha_before,
            "temperature_loss": alpha_loss,
            "actor_grad_norm": grad_norm,
            **aux,
            "alpha_loss": alpha_loss,
            "alpha": self.alpha,
        }
        return metrics_to_floats(metrics)

    #: The checkpoint: networks, temperature, optimisers, reward statistics, update count.
    CHECKPOINT_KEYS = (
        "actor", "qnet", "qnet_target", "log_alpha", "actor_optimizer", "q_optimizer",
        "alpha_optimizer", "reward_stats", "update_count",
    )  # fmt: skip

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore `get_state_dict()` (the reward statistics with their own env count), or a
        reference UniLab FlashSAC checkpoint (`reference_names.learner_state_from_reference`:
        its names and stacked critic members converted, optimiser moments included)."""
        if is_reference_checkpoint(state_dict):
            state_dict = learner_state_from_reference(state_dict, self)
        self.reward_stats.resize(int(state_dict["reward_stats"]["carried"].shape[0]))
        super().load_state_dict(state_dict)
        self.sync_learning_rates()  # (a checkpoint's rates already are)


@functools.cache
def _signature_defaults() -> dict[str, Any]:
    """``FlashSACLearner``'s argument defaults by name."""
    params = inspect.signature(FlashSACLearner.__init__).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
