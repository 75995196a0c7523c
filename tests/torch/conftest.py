"""Torch-path tests: every test is checked for leftover processes and shared memory."""

from __future__ import annotations

import multiprocessing as mp

import pytest
from leftovers import shm_entries, wait_no_leak


@pytest.fixture(autouse=True)
def no_leftovers():
    """Every test must leave no /dev/shm entry and no live child process behind."""
    before = shm_entries()
    yield
    children = mp.active_children()  # also joins finished ones
    for child in children:
        child.terminate()
        child.join(5)
    assert not children, f"children left alive: {children}"
    left = wait_no_leak(before)
    assert not left, f"/dev/shm entries left behind: {sorted(left)}"
