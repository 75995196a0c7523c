"""``unilab-jax plot RUN [RUN ...] --out curve.png``: learning curves of runs
(``analysis.plot.plot_runs``; its module docstring describes the figure)."""

from __future__ import annotations

from dataclasses import dataclass

from tyro.conf import Positional

from unilab_jax.analysis.plot import DPI, PlotError, plot_runs
from unilab_jax.cli.options import documented, error, parse

__all__ = ["Plot", "main"]


@dataclass(frozen=True)
class Plot:
    """Plot eval and training return of one or more runs against env steps and against
    wall-clock (four panels, runs overlaid)."""

    runs: Positional[tuple[str, ...]]
    """Runs' log dirs (their event files)."""
    out: str = "curves.png"
    """The figure file: .png, .pdf or .svg."""
    labels: tuple[str, ...] | None = None
    """One legend label per run; None: '<algo> <env> <dir name>'."""
    title: str | None = None
    """The figure's title."""
    per_seed: bool = False
    """Draw every run alone; else runs whose run_config.json differ only in the seed are one
    curve, their mean, with its 95% bootstrap band."""
    dpi: int = DPI
    """Resolution."""


def main(argv: list[str] | None = None) -> int:
    args = parse(documented(Plot), argv, prog="unilab-jax plot")
    try:
        result = plot_runs(list(args.runs), args.out, labels=args.labels and list(args.labels),
                           title=args.title, dpi=args.dpi, per_seed=args.per_seed)  # fmt: skip
    except PlotError as err:
        return error(str(err))
    for run in result["runs"]:
        points = run["points"]
        print(f"{run['label']}: {points.get('train_return', 0)} training points, "
              f"{points.get('eval_return', 0)} evaluations ({run['run_dir']})")  # fmt: skip
    for group in result["groups"]:
        print(f"{group['label']}: the mean of {len(group['runs'])} runs, 95% bootstrap band")
    for label in result["no_eval"]:
        print(f"note: {label} has no eval data (eval/mean_return); training curves only")
    print(f"wrote {result['out']}")
    return 0
