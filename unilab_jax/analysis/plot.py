"""``unilab-jax plot RUN [RUN ...] --out curve.png``: learning curves of runs.

Each RUN is a run's log dir (as written by ``python -m unilab_jax.train``): its TensorBoard
event files are read (every point, no subsampling), plus ``run_config.json`` for the label.
The figure has four panels, every run overlaid in its own colour::

    eval return     vs env steps  |  eval return     vs wall-clock
    training return vs env steps  |  training return vs wall-clock

*Eval return* is ``eval/mean_return`` (the deterministic evaluations); *training return* is
``reward/mean`` (mean episode return of the exploring policy). Env steps are the TensorBoard
step of each point; wall-clock is the time since the run's first event (so runs started at
different times overlay). A run resumed into its own dir is joined across its event files:
the points logged after the checkpoint it resumed from are replaced by the resumed session's,
and its wall-clock includes the time it was stopped. A run without
evaluations shows its training curves only, marked "(no eval)" in the legend. Runs are
labelled ``<algo> <env> <dir name>`` unless ``--labels`` is given. Runs whose
``run_config.json`` differ only in the seed are drawn as one curve: their mean at the steps
they all logged, with the 95% bootstrap band of that mean (``unilab_jax.analysis.stats``) and each
run
a thin line beside it (``--per-seed``, or ``--labels``, draws every run alone). ``--out``
picks the format by extension (png, pdf or svg). Needs matplotlib:
``pip install 'unilab-jax[plot]'``.

Examples::

    unilab-jax plot logs/fast_sac/PendulumSwingup/2026-12-01_10-00-00_mjx
    unilab-jax plot logs/fast_sac/PendulumSwingup/* --out sac.pdf --title "SAC seeds"
    unilab-jax plot RUN_A RUN_B --labels SAC TD3 --out compare.svg

From Python: ``load_curves(run_dir)`` returns the curves as numpy arrays and
``plot_runs(run_dirs, out)`` writes the figure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "CURVE_TAGS",
    "Curve",
    "PlotError",
    "load_curves",
    "plot_runs",
    "run_label",
]

# load_curves key -> TensorBoard scalar tag (as written by
# unilab_jax.training.logger.OffPolicyLogger).
CURVE_TAGS: dict[str, str] = {
    "eval_return": "eval/mean_return",
    "eval_length": "eval/mean_length",
    "train_return": "reward/mean",
}
# Logged at every learner log; its first step in a session is where that session starts.
RESUME_MARKER_TAG = "axis/env_steps_total"
FORMATS = (".png", ".pdf", ".svg")
EVENT_GLOB = "events.out.tfevents.*"
FIGSIZE = (12.0, 8.0)  # inches; at the default dpi of 100 a PNG is 1200 x 800 pixels
DPI = 100


class PlotError(ValueError):
    """A run dir that cannot be plotted, or bad options; the message names the path."""


class Curve(NamedTuple):
    """One scalar curve of a run, in logging order."""

    steps: np.ndarray
    """Env steps (the TensorBoard step), int64."""
    seconds: np.ndarray
    """Wall-clock seconds since the run's first event, float64."""
    values: np.ndarray
    """The logged values, float64 (TensorBoard stores them as float32)."""


def _event_files(run_dir: Path) -> list[Path]:
    if not run_dir.is_dir():
        what = "not a directory" if run_dir.exists() else "no such directory"
        raise PlotError(f"{run_dir}: {what}")
    files = sorted(p for p in run_dir.glob(EVENT_GLOB) if p.is_file())
    if not files:
        nested = sorted({p.parent for p in run_dir.rglob(EVENT_GLOB)})
        hint = ""
        if nested:
            shown = " ".join(str(p) for p in nested[:3]) + (" ..." if len(nested) > 3 else "")
            hint = f"; runs below it: {shown}"
        raise PlotError(f"{run_dir}: no TensorBoard event files ({EVENT_GLOB}) in it{hint}")
    return files


def _read_session(path: Path) -> tuple[float, dict[str, list]]:
    """``(first event's wall time, {curve key: scalar events})`` of one event file."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    # SCALARS: 0 keeps every point (the default reservoir keeps 10,000 per tag).
    acc = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0})
    try:
        acc.Reload()
    except Exception as err:  # a foreign or corrupt file (a truncated tail is only skipped)
        raise PlotError(f"{path}: unreadable event file ({type(err).__name__}: {err})") from err
    try:
        start = float(acc.FirstEventTimestamp())
    except ValueError:  # no event yet (a run killed before its first flush)
        return math.inf, {}
    tags = set(acc.Tags().get("scalars", ()))
    marker = RESUME_MARKER_TAG if RESUME_MARKER_TAG in tags else None
    events = {key: list(acc.Scalars(tag)) for key, tag in CURVE_TAGS.items() if tag in tags}
    if marker:
        events[marker] = list(acc.Scalars(marker))
    return start, events


def load_curves(run_dir: str | Path) -> dict[str, Curve]:
    """The curves of one run: ``{"eval_return", "eval_length", "train_return"} -> Curve``.

    A curve the run never logged is absent (a run without evaluations has only
    ``"train_return"``). A run resumed into its own dir has one event file per session; they
    are joined in order, and the points an earlier session logged at or after the first step
    of a later one (its work after the checkpoint the run resumed from) are dropped, so every
    step appears once. Raises ``PlotError`` for a path without (readable) event files.
    """
    run_dir = Path(run_dir)
    files = _event_files(run_dir)
    sessions = sorted(
        ((*_read_session(path), path.name) for path in files), key=lambda s: (s[0], s[2])
    )
    curves: dict[str, list] = {}
    for _, events, _ in sessions:
        steps = [e.step for evs in events.values() for e in evs]
        if not steps:
            continue
        first = min(steps)
        for key, evs in events.items():
            kept = [e for e in curves.get(key, []) if e.step < first]
            curves[key] = kept + evs
    curves.pop(RESUME_MARKER_TAG, None)
    start = sessions[0][0]  # finite whenever a curve has points
    return {
        key: Curve(
            steps=np.array([e.step for e in evs], dtype=np.int64),
            seconds=np.array([e.wall_time - start for e in evs], dtype=np.float64),
            values=np.array([e.value for e in evs], dtype=np.float64),
        )
        for key, evs in curves.items()
        if evs
    }


def run_label(run_dir: str | Path) -> str:
    """``"<algo> <env> <dir name>"`` from the run's ``run_config.json``, else the dir name."""
    run_dir = Path(run_dir)
    name = run_dir.resolve().name or str(run_dir)
    try:
        train = json.loads((run_dir / "run_config.json").read_text())["train"]
        algo, env = str(train["algo"]), str(train["env"])
    except (OSError, ValueError, KeyError, TypeError):
        return name
    from unilab_jax.algos.registry import ALGOS  # light: dataclasses only, no JAX

    spec = ALGOS.get(algo)
    return f"{spec.display_name if spec else algo} {env} {name}"


def _import_pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PlotError(
            "matplotlib is not installed; install the plot extra: pip install 'unilab-jax[plot]'"
        ) from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _time_unit(max_seconds: float) -> tuple[float, str]:
    if max_seconds >= 3 * 3600:
        return 3600.0, "h"
    if max_seconds >= 180:
        return 60.0, "min"
    return 1.0, "s"


class _Series(NamedTuple):
    """What one legend entry draws: one run, or the runs of one setting over seeds."""

    label: str
    curves: dict[str, Curve]  # a group: the mean over its runs at the steps all of them have
    bands: dict[str, tuple[np.ndarray, np.ndarray]]  # a group: the 95% band of that mean
    members: list[tuple[Path, str, dict[str, Curve]]]


def _setting(run_dir: Path) -> str | None:
    """The run's settings without its seed (what groups runs), None without a config."""
    try:
        config = json.loads((run_dir / "run_config.json").read_text())
        config["train"].pop("seed", None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return json.dumps(config, sort_keys=True)


def _mean_curve(curves: list[Curve]) -> tuple[Curve, tuple[np.ndarray, np.ndarray]]:
    """The mean of ``curves`` at the steps every one of them logged, and its 95% bootstrap
    band over the runs (``unilab_jax.analysis.stats.pointwise_band``); wall-clock: the mean."""
    from unilab_jax.analysis.stats import pointwise_band

    steps = curves[0].steps
    for c in curves[1:]:
        steps = np.intersect1d(steps, c.steps)
    picked = [(np.searchsorted(c.steps, steps), c) for c in curves]
    values = np.array([c.values[i] for i, c in picked])
    seconds = np.array([c.seconds[i] for i, c in picked]).mean(axis=0)
    mean, low, high = pointwise_band(values)
    return Curve(steps, seconds, mean), (low, high)


def _series(runs: list[tuple[Path, str, dict]], per_seed: bool) -> list[_Series]:
    """One series per run, or (unless ``per_seed``) one per setting whose runs differ only in
    their seed."""
    groups: dict[Any, list] = {}
    for i, run in enumerate(runs):
        key = None if per_seed else _setting(run[0])
        groups.setdefault(key if key is not None else i, []).append(run)
    out = []
    for members in groups.values():
        if len(members) == 1:
            out.append(_Series(members[0][1], members[0][2], {}, members))
            continue
        curves, bands = {}, {}
        for key in CURVE_TAGS:
            found = [m[2][key] for m in members if key in m[2]]
            if len(found) == len(members):
                curves[key], bands[key] = _mean_curve(found)
        label = f"{members[0][1].rsplit(' ', 1)[0]} ({len(members)} seeds)"
        out.append(_Series(label, curves, bands, members))
    return out


def plot_runs(
    run_dirs: Sequence[str | Path],
    out: str | Path = "curves.png",
    labels: Sequence[str] | None = None,
    title: str | None = None,
    dpi: int = DPI,
    per_seed: bool = False,
) -> dict[str, Any]:
    """Draw the four panels for ``run_dirs`` into ``out`` (png, pdf or svg by extension).

    Runs whose ``run_config.json`` differ only in the seed are drawn as one curve, the mean
    over them at the steps they all logged, with the 95% bootstrap band of that mean (each
    run a thin line beside it); ``per_seed`` draws every run alone.

    Returns ``{"out": Path, "runs": [{"run_dir", "label", "points": {curve: n}}, ...],
    "groups": [{"label", "runs"}, ...], "no_eval": [labels of series without evaluations]}``.
    Raises ``PlotError`` for a run without event files or curves, bad ``labels`` or ``out``,
    or a missing matplotlib.
    """
    run_dirs = [Path(p) for p in run_dirs]
    out = Path(out)
    _check_options(run_dirs, out, labels, dpi)
    plt = _import_pyplot()
    runs = [(d, labels[i] if labels else run_label(d), _return_curves(d))
            for i, d in enumerate(run_dirs)]  # fmt: skip
    series = _series(runs, per_seed or labels is not None)
    fig, axes = plt.subplots(2, 2, figsize=FIGSIZE, dpi=dpi, layout="constrained")
    unit, handles = _draw(plt, axes, series, runs)
    legend = [s.label if "eval_return" in s.curves else f"{s.label} (no eval)" for s in series]
    fig.legend(handles, legend, loc="outside lower center", ncol=min(len(series), 3),
               frameon=False)  # fmt: skip
    _label_axes(axes, unit, runs)
    if title:
        fig.suptitle(title)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=dpi)
    except OSError as err:
        raise PlotError(f"--out {out}: cannot write it ({err.strerror or err})") from err
    finally:
        plt.close(fig)
    return {
        "out": out,
        "runs": [
            {
                "run_dir": str(d),
                "label": label,
                "points": {k: int(c.steps.size) for k, c in curves.items()},
            }
            for d, label, curves in runs
        ],  # fmt: skip
        "groups": [
            {"label": s.label, "runs": [str(m[0]) for m in s.members]}
            for s in series
            if len(s.members) > 1
        ],  # fmt: skip
        "no_eval": [s.label for s in series if "eval_return" not in s.curves],
    }


def _check_options(run_dirs: list[Path], out: Path, labels, dpi: int) -> None:
    if not run_dirs:
        raise PlotError("no run dirs given")
    if out.suffix.lower() not in FORMATS:
        raise PlotError(f"--out {out}: use a .png, .pdf or .svg file name")
    if dpi < 1:
        raise PlotError(f"--dpi must be >= 1, got {dpi}")
    if labels is not None and len(labels) != len(run_dirs):
        raise PlotError(f"--labels: got {len(labels)} labels for {len(run_dirs)} runs")


def _return_curves(run_dir: Path) -> dict[str, Curve]:
    curves = load_curves(run_dir)
    if "train_return" not in curves and "eval_return" not in curves:
        raise PlotError(
            f"{run_dir}: no return curves in its event files "
            f"({CURVE_TAGS['eval_return']}, {CURVE_TAGS['train_return']})"
        )
    return curves


_ROWS = (("eval_return", "Eval return"), ("train_return", "Training return"))


def _draw(plt, axes, series: list[_Series], runs) -> tuple[str, list]:
    """Every series into the four panels; returns the wall-clock unit and each series' line
    for the legend (its mean curve's)."""
    max_seconds = max(
        (float(c.seconds.max()) for _, _, cs in runs for c in cs.values() if c.seconds.size),
        default=0.0,
    )
    scale, unit = _time_unit(max_seconds)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles = []
    for i, s in enumerate(series):
        colour = colours[i % len(colours)]
        handles.append(None)
        for row, (key, _) in enumerate(_ROWS):
            curve = s.curves.get(key)
            if curve is None:
                continue
            for col, x in enumerate((curve.steps, curve.seconds / scale)):
                ax = axes[row, col]
                for _, _, member in s.members if len(s.members) > 1 else ():
                    m = member[key]
                    ax.plot((m.steps, m.seconds / scale)[col], m.values, color=colour,
                            alpha=0.25, linewidth=0.8)  # fmt: skip
                # Markers for sparse curves (evaluations, short runs) so single points show.
                marker = "o" if key == "eval_return" or curve.steps.size <= 30 else None
                line = ax.plot(x, curve.values, color=colour, marker=marker, markersize=3,
                               linewidth=1.5)[0]  # fmt: skip
                handles[-1] = handles[-1] or line
                if key in s.bands:
                    ax.fill_between(x, *s.bands[key], color=colour, alpha=0.2, linewidth=0)
    return unit, handles


def _label_axes(axes, unit: str, runs) -> None:
    from matplotlib.ticker import EngFormatter

    for row, (key, name) in enumerate(_ROWS):
        for col, xlabel in enumerate(("env steps", f"wall-clock ({unit})")):
            ax = axes[row, col]
            ax.set_title(f"{name} vs {xlabel.split(' (')[0]}")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(name.lower())
            ax.grid(True, alpha=0.3)
            if col == 0:
                ax.xaxis.set_major_formatter(EngFormatter(sep=""))
            if not any(key in curves for _, _, curves in runs):
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes,
                        color="grey")  # fmt: skip
