"""The numpy-facing vectorised environment: ``make(env_name, num_envs, sim_backend, ...)``.

This is the env API the facade's torch collector (``unilab.algos.torch.offpolicy.worker``)
drives: numpy in, numpy out, one call steps every env, ended envs reset inside ``step``.
:func:`make` is the one place in ``unilab_jax.envs`` that reads ``sim_backend``; both physics
backends sit behind the same class interface and run the same task code (the step pipeline
of ``base.py``):

* ``"mjx"`` (:class:`MjxVecEnv`): a thin numpy facade over ``jax.jit(jax.vmap(Env.step))``,
  the functional env the JAX core trains on, on the default JAX device.
* ``"mujoco"`` (:class:`MujocoVecEnv`): C MuJoCo physics
  (``mujoco_backend.MujocoBatchPhysics``) stepped on CPU threads, the reference system's
  backend; ``ctrl_from_action`` and :func:`~unilab_jax.envs.base.post_physics` (observation,
  reward, termination, time limit, reset draw) are the same JAX code, run on the CPU device.
  Only applying the reset differs: the reset rows are written into the C batch.

Both draw episodes with the same keys (``jax.random.split(PRNGKey(seed), num_envs)`` for
:meth:`VecEnv.init_state`, ``post_physics``'s key splits afterwards) and stagger the step
counters with the same numpy generator, so one seed gives the same initial conditions, time
limits and resets on either backend: trajectories then differ only by the physics (float32 MJX
vs float64 C MuJoCo).

Contract of :meth:`VecEnv.step` (all arrays numpy, leading dimension ``num_envs``):

* ``obs``: observation groups (``"obs"``, ``"critic"``), float32, post-reset for ended envs;
* ``reward`` float32, ``terminated`` / ``truncated`` bool (the time limit; independent flags);
* ``final_observation``: the observation this step produced before any reset (== ``obs`` where
  nothing ended), which off-policy targets bootstrap from on truncation;
* ``info["log"]``: ``{"reward/<name>": float}``, batch means of this step's reward components;
  ``info["components"]``: the same components per env (``{"reward/<name>": [N]}``);
  ``info["episode_step"]``: per-env control steps into the current episode after this step
  (0 where the env was just reset).

Failures are loud, never masked: a non-finite observation or reward raises
``FloatingPointError`` naming the env index (the JAX training loop does the same), and so does
C MuJoCo reporting a diverged simulation (its automatic reset is disabled).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.envs.adapters import ADAPTER_PREFIXES, load_adapter
from unilab_jax.envs.base import (
    Env,
    EnvState,
    Task,
    draw_initial_conditions,
    observation_groups,
    post_physics,
)
from unilab_jax.envs.mujoco_backend import MujocoBatchPhysics, PhysicsView, trace_task
from unilab_jax.envs.registry import make_task, registered_names

__all__ = [
    "VEC_SIM_BACKENDS",
    "ActionSpace",
    "MjxVecEnv",
    "MujocoVecEnv",
    "VecEnv",
    "VecEnvState",
    "make",
]

#: Physics backends :func:`make` accepts.
VEC_SIM_BACKENDS = ("mjx", "mujoco")


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
    """The batch after one vectorised step (see the module docstring for each field)."""

    obs: dict[str, np.ndarray]
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_observation: dict[str, np.ndarray]
    info: dict[str, Any]


def _writable(state: VecEnvState) -> VecEnvState:
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
        self.state = _writable(state)
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
        self.state = _writable(state)
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
            info={
                "log": {k: 0.0 for k in self.reward_keys},
                "components": {k: np.zeros(n, np.float32) for k in self.reward_keys},
                "episode_step": step_count.copy(),
            },
        )

    def _set_reward_keys(self, keys: Any) -> None:
        self.reward_keys = tuple(sorted(keys))

    @staticmethod
    def _reward_log(metrics: Mapping[str, np.ndarray]) -> dict[str, float]:
        """``info["log"]``: the batch mean of each reward component of this step."""
        return {k: float(np.mean(v)) for k, v in sorted(metrics.items())}


class MjxVecEnv(VecEnv):
    """``sim_backend="mjx"``: numpy facade over ``jit(vmap(Env.step))`` on the default device.

    ``jax_state`` is the underlying batched :class:`EnvState` (device arrays); it is public so
    that tests and tools can inspect or set the physics state directly.
    """

    sim_backend = "mjx"

    def __init__(
        self, task: Task, name: str, num_envs: int, seed: int = 0, *, env: Any = None
    ) -> None:
        # ``env``: an already built Env-like (a Playground / Brax adapter); ``task`` is then
        # that env, which has the ``episode_length`` and ``action_size`` VecEnv reads.
        self.env = env if env is not None else Env(task, name=name)
        super().__init__(task, name, num_envs, seed, self.env.obs_size)
        shapes = jax.eval_shape(self.env.reset, jax.random.PRNGKey(0))
        self._set_reward_keys(shapes.metrics)
        self._reset_fn = jax.jit(jax.vmap(self.env.reset))
        self._step_fn = jax.jit(jax.vmap(self.env.step))
        self.jax_state: EnvState | None = None

    def _reset_all(self, keys: jax.Array, step_count: np.ndarray) -> dict[str, np.ndarray]:
        state = self._reset_fn(keys)
        self.jax_state = state.replace(step_count=jnp.asarray(step_count, jnp.int32))
        return {k: np.asarray(v) for k, v in jax.device_get(state.obs).items()}

    def _step(self, actions: np.ndarray) -> VecEnvState:
        self.jax_state = self._step_fn(self.jax_state, jnp.asarray(actions))
        s = self.jax_state
        # One transfer of everything the host needs; the physics stays on the device.
        obs, final_obs, reward, term, trunc, metrics, count = jax.device_get(
            (s.obs, s.final_obs, s.reward, s.terminated, s.truncated, s.metrics, s.step_count)
        )
        return VecEnvState(
            obs={k: np.asarray(v) for k, v in obs.items()},
            reward=np.asarray(reward),
            terminated=np.asarray(term),
            truncated=np.asarray(trunc),
            final_observation={k: np.asarray(v) for k, v in final_obs.items()},
            info={
                "log": self._reward_log(metrics),
                "components": {k: np.asarray(v) for k, v in metrics.items()},
                "episode_step": np.asarray(count),
            },
        )

    def _release(self) -> None:
        self.jax_state = None


class MujocoVecEnv(VecEnv):
    """``sim_backend="mujoco"``: a batch of C MuJoCo envs on ``nthread`` CPU threads.

    A step: ``ctrl_from_action`` (jitted, vmapped; skipped when it is the identity), C MuJoCo
    physics for the batch, then :func:`~unilab_jax.envs.base.post_physics` (jitted, vmapped)
    on a :class:`~unilab_jax.envs.mujoco_backend.PhysicsView` of the fields the task reads,
    then the reset applied to the ended rows of the batch and their fresh observation.

    Attributes beyond :class:`VecEnv`'s: ``physics`` (the
    :class:`~unilab_jax.envs.mujoco_backend.MujocoBatchPhysics`) and, from it, ``batch`` (the
    ``mujoco.batch.Batch``; ``batch.qpos`` etc. are live float64 views of the physics state),
    ``model`` (the batch's model: the task's with automatic reset disabled), ``nthread`` and
    ``fields`` (the ``mjx.Data`` fields the task reads). :meth:`close` drops the batch and every
    array bound from it, which stops its threads; a ``batch`` (or bound array) the caller still
    holds keeps them alive until it is released too.
    """

    sim_backend = "mujoco"

    def __init__(
        self,
        task: Task,
        name: str,
        num_envs: int,
        seed: int = 0,
        *,
        nthread: int | None = None,
        device: jax.Device | None = None,
        rows: tuple[int, int] | None = None,
    ) -> None:
        # ``device``: the CPU device the task's JAX code runs on (default: the first); a
        # collector that overlaps with a learner on another CPU device passes its own.
        # ``rows``: ``(first, total)`` when this batch is one process's share of a larger one.
        self._cpu = jax.devices("cpu")[0] if device is None else device
        trace = trace_task(task, self._cpu)
        super().__init__(
            task, name, num_envs, seed, {k: v.shape[-1] for k, v in trace.state.obs.items()}
        )
        if rows is not None:
            first, total = (int(r) for r in rows)
            if not 0 <= first <= total - self.num_envs:
                raise ValueError(f"rows {rows} do not hold {self.num_envs} envs")
            self.rows = (first, total)
        self._set_reward_keys(trace.state.metrics)
        self.physics = MujocoBatchPhysics(
            task.model,
            task.n_frames,
            self.num_envs,
            trace.template,
            trace.fields,
            name=name,
            nthread=nthread,
        )
        # The default ctrl_from_action is the identity: skip a jit dispatch per step.
        self._identity_ctrl = type(task).ctrl_from_action is Task.ctrl_from_action
        self._ctrl_fn = jax.jit(
            jax.vmap(lambda a, ts: jnp.asarray(task.ctrl_from_action(a, ts), jnp.float32))
        )
        self._observe_fn = jax.jit(jax.vmap(lambda d, ts: observation_groups(task, d, ts)))
        self._initial_fn = jax.jit(jax.vmap(lambda k: draw_initial_conditions(task, k)))

        def post(*args: Any) -> tuple[EnvState, tuple[jax.Array, jax.Array]]:
            state, reset = post_physics(task, *args)
            # The view is the host's: returning it would copy every field out of the jit.
            return state.replace(physics=None), reset

        self._post_fn = jax.jit(jax.vmap(post))

        # Per-env carry between steps (set by init_state).
        self._task_state: Any = None
        self._keys: jax.Array | None = None
        self._step_count = np.zeros(self.num_envs, np.int32)

    @property
    def batch(self) -> Any:
        return self.physics.batch

    @property
    def model(self) -> Any:
        return self.physics.model

    @property
    def nthread(self) -> int:
        return self.physics.nthread

    @property
    def fields(self) -> tuple[str, ...]:
        return self.physics.fields

    def _reset_all(self, keys: jax.Array, step_count: np.ndarray) -> dict[str, np.ndarray]:
        with jax.default_device(self._cpu):
            keys = jax.device_put(keys, self._cpu)
            qpos0, qvel0, task_state, keys = self._initial_fn(keys)
            self.physics.init(None, np.asarray(qpos0), np.asarray(qvel0))
            obs = jax.device_get(self._observe_fn(PhysicsView(self.physics.view()), task_state))
        self._task_state, self._keys = task_state, keys
        self._step_count = step_count.astype(np.int32, copy=True)
        return {k: np.asarray(v) for k, v in obs.items()}

    def _step(self, actions: np.ndarray) -> VecEnvState:
        with jax.default_device(self._cpu):
            if self._identity_ctrl:
                ctrl = actions
            else:
                ctrl = np.asarray(self._ctrl_fn(actions, self._task_state))
            self.physics.step(ctrl)
            view = self.physics.view()
            out, (qpos0, qvel0) = self._post_fn(
                PhysicsView(view), actions, self._task_state, self._keys, self._step_count
            )
            # One transfer of what the host needs; the carry stays in JAX arrays.
            host, (qpos0, qvel0) = jax.device_get(
                (out.replace(task_state=None, key=None), (qpos0, qvel0))
            )
            final_obs = {k: np.asarray(v) for k, v in host.obs.items()}
            done = np.asarray(host.done)
            if done.any():
                # Applying the reset, C MuJoCo's way: write the ended rows, observe them again.
                ids = np.flatnonzero(done)
                self.physics.init(ids, qpos0[ids], qvel0[ids])
                self.physics.refresh_rows(view, ids)
                fresh = jax.device_get(self._observe_fn(PhysicsView(view), out.task_state))
                obs = {k: np.where(done[:, None], fresh[k], v) for k, v in final_obs.items()}
            else:
                obs = dict(final_obs)  # VecEnv.step makes obs and final_observation distinct
        self._task_state, self._keys = out.task_state, out.key
        self._step_count = np.asarray(host.step_count, np.int32)
        return VecEnvState(
            obs=obs,
            reward=np.asarray(host.reward),
            terminated=np.asarray(host.terminated),
            truncated=np.asarray(host.truncated),
            final_observation=final_obs,
            info={
                "log": self._reward_log(host.metrics),
                "components": {k: np.asarray(v) for k, v in host.metrics.items()},
                "episode_step": self._step_count.copy(),
            },
        )

    def snapshot(self) -> dict[str, Any]:
        """Everything that decides the batch's future, as numpy arrays with leading ``[N]``:
        the C MuJoCo integration state (``mjSTATE_INTEGRATION``: qpos, qvel, act, time, solver
        warm start) as the bits of its float64 words (``uint32 [N, 2 * nstate]``, so it fits a
        JAX array without x64 and restores bit-exactly), the current observation groups, task
        state, per-env keys and step counters. :meth:`restore` continues exactly from it."""
        if self.state is None:
            raise RuntimeError(f"{self!r}: no state yet (call init_state first)")
        words = np.ascontiguousarray(self.batch.state, dtype=np.float64).view(np.uint32)
        return {
            "physics": words.copy(),
            "obs": {k: np.array(v) for k, v in self.state.obs.items()},
            "task_state": jax.tree.map(np.asarray, jax.device_get(self._task_state)),
            "key": np.asarray(jax.device_get(self._keys)),
            "step_count": self._step_count.copy(),
        }

    def restore(self, snapshot: Mapping[str, Any]) -> VecEnvState:
        """Continue from a :meth:`snapshot` (of a batch of the same task and size)."""
        self._ensure_open()
        words = np.ascontiguousarray(np.asarray(snapshot["physics"], np.uint32))
        physics = words.view(np.float64)
        if physics.shape != self.batch.state.shape:
            raise ValueError(
                f"{self.name}: snapshot physics state {physics.shape} does not fit this batch "
                f"{self.batch.state.shape} (another task or num_envs)"
            )
        self.batch.state[:] = physics
        with jax.default_device(self._cpu):
            self._task_state = jax.device_put(snapshot["task_state"], self._cpu)
            self._keys = jax.device_put(np.asarray(snapshot["key"]), self._cpu)
        self._step_count = np.asarray(snapshot["step_count"], np.int32).copy()
        obs = {k: np.array(v, np.float32) for k, v in snapshot["obs"].items()}
        self.state = _writable(self._unstepped(obs, self._step_count))
        return self.state

    def _release(self) -> None:
        self.physics.close()
        self._task_state = self._keys = None


def make(
    env_name: str,
    num_envs: int,
    sim_backend: str = "mujoco",
    env_cfg_override: Mapping[str, Any] | None = None,
    seed: int = 0,
    *,
    nthread: int | None = None,
    device: jax.Device | None = None,
) -> VecEnv:
    """Build the numpy-facing vectorised env ``env_name`` with ``num_envs`` copies.

    Args:
        env_name: a registered task (unknown names raise ``UnknownEnvError`` listing them),
            or a ``"playground/<Name>"`` / ``"brax/<name>"`` adapter (``"mjx"`` only).
        num_envs: batch size.
        sim_backend: ``"mujoco"`` (C MuJoCo on CPU threads, the reference's backend and the
            default here, as in the reference) or ``"mjx"`` (MJX on the default JAX device).
        env_cfg_override: task config fields to replace (e.g. ``{"episode_length": 50}``).
        seed: seeds the episodes and the staggered step counters of :meth:`VecEnv.init_state`.
        nthread: C MuJoCo threads (default: the CPU cores this process may use); ``"mjx"``
            ignores it (MJX runs on the JAX device), so callers need not know the backend.
        device: ``"mujoco"`` only: the CPU device the task's JAX code runs on (default: the
            first CPU device).
    """
    is_adapter = env_name.startswith(ADAPTER_PREFIXES)
    if is_adapter and sim_backend != "mjx":
        raise ValueError(
            f"{env_name}: Playground and Brax environments are JAX environments and run on "
            f"sim_backend='mjx' only (got {sim_backend!r}); C MuJoCo ('mujoco') runs the "
            f"registered tasks: {', '.join(registered_names())}"
        )
    task = None if is_adapter else make_task(env_name, env_cfg_override)  # unknown names first
    if sim_backend == "mjx":
        if is_adapter:
            adapter = load_adapter(env_name, env_cfg_override)
            return MjxVecEnv(adapter, env_name, num_envs, seed, env=adapter)
        return MjxVecEnv(task, env_name, num_envs, seed)
    if sim_backend == "mujoco":
        return MujocoVecEnv(task, env_name, num_envs, seed, nthread=nthread, device=device)
    raise ValueError(f"Unknown sim_backend {sim_backend!r}; expected one of {VEC_SIM_BACKENDS}")
