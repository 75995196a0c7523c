"""The host side both vectorised backends share: :class:`VecEnv` and its state and action box.

:class:`VecEnv` is the host-side half of every numpy-facing batch: argument and action
validation, staggered step counters (:meth:`VecEnv.init_state`), the finite checks that raise
``FloatingPointError`` naming the env, writable results, and ``close`` / context management.
A backend subclass (``vec_env_mjx.MjxVecEnv``, ``vec_env_mujoco.MujocoVecEnv``) only resets
and steps its physics. The contract of :meth:`VecEnv.step` and the choice of backend
(:func:`~unilab_jax.envs.vec_env.make`) are in ``vec_env.py``.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import jax
import numpy as np

from unilab_jax.envs.base import Task

__all__ = ["ActionSpace", "VecEnv", "VecEnvState"]


@dataclasses.dataclass(frozen=True, eq=False)
class ActionSpace:
    """Box action space (no gym dependency): policies act in ``[low, high]`` = ``[-1, 1]``.

    Tasks scale actions to actuator ranges themselves, so the policy-facing box is always the
    unit box; ``low``/``high`` exist because collectors written for gym read them.
    """

    low: np.ndarray
    high: np.ndarray

    @classmethod
    def unit_box(cls, action_dim: int) -> ActionSpace:
        """The ``[-1, 1]^action_dim`` float32 box."""
        return cls(-np.ones(action_dim, np.float32), np.ones(action_dim, np.float32))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.low.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.low.dtype

    def sample(self, rng: np.random.Generator, batch: int | None = None) -> np.ndarray:
        """Uniform actions, ``[batch, *shape]`` (or ``shape`` when batch is None), float32."""
        shape = self.shape if batch is None else (batch, *self.shape)
        return rng.uniform(self.low, self.high, shape).astype(self.dtype)

    def __repr__(self) -> str:
        return f"ActionSpace(shape={self.shape}, low=-1.0, high=1.0, dtype={self.dtype})"


@dataclasses.dataclass
class VecEnvState:
    """The batch after one vectorised step (``vec_env.py``'s module docstring: each field)."""

    obs: dict[str, np.ndarray]
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_observation: dict[str, np.ndarray]
    info: dict[str, Any]


def writable(state: VecEnvState) -> VecEnvState:
    """Make every array of ``state`` writable and ``obs`` / ``final_observation`` distinct.

    Arrays read back from JAX are read-only views; a collector that normalises or patches an
    observation in place must neither fail on one backend only nor change the other group.
    """

    def own(x: np.ndarray) -> np.ndarray:
        return x if x.flags.writeable else x.copy()

    obs = {k: own(v) for k, v in state.obs.items()}
    final = {k: v.copy() if v is obs.get(k) else own(v) for k, v in state.final_observation.items()}
    info = dict(state.info)
    info["episode_step"] = own(np.asarray(info["episode_step"]))
    return dataclasses.replace(
        state,
        obs=obs,
        reward=own(state.reward),
        terminated=own(state.terminated),
        truncated=own(state.truncated),
        final_observation=final,
        info=info,
    )


class VecEnv(abc.ABC):
    """Shared host-side logic of both backends: validation, staggering, finite checks, close.

    Subclasses implement :meth:`_reset_all` (reset every env from per-env keys and set the step
    counters) and :meth:`_step` (one control step of every env, with automatic resets).
    """

    #: ``"mjx"`` or ``"mujoco"``: a label of the subclass (for ``repr`` and error messages);
    #: :func:`make` is what chooses the backend.
    sim_backend: str = ""

    def __init__(
        self,
        task: Task,
        name: str,
        num_envs: int,
        seed: int,
        obs_sizes: Mapping[str, int],
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise TypeError(f"num_envs must be an int, got {type(num_envs).__name__}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.task = task
        self.name = name
        self.num_envs = int(num_envs)
        self.seed = int(seed)
        self.max_episode_steps = int(task.episode_length)
        self.action_space = ActionSpace.unit_box(int(task.action_size))
        self.obs_groups_spec: dict[str, tuple[int, ...]] = {
            k: (int(v),) for k, v in obs_sizes.items()
        }
        # Reward component names, for the all-zero info["log"] of the reset state.
        self.reward_keys: tuple[str, ...] = ()
        self.state: VecEnvState | None = None
        self._closed = False
        #: ``(first, total)``: this batch is rows ``first .. first + num_envs`` of a batch of
        #: ``total`` envs (one process's share of a multi-process run), which
        #: :meth:`init_state` draws exactly as the whole batch would.
        self.rows = (0, self.num_envs)

    # ----------------------------------------------------------------- backend hooks
    @abc.abstractmethod
    def _reset_all(self, keys: jax.Array, step_count: np.ndarray) -> dict[str, np.ndarray]:
        """Reset every env from ``keys`` [N, 2], set the step counters; return the obs groups."""

    @abc.abstractmethod
    def _step(self, actions: np.ndarray) -> VecEnvState:
        """One control step of every env (``actions`` validated, float32, in [-1, 1])."""

    @abc.abstractmethod
    def _release(self) -> None:
        """Free backend resources (threads, device buffers)."""

    # ----------------------------------------------------------------- API
    def init_state(self, seed: int | None = None, stagger: bool = True) -> VecEnvState:
        """Reset every env and stagger the step counters uniformly in ``[0, max_episode_steps)``.

        Staggering (as the reference does) spreads the time limits over the batch, so resets
        arrive at a steady rate instead of all envs truncating on the same step. ``seed``
        (default: the one given to :func:`make`) fixes both the episodes and the counters;
        calling it again with the same seed restarts the same episodes. ``stagger=False``
        starts every counter at 0 (full first episodes, e.g. for evaluation).
        """
        self._ensure_open()
        seed = self.seed if seed is None else int(seed)
        first, total = self.rows
        mine = slice(first, first + self.num_envs)
        keys = jax.random.split(jax.random.PRNGKey(seed), total)[mine]
        rng = np.random.default_rng(seed)
        step_count = rng.integers(0, self.max_episode_steps, total)[mine].astype(np.int32)
        if not stagger:
            step_count[:] = 0
        state = self._unstepped(self._reset_all(keys, step_count), step_count)
        self._check_finite(state)
        self.state = writable(state)
        return self.state

    def step(self, actions: np.ndarray) -> VecEnvState:
        """Advance every env one control step (resetting ended ones) and return the new state.

        ``actions``: ``[num_envs, action_dim]`` in [-1, 1] (clipped, as the functional env does).
        Calls :meth:`init_state` first if no state exists yet. After a ``FloatingPointError``
        the batch is in an undefined state: call :meth:`init_state` before stepping again.
        """
        self._ensure_open()
        actions = self._validate_actions(actions)
        if self.state is None:
            self.init_state()
        state = self._step(actions)
        self._check_finite(state)
        self.state = writable(state)
        return self.state

    def close(self) -> None:
        """Release the backend (the C MuJoCo thread pool); idempotent."""
        if not self._closed:
            self._closed = True
            self._release()

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, num_envs={self.num_envs}, "
            f"sim_backend={self.sim_backend!r})"
        )

    # ----------------------------------------------------------------- shared helpers
    def _ensure_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")

    def _validate_actions(self, actions: Any) -> np.ndarray:
        expected = (self.num_envs, *self.action_space.shape)
        arr = np.asarray(actions)
        if arr.shape != expected:
            raise ValueError(
                f"{self.name}: actions must have shape {expected} (num_envs, action_dim), "
                f"got {arr.shape}"
            )
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
            raise ValueError(f"{self.name}: actions must be real numbers, got dtype {arr.dtype}")
        arr = arr.astype(np.float32, copy=False)
        finite = np.isfinite(arr).all(axis=1)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            raise ValueError(
                f"{self.name}: non-finite action for env {int(bad[0])} "
                f"({bad.size} of {self.num_envs} envs: {bad[:8].tolist()})"
            )
        return np.clip(arr, -1.0, 1.0)

    def _check_finite(self, state: VecEnvState) -> None:
        """Raise ``FloatingPointError`` naming the first env with a non-finite obs or reward."""
        bad = ~np.isfinite(state.reward)
        for groups in (state.obs, state.final_observation):
            for arr in groups.values():
                bad |= ~np.isfinite(arr).all(axis=1)
        if not bad.any():
            return
        idx = np.flatnonzero(bad)
        first = int(idx[0])
        what = []
        if not np.isfinite(state.reward[first]):
            what.append(f"reward={state.reward[first]}")
        for label, groups in (("obs", state.obs), ("final_observation", state.final_observation)):
            for key, arr in groups.items():
                if not np.isfinite(arr[first]).all():
                    what.append(f"{label}[{key!r}]={arr[first].tolist()}")
        raise FloatingPointError(
            f"{self.name} ({self.sim_backend}): non-finite observation or reward in env {first} "
            f"({idx.size} of {self.num_envs} envs: {idx[:8].tolist()}): {'; '.join(what)}. "
            "A diverging model, a reward that divides by zero or a bad action scale are the "
            "usual causes; nothing is masked."
        )

    def _unstepped(self, obs: dict[str, np.ndarray], step_count: np.ndarray) -> VecEnvState:
        """The batch state before any step: ``obs``, no reward or flags, zero components."""
        n = self.num_envs
        return VecEnvState(
            obs=obs,
            reward=np.zeros(n, np.float32),
            terminated=np.zeros(n, bool),
            truncated=np.zeros(n, bool),
            final_observation={k: v.copy() for k, v in obs.items()},
            info=self._step_info(
                {k: np.zeros(n, np.float32) for k in self.reward_keys}, step_count.copy()
            ),
        )

    def _set_reward_keys(self, keys: Any) -> None:
        self.reward_keys = tuple(sorted(keys))

    @staticmethod
    def _step_info(metrics: Mapping[str, np.ndarray], step_count: np.ndarray) -> dict[str, Any]:
        """``info`` after a step: ``"log"``, the batch mean of each reward component
        (``metrics``) of this step, ``"components"``, their values, and ``"episode_step"``."""
        return {
            "log": {k: float(np.mean(v)) for k, v in sorted(metrics.items())},
            "components": {k: np.asarray(v) for k, v in metrics.items()},
            "episode_step": np.asarray(step_count),
        }
