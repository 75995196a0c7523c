"""Statistics of several seeds, as published RL comparisons report them (Agarwal et al., "Deep
RL at the Edge of the Statistical Precipice", NeurIPS 2021, the ``rliable`` practice):

- the **interquartile mean** (IQM) of all runs' scores pooled over tasks: the mean of the
  middle 50% (``scipy.stats.trim_mean(x, 0.25)``), robust to an outlier seed yet using half
  the runs, where a median uses one;
- **95% stratified bootstrap confidence intervals**: resample each task's runs with
  replacement (as many as it has), recompute the statistic over the pooled resample, take the
  2.5th and 97.5th percentiles of ``reps`` resamples;
- per-task means with a bootstrap interval, and learning curves as the mean over seeds with
  a pointwise bootstrap band.

``bench/learning/peers.py`` pools returns normalised per task by Brax's mean best evaluation (1.0:
Brax's level), so tasks of different return scales pool; ``unilab-jax plot`` draws
the runs of one setting over seeds as a mean with its band. ``rliable`` itself (1.2.0) does
not import with the pandas 3 that pip resolves for it today (its ``arch`` dependency fails),
so this module computes the same quantities with numpy and scipy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from scipy.stats import trim_mean

__all__ = ["iqm", "mean_interval", "pointwise_band", "stratified_interval"]

REPS = 2000
CONFIDENCE = 0.95


def iqm(scores: np.ndarray) -> float:
    """The interquartile mean: the mean of the middle 50% of ``scores`` (flattened)."""
    return float(trim_mean(np.asarray(scores, dtype=np.float64).ravel(), 0.25))


def stratified_interval(
    scores: Mapping[str, np.ndarray],
    statistic: Callable[[np.ndarray], float] = iqm,
    reps: int = REPS,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(statistic over all runs, low, high)``: the 95% stratified bootstrap interval of
    ``statistic`` over the runs of every task pooled (``scores``: task -> its runs' scores)."""
    rng = np.random.default_rng(seed)
    tasks = [np.asarray(v, dtype=np.float64).ravel() for v in scores.values() if len(v)]
    point = statistic(np.concatenate(tasks))
    draws = np.empty(reps)
    for i in range(reps):
        draws[i] = statistic(np.concatenate([t[rng.integers(0, len(t), len(t))] for t in tasks]))
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return point, float(low), float(high)


def mean_interval(values, reps: int = REPS, seed: int = 0) -> tuple[float, float, float]:
    """``(mean, low, high)``: the 95% bootstrap interval of one task's mean over its seeds."""
    return stratified_interval({"task": np.asarray(values)}, np.mean, reps, seed)


def pointwise_band(curves: np.ndarray, reps: int = REPS, seed: int = 0) -> np.ndarray:
    """``[3, points]``: the mean over seeds (rows of ``curves``) at each point, and the 95%
    bootstrap interval of that mean (the seeds resampled together, so a band is one set of
    resampled runs)."""
    curves = np.asarray(curves, dtype=np.float64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(curves), (reps, len(curves)))
    means = curves[picks].mean(axis=1)  # [reps, points]
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    return np.stack([curves.mean(axis=0), low, high])
