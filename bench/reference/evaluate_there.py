"""The walking evaluator, run on the REFERENCE's own env (its venv, its physics, its code).

Runs only in the reference's virtual environment (its top-level package is also ``unilab``;
never import this file from our code or tests)::

    /work/ref/venv/bin/python bench/reference/evaluate_there.py --checkout /work/ref/UniLab \\
        RUN_DIR/model_9000.pt [...] --out rows.json

``bench.reference`` evaluates every policy, the reference's included, on our implementation of
the task (one evaluator, one task). This script answers the question that leaves open: does a
policy score the same on the reference's own env? It applies the same protocol as
``bench.learning.locomotion.walking_figures`` to the env the reference trains on, built from
the run's recorded config (``run_config.json`` beside the checkpoint: task, noise, curriculum,
domain randomisation as trained): one episode in each of ``--episodes`` envs
from the reference's own ``init_state`` (it resets every env to step 0), counted until it
terminates or reaches the time limit. Per checkpoint: the share of episodes that reach the
time limit and the mean linear-velocity tracking term per step (the unweighted
``tracking_lin_vel``, 1 at perfect tracking), the same figures as ours.

The actor is the reference's own (``build_actor`` as its play does), acting deterministically,
or with ``--stochastic`` with its exploring draw, as the reference's collector acts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

TRACKING = "tracking_lin_vel"


def build(checkout: Path, run_config: dict, episodes: int):
    """The run's env (as trained) and an actor builder, through the reference's own code."""
    from omegaconf import OmegaConf

    sys.path.insert(0, str(checkout))
    from scripts.train_offpolicy import (  # the reference's entry point module
        build_offpolicy_env_cfg_override,
        resolve_play_actor_spec,
    )
    from unilab.training import create_env, ensure_registries

    cfg = OmegaConf.create(run_config["config"])
    algo = str(cfg.algo.algo)
    if algo not in ("sac", "flashsac"):
        raise SystemExit(f"evaluate_there: {algo} checkpoints are not supported (sac, flashsac)")
    ensure_registries()
    override = build_offpolicy_env_cfg_override(algo, cfg)
    env = create_env(cfg, num_envs=episodes, env_cfg_override=override)
    obs_dim = int(env.obs_groups_spec["obs"])
    critic_dim = int(env.obs_groups_spec.get("critic", obs_dim))
    action_dim = int(env.action_space.shape[0])
    actor_type, actor_kwargs = resolve_play_actor_spec(
        algo, cfg, obs_dim=obs_dim, critic_obs_dim=critic_dim
    )

    def make_actor():
        from unilab.algos.torch.common.actor_factory import build_actor

        extra = dict(actor_kwargs)
        if algo == "flashsac":
            params = cfg.algo.algo_params
            extra.update(
                actor_num_blocks=params.actor_num_blocks,
                actor_noise_zeta_mu=params.actor_noise_zeta_mu,
                actor_noise_zeta_max=params.actor_noise_zeta_max,
            )
        return build_actor(
            actor_type, obs_dim, action_dim, cfg.algo.actor_hidden_dim,
            cfg.algo.use_layer_norm, "cpu", **extra,
        )  # fmt: skip

    return env, make_actor


def evaluate(env, actor, seed: int, stochastic: bool = False) -> dict:
    """One episode per env (deterministic unless ``stochastic``: the actor's exploring draw,
    as its collector acts); the figures of ``walking_figures``."""
    import torch

    fns = env._reward_fns
    seen: dict[str, np.ndarray] = {}
    original = env._compute_reward

    def compute_reward(info, linvel, gyro, gravity, dof_pos, dof_vel):
        ctx = env._build_reward_context(info, linvel, gyro, gravity, dof_pos, dof_vel)
        seen["tracking"] = np.asarray(fns[TRACKING](ctx), dtype=np.float64)
        return original(info, linvel, gyro, gravity, dof_pos, dof_vel)

    env._compute_reward = compute_reward
    np.random.seed(seed)
    torch.manual_seed(seed)
    state = env.init_state()
    n = len(state.obs["obs"])
    alive = np.ones(n, bool)
    time_limit = np.zeros(n, bool)
    length = np.zeros(n, np.int64)
    tracking = np.zeros(n, np.float64)
    steps = int(env.cfg.max_episode_steps)
    with torch.inference_mode():
        for _ in range(steps):
            obs = torch.as_tensor(np.asarray(state.obs["obs"], np.float32))
            actions = actor.explore(obs, deterministic=not stochastic).numpy()
            state = env.step(actions)
            tracking += np.where(alive, seen["tracking"], 0.0)
            length += alive
            time_limit |= alive & state.truncated & ~state.terminated
            alive &= ~(state.terminated | state.truncated)
            if not alive.any():
                break
    env._compute_reward = original
    return {
        "time_limit_rate": float(np.mean(time_limit)),
        "tracking_share": float(np.mean(tracking / np.maximum(length, 1))),
        "mean_length": float(np.mean(length)),
    }


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", type=Path, help="model_<it>.pt of one run")
    parser.add_argument("--checkout", type=Path, required=True, help="the reference's checkout")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stochastic", action="store_true", help="act as the collector does")
    parser.add_argument("--out", type=Path, help="append one JSON row per checkpoint")
    args = parser.parse_args()
    torch.set_num_threads(1)
    run_config = json.loads((args.checkpoints[0].parent / "run_config.json").read_text())
    env, make_actor = build(args.checkout, run_config, args.episodes)
    for path in args.checkpoints:
        actor = make_actor()
        actor.load_state_dict(torch.load(path, map_location="cpu", weights_only=True)["actor"])
        actor.eval()
        row = {"checkpoint": str(path), "iteration": int(path.stem.split("_")[1]),
               "stochastic": args.stochastic,
               **evaluate(env, actor, args.seed, args.stochastic)}  # fmt: skip
        print(json.dumps(row), flush=True)
        if args.out is not None:
            with args.out.open("a") as out:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
