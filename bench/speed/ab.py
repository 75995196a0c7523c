"""A/B of the trainer's compiled step: the same sizes with other algorithm settings, side by side.

On a shared 2-core VM one process's timing moves by up to 20% from run to run, more than most
code changes gain. This script builds every variant in one process (the ``brax`` or
``reference`` size set of ``bench/speed/profile.py``: the trainer's own ``log_interval``-iteration
step, evaluation off, the replay filled past the learning threshold first) and then calls them
in turn, round after round, so that a slow spell hits them all alike. It prints the median,
min and max ms per iteration of each and the ratio of each median to the first variant's.

    python -m bench.speed.ab --algo sac --variant '{}' --variant '{"use_layer_norm": false}'
    python -m bench.speed.ab --algo td3 --sizes reference --rounds 6 \
        --variant '{}' --variant '{"num_atoms": 51}'

A variant is a JSON object of algorithm settings over the size set's (``{}``: the set as it
is). Figures go to the terminal only; quote them in ``bench/RESULTS.md`` with the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `bench` and `unilab_jax` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import jax  # noqa: E402

from bench.common import machine_info, machine_lines  # noqa: E402
from bench.speed.profile import _adapters_installed, learning_step, size_sets  # noqa: E402


def build(algo: str, spec: dict, overrides: dict):
    """``(call, iterations per call)``: ``call()`` runs one block of the size set's step with
    ``overrides`` and waits for it (``bench.speed.profile.learning_step``, warmed once)."""
    trainer, _, _, step = learning_step(algo, spec, overrides)

    def call() -> None:
        jax.block_until_ready(step())

    call()  # warm
    return call, trainer.config.log_interval


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=["sac", "td3", "flash_sac"], default="sac")
    parser.add_argument("--sizes", choices=["brax", "reference"], default="brax")
    parser.add_argument("--variant", action="append", default=[], type=json.loads,
                        help="JSON object of algorithm settings (repeatable; the first is "
                        "the baseline)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=12, help="timed calls of each variant")
    args = parser.parse_args(argv)
    variants = args.variant or [{}]
    if not all(isinstance(v, dict) for v in variants):
        parser.error("--variant takes a JSON object, e.g. '{\"num_atoms\": 51}'")
    print("\n".join(machine_lines(machine_info())), flush=True)
    spec = size_sets(_adapters_installed())[args.sizes]
    built = []
    for overrides in variants:
        print(f"... building {args.algo} {args.sizes} {json.dumps(overrides)}", flush=True)
        built.append(build(args.algo, spec, overrides))
    times: list[list[float]] = [[] for _ in built]
    for _ in range(args.rounds):
        for i, (call, n) in enumerate(built):
            start = time.perf_counter()
            call()
            times[i].append(1e3 * (time.perf_counter() - start) / n)
    base = None
    for overrides, ts in zip(variants, times, strict=True):
        ts = sorted(ts)
        median = ts[len(ts) // 2]
        base = base or median
        print(f"{json.dumps(overrides):40s} median {median:7.1f} ms/iteration  min {ts[0]:7.1f}  "
              f"max {ts[-1]:7.1f}  vs first {base / median:5.2f}x faster")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
