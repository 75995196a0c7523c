"""``unilab-jax evaluate RUN``: the deterministic return of a trained policy.

RUN is a run's log dir (as written by ``python -m unilab_jax.train``), its ``checkpoints/``
folder, or one checkpoint's folder. The policy is loaded from the checkpoint's ``agent`` item
(``unilab_jax.policy.load_policy``: seconds, no replay, no trainer) and run for one full
episode in each of ``--episodes`` fresh envs of its task.

Examples::

    unilab-jax evaluate logs/fast_sac/PendulumSwingup/2026-12-01_10-00-00_mjx
    unilab-jax evaluate RUN --episodes 256 --step 500 --json
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unilab-jax evaluate",
        description="Evaluate the deterministic policy of a training run's checkpoint: one full "
        "episode in each of --episodes fresh envs; prints the mean, spread and episode length.",
    )
    parser.add_argument("run", help="a run's log dir, its checkpoints/ folder or one checkpoint")
    parser.add_argument("--episodes", type=int, default=64, help="episodes (envs) (default: 64)")
    parser.add_argument("--step", type=int, default=None, help="checkpoint iteration (newest)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial states (0)")
    parser.add_argument(
        "--env", default=None, help="another task with the same sizes (default: the run's)"
    )
    parser.add_argument(
        "--physics",
        choices=("mjx", "mujoco"),
        default=None,
        help="physics of the evaluation: mjx or mujoco (C MuJoCo on CPU threads; our tasks "
        "only) (default: the run's)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.episodes < 1:
        print(f"error: --episodes must be >= 1, got {args.episodes}", file=sys.stderr)
        return 2
    from unilab_jax.envs import UnknownEnvError
    from unilab_jax.policy import evaluate, load_policy
    from unilab_jax.training.checkpoint import CheckpointError

    try:
        policy = load_policy(args.run, args.step)
        result = evaluate(policy, args.env, args.episodes, args.seed, physics=args.physics)
    except (FileNotFoundError, CheckpointError, UnknownEnvError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report = {
        "checkpoint": policy.checkpoint,
        "env": args.env or policy.env,
        "algo": policy.algo,
        "iteration": policy.iteration,
        **result.as_dict(),
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"{report['env']} ({policy.algo}, iteration {policy.iteration}): mean return "
            f"{report['mean_return']:.3f} +- {report['std_return']:.3f} (min "
            f"{report['min_return']:.3f}, max {report['max_return']:.3f}) over "
            f"{report['episodes']} episodes, mean length {report['mean_length']:.1f}"
            + (
                f", {100 * report['time_limit_rate']:.0f}% reached the time limit"
                if "time_limit_rate" in report
                else ""
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
