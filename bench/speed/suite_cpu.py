"""Where the test suite's CPU goes: a pytest plugin that records each test's CPU seconds (its
worker's own, and the subprocesses it waited for), and a summary of the records.

The suite runs on 2 cores with 2 xdist workers, so its wall time is about its CPU time / 2, and
a test's wall time says little about its cost (a cheap test waits while its neighbour's
subprocesses compile). Record, then summarise::

    PYTHONPATH=bench/speed python -m pytest -q -n 2 --dist loadfile -p suite_cpu  # .suite_cpu/
    python -m bench.speed.suite_cpu [--top 40]

Children count when waited for (``subprocess.run``/``communicate``/``wait``); a process left to
the operating system is not counted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import time
from pathlib import Path

import pytest

OUT = Path(".suite_cpu")


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


_rows: list[tuple[str, float, float, float]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    (own, children), start = _cpu(), time.monotonic()
    yield
    own2, children2 = _cpu()
    _rows.append((item.nodeid, own2 - own, children2 - children, time.monotonic() - start))


def pytest_configure(config):
    """In the main process (before any xdist worker starts): drop an earlier run's records,
    which the summary would otherwise merge with this run's."""
    if not hasattr(config, "workerinput"):
        for old in OUT.glob("*.json"):
            old.unlink()


def pytest_sessionfinish(session):
    if not _rows:  # xdist's main process runs no test
        return
    OUT.mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (OUT / f"{worker}.json").write_text(json.dumps(_rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=OUT, help="the records' folder")
    parser.add_argument("--top", type=int, default=30, help="tests and files to list")
    args = parser.parse_args()
    rows = [r for f in sorted(args.dir.glob("*.json")) for r in json.loads(f.read_text())]
    if not rows:
        raise SystemExit(f"error: no records in {args.dir}: run pytest with -p suite_cpu first")
    own, children = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{len(rows)} tests: {own:.0f} s CPU in the workers, {children:.0f} s in subprocesses")
    files: collections.Counter = collections.Counter()
    for name, a, b, _ in rows:
        files[name.split("::")[0]] += a + b
    print("\nCPU s  file")
    for name, seconds in files.most_common(args.top):
        print(f"{seconds:5.0f}  {name}")
    print("\nCPU s (own + children)  wall s  test")
    for name, a, b, wall in sorted(rows, key=lambda r: -(r[1] + r[2]))[: args.top]:
        print(f"{a + b:5.0f} ({a:4.0f} + {b:4.0f})  {wall:6.0f}  {name}")


if __name__ == "__main__":
    main()
