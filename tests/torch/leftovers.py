"""What every torch-path test must leave behind: no live child process, no `/dev/shm` entry.

`/dev/shm` is shared with anything else running on the machine, so an entry counts as leaked
only if no other live process holds it open or mapped.
"""

from __future__ import annotations

import os
import time


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm"))


def _held_by(pid: str) -> set[str]:
    """/dev/shm names a process has open or mapped."""
    held = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("/dev/shm/"):
                held.add(target.split()[0][len("/dev/shm/") :])
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                if "/dev/shm/" in line:
                    held.add(line.split("/dev/shm/", 1)[1].split()[0])
    except OSError:  # the process ended or is not ours
        pass
    return held


def leaked(new: set[str]) -> set[str]:
    """Entries of `new` that nobody but this process holds: ours, or orphaned.

    `/dev/shm` is shared with other test runs on this machine; an entry that another live
    process holds open belongs to that process, not to this test.
    """
    foreign = set()
    own = str(os.getpid())
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid != own:
            foreign |= _held_by(pid)
    return {name for name in new if name not in foreign}


def wait_no_leak(before: set[str], timeout: float = 3.0) -> set[str]:
    deadline = time.monotonic() + timeout
    while (left := leaked(shm_entries() - before)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
