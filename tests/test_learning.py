"""The JAX core learns on CPU: SAC on the pendulum swing-up, TD3 on the Go1 quadruped.

TD3 on the pendulum is proven through the facade (``tests/torch/test_offpolicy_runner.py``,
``sim_backend="mjx"`` runs this same trainer), SAC on Go1 is not asserted (see below).
"""

import numpy as np
import pytest

from unilab_jax.config import TrainConfig
from unilab_jax.envs.robots import RobotAssetError, robot_mjcf_path
from unilab_jax.trainer import Trainer, train

THRESHOLD = 130.0
RANDOM_POLICY_RETURN = 45.0


@pytest.mark.slow
def test_sac_learns_pendulum_swingup():
    """Budget: 1000 iterations x 32 envs = 32,000 env steps (8 updates of batch 256 per
    iteration; about 60-75 s on 2 cores, compile included). Threshold: a deterministic
    evaluation over 64 fresh episodes must average at least 130 (per-step reward in [-0.1, 1],
    200 steps). For reference (64 episodes, see ``unilab_jax/envs/pendulum.py``): a
    uniform-random policy scores about 45, a hand-written energy-pumping + PD controller about
    165. Measured here (seed 0, 2-core CPU): eval 157.7."""
    config = TrainConfig(
        env="PendulumSwingup",
        algo="sac",
        num_envs=32,
        replay_buffer_n=1024,
        batch_size=256,
        updates_per_step=8,
        max_iterations=1000,
        log_interval=50,
        save_interval=0,
        eval_envs=64,
        seed=0,
    )
    result = train(config, {"actor_hidden_dim": 64, "critic_hidden_dim": 128}, quiet=True)
    returns = [h["mean_return"] for h in result.history if h["mean_return"] is not None]
    print(result.summary, [round(r, 1) for r in returns])
    assert result.summary["eval_mean_return"] >= THRESHOLD
    # Periodic evaluation (about 10 per run by default) draws the deterministic policy's curve.
    evals = [(h["iteration"], h["eval_return"]) for h in result.history if "eval_return" in h]
    print("evals", [(i, round(r, 1)) for i, r in evals])
    assert [i for i, _ in evals] == list(range(100, 1001, 100))
    assert evals[-1][1] == result.summary["eval_mean_return"]
    assert evals[0][1] < THRESHOLD <= result.summary["best_eval_return"]
    assert result.summary["eval_time_sec"] < result.summary["training_wall_time_sec"]
    # The training episodes improved too: late returns beat the early ones and random play.
    assert max(returns[-5:]) > RANDOM_POLICY_RETURN + 30
    assert sum(returns[-5:]) / 5 > sum(returns[:3]) / 3 + 50


# Go1JoystickFlat, 200-step episodes, default commands (measured here with 32 envs over whole
# episodes): zero actions (the PD targets hold the standing pose) score 154 (0.77 per step),
# uniform-random actions 35 (most fall: mean episode length 140 of 200 steps; 0.17 per step).
GO1_RANDOM_STEP_REWARD = 0.17


@pytest.mark.slow
def test_td3_on_go1_raises_the_return_of_the_exploring_policy():
    """A short CPU run (600 iterations x 64 envs = 38,400 env steps, 4 updates of batch 512
    per iteration; about 60-90 s on 2 cores, compile included) learns to keep the exploring
    policy on its feet.

    The return measured is the training policy's, with TD3's exploration noise: the per-step
    reward of the collected transitions (the sum of the logged reward components, averaged
    over each 50-iteration block; it does not depend on where episodes start or end) and the
    mean return of the episodes that ended. The untrained actor's output is close to zero, so
    its deterministic policy already stands (eval about 155 over 200 steps); the noise makes it
    fall, and the first updates make it fall more (per-step reward down to about 0.1). TD3 then
    learns to stand under the noise. Walking to the command takes millions of steps, out of
    reach of a CPU test, so the deterministic eval is only asked to stay well above random
    play. Measured here (seed 0 / seed 1): per-step reward 0.41 / 0.46 in the first block,
    lowest block 0.08 / 0.03, last two blocks 0.55 / 0.57; episode returns in the last two
    blocks 80 / 76; deterministic eval 155 -> 144 / 147 -> 102.
    """
    try:
        robot_mjcf_path("go1")
    except RobotAssetError as err:
        pytest.skip(str(err))
    config = TrainConfig(
        env="Go1JoystickFlat",
        algo="td3",
        num_envs=64,
        replay_buffer_n=256,
        batch_size=512,
        updates_per_step=4,
        max_iterations=600,
        log_interval=50,
        save_interval=0,
        eval_envs=32,
        eval_interval=0,  # the final evaluation only: each costs seconds on Go1
        seed=0,
        env_overrides={"episode_length": 200},
    )
    algo_config = {"actor_hidden_dim": 128, "critic_hidden_dim": 256}
    trainer = Trainer(config, algo_config)
    eval_before = trainer.evaluate(trainer.init_state(0), 32, seed=1)
    result = train(config, algo_config, quiet=True, trainer=trainer)
    history = result.history
    step_reward = [sum(h["components"].values()) for h in history]
    returns = [h["mean_return"] for h in history[-2:] if h["mean_return"] is not None]
    eval_after = result.summary["eval_mean_return"]
    print(
        f"go1 td3: eval {eval_before:.1f} -> {eval_after:.1f}; per-step reward "
        f"{[round(r, 3) for r in step_reward]}; last returns {returns}"
    )
    assert result.summary["completed_iterations"] == 600
    assert set(history[-1]["components"]) >= {"reward/tracking_lin_vel", "reward/alive"}
    assert all(np.isfinite(v) for v in history[-1]["learner"].values())
    final = float(np.mean(step_reward[-2:]))
    assert final >= step_reward[0] + 0.08, "the exploring policy did not improve on its start"
    assert final >= min(step_reward[:6]) + 0.3, "no recovery from the early falls"
    assert final >= 3 * GO1_RANDOM_STEP_REWARD
    assert returns and np.mean(returns) >= 2 * 35.0
    assert eval_after >= 2 * 35.0
