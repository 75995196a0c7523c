"""Packed shared-memory CPU replay ring (reference §1.4), safe against torn reads.

Layout: one float32 `[capacity, width]` tensor in shared memory, `capacity = replay_buffer_n *
num_envs` rows (so `replay_buffer_n` is the per-env history depth), columns
obs | next_obs | actions | reward | done | truncated | critic | next_critic. The collector process
`add`s, the learner process `sample`s; the object travels to the collector by spawn pickling
(torch shared tensors go as shared-memory handles, the lock as a semaphore handle).

Torn reads (reference quirk "A-path replay reads are unlocked"): fixed with a per-row range
check on absolute row numbers, the seqlock idea applied to a ring, instead of locking the copies.

- Three shared int64 counters, all monotonic except `size`: `claimed` (rows the writer has
  started writing, absolute), `ptr` (rows fully written, absolute, as in the reference) and
  `size = min(ptr, capacity)`. Absolute row `a` lives in slot `a % capacity`.
- Writer (one collector): `claimed += n`, copy the `n` packed rows, then `ptr += n`.
- Reader: read `ptr` (p1), draw absolute rows in `[max(p1 - size, claimed - capacity), p1)`,
  gather, then read `claimed` again (p2). A gathered row `a` is intact iff `a >= p2 -
  capacity`: it was complete before the gather (`a < p1`), and no write since then has reached
  its slot (that needs `claimed > a + capacity`). Rows failing the check are redrawn and
  regathered; only the oldest rows of the ring can fail, so retries are rare and short.
- Each counter read / update happens under a tiny spawn `Lock`. The lock is never held during a
  row copy, so the collector never waits for a gather and vice versa; its only job is to act as
  the memory barrier that orders "counter, then data" on the writer and "data, then counter"
  on the reader on any CPU (x86 would be ordered anyway, ARM would not). A process killed
  while holding it (SIGKILL, the OOM killer) never releases it, so a waiter gives up each
  second to call `while_waiting` (the learner checks there that its collector is alive and
  raises `CollectorError`) instead of blocking forever.

Constructed with ours (`ReplayBuffer(capacity_n, num_envs, obs_dim, action_dim, critic_dim,
device="cpu", recorder=None)`: `capacity_n` env steps of `num_envs` rows) or the reference's
arguments (`ReplayBuffer(capacity, obs_dim, action_dim, device, defer_gpu=False, critic_dim=0,
packed_cpu_storage=False)`: `capacity` rows; `defer_gpu` and `packed_cpu_storage` are accepted
and ignored, as the reference ignores them, the storage always being packed CPU memory). Which
one a call means: the reference's keywords (`capacity`, `defer_gpu`, `packed_cpu_storage`) or a
device as the fourth argument pick the reference's; otherwise ours, unless only the reference's
binds (`ReplayBuffer(1000, 8, 2, device="cpu")`). `add` takes the reference's keywords
(`terminal_next_obs`, `terminal_next_critic`, in its order) and ours (`terminal_obs`,
`terminal_critic`, keyword-only); one `add` of more rows than the ring holds keeps the newest
`capacity`, as the reference's wrap-around does.

Other deviations: the terminal patch (next_obs / next_critic of rows whose terminal mask is set)
is applied while packing the rows, before they reach shared memory, so a reader can never see a
row between the copy and the patch. Draws exclude the rows that an in-progress write is
overwriting (they are about to disappear anyway). Exactly one process may `add`.
"""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing as mp
import time
from collections.abc import Callable
from typing import Any

import torch

from unilab.ipc.locks import held
from unilab.logging.trace_event import TraceRecorder, maybe_span

__all__ = ["ReplayBuffer"]

_FIELDS = ("obs", "next_obs", "actions", "rewards", "dones", "truncated", "critic", "next_critic")


def _one_of(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """``value`` given under the reference's ``name`` or our ``alias``, not both."""
    if value is not None and alias_value is not None:
        raise TypeError(f"ReplayBuffer.add: pass {name} or {alias}, not both")
    return value if value is not None else alias_value


def _ours(
    capacity_n: int,
    num_envs: int,
    obs_dim: int,
    action_dim: int,
    critic_dim: int,
    device: str | torch.device = "cpu",
    recorder: TraceRecorder | None = None,
) -> None:
    """Our constructor's arguments (`ReplayBuffer`)."""


def _reference(
    capacity: int,
    obs_dim: int,
    action_dim: int,
    device: str | torch.device,
    defer_gpu: bool = False,
    critic_dim: int = 0,
    packed_cpu_storage: bool = False,
    *,
    recorder: TraceRecorder | None = None,
) -> None:
    """The reference's constructor's arguments (`ReplayBuffer`), and our `recorder`."""


_OURS = inspect.signature(_ours)
_REFERENCE = inspect.signature(_reference)
_REFERENCE_ONLY = frozenset({"capacity", "defer_gpu", "packed_cpu_storage"})


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``capacity`` (rows), ``num_envs`` (None in the reference's form), the widths,
    ``device`` and ``recorder`` of a constructor call in either form (module docstring)."""
    device_fourth = len(args) > 3 and isinstance(args[3], str | torch.device)
    ours_error: TypeError | None = None
    if not (_REFERENCE_ONLY & kwargs.keys() or device_fourth):
        try:
            ours = _OURS.bind(*args, **kwargs)
        except TypeError as error:
            if {"capacity_n", "num_envs"} & kwargs.keys():
                raise
            ours_error = error
        else:
            ours.apply_defaults()
            given = dict(ours.arguments)
            if given["capacity_n"] < 1 or given["num_envs"] < 1:
                raise ValueError(
                    f"capacity_n={given['capacity_n']} and num_envs={given['num_envs']} "
                    "must be >= 1"
                )
            return {**given, "capacity": given["capacity_n"] * given["num_envs"]}
    try:
        reference = _REFERENCE.bind(*args, **kwargs)
    except TypeError as error:
        if ours_error is None:
            raise
        raise TypeError(
            f"ReplayBuffer{_OURS} (ours): {ours_error}; ReplayBuffer{_REFERENCE} (the "
            f"reference's): {error}"
        ) from None
    reference.apply_defaults()
    given = dict(reference.arguments)
    if given["capacity"] < 1:
        raise ValueError(f"capacity={given['capacity']} must be >= 1")
    return {**given, "num_envs": None}


class ReplayBuffer:
    """Shared-memory ring of packed transitions: one writer process, any number of readers.

    Args (ours; the reference's are in the module docstring):
        capacity_n: vectorised env steps kept per env (`replay_buffer_n`).
        num_envs: rows appended per env step (None when built with the reference's
            `capacity`).
        obs_dim, action_dim, critic_dim: column widths; `critic_dim > 0` makes `critic` /
            `next_critic` mandatory in `add`, as in the reference.
        device: where `sample` puts the batch.
        recorder: optional trace recorder (`replay/add`, `replay/sample_indices`,
            `replay/sample`); dropped when pickled, as in the reference.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        given = _arguments(args, kwargs)
        self.capacity = int(given["capacity"])
        self.num_envs = given["num_envs"]
        self.obs_dim, self.action_dim = given["obs_dim"], given["action_dim"]
        self.critic_dim = given["critic_dim"]
        self.device = torch.device(given["device"])
        self.recorder = given["recorder"]
        widths = (self.obs_dim, self.obs_dim, self.action_dim, 1, 1, 1, self.critic_dim,
                  self.critic_dim)  # fmt: skip
        bounds = [0]
        for w in widths:
            bounds.append(bounds[-1] + w)
        # Column slice per field: obs | next_obs | actions | reward | done | truncated | critic...
        self._columns = {f: (bounds[i], bounds[i + 1]) for i, f in enumerate(_FIELDS)}
        self.width = bounds[-1]
        self.storage = torch.zeros(self.capacity, self.width).share_memory_()
        self.ptr = torch.zeros(1, dtype=torch.int64).share_memory_()
        self.size = torch.zeros(1, dtype=torch.int64).share_memory_()
        self.claimed = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._lock: Any = mp.get_context("spawn").Lock()
        # Called each second the counter lock stays taken (see the module docstring); per
        # process, not pickled.
        self.while_waiting: Callable[[], None] | None = None
        self.last_incremental_h2d_time_s = 0.0  # reference attribute; always 0 on this path

    # -- writer side -------------------------------------------------------------------------

    def add(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_obs: torch.Tensor,
        dones: torch.Tensor,
        truncated: torch.Tensor,
        terminal_mask: torch.Tensor | None = None,
        terminal_next_obs: torch.Tensor | None = None,
        critic: torch.Tensor | None = None,
        next_critic: torch.Tensor | None = None,
        terminal_next_critic: torch.Tensor | None = None,
        *,
        terminal_obs: torch.Tensor | None = None,
        terminal_critic: torch.Tensor | None = None,
    ) -> None:
        """Append `n` transitions (`[n, dim]`, rewards / dones / truncated `[n]`).

        `next_obs` of an auto-reset env is the reset observation; rows with `terminal_mask` set
        get `terminal_next_obs` (`terminal_next_critic`) as their next observation instead,
        which is what the bootstrap must see. `terminal_*` are full `[n, dim]` tensors, read
        where the mask is set. `terminal_obs` / `terminal_critic`: our names of the same.
        """
        terminal_obs = _one_of("terminal_next_obs", terminal_next_obs, "terminal_obs",
                               terminal_obs)  # fmt: skip
        terminal_critic = _one_of("terminal_next_critic", terminal_next_critic,
                                  "terminal_critic", terminal_critic)  # fmt: skip
        with maybe_span(self.recorder, "replay/add", cat="replay", rows=int(obs.shape[0])):
            rows = self._pack(
                obs, actions, rewards, next_obs, dones, truncated,
                terminal_mask, terminal_obs, terminal_critic, critic, next_critic,
            )  # fmt: skip
            self._write(rows)

    def _pack(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_obs: torch.Tensor,
        dones: torch.Tensor,
        truncated: torch.Tensor,
        terminal_mask: torch.Tensor | None,
        terminal_obs: torch.Tensor | None,
        terminal_critic: torch.Tensor | None,
        critic: torch.Tensor | None,
        next_critic: torch.Tensor | None,
    ) -> torch.Tensor:
        """Build the `[n, width]` float32 rows, terminal patch included, in private memory."""
        if self.critic_dim > 0 and (critic is None or next_critic is None):
            raise ValueError("ReplayBuffer.add: critic and next_critic are required")
        n = obs.shape[0]
        rows = torch.empty(n, self.width)
        values = {
            "obs": obs, "next_obs": next_obs, "actions": actions, "rewards": rewards,
            "dones": dones, "truncated": truncated, "critic": critic, "next_critic": next_critic,
        }  # fmt: skip
        for field, (lo, hi) in self._columns.items():
            if hi > lo:
                rows[:, lo:hi] = torch.as_tensor(values[field], dtype=torch.float32).reshape(n, -1)
        if terminal_mask is not None:
            mask = torch.as_tensor(terminal_mask).reshape(n).bool()
            patches = (("next_obs", terminal_obs), ("next_critic", terminal_critic))
            for field, value in patches:
                lo, hi = self._columns[field]
                if value is not None and hi > lo:
                    value = torch.as_tensor(value, dtype=torch.float32).reshape(n, -1)
                    rows[mask, lo:hi] = value[mask]
        return rows

    def _begin_write(self, n: int) -> int:
        """Claim `n` rows; returns their first absolute row number (= current `ptr`)."""
        with self._locked():
            start = int(self.ptr.item())
            self.claimed.fill_(start + n)
        return start

    def _copy_rows(self, start: int, rows: torch.Tensor) -> None:
        """Copy packed rows to slots `start % capacity ...`, split in two where the ring wraps."""
        slot = start % self.capacity
        first = min(rows.shape[0], self.capacity - slot)
        self.storage[slot : slot + first].copy_(rows[:first])
        if first < rows.shape[0]:
            self.storage[: rows.shape[0] - first].copy_(rows[first:])

    def _publish(self, end: int) -> None:
        """Make rows `< end` visible to readers (after their data is in place)."""
        with self._locked():
            self.ptr.fill_(end)
            self.size.fill_(min(end, self.capacity))

    def _write(self, rows: torch.Tensor) -> None:
        n = rows.shape[0]
        start = self._begin_write(n)
        kept = rows[-self.capacity :]  # more rows than the ring holds: the newest survive
        self._copy_rows(start + n - kept.shape[0], kept)
        self._publish(start + n)

    # -- reader side -------------------------------------------------------------------------

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return held(self._lock, self.while_waiting)

    def _counters(self) -> tuple[int, int, int]:
        with self._locked():
            return int(self.ptr.item()), int(self.size.item()), int(self.claimed.item())

    def _draw(self, count: int, generator: torch.Generator | None) -> torch.Tensor:
        """Absolute row numbers, uniform with replacement over the rows safe to read now."""
        while True:
            ptr, size, claimed = self._counters()
            lo = max(ptr - size, claimed - self.capacity)
            if size == 0:
                raise RuntimeError("ReplayBuffer.sample: the buffer is empty")
            if ptr > lo:
                return lo + torch.randint(ptr - lo, (count,), generator=generator)
            time.sleep(0)  # whole ring claimed by one write (capacity_n == 1): wait for it

    def sample_rows(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """`[batch_size, width]` packed rows, none of them torn (see module docstring)."""
        with maybe_span(self.recorder, "replay/sample_indices", cat="replay"):
            rows_abs = self._draw(batch_size, generator)
        out = self.storage[rows_abs % self.capacity]  # gather = private copy
        pending = torch.arange(batch_size)
        while True:
            _, _, claimed = self._counters()
            bad = rows_abs[pending] < claimed - self.capacity
            pending = pending[bad]
            if pending.numel() == 0:
                return out
            fresh = self._draw(pending.numel(), generator)
            rows_abs[pending] = fresh
            out[pending] = self.storage[fresh % self.capacity]

    def sample(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> dict[str, torch.Tensor]:
        """Uniform batch with replacement as the reference's dict of column views on `device`.

        Keys: obs, next_obs, actions, rewards, dones, truncated, critic, next_critic (rewards,
        dones and truncated are `[B]`; critic keys only when `critic_dim > 0`).
        """
        with maybe_span(self.recorder, "replay/sample", cat="replay", batch_size=batch_size):
            batch = self.sample_rows(batch_size, generator).to(self.device)
            return self.split_columns(batch)

    def rows_since(self, start: int, limit: int | None = None) -> tuple[torch.Tensor, int]:
        """Intact packed rows written since absolute row `start`, and the new end (`ptr`).

        At most the newest `limit` rows (default: the capacity). Rows an in-progress write has
        reached by the time the copy is done are dropped from the front (the oldest ones).
        The learner uses this to feed the normaliser with freshly collected observations.
        """
        ptr, _, _ = self._counters()
        keep = self.capacity if limit is None else min(limit, self.capacity)
        lo = max(start, ptr - keep)
        if ptr <= lo:
            return torch.empty(0, self.width), ptr
        slots = torch.arange(lo, ptr) % self.capacity
        out = self.storage[slots]
        _, _, claimed = self._counters()
        first_intact = max(lo, claimed - self.capacity)
        return out[first_intact - lo :], ptr

    def split_columns(self, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of `[B, width]` packed rows by field (scalars flattened to `[B]`)."""
        out = {}
        for field, (lo, hi) in self._columns.items():
            if hi == lo:
                continue
            out[field] = (
                rows[:, lo] if field in ("rewards", "dones", "truncated") else rows[:, lo:hi]
            )
        return out

    def __len__(self) -> int:
        return int(self.size.item())

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Drop this process's references to the shared tensors.

        torch's default `file_descriptor` strategy unlinks the `/dev/shm` entry as soon as it is
        mapped, so the memory is returned once every process has closed (or exited). The spawn
        lock is a named POSIX semaphore (`/dev/shm/sem.mp-*`) unlinked by its finaliser when
        its last reference dies, so it is dropped here too. Idempotent; unusable afterwards.
        """
        self._lock = None
        empty = torch.empty(0)
        self.storage = empty.reshape(0, self.width)
        self.ptr = self.size = self.claimed = torch.zeros(1, dtype=torch.int64)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["recorder"] = None  # each process traces into its own recorder
        state["while_waiting"] = None
        return state
