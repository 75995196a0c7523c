"""The leak check itself: it must tell this test's /dev/shm entries from another process's."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys

from leftovers import leaked, shm_entries

HOLDER = """
import multiprocessing as mp, sys
locks = [mp.get_context("spawn").Lock() for _ in range(3)]
print(" ".join("sem." + lock._semlock.name.lstrip("/") for lock in locks), flush=True)
sys.stdin.read()
"""


def _entry(lock) -> str:
    return "sem." + lock._semlock.name.lstrip("/")


def test_a_semaphore_another_process_holds_is_not_ours_and_ours_is():
    # glibc maps a new semaphore under a temporary name, so its creator's /proc maps never show
    # the sem.mp-... name: the check must match by inode (the pytest-xdist worker next door
    # creates such semaphores all the time). Names are taken from the locks themselves, so
    # entries the other worker makes meanwhile do not matter.
    before = shm_entries()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        theirs = set(holder.stdout.readline().split())
        assert len(theirs) == 3 and theirs <= shm_entries()
        ours = mp.get_context("spawn").Lock()
        left = leaked(shm_entries() - before)
        assert _entry(ours) in left
        assert not theirs & left
        del ours
    finally:
        holder.communicate("")
    assert holder.returncode == 0
