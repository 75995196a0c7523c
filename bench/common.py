"""Helpers shared by the bench scripts: machine description, timing, RESULTS.md sections.

Speed is measured and recorded here, never asserted in tests. Every script prints its table and
(unless ``--no-record``) replaces its own section of ``bench/RESULTS.md`` with the machine,
date, commit, command and the table, so rerunning one script updates only its figures.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS = BENCH_DIR / "RESULTS.md"
#: One results file per experiment family (rows the tables are drawn from) and the figures.
RESULTS_DIR = BENCH_DIR / "results"
FIGURES_DIR = BENCH_DIR / "figures"

_RESULTS_HEADER = """# Bench results

Figures written by the scripts in `bench/` (see `bench/README.md`); each script replaces its own
section. Speed is measured here, never asserted in tests. Numbers from different machines are
not comparable; each section names the machine it ran on.
"""

#: Load averages when the first bench module was imported (the start of a run).
START_LOAD = os.getloadavg() if hasattr(os, "getloadavg") else None

__all__ = [
    "BENCH_DIR",
    "FIGURES_DIR",
    "RESULTS_DIR",
    "REPO_ROOT",
    "RESULTS",
    "add_common_args",
    "cpu_model",
    "ensure_repo_on_path",
    "git_commit",
    "load_average",
    "machine_info",
    "machine_lines",
    "markdown_table",
    "record_section",
    "time_repeated",
    "today",
]


# ----------------------------------------------------------------------------- machine
def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (``platform.processor()`` elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or "unknown")


def _ram_gib() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s*(\d+)\s*kB", text, re.MULTILINE)
    return int(match.group(1)) / 2**20 if match else None


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> tuple[float, float, float] | None:
    """The 1/5/15-minute load averages (None where the OS does not report them)."""
    try:
        return os.getloadavg()
    except OSError:
        return None


def machine_info() -> dict[str, Any]:
    """CPU, cores, RAM, library versions and ``jax.devices()`` (imports jax)."""
    import jax

    ram = _ram_gib()
    return {
        "cpu": cpu_model(),
        "cores": _usable_cores(),
        "logical_cpus": os.cpu_count(),
        "ram_gib": None if ram is None else round(ram, 1),
        "python": platform.python_version(),
        "jax": _version("jax"),
        "jaxlib": _version("jaxlib"),
        "mujoco": _version("mujoco"),
        "mujoco_mjx": _version("mujoco-mjx"),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def machine_lines(info: dict[str, Any] | None = None) -> list[str]:
    """Human-readable description of the machine, one fact per line."""
    info = machine_info() if info is None else info
    ram = "?" if info["ram_gib"] is None else f"{info['ram_gib']} GiB"
    lines = [
        f"CPU: {info['cpu']}, {info['cores']} usable cores "
        f"({info['logical_cpus']} logical CPUs), RAM {ram}",
        f"jax {info['jax']}, jaxlib {info['jaxlib']}, mujoco {info['mujoco']}, "
        f"mujoco-mjx {info['mujoco_mjx']}, Python {info['python']}",
        f"backend {info['backend']}, devices {', '.join(info['devices'])}",
    ]
    if info["xla_flags"]:
        lines.append(f"XLA_FLAGS={info['xla_flags']}")
    return lines


def git_commit() -> str:
    """``git rev-parse --short HEAD``, plus ``-dirty`` when the work tree has changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if status else head


def today() -> str:
    """Local date and time, minutes resolution, with the UTC offset."""
    return datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %z")


# ----------------------------------------------------------------------------- timing
def time_repeated(
    fn: Callable[[], Any], repeats: int = 5, warmup: int = 1
) -> dict[str, float | list[float]]:
    """Median wall time of ``fn()`` over ``repeats`` calls, after ``warmup`` untimed calls.

    ``fn`` takes no arguments (close over the inputs; thread a state through a mutable holder
    if each call should continue from the last). Its result is passed to
    ``jax.block_until_ready`` before the clock stops, so asynchronous dispatch is included.
    Returns ``{"median", "min", "max", "times"}`` in seconds."""
    import jax

    for _ in range(warmup):
        jax.block_until_ready(fn())
    times = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return {
        "median": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "times": times,
    }


# ----------------------------------------------------------------------------- recording
def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table; numbers right-aligned by the caller's formatting."""

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|")

    out = ["| " + " | ".join(cell(h) for h in headers) + " |"]
    out.append("|" + "|".join("---" for _ in headers) + "|")
    out.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return "\n".join(out)


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def record_section(
    name: str,
    title: str,
    body: str,
    *,
    info: dict[str, Any] | None = None,
    command: str | None = None,
    notes: Sequence[str] = (),
    path: Path = RESULTS,
) -> str:
    """Append or replace the section ``name`` (per backend) of ``path`` (``bench/RESULTS.md``).

    The section holds ``title``, the machine (``info``, see ``machine_info``), date, commit,
    command line, 1-minute load average at the end of the run, ``notes`` and ``body`` (usually
    a markdown table). Other sections are left as they are. Returns the section text."""
    info = machine_info() if info is None else info
    command = command or _command_line()
    load = load_average()
    meta = [
        f"- Date: {today()}; commit `{git_commit()}`",
        *(f"- {line}" for line in machine_lines(info)),
        f"- Command: `{command}`",
    ]
    if load is not None and START_LOAD is not None:
        meta.append(
            f"- Load average (1/5/15 min) at the start: {START_LOAD[0]:.2f} / "
            f"{START_LOAD[1]:.2f} / {START_LOAD[2]:.2f}; at the end: "
            f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (this run itself keeps the cores "
            f"busy)"
        )
    # One section per script and backend: a GPU run adds its own section next to the CPU one.
    start, end = _markers(f"{name}-{info['backend']}")
    parts = [start, f"## {title} on {info['backend'].upper()}", "", *meta]
    if notes:
        parts += ["", *notes]
    parts += ["", body.rstrip(), end]
    section = "\n".join(parts)

    text = path.read_text() if path.exists() else _RESULTS_HEADER
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")
    return section


def _command_line() -> str:
    """How this process was started, as ``python -m bench.x ...`` when run as a module."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    args = " ".join(shlex.quote(a) for a in sys.argv[1:])
    if spec is not None and spec.name:
        return f"python -m {spec.name} {args}".strip()
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(REPO_ROOT):
        script = script.relative_to(REPO_ROOT)
    return f"python {script} {args}".strip()


def add_common_args(parser: argparse.ArgumentParser, repeats: int) -> None:
    """``--repeats`` and ``--no-record``, shared by every script."""
    parser.add_argument(
        "--repeats",
        type=int,
        default=repeats,
        help=f"timed calls after one untimed warm-up call; the median is reported "
        f"(default {repeats})",
    )
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="print the table only; do not update bench/RESULTS.md",
    )


def ensure_repo_on_path() -> None:
    """Make ``import bench.*`` and ``import unilab_jax`` work when run as a script."""
    root = str(REPO_ROOT)
    if root not in sys.path:
        sys.path.insert(0, root)


def evaluate_command(description: str, evaluate: Any, argv: Sequence[str] | None = None) -> None:
    """The learning evaluators' command line: ``evaluate RUN [--episodes N] [--seed S]``, a
    run's newest checkpoint beside the untrained policy (``evaluate(args)`` prints them)."""
    parser = argparse.ArgumentParser(description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="a run's newest checkpoint beside the untrained policy")
    ev.add_argument("run", help="a training run's log dir")
    ev.add_argument("--episodes", type=int, default=64)
    ev.add_argument("--seed", type=int, default=1)
    evaluate(parser.parse_args(argv))
