"""`OffPolicyLogger`: Rich live dashboard plus TensorBoard or W&B scalars for FastSAC / FastTD3.

Keeps the documented UniLab off-policy logger API (signatures and defaults unchanged). The JAX
training loop calls `log_step` once per host sync with ``train_time`` = device seconds of the
iteration and ``extra_info={"throughput_steps": num_envs * env_steps_per_sync}``.

Throughput. ``Steps/s = throughput_steps / (learner_incremental_h2d + train + weight_sync)``,
the "iter pipeline time" (UniLab issues #361/#370): ``wait_time`` is excluded so that start-up
and warm-up waits do not pollute it, and nothing is shown or logged when ``extra_info`` is
missing. ``perf/iter_ms`` is that pipeline time in milliseconds.

Backend scalars per `log_step` use ``global_step`` = total env steps reported by
`log_collector` (the iteration while that is still 0): ``axis/*``, metrics (``train/<key>``
unless the key already contains "/"), ``reward/mean``, ``reward/<reward_metric>``,
``reward/<component>``, ``episode/*``, ``timing/learner_*_ms``, ``timing/collector_<phase>``,
``perf/*``. W&B receives the same keys plus ``iteration`` in one ``log`` call.

Deviations from the reference, besides those listed in `unilab_jax.training.logger.common`:

- Rates given to `update_done_rates` are fractions in [0, 1]; the dashboard shows them as
  percentages, the backends log the fractions.
- Reward-component keys without the ``reward/`` prefix get it in the backends (and lose it on
  the dashboard), so both ``{"reward/vel": x}`` and ``{"vel": x}`` land on ``reward/vel``.
- Collector timing phases not known to the dashboard are still shown (after the known ones,
  labelled from their key) and logged, so a new phase is never silently dropped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from unilab_jax.training.logger.common import BaseTrainingLogger, format_number

__all__ = ["OffPolicyLogger"]

# Flat metric names of the APPO learner (which shares this logger) and their canonical keys;
# the flat alias is dropped when the canonical key is present so a value is not logged twice.
LEGACY_METRIC_ALIASES: dict[str, str] = {
    "surrogate_loss": "loss/policy_loss",
    "value_loss": "loss/value_loss",
    "entropy": "policy/entropy",
    "kl": "ppo/approx_kl",
}

# Collector phases (average ms per collector step) in dashboard order.
COLLECTOR_TIMING_LABELS: dict[str, str] = {
    "weight_sync_ms": "Weight Sync",
    "action_select_ms": "Action Select",
    "env_step_ms": "Env Step",
    "replay_ms": "Replay",
    "sync_coordination_ms": "Sync Coordination",
}

# Learner wait above this (ms) is highlighted: the learner is starved by the collector.
WAIT_WARN_MS = 1.0
# Losses above this are highlighted as likely divergence.
LOSS_WARN = 10.0


def _drop_legacy_aliases(metrics: Mapping[str, float]) -> dict[str, float]:
    return {
        key: value
        for key, value in metrics.items()
        if LEGACY_METRIC_ALIASES.get(key) not in metrics
    }


def _metric_tag(key: str) -> str:
    return key if "/" in key else f"train/{key}"


def _reward_tag(key: str) -> str:
    return key if key.startswith("reward/") else f"reward/{key}"


def _metric_label(key: str) -> str:
    return key.replace("_", " ").title()


def _phase_label(key: str) -> str:
    return COLLECTOR_TIMING_LABELS.get(key) or _metric_label(key.removesuffix("_ms"))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


class OffPolicyLogger(BaseTrainingLogger):
    """Rich logger for off-policy RL algorithms (SAC, TD3, etc).

    Args:
        algo_name: e.g. ``"FastSAC"`` / ``"FastTD3"``.
        max_iterations: Planned learner iterations.
        num_envs: Parallel environments.
        env_name: Environment name.
        obs_dim, action_dim: Recorded in the W&B config.
        refresh_per_second: Display refresh limit for logging calls.
        log_dir: TensorBoard event files go directly here; W&B run files under it.
        log_backend: ``"tensorboard"`` | ``"wandb"`` | ``"no_print"`` | other (console only).
        wandb_project, wandb_entity, wandb_name, wandb_group, wandb_job_type, wandb_tags,
            wandb_notes: ``wandb.init`` arguments when no run exists yet; the default run name
            is ``f"{algo_name}_{env_name}"``.
    """

    display_title = "🚀 UniLab Off-Policy Training"

    def __init__(
        self,
        algo_name: str = "RL",
        max_iterations: int = 1500,
        num_envs: int = 4096,
        env_name: str = "",
        obs_dim: int = 0,
        action_dim: int = 0,
        refresh_per_second: int = 4,
        log_dir: str = "",
        log_backend: str = "tensorboard",
        wandb_project: str = "unilab",
        wandb_entity: str | None = None,
        wandb_name: str = "",
        wandb_group: str | None = None,
        wandb_job_type: str | None = None,
        wandb_tags: list[str] | None = None,
        wandb_notes: str | None = None,
    ) -> None:
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self._total_steps: int = 0
        self._buffer_size: int = 0
        self._buffer_target: int = 0
        self._wait_time: float = 0.0
        self._h2d_time: float = 0.0
        self._train_time: float = 0.0
        self._weight_sync_time: float = 0.0
        self._throughput_steps: int = 0
        self._has_throughput = False
        self._collector_timing: dict[str, float] = {}
        self._timeout_rate: float = 0.0
        self._terminated_rate: float = 0.0
        self._buffer_utilization: float = 0.0
        self._sync_collection = False
        self._env_steps_per_sync: int = 0
        self._eval: tuple[int, float, float] | None = None  # (iteration, return, length)
        self._best_eval: float | None = None
        self._staging_pool_len: int = 0
        self._staging_pool_max: int = 0
        super().__init__(
            algo_name=algo_name,
            max_iterations=max_iterations,
            num_envs=num_envs,
            env_name=env_name,
            log_dir=log_dir,
            log_backend=log_backend,
            wandb_project=wandb_project,
            wandb_entity=wandb_entity,
            wandb_name=wandb_name,
            wandb_group=wandb_group,
            wandb_job_type=wandb_job_type,
            wandb_tags=wandb_tags,
            wandb_notes=wandb_notes,
            refresh_per_second=refresh_per_second,
            # Off-policy runs write event files directly into log_dir (no "tb" subdirectory).
            tensorboard_subdir=None,
            wandb_config={
                "obs_dim": obs_dim,
                "action_dim": action_dim,
                "max_iterations": max_iterations,
            },
        )

    # ------------------------------------------------------------------ public API

    def start(self, *, status: str = "Warming up...") -> None:
        """Start the live display (a second call only updates the status)."""
        super().start(status=status)

    def finish(self, *, title: str = "Training Summary", extra_summary: str = "") -> None:
        """Final render, summary panel with the total env steps, close backends; idempotent."""
        steps_line = f"  Total env steps: [yellow]{self._total_steps:,}[/]"
        extra = f"{steps_line}\n{extra_summary}" if extra_summary else steps_line
        super().finish(title=title, extra_summary=extra)

    def log_buffer_fill(self, current: int, target: int) -> None:
        """Warm-up progress of the replay buffer; redraws only until training has started."""
        self._buffer_size = int(current)
        self._buffer_target = int(target)
        pct = current / max(target, 1) * 100
        self._status = f"Buffer fill: {current:,}/{target:,} ({pct:.0f}%)"
        if not self._training_started:
            self._refresh()

    def update_collector_timing(self, timing_ms: dict[str, float]) -> None:
        """Merge average collector phase times (ms per collector step)."""
        self._collector_timing.update({k: float(v) for k, v in timing_ms.items()})

    def update_done_rates(self, timeout_rate: float, terminated_rate: float) -> None:
        """Fractions of env steps that ended by time limit / by termination."""
        self._timeout_rate = float(timeout_rate)
        self._terminated_rate = float(terminated_rate)

    def update_buffer_utilization(self, utilization: float) -> None:
        """Stored only (neither displayed nor logged, as in the reference)."""
        self._buffer_utilization = float(utilization)

    def update_replay_queue(self, current_len: int, max_size: int) -> None:
        """Alias of `update_staging_pool`."""
        self.update_staging_pool(current_len, max_size)

    def update_staging_pool(self, current_len: int, max_size: int) -> None:
        """Staging pool fill; shown in the System column when ``max_size > 0``."""
        self._staging_pool_len = int(current_len)
        self._staging_pool_max = int(max_size)

    def set_collection_sync(self, enabled: bool, env_steps_per_sync: int = 0) -> None:
        """Whether collection is synchronised with learning, and env steps per sync."""
        self._sync_collection = bool(enabled)
        self._env_steps_per_sync = int(env_steps_per_sync)

    def log_collector(self, total_steps: int, buffer_size: int, mean_reward: float = 0.0) -> None:
        """Collector progress; a non-zero ``mean_reward`` is appended to the reward history."""
        self._total_steps = int(total_steps)
        self._buffer_size = int(buffer_size)
        if mean_reward != 0:
            self._reward_history.append(float(mean_reward))

    def log_step(
        self,
        iteration: int,
        metrics: dict[str, float] | None = None,
        reward: float | None = None,
        reward_metrics: dict[str, float] | None = None,
        reward_components: dict[str, float] | None = None,
        train_time: float = 0.0,
        wait_time: float = 0.0,
        learner_incremental_h2d_time: float = 0.0,
        weight_sync_time: float = 0.0,
        extra_info: dict[str, Any] | None = None,
    ) -> None:
        """Record one learner iteration, redraw (throttled) and write the backend scalars.

        Times are in seconds. ``extra_info["throughput_steps"]`` (env steps consumed by the
        iteration) enables the Steps/s metric.
        """
        metrics = _drop_legacy_aliases({k: float(v) for k, v in (metrics or {}).items()})
        self._iteration = int(iteration)
        self._train_time = float(train_time)
        self._wait_time = float(wait_time)
        self._h2d_time = float(learner_incremental_h2d_time)
        self._weight_sync_time = float(weight_sync_time)
        self._has_throughput = extra_info is not None
        self._throughput_steps = int((extra_info or {}).get("throughput_steps", 0))
        # Merge rather than replace: metrics produced only every few updates (the delayed
        # actor loss of TD3/SAC) stay on the dashboard between their updates.
        self._latest_metrics.update(metrics)
        if reward is not None:
            self._reward_history.append(float(reward))
        if reward_components:
            self._latest_reward_components = {k: float(v) for k, v in reward_components.items()}
        self._status = "Training"
        self._training_started = True
        self._refresh()
        self._log_step_scalars(metrics, reward, reward_metrics, reward_components)

    def log_eval(self, iteration: int, mean_return: float, mean_length: float) -> None:
        """A deterministic evaluation at ``iteration``: shown in the panel and written as
        ``eval/mean_return`` and ``eval/mean_length`` at the current env step."""
        self._eval = (int(iteration), float(mean_return), float(mean_length))
        self._best_eval = max(self._best_eval or -math.inf, float(mean_return))
        self._refresh()
        if self._tb_writer is None and self._wandb_run is None:
            return
        step = self._total_steps if self._total_steps > 0 else int(iteration)
        scalars = {"eval/mean_return": float(mean_return), "eval/mean_length": float(mean_length)}
        self._log_backend_scalars(scalars, step, iteration=int(iteration))

    def log_status(self, status: str) -> None:
        """Set the status line (forced redraw before training or for errors)."""
        super().log_status(status)

    # ------------------------------------------------------------------ metrics

    def _pipeline_time(self) -> float:
        """Seconds of the learner pipeline of one iteration (excludes waiting for data)."""
        return self._h2d_time + self._train_time + self._weight_sync_time

    def _steps_per_sec(self) -> float | None:
        pipeline = self._pipeline_time()
        if not self._has_throughput or self._throughput_steps <= 0 or pipeline <= 0:
            return None
        return self._throughput_steps / pipeline

    def _log_step_scalars(
        self,
        metrics: Mapping[str, float],
        reward: float | None,
        reward_metrics: Mapping[str, float] | None,
        reward_components: Mapping[str, float] | None,
    ) -> None:
        if self._tb_writer is None and self._wandb_run is None:
            return
        global_step = self._total_steps if self._total_steps > 0 else self._iteration
        scalars: dict[str, float] = {
            "axis/iteration": float(self._iteration),
            "axis/env_steps_total": float(self._total_steps),
        }
        scalars.update({_metric_tag(k): v for k, v in metrics.items()})
        if reward is not None:
            scalars["reward/mean"] = float(reward)
        for key, value in (reward_metrics or {}).items():
            scalars[_reward_tag(key)] = float(value)
        for key, value in (reward_components or {}).items():
            scalars[_reward_tag(key)] = float(value)
        if self._mean_ep_length > 0:
            scalars["episode/length"] = self._mean_ep_length
        scalars["episode/timeout_rate"] = self._timeout_rate
        scalars["episode/terminated_rate"] = self._terminated_rate
        scalars["timing/learner_wait_ms"] = self._wait_time * 1e3
        scalars["timing/learner_incremental_h2d_ms"] = self._h2d_time * 1e3
        scalars["timing/learner_train_ms"] = self._train_time * 1e3
        scalars["timing/learner_weight_sync_ms"] = self._weight_sync_time * 1e3
        for phase, value in self._collector_timing.items():
            scalars[f"timing/collector_{phase}"] = value
        steps_per_sec = self._steps_per_sec()
        if steps_per_sec is not None:
            scalars["perf/steps_per_sec"] = steps_per_sec
        scalars["perf/iter_ms"] = self._pipeline_time() * 1e3
        self._log_backend_scalars(scalars, global_step, iteration=self._iteration)

    # ------------------------------------------------------------------ dashboard

    def _header_fields(self) -> list[tuple[str, str]]:
        steps_per_sec = self._steps_per_sec()
        if steps_per_sec is None:
            return []
        return [(f"Steps/s {steps_per_sec:,.0f}", "bold green")]

    def _metrics_table(self) -> Table:
        table = Table(box=box.SIMPLE_HEAD, expand=True, padding=(0, 1), show_edge=False)
        table.add_column("Losses & Metrics", style="bold")
        table.add_column("Value", justify="right", no_wrap=True)
        if not self._latest_metrics:
            table.add_row(Text("Waiting for data...", style="dim italic"), "")
            return table
        losses = sorted(k for k in self._latest_metrics if "loss" in k)
        others = sorted(k for k in self._latest_metrics if "loss" not in k)
        for key in losses:
            value = self._latest_metrics[key]
            style = "red" if value > LOSS_WARN else ""
            table.add_row(_metric_label(key), Text(format_number(value), style=style))
        for key in others:
            value = self._latest_metrics[key]
            table.add_row(Text(f"  {_metric_label(key)}", style=""), format_number(value))
        return table

    def _rewards_table(self) -> Table:
        table = Table(box=box.SIMPLE_HEAD, expand=True, padding=(0, 1), show_edge=False)
        table.add_column("Rewards", style="bold")
        table.add_column("", justify="right", no_wrap=True)
        if self._reward_history:
            arrow, style = self._reward_trend()
            label = Text("Reward ")
            label.append(arrow, style=style)
            value = f"Mean {self._reward_mean():.3f} / Peak {self._reward_peak():.3f}"
            table.add_row(label, Text(value, style="bold"))
        else:
            table.add_row(Text("Waiting for episodes...", style="dim italic"), "")
        if self._eval is not None:
            iteration, value, length = self._eval
            text = f"{value:.3f} (best {self._best_eval:.3f}, len {length:.0f}, it {iteration})"
            table.add_row("Eval return", Text(text, style="bold cyan"))
        for key in sorted(self._latest_reward_components):
            value = self._latest_reward_components[key]
            name = key.removeprefix("reward/")
            style = "green" if value >= 0 else "red"
            table.add_row(f"  {name}", Text(f"{value:+.4f}", style=style))
        return table

    def _learner_rows(self) -> list[tuple[str, Text]]:
        wait_style = "red" if self._wait_time * 1e3 > WAIT_WARN_MS else ""
        return [
            ("Wait", Text(_ms(self._wait_time), style=wait_style)),
            ("H2D", Text(_ms(self._h2d_time))),
            ("Train", Text(_ms(self._train_time))),
            ("Weight Sync", Text(_ms(self._weight_sync_time))),
        ]

    def _collector_rows(self) -> list[tuple[str, Text]]:
        known = [k for k in COLLECTOR_TIMING_LABELS if k in self._collector_timing]
        extra = sorted(k for k in self._collector_timing if k not in COLLECTOR_TIMING_LABELS)
        return [
            (_phase_label(k), Text(f"{self._collector_timing[k]:,.2f} ms")) for k in known + extra
        ]

    def _system_rows(self) -> list[tuple[str, Text]]:
        sync = f"✓ ({self._env_steps_per_sync})" if self._sync_collection else "✗"
        rows = [
            ("Buffer", Text(f"{self._buffer_size:,}")),
            ("Timeout Rate", Text(f"{self._timeout_rate * 100:.1f}%")),
            ("Terminated Rate", Text(f"{self._terminated_rate * 100:.1f}%")),
            ("Envs", Text(f"{self.num_envs:,}")),
            ("Sync Collect", Text(sync, style="green" if self._sync_collection else "dim")),
        ]
        if self._staging_pool_max > 0:
            full = self._staging_pool_len >= self._staging_pool_max
            rows.append(
                (
                    "Staging Pool",
                    Text(
                        f"{self._staging_pool_len}/{self._staging_pool_max}",
                        style="yellow" if full else "green",
                    ),
                )
            )
        return rows

    def _timing_table(self) -> Table:
        table = Table(box=box.SIMPLE_HEAD, expand=True, padding=(0, 1), show_edge=False)
        for title in ("Learner", "Collector", "System"):
            table.add_column(title, style="bold")
            table.add_column("", justify="right", no_wrap=True)
        columns = [self._learner_rows(), self._collector_rows(), self._system_rows()]
        for i in range(max(len(c) for c in columns)):
            cells: list[str | Text] = []
            for column in columns:
                label, value = column[i] if i < len(column) else ("", Text(""))
                cells.extend([label, value])
            table.add_row(*cells)
        return table

    def _build_display(self) -> RenderableType:
        columns = Table.grid(expand=True, padding=(0, 2))
        columns.add_column(ratio=1)
        columns.add_column(ratio=1)
        columns.add_row(self._metrics_table(), self._rewards_table())
        body = Group(self._build_header(), Text(""), columns, Text(""), self._timing_table())
        return Panel(body, title=self.display_title, border_style="bright_blue")
