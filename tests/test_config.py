"""Config validation: sizes and algorithm settings that cannot work fail early, naming the
setting, the value and the valid range or fix."""

import dataclasses

import pytest

from unilab_jax.algos.registry import get_algo
from unilab_jax.config import ConfigError, TrainConfig


def test_defaults_are_the_reference_runner_defaults():
    cfg = TrainConfig()
    assert (cfg.num_envs, cfg.replay_buffer_n, cfg.batch_size) == (4096, 1024, 8192)
    assert (cfg.updates_per_step, cfg.env_steps_per_sync, cfg.learning_starts) == (8, 1, 0)
    assert cfg.resolved_policy_frequency == 4
    assert cfg.replace(algo="td3").resolved_policy_frequency == 2
    cfg.validate(available_devices=1)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"algo": "ppo"}, "unknown algo 'ppo'; choose one of sac, td3"),
        ({"num_envs": 0}, "num_envs must be a positive integer"),
        ({"batch_size": -8}, "batch_size must be a positive integer"),
        ({"updates_per_step": 0}, "updates_per_step must be a positive integer"),
        ({"policy_frequency": 0}, "policy_frequency must be a positive integer"),
        ({"num_envs": True}, "num_envs must be a positive integer, got True"),
        ({"replay_buffer_n": 2, "num_envs": 16}, "larger than the replay buffer"),
        ({"learning_starts": 5000}, "can never be stored"),
        ({"num_envs": 4095, "num_devices": 2}, "not divisible by num_devices 2"),
        ({"batch_size": 8191, "num_devices": 2}, "batch_size 8191 is not divisible"),
        ({"num_devices": 4}, "xla_force_host_platform_device_count=4"),
        ({"max_iterations": -1}, "max_iterations must be >= 0"),
        ({"matmul_precision": "tf32"}, "matmul_precision 'tf32' is not one of highest, high"),
    ],
)
def test_bad_sizes_fail_with_the_problem_and_the_fix(changes, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        TrainConfig().replace(**changes).validate(available_devices=1)


@pytest.mark.parametrize(
    "algo, changes, message",
    [
        ("sac", {"v_min": 10.0, "v_max": 10.0}, r"v_min is 10.0; it must be below v_max \(10.0\)"),
        ("sac", {"v_min": 10.0, "v_max": -10.0}, "v_min is 10.0; it must be below v_max"),
        ("sac", {"gamma": 1.5}, r"gamma is 1.5; it must be in \(0, 1\]"),
        ("td3", {"gamma": -0.5}, r"gamma is -0.5; it must be in \(0, 1\]"),
        ("sac", {"tau": 0.0}, r"tau is 0.0; it must be in \(0, 1\]"),
        ("td3", {"tau": 1.5}, r"tau is 1.5; it must be in \(0, 1\]"),
        ("sac", {"actor_lr": -0.001}, "actor_lr is -0.001; it must be a positive learning rate"),
        ("td3", {"critic_lr": 0.0}, "critic_lr is 0.0; it must be a positive learning rate"),
        ("sac", {"num_atoms": 1}, "num_atoms is 1; it must be an integer >= 2"),
        ("sac", {"actor_hidden_dim": 2}, "actor_hidden_dim is 2; it must be an integer >= 4"),
        ("td3", {"critic_hidden_dim": 3}, "critic_hidden_dim is 3; it must be an integer >= 4"),
        ("sac", {"num_q_networks": 0}, "num_q_networks is 0; it must be an integer >= 1"),
        ("sac", {"lr_decay_steps": -1}, "lr_decay_steps is -1; it must be an integer >= 0"),
        ("sac", {"lr_final_ratio": 0.0}, r"lr_final_ratio is 0.0; it must be in \(0, 1\]"),
        ("sac", {"alpha_init": 0.0}, "alpha_init is 0.0; it must be > 0"),
        ("sac", {"log_std_min": 0.0}, r"log_std_min is 0.0; it must be below log_std_max \(0.0\)"),
        ("sac", {"gamma": float("nan")}, "gamma is nan; it must be a finite number"),
        ("td3", {"std_min": 0.9, "std_max": 0.5}, r"std_min is 0.9; it must be at most std_max"),
        ("td3", {"noise_clip": -0.1}, "noise_clip is -0.1; it must be >= 0"),
    ],
)
def test_bad_algorithm_settings_name_the_setting_value_and_range(algo, changes, message):
    cls = get_algo(algo).config_cls
    cls().validate()  # the defaults are valid
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(cls(), **changes).validate()
