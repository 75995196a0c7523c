"""The reference's `FlashSACLearner` constructor arguments, mapped onto `FlashSACConfig`.

`FlashSACLearner.__init__` takes the reference's arguments (`FlashSACLearner` of UniLab
9aa57115: its arguments, order and class defaults, which are `FlashSACConfig`'s values);
`config_from_arguments` refuses what the learner cannot reproduce and turns the rest into the
learner's `FlashSACConfig` (`config_settings`), naming the reference's argument beside ours
when the config is invalid (`REFERENCE_NAMES`). The update itself is `learner.py`; the
reference's checkpoint (state-dict) names are `reference_names.py`.

Each argument's mapping:

- `critic_min_v` / `critic_max_v` -> `v_min` / `v_max`; `temp_initial_value` -> `alpha_init`;
  `temp_target_sigma` -> `target_entropy_std` (floored at 1e-6, as the reference);
  `temp_target_entropy` (given) -> the target entropy itself, held in `config` as the std whose
  Gaussian has that entropy; `actor_noise_zeta_mu` / `actor_noise_zeta_max` ->
  `noise_repeat_exponent` / `noise_repeat_max`; `normalize_reward` / `normalized_g_max` ->
  `reward_scaling` / `g_max`; `actor_num_blocks` and `critic_num_blocks` -> `num_blocks` (the
  two must be equal: the core has one).
- Learning rates, as the reference: all three optimisers start at `learning_rate_peak` (at
  `actor_lr` when it is <= 0; `actor_lr` / `critic_lr` are otherwise unused, there too) and
  decay on a cosine to `learning_rate_end` over `learning_rate_decay_steps` optimiser steps
  (`lr_final_ratio = learning_rate_end / start`). `learning_rate_init` is read only by a
  warm-up, which is refused, so any value is accepted. `learning_rate_peak=None` (ours): each
  optimiser starts at its own `actor_lr`, `critic_lr`, `alpha_lr`.
- Refused at construction (`unilab_jax.errors.ConfigError`, a `ValueError`, naming the option,
  the reason and what to pass): `learning_rate_warmup_steps > 0`, `n_step != 1`,
  `actor_bc_alpha != 0`, `obs_normalization=True`, `actor_num_blocks != critic_num_blocks`, a
  `learning_rate_end` outside `(0, start]`, and `use_amp=True` / `use_compile=True` on CUDA or
  XPU. On a CPU the reference ignores `use_amp` and `use_compile`, and so does this learner
  (`learner.use_amp` / `use_compile` are then False, as there). `amp_dtype` other than auto /
  fp16 / bf16 raises `ValueError` in the reference's words, on every device.
- After them, keyword-only, ours: `num_envs`, `world_size`, the settings the reference fixes
  (`alpha_lr`, `use_autotune`, `weight_decay`, `max_grad_norm`, `num_q_networks`,
  `batch_norm_momentum`, `log_std_min`, `log_std_max`; defaults: its values) and
  `FlashSACConfig`'s names of the reference's settings above (`v_min`, `alpha_init`,
  `lr_decay_steps`, ...; None: from the reference's argument), which
  `unilab.algos.torch.registry.build_learner` passes to build a learner of a config. One setting
  given under both names with different values raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn

import torch

from unilab.algos.torch.common.updates import AMP_DEVICES, resolve_amp_dtype
from unilab_jax.algos.hyperparams import FlashSACConfig
from unilab_jax.errors import ConfigError

__all__ = ["REFERENCE_NAMES", "config_from_arguments", "config_settings"]

#: `FlashSACConfig`'s fields the reference names otherwise -> the reference's argument(s).
REFERENCE_NAMES = {
    "v_min": "critic_min_v",
    "v_max": "critic_max_v",
    "alpha_init": "temp_initial_value",
    "target_entropy_std": "temp_target_sigma / temp_target_entropy",
    "num_blocks": "actor_num_blocks / critic_num_blocks",
    "noise_repeat_exponent": "actor_noise_zeta_mu",
    "noise_repeat_max": "actor_noise_zeta_max",
    "lr_decay_steps": "learning_rate_decay_steps",
    "lr_final_ratio": "learning_rate_end",
    "actor_lr": "learning_rate_peak / actor_lr",
    "critic_lr": "learning_rate_peak / actor_lr",
    "alpha_lr": "learning_rate_peak / actor_lr",
    "reward_scaling": "normalize_reward",
    "g_max": "normalized_g_max",
}


def _refuse(option: str, value: Any, why: str, instead: str) -> NoReturn:
    raise ConfigError(f"FlashSACLearner({option}={value!r}) is not supported: {why}; {instead}")


def _refuse_unsupported(given: Mapping[str, Any], device: torch.device) -> None:
    """Raise ``ConfigError`` for a reference setting this learner cannot reproduce."""
    resolve_amp_dtype(given["amp_dtype"], "FlashSAC")  # the reference's check, on every device
    if int(given["learning_rate_warmup_steps"]) > 0:
        _refuse(
            "learning_rate_warmup_steps", given["learning_rate_warmup_steps"],
            "the core's schedule (FlashSACConfig) is a cosine decay from the start rate, with "
            "no linear warm-up from learning_rate_init",
            "pass learning_rate_warmup_steps=0 (learning_rate_init is then unused, as in the "
            "reference)",
        )  # fmt: skip
    if given["n_step"] != 1:
        _refuse(
            "n_step", given["n_step"],
            "the reference only raised the target's discount to gamma**n_step over one-step "
            "replay rows, while the core discounts the target and the reward statistics with "
            "one gamma",
            "pass n_step=1 and the gamma you want",
        )  # fmt: skip
    if given["actor_bc_alpha"] != 0:
        _refuse(
            "actor_bc_alpha", given["actor_bc_alpha"],
            "the core's FlashSAC actor loss has no behaviour-cloning term",
            "pass actor_bc_alpha=0.0",
        )  # fmt: skip
    if given["obs_normalization"]:
        _refuse(
            "obs_normalization", given["obs_normalization"],
            "FlashSAC here keeps no running observation normaliser: the networks' input "
            "BatchNorm normalises their inputs (the core's FlashSAC)",
            "pass obs_normalization=False",
        )  # fmt: skip
    if given["actor_num_blocks"] != given["critic_num_blocks"]:
        _refuse(
            "critic_num_blocks", given["critic_num_blocks"],
            f"it differs from actor_num_blocks={given['actor_num_blocks']!r}, and the core "
            "(FlashSACConfig.num_blocks) gives the actor and the critics one depth",
            "pass the same value to both",
        )  # fmt: skip
    if given["use_amp"] and device.type in AMP_DEVICES:
        _refuse(
            "use_amp", given["use_amp"],
            f"mixed precision is not implemented for FlashSAC (its updates run in float32 on "
            f"{device.type})",
            "pass use_amp=False (on a CPU the reference ignores use_amp, and so does this learner)",
        )  # fmt: skip
    if given["use_compile"] and device.type == "cuda":
        _refuse(
            "use_compile", given["use_compile"],
            "torch.compile of FlashSAC's updates is not implemented",
            "pass use_compile=False (eager updates, the same maths; on a CPU the reference "
            "ignores use_compile, and so does this learner)",
        )  # fmt: skip


def _ours_or_reference(
    given: Mapping[str, Any], defaults: Mapping[str, Any], ours: str, reference: str, mapped: Any
) -> Any:
    """``given[ours]`` (FlashSACConfig's name) when given, else ``mapped`` (the value the
    reference's argument ``reference`` gives); both given with different values raise."""
    value = given[ours]
    if value is None:
        return mapped
    if given[reference] != defaults[reference] and value != mapped:
        raise ConfigError(
            f"FlashSACLearner: {ours}={value!r} (FlashSACConfig's name) and "
            f"{reference}={given[reference]!r} (the reference's) set one setting differently; "
            "pass one of them"
        )
    return value


def config_settings(
    given: Mapping[str, Any], defaults: Mapping[str, Any], action_dim: int
) -> tuple[dict[str, Any], float | None]:
    """``FlashSACConfig``'s fields from ``FlashSACLearner``'s arguments ``given`` (its
    ``defaults``), and the target entropy ``temp_target_entropy`` sets (None: from the std)."""

    def pick(ours: str, reference: str, mapped: Any) -> Any:
        return _ours_or_reference(given, defaults, ours, reference, mapped)

    # The rates: the reference steps all three optimisers at one rate, learning_rate_peak (or
    # actor_lr when that is <= 0); `learning_rate_peak=None` (ours): each its own.
    peak = given["learning_rate_peak"]
    if peak is None:
        actor_lr, critic_lr = given["actor_lr"], given["critic_lr"]
    else:
        actor_lr = critic_lr = peak if peak > 0 else given["actor_lr"]
    if not (isinstance(actor_lr, int | float) and math.isfinite(actor_lr) and actor_lr > 0):
        source = "learning_rate_peak" if peak is not None and peak > 0 else "actor_lr"
        raise ConfigError(
            f"FlashSACLearner: {source} is {actor_lr!r}; it must be a positive learning rate"
        )
    alpha_lr = actor_lr if given["alpha_lr"] is None else given["alpha_lr"]
    end, decay = given["learning_rate_end"], given["learning_rate_decay_steps"]
    final_ratio = pick("lr_final_ratio", "learning_rate_end", end / actor_lr)
    if given["lr_final_ratio"] is None and not 0.0 < final_ratio <= 1.0:
        _refuse(
            "learning_rate_end", end,
            f"the core's cosine decays from the start rate ({actor_lr!r}) to a positive share "
            "of it at most 1 (FlashSACConfig.lr_final_ratio in (0, 1]), not to zero or upwards",
            f"pass a learning_rate_end in (0, {actor_lr!r}]",
        )  # fmt: skip
    # The target entropy: the reference's target_entropy when given, else that of a Gaussian of
    # std max(temp_target_sigma, 1e-6) per action dimension; the config holds the std.
    target_entropy = given["temp_target_entropy"]
    if target_entropy is None:
        std = max(float(given["temp_target_sigma"]), 1e-6)
        std = pick("target_entropy_std", "temp_target_sigma", std)
    else:
        target_entropy = float(target_entropy)
        per_dim = target_entropy / action_dim
        std = math.sqrt(math.exp(2.0 * per_dim) / (2.0 * math.pi * math.e))
        std = pick("target_entropy_std", "temp_target_entropy", std)
        if given["target_entropy_std"] is not None:
            target_entropy = None  # (equal to the given entropy: computed from the std)
    settings = dict(
        gamma=given["gamma"],
        tau=given["tau"],
        actor_lr=actor_lr,
        critic_lr=critic_lr,
        alpha_lr=alpha_lr,
        # (the reference's floor of its decay steps: 1)
        lr_decay_steps=pick("lr_decay_steps", "learning_rate_decay_steps", max(int(decay), 1)),
        lr_final_ratio=final_ratio,
        alpha_init=pick("alpha_init", "temp_initial_value", given["temp_initial_value"]),
        target_entropy_std=std,
        use_autotune=given["use_autotune"],
        weight_decay=given["weight_decay"],
        max_grad_norm=given["max_grad_norm"],
        actor_hidden_dim=given["actor_hidden_dim"],
        critic_hidden_dim=given["critic_hidden_dim"],
        num_blocks=pick("num_blocks", "actor_num_blocks", given["actor_num_blocks"]),
        num_q_networks=given["num_q_networks"],
        num_atoms=given["num_atoms"],
        v_min=pick("v_min", "critic_min_v", given["critic_min_v"]),
        v_max=pick("v_max", "critic_max_v", given["critic_max_v"]),
        g_max=pick("g_max", "normalized_g_max", given["normalized_g_max"]),
        reward_scaling=pick("reward_scaling", "normalize_reward", given["normalize_reward"]),
        batch_norm_momentum=given["batch_norm_momentum"],
        log_std_min=given["log_std_min"],
        log_std_max=given["log_std_max"],
        noise_repeat_max=pick(
            "noise_repeat_max", "actor_noise_zeta_max", given["actor_noise_zeta_max"]
        ),
        noise_repeat_exponent=pick(
            "noise_repeat_exponent", "actor_noise_zeta_mu", given["actor_noise_zeta_mu"]
        ),
    )
    return settings, target_entropy


def config_from_arguments(
    given: Mapping[str, Any], defaults: Mapping[str, Any], action_dim: int, device: torch.device
) -> tuple[FlashSACConfig, float | None]:
    """The validated ``FlashSACConfig`` of ``FlashSACLearner``'s arguments ``given`` (its
    ``defaults``) on ``device``, and the target entropy ``temp_target_entropy`` sets (None: from
    the std). Raises ``ConfigError`` for a setting refused or invalid, naming the reference's
    argument beside ours."""
    _refuse_unsupported(given, device)
    settings, target_entropy = config_settings(given, defaults, action_dim)
    config = FlashSACConfig(**settings)
    try:  # one line naming a setting that cannot work, before any net
        config.validate()
    except ConfigError as error:
        message = str(error)
        field = message.split(" ", 1)[0]
        if field in REFERENCE_NAMES:  # "v_min (the reference's critic_min_v) is ..."
            message = f"{field} (the reference's {REFERENCE_NAMES[field]}){message[len(field) :]}"
        raise ConfigError(f"FlashSACLearner: {message}") from None
    return config, target_entropy
