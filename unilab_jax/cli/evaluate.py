"""``unilab-jax evaluate RUN``: the deterministic return of a trained policy (``load_policy``:
seconds, no replay, no trainer; ``policy.evaluate``: one full episode in each of ``--episodes``
fresh envs of its task)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from tyro.conf import Positional

from unilab_jax.cli.options import STEP_HELP, documented, error, parse
from unilab_jax.errors import CheckpointError

__all__ = ["Evaluate", "main"]


@dataclass(frozen=True)
class Evaluate:
    """Evaluate the deterministic policy of a training run's checkpoint: one full episode in each
    of --episodes fresh envs; prints the mean, spread and episode length."""

    run: Positional[str]
    """A run's log dir, its checkpoints/ folder or one checkpoint."""
    episodes: int = 64
    """Episodes (fresh envs)."""
    step: int | Literal["best"] | None = None
    seed: int = 0
    """Seed of the initial states."""
    env: str | None = None
    """Another task with the same sizes; None: the run's."""
    physics: Literal["mjx", "mujoco"] | None = None
    """mjx, or mujoco (C MuJoCo on CPU threads; our tasks only); None: the run's."""
    json: bool = False
    """Print one JSON object."""


def main(argv: list[str] | None = None) -> int:
    args = parse(documented(Evaluate, step=STEP_HELP), argv, prog="unilab-jax evaluate")
    from unilab_jax.policy import evaluate, load_policy

    try:
        policy = load_policy(args.run, args.step)
        result = evaluate(policy, args.env, args.episodes, args.seed, physics=args.physics)
    except (FileNotFoundError, CheckpointError, ValueError) as err:  # UnknownEnvError too
        return error(str(err))
    r = {"checkpoint": policy.checkpoint, "env": args.env or policy.env, "algo": policy.algo,
         "iteration": policy.iteration, **result.as_dict()}  # fmt: skip
    rate = r.get("time_limit_rate")  # C MuJoCo's episodes only
    limit = "" if rate is None else f", {100 * rate:.0f}% reached the time limit"
    print(json.dumps(r) if args.json else (
        f"{r['env']} ({policy.algo}, iteration {policy.iteration}): mean return "
        f"{r['mean_return']:.3f} +- {r['std_return']:.3f} (min {r['min_return']:.3f}, max "
        f"{r['max_return']:.3f}) over {r['episodes']} episodes, mean length "
        f"{r['mean_length']:.1f}{limit}"))  # fmt: skip
    return 0
