"""The tiny pendulum run several test files train (one definition, so their compiled programs
are shared through the persistent compile cache): 8 envs, 5-step episodes, 6 iterations."""

from pathlib import Path

from unilab_jax.config import TrainConfig
from unilab_jax.training.checkpoint import read_meta

TINY = TrainConfig(
    env="PendulumSwingup",
    algo="sac",
    num_envs=8,
    replay_buffer_n=16,
    batch_size=32,
    updates_per_step=2,
    policy_frequency=2,
    learning_starts=3,
    max_iterations=6,
    log_interval=2,
    save_interval=0,
    eval_envs=0,
    env_overrides={"episode_length": 5},
)
TINY_SAC = {"actor_hidden_dim": 16, "critic_hidden_dim": 32, "num_atoms": 11}


def array_checksums(checkpoint: Path) -> dict:
    """``(item, array) -> checksum`` of every array of one checkpoint folder (its
    ``meta`` item): two checkpoints hold the same state bit for bit when these are equal."""
    checkpoint = Path(checkpoint)
    items = read_meta(checkpoint.parent, int(checkpoint.name))["items"]
    return {
        (item, name): e["checksum"] for item, arrays in items.items() for name, e in arrays.items()
    }
