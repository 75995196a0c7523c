"""``FlashSACLearner`` takes the reference UniLab's constructor (unilabsim/UniLab @ 9aa57115,
``src/unilab/algos/torch/flash_sac/learner.py``, ``FlashSACLearner.__init__``): its arguments,
in its order, with its class defaults, each mapped onto our ``FlashSACConfig`` or refused at
construction with an error naming it; its updates report the reference's metric names (ours
beside them). The reference's values below are read from its source by hand and pinned here.
"""

from __future__ import annotations

import inspect
import math

import pytest
import torch
from torch import nn

from unilab.algos.torch.flash_sac.learner import FlashSACLearner
from unilab.algos.torch.registry import build_learner
from unilab_jax.algos.hyperparams import FlashSACConfig
from unilab_jax.errors import ConfigError

torch.set_num_threads(1)

OBS, CRITIC, ACT = 4, 5, 2
TINY = dict(actor_hidden_dim=16, critic_hidden_dim=16, actor_num_blocks=1, critic_num_blocks=1)
REQUIRED = object()
# The reference's FlashSACLearner.__init__ (src/unilab/algos/torch/flash_sac/learner.py at
# 9aa57115): (name, default) in order; REQUIRED has no default there (ours: `critic_obs_dim`
# may be left out, it then equals `obs_dim`).
REFERENCE_FLASH = [
    ("obs_dim", REQUIRED), ("action_dim", REQUIRED), ("critic_obs_dim", REQUIRED),
    ("device", "cpu"), ("gamma", 0.99), ("tau", 0.01), ("actor_lr", 3e-4), ("critic_lr", 3e-4),
    ("actor_hidden_dim", 128), ("critic_hidden_dim", 256), ("actor_num_blocks", 2),
    ("critic_num_blocks", 2), ("num_atoms", 101), ("critic_min_v", -5.0), ("critic_max_v", 5.0),
    ("temp_initial_value", 0.01), ("temp_target_sigma", 0.15), ("temp_target_entropy", None),
    ("actor_bc_alpha", 0.0), ("actor_noise_zeta_mu", 2.0), ("actor_noise_zeta_max", 16),
    ("learning_rate_init", 3e-4), ("learning_rate_peak", 3e-4), ("learning_rate_end", 1.5e-4),
    ("learning_rate_warmup_steps", 0), ("learning_rate_decay_steps", 500000),
    ("normalize_reward", True), ("normalized_g_max", 5.0), ("n_step", 1),
    ("obs_normalization", False), ("use_amp", False), ("amp_dtype", "auto"),
    ("use_compile", False),
]  # fmt: skip
# What the reference's class does with those defaults, read from the same file and its
# network.py / layers.py / update.py: all three Adam optimisers at learning_rate_peak, a
# cosine to learning_rate_end over learning_rate_decay_steps, the temperature learnt after
# every actor step from temp_initial_value, no weight decay or clipping, two critics, the
# BatchNorm momentum 0.01, the actor's log-std range [-10, 2]; target entropy
# action_dim * log(2 pi e sigma^2) / 2.
REFERENCE_CONFIG = dict(
    gamma=0.99, tau=0.01, actor_lr=3e-4, critic_lr=3e-4, alpha_lr=3e-4, lr_decay_steps=500000,
    lr_final_ratio=0.5, alpha_init=0.01, target_entropy_std=0.15, use_autotune=True,
    weight_decay=0.0, max_grad_norm=0.0, actor_hidden_dim=128, critic_hidden_dim=256,
    num_blocks=2, num_q_networks=2, num_atoms=101, v_min=-5.0, v_max=5.0, g_max=5.0,
    reward_scaling=True, batch_norm_momentum=0.01, log_std_min=-10.0, log_std_max=2.0,
    noise_repeat_max=16, noise_repeat_exponent=2.0,
)  # fmt: skip
# The keys the reference's updates return (its update_critic / update_actor).
REFERENCE_CRITIC_METRICS = {"critic_loss", "reward_scale_std"}
REFERENCE_ACTOR_METRICS = {"actor_loss", "actor_entropy", "temperature", "temperature_loss"}


def gaussian_entropy(std: float, dims: int = ACT) -> float:
    return dims * 0.5 * math.log(2.0 * math.pi * math.e * std * std)


def batch(rows: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(rows, OBS, generator=g),
        "critic": torch.randn(rows, CRITIC, generator=g),
        "actions": torch.rand(rows, ACT, generator=g) * 2 - 1,
        "rewards": torch.randn(rows, generator=g),
        "next_obs": torch.randn(rows, OBS, generator=g),
        "next_critic": torch.randn(rows, CRITIC, generator=g),
        "dones": torch.zeros(rows),
        "truncated": torch.zeros(rows),
    }


def config_of(**kwargs) -> FlashSACConfig:
    return FlashSACLearner(OBS, ACT, CRITIC, **{**TINY, **kwargs}).config


# --- the constructor and its defaults -----------------------------------------------------------


def test_the_constructor_starts_with_the_references_arguments_in_order_with_its_defaults():
    params = list(inspect.signature(FlashSACLearner).parameters.values())
    assert [p.name for p in params[: len(REFERENCE_FLASH)]] == [n for n, _ in REFERENCE_FLASH]
    for param, (name, default) in zip(params, REFERENCE_FLASH, strict=False):
        if default is not REQUIRED:
            assert param.default == default, name
    # Ours come after them, keyword-only: a reference script's positional arguments mean the
    # same here.
    assert all(p.kind is p.KEYWORD_ONLY for p in params[len(REFERENCE_FLASH) :])


def test_the_references_defaults_give_the_references_settings():
    learner = FlashSACLearner(obs_dim=OBS, action_dim=ACT, critic_obs_dim=CRITIC, device="cpu")
    assert learner.config == FlashSACConfig(**REFERENCE_CONFIG)
    assert learner.config == FlashSACConfig()  # our config's defaults are the same values
    assert learner.target_entropy == pytest.approx(gaussian_entropy(0.15), rel=1e-12)
    for optimizer in (learner.actor_optimizer, learner.q_optimizer, learner.alpha_optimizer):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(3e-4, rel=1e-6)
    assert float(learner.alpha) == pytest.approx(0.01, rel=1e-6)
    # The reference's attributes: dims, discount, rate, and what its defaults switch off.
    assert (learner.obs_dim, learner.action_dim, learner.critic_obs_dim) == (OBS, ACT, CRITIC)
    assert (learner.gamma, learner.tau, learner.n_step, learner.actor_bc_alpha) == (
        0.99, 0.01, 1, 0.0,
    )  # fmt: skip
    assert (learner.use_amp, learner.amp_dtype, learner.use_compile) == (False, "auto", False)
    assert isinstance(learner.obs_normalizer, nn.Identity)  # as the reference's without one
    assert learner.update_count == 0


# --- each reference argument, mapped --------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "want"),
    [
        (dict(gamma=0.97, tau=0.05), dict(gamma=0.97, tau=0.05)),
        (dict(critic_min_v=-3.0, critic_max_v=7.0), dict(v_min=-3.0, v_max=7.0)),
        (dict(temp_initial_value=0.05), dict(alpha_init=0.05)),
        (dict(temp_target_sigma=0.3), dict(target_entropy_std=0.3)),
        (dict(actor_num_blocks=3, critic_num_blocks=3), dict(num_blocks=3)),
        (dict(actor_noise_zeta_mu=1.5, actor_noise_zeta_max=8),
         dict(noise_repeat_exponent=1.5, noise_repeat_max=8)),
        (dict(normalize_reward=False, normalized_g_max=3.0), dict(reward_scaling=False, g_max=3.0)),
        (dict(num_atoms=51), dict(num_atoms=51)),
        # One rate for all three optimisers, learning_rate_peak; actor_lr / critic_lr unused.
        (dict(learning_rate_peak=1e-3, learning_rate_end=2e-4, learning_rate_decay_steps=1000,
              actor_lr=5e-4, critic_lr=7e-4),
         dict(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3, lr_final_ratio=0.2,
              lr_decay_steps=1000)),
        # learning_rate_peak <= 0: actor_lr for all three (critic_lr still unused).
        (dict(learning_rate_peak=0.0, actor_lr=2e-3, critic_lr=9e-4, learning_rate_end=1e-3),
         dict(actor_lr=2e-3, critic_lr=2e-3, alpha_lr=2e-3, lr_final_ratio=0.5)),
        (dict(learning_rate_decay_steps=0), dict(lr_decay_steps=1)),  # the reference's floor
        (dict(learning_rate_init=1e-5), dict(actor_lr=3e-4)),  # read by a warm-up only
        # Ours, keyword-only: each optimiser its own rate.
        (dict(learning_rate_peak=None, actor_lr=1e-3, critic_lr=2e-3, alpha_lr=4e-3),
         dict(actor_lr=1e-3, critic_lr=2e-3, alpha_lr=4e-3, lr_final_ratio=0.15)),
    ],
)  # fmt: skip
def test_each_reference_argument_sets_its_config_field(given, want):
    config = config_of(**given)
    got = {name: getattr(config, name) for name in want}
    assert got == pytest.approx(want, rel=1e-12)


def test_temp_target_entropy_is_the_target_entropy():
    learner = FlashSACLearner(OBS, ACT, CRITIC, temp_target_entropy=-2.5, **TINY)
    assert learner.target_entropy == -2.5
    # The config (and so the JAX core) holds the std whose Gaussian has that entropy.
    std = learner.config.target_entropy_std
    assert gaussian_entropy(std) == pytest.approx(-2.5, rel=1e-12)
    sigma = FlashSACLearner(OBS, ACT, CRITIC, temp_target_sigma=0.3, **TINY)
    assert sigma.target_entropy == pytest.approx(gaussian_entropy(0.3), rel=1e-12)


def test_amp_and_compile_are_ignored_on_a_cpu_as_the_reference_ignores_them():
    for amp_dtype in ("auto", "fp16", "BF16"):
        learner = FlashSACLearner(
            OBS, ACT, CRITIC, device="cpu", use_amp=True, amp_dtype=amp_dtype, use_compile=True,
            **TINY,
        )  # fmt: skip
        assert (learner.use_amp, learner.use_compile, learner.amp_dtype) == (
            False, False, amp_dtype,
        )  # fmt: skip
        assert "critic_loss" in learner.update_critic(batch())


def test_the_configs_names_are_accepted_and_agree_with_the_references():
    """``build_learner`` passes a config's fields by our names; a setting given under both
    names must agree."""
    config = FlashSACConfig(
        actor_lr=1e-3, critic_lr=2e-3, alpha_lr=5e-3, lr_final_ratio=0.3, v_min=-3.0,
        num_blocks=1, noise_repeat_max=4, actor_hidden_dim=16, critic_hidden_dim=16,
    )  # fmt: skip
    assert build_learner("flash_sac", config, OBS, CRITIC, ACT).config == config
    assert config_of(v_min=-3.0, critic_min_v=-3.0).v_min == -3.0
    with pytest.raises(ConfigError, match=r"v_min=-1.0 .* critic_min_v=-3.0 .* differently"):
        config_of(v_min=-1.0, critic_min_v=-3.0)


# --- refused ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "option"),
    [
        (dict(learning_rate_warmup_steps=100), "learning_rate_warmup_steps"),
        (dict(n_step=3), "n_step"),
        (dict(actor_bc_alpha=0.1), "actor_bc_alpha"),
        (dict(obs_normalization=True), "obs_normalization"),
        (dict(actor_num_blocks=2, critic_num_blocks=3), "critic_num_blocks"),
        (dict(learning_rate_end=6e-4), "learning_rate_end"),  # above the peak: a rising cosine
        (dict(learning_rate_end=0.0), "learning_rate_end"),  # decays to zero
        (dict(device="cuda", use_amp=True), "use_amp"),  # refused before any CUDA call
        (dict(device="xpu", use_amp=True), "use_amp"),
        (dict(device="cuda", use_compile=True), "use_compile"),
    ],
)
def test_a_reference_setting_we_cannot_reproduce_is_refused_naming_it(given, option):
    with pytest.raises(ConfigError) as error:
        FlashSACLearner(OBS, ACT, CRITIC, **{**TINY, **given})
    message = str(error.value)
    assert message.startswith(f"FlashSACLearner({option}=") and "is not supported" in message
    assert f"pass {option}" in message or "pass a " in message or "pass the same" in message
    assert isinstance(error.value, ValueError)


def test_an_invalid_value_names_the_references_argument_too():
    with pytest.raises(ValueError, match="FlashSAC amp_dtype must be one of: auto, fp16, bf16"):
        FlashSACLearner(OBS, ACT, CRITIC, amp_dtype="tf32", **TINY)  # on every device
    with pytest.raises(
        ConfigError, match=r"noise_repeat_exponent \(the reference's actor_noise_zeta_mu\) is 1.0"
    ):
        FlashSACLearner(OBS, ACT, CRITIC, actor_noise_zeta_mu=1.0, **TINY)
    with pytest.raises(ConfigError, match=r"v_min \(the reference's critic_min_v\) is 5.0"):
        FlashSACLearner(OBS, ACT, CRITIC, critic_min_v=5.0, **TINY)


# --- the update metrics -------------------------------------------------------------------------


def test_updates_report_the_references_metric_names_and_ours():
    learner = FlashSACLearner(OBS, ACT, CRITIC, num_envs=2, **TINY)
    learner.observe_rewards(torch.tensor([[1.0, 3.0], [2.0, -1.0]]), torch.zeros(2, 2))
    critic = learner.update_critic(batch())
    assert critic.keys() >= REFERENCE_CRITIC_METRICS
    assert critic["critic_loss"] == critic["qf_loss"]
    assert critic["reward_scale_std"] == pytest.approx(math.sqrt(float(learner.reward_stats.var)))
    assert critic["reward_scale_std"] != 1.0 and "reward_scale" in critic  # ours: the divisor
    alpha = float(learner.alpha)
    actor = learner.update_actor(batch())
    assert actor.keys() >= REFERENCE_ACTOR_METRICS
    assert actor["temperature"] == pytest.approx(alpha)  # before the temperature step
    assert actor["alpha"] == pytest.approx(float(learner.alpha)) != actor["temperature"]
    assert actor["actor_entropy"] == actor["policy_entropy"]
    assert actor["temperature_loss"] == actor["alpha_loss"]
    plain = FlashSACLearner(OBS, ACT, CRITIC, normalize_reward=False, **TINY)
    assert plain.update_critic(batch())["reward_scale_std"] == 1.0  # as the reference's
