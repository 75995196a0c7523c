"""``unilab-jax plot RUN [RUN ...] --out curve.png``: learning curves of runs
(``unilab_jax.analysis.plot.plot_runs``; its module docstring describes the figure)."""

from __future__ import annotations

import argparse
import sys

from unilab_jax.analysis.plot import DPI, PlotError, plot_runs

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unilab-jax plot",
        description="Plot eval and training return of one or more runs against env steps and "
        "against wall-clock (four panels, runs overlaid).",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="a run's log dir (event files)")
    parser.add_argument(
        "--out", default="curves.png", help="figure file, .png, .pdf or .svg (default: curves.png)"
    )
    parser.add_argument(
        "--labels",
        nargs="+",
        default=None,
        metavar="LABEL",
        help="one legend label per run (default: '<algo> <env> <dir name>')",
    )
    parser.add_argument("--title", default=None, help="figure title")
    parser.add_argument(
        "--per-seed",
        action="store_true",
        help="draw every run alone (default: runs whose run_config.json differ only in the "
        "seed are one curve, their mean, with its 95%% bootstrap band)",
    )
    parser.add_argument("--dpi", type=int, default=DPI, help=f"resolution (default: {DPI})")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = plot_runs(args.runs, args.out, labels=args.labels, title=args.title,
                           dpi=args.dpi, per_seed=args.per_seed)  # fmt: skip
    except PlotError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for run in result["runs"]:
        points = run["points"]
        print(
            f"{run['label']}: {points.get('train_return', 0)} training points, "
            f"{points.get('eval_return', 0)} evaluations ({run['run_dir']})"
        )
    for group in result["groups"]:
        print(f"{group['label']}: the mean of {len(group['runs'])} runs, 95% bootstrap band")
    for label in result["no_eval"]:
        print(f"note: {label} has no eval data (eval/mean_return); training curves only")
    print(f"wrote {result['out']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
