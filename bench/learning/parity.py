"""Learning parity: the torch path and the JAX core on the same task, config and seeds.

Both paths are driven through the documented facade, so they start from the same torch
learner (same initial weights per seed) and save the same `model_<it>.pt` checkpoints:

- torch: `OffPolicyRunner(..., sim_backend="mujoco")`: a collector process on C MuJoCo,
  shared-memory replay, the torch learner in this process (1 torch thread, the collector gets
  the other core);
- jax: `OffPolicyRunner(..., sim_backend="mjx")`: the fused JAX loop (MJX physics), weights
  converted in and out.

Every checkpoint is evaluated the same way (`unilab.algos.torch.evaluation.evaluate_actor`: one
deterministic episode in each of 32 C MuJoCo envs), and placed at its env steps and at its
wall-clock time since `learn` started (the checkpoint file's mtime; the JAX time includes
compilation). Env steps: the torch path's warm-up chunks (until `batch_size` rows are stored)
are not iterations, the JAX core's are, so the torch path is given that many fewer iterations
and both end at the same env steps.

Writes `bench/figures/parity.png` (return against env steps and against wall-clock, mean and range
over seeds) and the table into `bench/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch

from bench.common import FIGURES_DIR, RESULTS_DIR, markdown_table, record_section

ENV = "PendulumSwingup"
NETS = dict(actor_hidden_dim=64, critic_hidden_dim=128, v_min=-5.0, v_max=40.0)
RUN = dict(num_envs=32, replay_buffer_n=1000, batch_size=256, updates_per_step=8)
POLICY_FREQUENCY = {"sac": 4, "td3": 2}


def make_learner(algo: str, seed: int):
    """The core's config of ``algo`` with ``NETS`` (every value explicit: the facade's class
    defaults are the reference's, not the core's)."""
    from unilab.algos.torch.registry import build_learner, get_torch_algo

    torch.manual_seed(seed)
    config = get_torch_algo(algo).core.config_cls(**NETS)
    extra = {"num_envs": RUN["num_envs"]} if algo == "td3" else {}
    return build_learner(algo, config, 3, 3, 1, **extra)


def run_one(algo: str, path: str, seed: int, env_steps: int, save_every: int) -> dict:
    """Train one (algo, path, seed); returns the curve [(env steps, seconds, eval return)]."""
    from unilab.algos.torch.evaluation import evaluate_actor
    from unilab.algos.torch.offpolicy import OffPolicyRunner

    learner = make_learner(algo, seed)
    rows_per_iter = RUN["num_envs"]
    warmup = math.ceil(RUN["batch_size"] / rows_per_iter)  # chunks before learning starts
    total_iters = env_steps // rows_per_iter
    backend = "mujoco" if path == "torch" else "mjx"
    iterations = total_iters - warmup if path == "torch" else total_iters
    offset = warmup if path == "torch" else 0
    runner = OffPolicyRunner(
        learner, ENV, algo, policy_frequency=POLICY_FREQUENCY[algo], seed=seed,
        actor_hidden_dim=NETS["actor_hidden_dim"], sim_backend=backend, **RUN,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as log_dir:
        start = time.time()
        runner.learn(iterations, save_interval=save_every, log_dir=log_dir, logger_type="no_print")
        wall = time.time() - start
        curve = [(0, 0.0, evaluate_actor(make_learner(algo, seed), ENV))]
        for ckpt in sorted(Path(log_dir).glob("model_*.pt"), key=lambda p: p.stat().st_mtime):
            it = int(ckpt.stem.split("_")[1])
            learner.load_state_dict(torch.load(ckpt, weights_only=False))
            seconds = ckpt.stat().st_mtime - start
            curve.append(((it + offset) * rows_per_iter, seconds, evaluate_actor(learner, ENV)))
    print(f"{algo} {path} seed {seed}: final eval {curve[-1][2]:.1f}, {wall:.0f}s", flush=True)
    return {"algo": algo, "path": path, "seed": seed, "wall": wall, "curve": curve}


def plot(runs: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = sorted({r["algo"] for r in runs})
    fig, axes = plt.subplots(len(algos), 2, figsize=(11, 4 * len(algos)), squeeze=False)
    colours = {"torch": "tab:orange", "jax": "tab:blue"}
    for row, algo in enumerate(algos):
        for path, colour in colours.items():
            curves = [r["curve"] for r in runs if r["algo"] == algo and r["path"] == path]
            if not curves:
                continue
            for col, x_index in enumerate((0, 1)):
                ax = axes[row][col]
                for i, curve in enumerate(curves):
                    xs = [p[x_index] for p in curve]
                    ys = [p[2] for p in curve]
                    ax.plot(xs, ys, color=colour, alpha=0.8, lw=1.2,
                            label=f"{path} ({len(curves)} seeds)" if i == 0 else None)  # fmt: skip
                ax.set_xlabel("env steps" if x_index == 0 else "wall-clock seconds")
                ax.set_ylabel("deterministic eval return")
                ax.set_title(f"{algo.upper()} on {ENV}")
                ax.grid(alpha=0.3)
                ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def table(runs: list[dict]) -> str:
    rows = []
    for algo in sorted({r["algo"] for r in runs}):
        for path in ("torch", "jax"):
            sel = [r for r in runs if r["algo"] == algo and r["path"] == path]
            if not sel:
                continue
            finals = [r["curve"][-1][2] for r in sel]
            half = [min(r["curve"][1:], key=lambda p: abs(p[0] - r["curve"][-1][0] / 2))[2]
                    for r in sel]  # fmt: skip
            walls = [r["wall"] for r in sel]
            first_130 = []
            for r in sel:
                hit = [p for p in r["curve"] if p[2] >= 130.0]
                first_130.append(f"{hit[0][0]:,} / {hit[0][1]:.0f}s" if hit else "never")
            rows.append([
                algo, path, len(sel), f"{sel[0]['curve'][-1][0]:,}",
                f"{statistics.mean(half):.1f}",
                f"{statistics.mean(finals):.1f} ± {statistics.pstdev(finals):.1f}",
                " ".join(f"{f:.0f}" for f in finals), f"{statistics.mean(walls):.0f}",
                "; ".join(first_130),
            ])  # fmt: skip
    headers = ["algo", "path", "seeds", "env steps", "eval at half", "final eval (mean ± sd)",
               "per seed", "wall s (mean)", "first eval >= 130 (env steps / wall)"]  # fmt: skip
    return markdown_table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["sac", "td3"], choices=["sac", "td3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--env-steps", type=int, default=25_600)
    parser.add_argument("--save-every", type=int, default=100, help="iterations per checkpoint")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs = [
        run_one(algo, path, seed, args.env_steps, args.save_every)
        for algo in args.algos
        for seed in args.seeds
        for path in ("torch", "jax")
    ]
    (RESULTS_DIR / "parity.json").write_text(json.dumps(runs, indent=1))
    plot(runs, FIGURES_DIR / "parity.png")
    body = table(runs)
    print(body)
    if not args.no_record:
        record_section(
            "parity",
            "Learning parity: torch path vs JAX core (PendulumSwingup)",
            body + "\n\n![parity curves](figures/parity.png)",
            notes=[
                "Both paths through `OffPolicyRunner` (sim_backend mujoco vs mjx), same initial "
                "weights per seed; 32 envs, batch 256, 8 updates/iteration, widths 64/128, "
                "C51 support [-5, 40]; eval = one deterministic episode in 32 C MuJoCo envs "
                "(random policy ~52, hand-written controller ~165).",
                "torch: collector process + 1-thread torch learner on the 2 cores; jax: the fused "
                "loop, wall-clock includes its compile.",
            ],
        )


if __name__ == "__main__":
    main()
