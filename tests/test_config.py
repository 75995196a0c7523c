"""TrainConfig validation: sizes that cannot work fail early with the fix in the message."""

import pytest

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
        ({"policy_frequency": 0}, "policy_frequency must be positive"),
        ({"replay_buffer_n": 2, "num_envs": 16}, "larger than the replay buffer"),
        ({"learning_starts": 5000}, "can never be stored"),
        ({"num_envs": 4095, "num_devices": 2}, "not divisible by num_devices 2"),
        ({"batch_size": 8191, "num_devices": 2}, "batch_size 8191 is not divisible"),
        ({"num_devices": 4}, "xla_force_host_platform_device_count=4"),
        ({"max_iterations": -1}, "max_iterations must be >= 0"),
    ],
)
def test_bad_sizes_fail_with_the_problem_and_the_fix(changes, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        TrainConfig().replace(**changes).validate(available_devices=1)
