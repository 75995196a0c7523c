"""What fixed, untrained action sources earn on a task: is its reward reachable by chance?

Each source acts for one full episode in each of ``--envs`` fresh envs (one key for all
sources, so every source meets the same starts); the table gives the episode returns and how
much of them came in the first 100 steps (a return earned there comes from the start state,
not from what the actions did). Sources: zero action; uniform random actions drawn every step;
uniform random actions held for a geometric number of steps of mean 10 and 50 (an off-policy
learner's exploration before its critic knows anything, with and without noise held over
time); a constant +1; and, on a task whose last observation is a velocity (PendulumSwingup),
``sign(velocity)``, a hand-made energy pump.

    python -m bench.learning.exploration                           # playground/PendulumSwingup
    python -m bench.learning.exploration --env playground/CartpoleBalance --no-record
"""

from __future__ import annotations

import argparse
import time

import numpy as np

try:
    from bench.common import ensure_repo_on_path, markdown_table, record_section
except ModuleNotFoundError:  # run as a script: python bench/learning/exploration.py
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.common import ensure_repo_on_path, markdown_table, record_section

ensure_repo_on_path()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from unilab_jax.envs import load  # noqa: E402


def _sources(num_envs: int, action_size: int) -> dict:
    """name -> ``(obs, key, held) -> (action, held)``."""
    shape = (num_envs, action_size)

    def uniform(key):
        return jax.random.uniform(key, shape, minval=-1.0, maxval=1.0)

    def held(mean_steps):
        def act(obs, key, last):
            k_draw, k_switch = jax.random.split(key)
            switch = jax.random.uniform(k_switch, (num_envs, 1)) < 1.0 / mean_steps
            action = jnp.where(switch, uniform(k_draw), last)
            return action, action

        return act

    def pump(obs, key, last):
        velocity = obs[:, -1:]
        return jnp.broadcast_to(jnp.sign(velocity), shape), last

    return {
        "zero": lambda obs, key, last: (jnp.zeros(shape), last),
        "uniform, every step": lambda obs, key, last: (uniform(key), last),
        "uniform, held ~10 steps": held(10.0),
        "uniform, held ~50 steps": held(50.0),
        "constant +1": lambda obs, key, last: (jnp.ones(shape), last),
        "sign(last observation)": pump,
    }


def probe(env_name: str, num_envs: int, seed: int) -> list[list]:
    env = load(env_name)
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    rows = []
    for name, source in _sources(num_envs, env.action_size).items():
        act = jax.jit(source)
        state = reset(jax.random.split(jax.random.PRNGKey(seed), num_envs))
        key, last = jax.random.PRNGKey(seed + 1), jnp.zeros((num_envs, env.action_size))
        returns, early = np.zeros(num_envs), np.zeros(num_envs)
        alive = np.ones(num_envs, bool)  # as the evaluation: an episode's end stops its sum
        start = time.perf_counter()
        for t in range(env.episode_length):
            key, sub = jax.random.split(key)
            action, last = act(state.obs["obs"], sub, last)
            state = step(state, action)
            reward = np.where(alive, np.asarray(state.reward), 0.0)
            returns += reward
            if t < 100:
                early += reward
            alive &= ~np.asarray(state.terminated | state.truncated)
        rows.append([
            name, f"{returns.mean():.1f}", f"{np.median(returns):.1f}", f"{returns.max():.1f}",
            f"{np.mean(returns > 10.0):.2f}", f"{early.mean():.1f}",
            f"{time.perf_counter() - start:.0f}",
        ])  # fmt: skip
        print(" | ".join(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="playground/PendulumSwingup")
    parser.add_argument("--envs", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-record", action="store_true", help="print only")
    args = parser.parse_args()
    rows = probe(args.env, args.envs, args.seed)
    headers = ["actions", "return mean", "median", "max", "share > 10", "of it in steps 0-99",
               "s"]  # fmt: skip
    body = markdown_table(headers, rows)
    print(body)
    if not args.no_record:
        note = (f"{args.env}: one episode in each of {args.envs} fresh envs per source, the "
                "same starts for every source.")  # fmt: skip
        record_section("exploration", "Returns of untrained action sources", body,
                       notes=[note])  # fmt: skip


if __name__ == "__main__":
    main()
