"""A run's log directory: checked before anything compiles, and owned by one run at a time.

``claim_log_dir(path)`` creates the directory, proves it writable and takes its lock file
``.run.lock`` for the life of the run. The lock is an ``flock`` on that file, so the kernel
drops it when the owning process dies, however it dies: a lock file left by a dead run is
taken over at once (its old contents are only used to name the previous owner), while a live
owner turns the second run into a ``LogDirError`` naming that owner's pid and start time.

``train`` claims its run's log dir; the CLI only ``probe_log_dir``s it first thing, so a busy or
unwritable directory fails in a fraction of a second, before JAX starts. Claims nest within one
process (a second claim of the same directory shares the lock); the directory is free once
every claim is released.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from unilab_jax.errors import ConfigError

__all__ = [
    "LOCK_FILE", "LogDirError", "RunDirLock", "claim_log_dir", "probe_log_dir",
]  # fmt: skip

LOCK_FILE = ".run.lock"


class LogDirError(ConfigError):
    """A log directory that cannot be used: not a directory, not writable, or in use."""


class _HeldLock:
    """One flock held by this process, shared by nested claims."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.claims = 0

    def give_up(self) -> None:
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)  # an unlocked, empty file: nobody owns the directory
        os.close(self.fd)  # closing drops the flock


_HELD: dict[Path, _HeldLock] = {}


class RunDirLock:
    """A claim on one run's log directory; ``release()`` (or ``with``) gives it up."""

    def __init__(self, directory: Path, held: _HeldLock, took_over: dict | None) -> None:
        self.directory = directory
        self.took_over = took_over
        """The previous owner's record when a stale lock (dead run) was taken over."""
        self._held: _HeldLock | None = held
        held.claims += 1

    def release(self) -> None:
        if self._held is None:
            return
        held, self._held = self._held, None
        held.claims -= 1
        if held.claims:
            return
        _HELD.pop(self.directory, None)
        held.give_up()

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def claim_log_dir(path: str | Path) -> RunDirLock:
    """Create ``path`` if needed, check that it is a writable directory and lock it.

    Raises ``LogDirError`` with the problem and the fix.
    """
    directory = Path(path).resolve()
    if directory in _HELD:
        return RunDirLock(directory, _HELD[directory], None)
    if directory.exists() and not directory.is_dir():
        raise LogDirError(f"--log-dir {path} is a file, not a directory; choose another path")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise LogDirError(
            f"--log-dir {path} cannot be written ({err.strerror or err}); "
            "choose a writable location"
        ) from None
    previous = _read_owner(fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            raise
        owner = _describe(previous)
        raise LogDirError(
            f"--log-dir {path} is in use by another run ({owner}); wait for it to end, "
            "stop it, or choose another --log-dir"
        ) from None
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
    except OSError as err:
        os.close(fd)
        raise LogDirError(
            f"--log-dir {path} cannot be written ({err.strerror or err}); "
            "choose a location with free space"
        ) from None
    _HELD[directory] = _HeldLock(fd)
    return RunDirLock(directory, _HELD[directory], previous or None)


def probe_log_dir(path: str | Path) -> None:
    """The checks of ``claim_log_dir`` without creating or locking anything, for failing fast
    before a run is built: ``LogDirError`` when ``path`` is a file, cannot be created or
    written, or is locked by a live run."""
    directory = Path(path).resolve()
    if directory.exists() and not directory.is_dir():
        raise LogDirError(f"--log-dir {path} is a file, not a directory; choose another path")
    existing = directory
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        reason = "read-only or not writable" if existing.is_dir() else f"{existing} is a file"
        raise LogDirError(f"--log-dir {path} cannot be written ({reason}); choose a writable one")
    lock = directory / LOCK_FILE
    if directory in _HELD or not lock.exists():
        return
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise LogDirError(
            f"--log-dir {path} is in use by another run ({_describe(_read_owner(fd))}); wait "
            "for it to end, stop it, or choose another --log-dir"
        ) from None
    finally:
        os.close(fd)  # also drops the probe's own lock


def _read_owner(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        return {}


def _describe(owner: dict) -> str:
    if not owner:
        return "owner unknown"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("started", 0)))
    return f"pid {owner.get('pid')} on {owner.get('host')}, started {started}"
