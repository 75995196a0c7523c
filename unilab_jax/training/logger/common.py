"""Shared machinery of the training loggers: Rich console/Live, backends, summary panel.

`BaseTrainingLogger` (here) owns what every training logger needs and what is algorithm-agnostic:

- the Rich console and a `Live` display that is only refreshed on demand (no refresh thread, so
  the training loop alone decides when the terminal is redrawn), throttled to
  `refresh_per_second`;
- the backends: TensorBoard event files, a Weights & Biases run, or none;
- the reward history (`deque(maxlen=200)`), latest metrics and reward components, mean episode
  length, last checkpoint path and current iteration;
- `start` / `log_status` / `log_save` / `update_ep_length` / `finish` / `close`.

Subclasses build the dashboard (`_build_display`) and decide which scalars to log. The
TensorBoard writer and the wandb import are `backends`; the console override and the number
formats `console`.

Deviations from the reference (UniLab's torch ``unilab.logging.common``):

- TensorBoard is written without torch or TensorFlow: `TensorBoardScalarWriter` builds
  ``Summary`` protos with ``simple_value`` (the same records torch's ``SummaryWriter.add_scalar``
  writes) and hands them to tensorboard's own ``EventFileWriter``. An empty ``log_dir`` falls
  back to ``runs/<date>_<host>`` like torch's writer.
- The console can be chosen from outside without touching the fixed constructor signatures:
  loggers built inside ``with use_console(console):`` print to that console (tests render the
  real dashboard to a ``Console(file=io.StringIO(), force_terminal=True)``). The ``console``
  attribute is public as well.
- ``close()`` always ends by showing the terminal cursor again (unless the backend is
  ``no_print``), even when the Live display was never started, already stopped, or its final
  render raised; UniLab issue #374 was a cursor left hidden after Ctrl+C.
- ``wandb.init`` is called without ``reinit``: a new run is only created when ``wandb.run`` is
  None, and recent wandb versions deprecate ``reinit=True``.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from unilab_jax.training.logger.backends import (
    WANDB_INSTALL_HINT,
    TensorBoardScalarWriter,
    default_tensorboard_dir,
    load_wandb,
)
from unilab_jax.training.logger.console import (
    console_override,
    format_duration,
    format_number,
    use_console,
)

__all__ = [
    "BaseTrainingLogger",
    "TensorBoardScalarWriter",
    "format_duration",
    "format_number",
    "use_console",
]

REWARD_HISTORY_LEN = 200
# The displayed "Mean" averages this many of the latest history entries; "Peak" uses all 200.
REWARD_MEAN_WINDOW = 50
# Trend arrow: mean of the last TREND_WINDOW entries against the TREND_WINDOW before them.
TREND_WINDOW = 10
TREND_TOLERANCE = 0.05


class BaseTrainingLogger:
    """Rich live display plus an optional TensorBoard / W&B backend.

    Args:
        algo_name: Shown in the header and the summary; part of the default W&B run name.
        max_iterations: Planned iterations (header ``iter i/max``, ETA, summary).
        num_envs: Number of parallel environments (display and W&B config).
        env_name: Environment name (header, summary, W&B run name).
        log_dir: Backend output directory.
        log_backend: ``"tensorboard"``, ``"wandb"``, ``"no_print"`` (silent, no backend) or
            anything else for console only; case-insensitive.
        wandb_project, wandb_entity, wandb_name, wandb_group, wandb_job_type, wandb_tags,
            wandb_notes: Passed to ``wandb.init`` when this logger creates the run.
        refresh_per_second: Upper bound on display refreshes triggered by logging calls.
        tensorboard_subdir: Subdirectory of ``log_dir`` for event files; None writes directly
            into ``log_dir``.
        wandb_config: Extra entries of the W&B run config.
    """

    display_title = "UniLab Training"

    def __init__(
        self,
        *,
        algo_name: str = "RL",
        max_iterations: int = 1500,
        num_envs: int = 4096,
        env_name: str = "",
        log_dir: str = "",
        log_backend: str = "tensorboard",
        wandb_project: str = "unilab",
        wandb_entity: str | None = None,
        wandb_name: str = "",
        wandb_group: str | None = None,
        wandb_job_type: str | None = None,
        wandb_tags: list[str] | None = None,
        wandb_notes: str | None = None,
        refresh_per_second: int = 4,
        tensorboard_subdir: str | None = "tb",
        wandb_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.algo_name = algo_name
        self.max_iterations = max_iterations
        self.num_envs = num_envs
        self.env_name = env_name
        self.log_dir = log_dir
        self.log_backend = (log_backend or "").lower()
        self.refresh_per_second = refresh_per_second
        self.console: Console = console_override.get() or Console()

        self._quiet = self.log_backend == "no_print"
        self._reward_history: deque[float] = deque(maxlen=REWARD_HISTORY_LEN)
        self._latest_metrics: dict[str, float] = {}
        self._latest_reward_components: dict[str, float] = {}
        self._mean_ep_length: float = 0.0
        self._last_save_path: str | None = None
        self._warnings: list[str] = []
        self._iteration: int = 0
        self._status: str = "Initializing..."
        self._training_started = False
        self._start_time: float | None = None
        self._last_refresh_time: float = -math.inf
        self._live: Live | None = None
        self._finished = False
        self._backends_closed = False

        self._tb_writer: TensorBoardScalarWriter | None = None
        self._wandb_run: Any | None = None
        self._owns_wandb_run = False
        if self.log_backend == "tensorboard":
            self._init_tensorboard(tensorboard_subdir)
        elif self.log_backend == "wandb":
            # TensorBoard files are written alongside, so a wandb run is readable offline.
            self._init_tensorboard(tensorboard_subdir)
            config = {"algo": algo_name, "env": env_name, "num_envs": num_envs}
            config.update(wandb_config or {})
            self._init_wandb(
                project=wandb_project,
                name=wandb_name or f"{algo_name}_{env_name}",
                config=config,
                entity=wandb_entity,
                group=wandb_group,
                job_type=wandb_job_type,
                tags=wandb_tags,
                notes=wandb_notes,
            )

    # ------------------------------------------------------------------ backends

    def _print(self, *objects: Any) -> None:
        if not self._quiet:
            self.console.print(*objects)

    def _init_tensorboard(self, subdir: str | None) -> None:
        base = self.log_dir or default_tensorboard_dir()
        tb_dir = os.path.join(base, subdir) if subdir else base
        try:
            self._tb_writer = TensorBoardScalarWriter(tb_dir)
        except ImportError:
            self._print(
                "[yellow]Warning: tensorboard is not installed; TensorBoard logging is "
                "disabled (pip install tensorboard).[/]"
            )
            return
        self._print(f"[dim]TensorBoard logging to: {escape(tb_dir)}[/]")

    def _init_wandb(
        self, *, project: str, name: str, config: dict[str, Any], **kwargs: Any
    ) -> None:
        wandb = load_wandb()
        if wandb is None:
            self._print(
                "[yellow]Warning: log_backend='wandb' but wandb is not installed; W&B logging is "
                f"disabled. Install it with: {escape(WANDB_INSTALL_HINT)}[/]"
            )
            return
        if wandb.run is not None:
            # A run created by the caller (e.g. an experiment tracker) is reused, not owned.
            self._wandb_run = wandb.run
            self._owns_wandb_run = False
        else:
            if self.log_dir:
                os.makedirs(self.log_dir, exist_ok=True)
            self._wandb_run = wandb.init(
                project=project,
                name=name,
                config=config,
                dir=self.log_dir or None,
                **kwargs,
            )
            self._owns_wandb_run = True
        run_name = getattr(self._wandb_run, "name", None) or name
        self._print(
            f"[dim]W&B logging to project: {escape(project)}, run: {escape(str(run_name))}[/]"
        )

    def _log_backend_scalars(self, scalars: Mapping[str, float], step: int, **extra: Any) -> None:
        """Write ``scalars`` to TensorBoard, and ``scalars | extra`` as one ``wandb.log``."""
        if self._tb_writer is not None:
            for tag, value in scalars.items():
                self._tb_writer.add_scalar(tag, value, step)
        if self._wandb_run is not None and not self._backends_closed:
            self._wandb_run.log({**scalars, **extra}, step=step)

    def _close_backends(self) -> None:
        if self._backends_closed:
            return
        self._backends_closed = True
        try:
            if self._tb_writer is not None:
                self._tb_writer.close()
        finally:
            if self._wandb_run is not None and self._owns_wandb_run:
                self._wandb_run.finish()

    # ------------------------------------------------------------------ display

    def _elapsed(self) -> float:
        return 0.0 if self._start_time is None else time.time() - self._start_time

    def _eta(self) -> str:
        if self._iteration <= 0 or self._start_time is None:
            return "--"
        remaining = max(self.max_iterations - self._iteration, 0)
        return format_duration(remaining * self._elapsed() / self._iteration)

    def _header_fields(self) -> list[tuple[str, str]]:
        """Extra ``(text, style)`` header fields placed before the status; for subclasses."""
        return []

    def _build_header(self) -> Text:
        fields: list[tuple[str, str]] = [(self.algo_name, "bold cyan")]
        if self.env_name:
            fields.append((self.env_name, "cyan"))
        fields.append((f"iter {self._iteration}/{self.max_iterations}", "bold"))
        fields.append((f"⏱ {format_duration(self._elapsed())}", ""))
        fields.append((f"ETA {self._eta()}", ""))
        if self._mean_ep_length > 0:
            fields.append((f"Ep Len {self._mean_ep_length:.1f}", ""))
        fields.extend(self._header_fields())
        fields.append((self._status, "dim italic"))
        header = Text()
        for i, (text, style) in enumerate(fields):
            if i:
                header.append(" | ", style="dim")
            header.append(text, style=style)
        return header

    def _build_display(self) -> RenderableType:
        return Panel(self._build_header(), title=self.display_title, border_style="bright_blue")

    def _refresh(self, *, force: bool = False) -> None:
        """Redraw the Live display, at most ``refresh_per_second`` times a second unless forced."""
        if self._live is None or self._finished:
            return
        now = time.monotonic()
        min_interval = 1.0 / self.refresh_per_second if self.refresh_per_second > 0 else 0.0
        if not force and now - self._last_refresh_time < min_interval:
            return
        self._last_refresh_time = now
        self._live.refresh()

    def _stop_live(self) -> None:
        """Stop the Live display (one final render) and always show the cursor again."""
        live, self._live = self._live, None
        try:
            if live is not None:
                live.stop()
        finally:
            if not self._quiet:
                # Live.stop shows the cursor too, but not when it never started or when the
                # final render was interrupted before its own `finally` (issue #374).
                self.console.show_cursor(True)

    # ------------------------------------------------------------------ reward statistics

    def _reward_mean(self) -> float:
        recent = list(self._reward_history)[-REWARD_MEAN_WINDOW:]
        return sum(recent) / len(recent)

    def _reward_peak(self) -> float:
        return max(self._reward_history)

    def _reward_trend(self) -> tuple[str, str]:
        """(arrow, style): last TREND_WINDOW entries vs the previous TREND_WINDOW, +-5 %."""
        history = list(self._reward_history)
        if len(history) < 2 * TREND_WINDOW:
            return "━", "dim"
        recent = sum(history[-TREND_WINDOW:]) / TREND_WINDOW
        previous = sum(history[-2 * TREND_WINDOW : -TREND_WINDOW]) / TREND_WINDOW
        tolerance = TREND_TOLERANCE * abs(previous)
        if recent > previous + tolerance:
            return "▲", "green"
        if recent < previous - tolerance:
            return "▼", "red"
        return "━", "dim"

    # ------------------------------------------------------------------ public API

    def start(self, *, status: str = "Warming up...") -> None:
        """Record the start time and start the Live display; a second call only sets status."""
        self._status = status
        if self._start_time is not None:
            self._refresh(force=True)
            return
        self._start_time = time.time()
        if self._quiet or self._finished:
            return
        self._live = Live(
            get_renderable=self._build_display,
            console=self.console,
            auto_refresh=False,
            transient=False,
            refresh_per_second=max(self.refresh_per_second, 1),
        )
        self._live.start(refresh=True)
        self._last_refresh_time = time.monotonic()

    def log_status(self, status: str) -> None:
        """Set the status; redraw at once before training or for errors, else on next refresh."""
        self._status = status
        if not self._training_started or "[red]" in status or "ERROR" in status:
            self._refresh(force=True)

    def log_warning(self, text: str) -> None:
        """Print a warning above the live display (and into a redirected log), once per call;
        it is also repeated in the final summary."""
        self._warnings.append(text)
        self._print(f"[bold yellow]WARNING[/bold yellow] {escape(text)}")

    def log_save(self, path: str) -> None:
        """Remember the latest checkpoint path for the summary."""
        self._last_save_path = str(path)

    def update_ep_length(self, mean_ep_length: float) -> None:
        """Mean episode length of recently finished episodes (shown when > 0)."""
        self._mean_ep_length = float(mean_ep_length)

    def _summary_lines(self, extra_summary: str) -> list[str]:
        env = escape(self.env_name) if self.env_name else "-"
        lines = [
            "[bold green]Training complete[/]",
            f"  Algo: [cyan]{escape(self.algo_name)}[/] | Env: [cyan]{env}[/]",
            f"  Iterations: {self._iteration}/{self.max_iterations}",
            f"  Total time: {format_duration(self._elapsed())}",
        ]
        if extra_summary:
            lines.append(extra_summary.rstrip("\n"))
        if self._last_save_path:
            lines.append(f"  Last checkpoint: {escape(self._last_save_path)}")
        for text in self._warnings:
            lines.append(f"  [bold yellow]Warning:[/] {escape(text)}")
        return lines

    def finish(self, *, title: str = "Training Summary", extra_summary: str = "") -> None:
        """Stop the display, print the summary panel once and close the backends."""
        if self._finished:
            return
        try:
            self._stop_live()
        finally:
            self._finished = True
        try:
            body = "\n".join(self._summary_lines(extra_summary))
            self._print(Panel(body, title=title, border_style="green"))
        finally:
            self._close_backends()

    def close(self) -> None:
        """Stop the display and close the backends without a summary (after an interrupt).

        Safe to call at any time and repeatedly; the cursor is always shown again.
        """
        try:
            # close() runs on error paths (`finally`, after Ctrl+C): a failing final render
            # must not mask the original exception; _stop_live restored the cursor already.
            with contextlib.suppress(Exception):
                self._stop_live()
        finally:
            self._close_backends()
