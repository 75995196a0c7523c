"""What every torch-path test must leave behind: no live child process, no `/dev/shm` entry.

`/dev/shm` is shared with anything else running on the machine (the other pytest-xdist worker
too), so an entry counts as leaked only if no other live process holds it open or mapped.

Entries are matched to their holders by inode, not by name: glibc's `sem_open` builds a
semaphore under a temporary name, maps it, then links it to its own name, so its creator's
`/proc/PID/maps` shows that temporary name (e.g. `/dev/shm/sem.pdO4ck (deleted)`), never the
`sem.mp-...` name that `/dev/shm` lists.
"""

from __future__ import annotations

import os
import time

SHM = "/dev/shm"


def shm_entries() -> set[str]:
    return set(os.listdir(SHM))


def _held_by(pid: str) -> set[int]:
    """Inodes of the /dev/shm files a process has open or mapped."""
    held = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(f"{SHM}/"):
                    held.add(os.stat(f"/proc/{pid}/fd/{fd}").st_ino)
            except OSError:  # closed meanwhile
                pass
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)  # address perms offset dev inode path
                if len(fields) == 6 and fields[5].startswith(f"{SHM}/"):
                    held.add(int(fields[4]))
    except OSError:  # the process ended or is not ours
        pass
    return held


def _inode(name: str) -> int | None:
    try:
        return os.stat(f"{SHM}/{name}").st_ino
    except OSError:  # removed meanwhile
        return None


def leaked(new: set[str]) -> set[str]:
    """Entries of `new` that still exist and that nobody but this process holds: ours, or
    orphaned."""
    foreign = set()
    own = str(os.getpid())
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid != own:
            foreign |= _held_by(pid)
    inodes = {name: _inode(name) for name in new}
    return {name for name, ino in inodes.items() if ino is not None and ino not in foreign}


def wait_no_leak(before: set[str], timeout: float = 3.0) -> set[str]:
    deadline = time.monotonic() + timeout
    while (left := leaked(shm_entries() - before)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
