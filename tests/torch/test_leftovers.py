"""The leak check itself: it must tell this test's /dev/shm entries from another process's."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys

from leftovers import leaked, shm_entries

HOLDER = """
import multiprocessing as mp, sys
locks = [mp.get_context("spawn").Lock() for _ in range(3)]
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_semaphore_another_process_holds_is_not_ours_and_ours_is():
    # glibc maps a new semaphore under a temporary name, so the holder's /proc maps never show
    # the sem.mp-... name: the check must match by inode (the pytest-xdist worker next door
    # creates such semaphores all the time).
    before = shm_entries()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        foreign = {name for name in shm_entries() - before if name.startswith("sem.mp-")}
        assert len(foreign) >= 3
        ours = mp.get_context("spawn").Lock()
        mine = shm_entries() - before - foreign
        assert len(mine) == 1
        assert leaked(shm_entries() - before) == mine
        del ours
    finally:
        holder.communicate("")
    assert holder.returncode == 0
