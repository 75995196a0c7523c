"""Physics backend ``"mujoco"``: C MuJoCo stepped on CPU threads over a batch of envs.

The reference system steps its envs with C MuJoCo on CPU cores; this backend does the same for
any registered :class:`~unilab_jax.envs.base.Task` and reuses the task unchanged: its ``model``,
``n_frames``, ``init_qpos_qvel``, ``ctrl_from_action``, ``observe``, ``reward``, ``terminated`` and
task-state functions are the same JAX code the MJX backend runs, executed (jitted, vmapped) on
the CPU device.

Design (why it is built this way):

* **Physics: one** ``mujoco.batch.Batch`` **per env batch.** It keeps every env's full
  integration state (``mjSTATE_INTEGRATION``: qpos, qvel, act, time, *and the solver warm
  start*) in one numpy array, steps all envs ``n_frames`` substeps on a persistent pool of
  ``nthread`` threads in one call, and exposes live numpy views of state fields and of the
  derived fields it copies out after each call. ``mujoco.rollout`` was measured as fast
  (within 2 %) but returns only ``mjSTATE_FULLPHYSICS``, which drops ``qacc_warmstart``: each
  control step would then start its first substep's constraint solver cold, unlike both MJX
  (which carries ``qacc_warmstart`` in ``mjx.Data``) and a plain C MuJoCo loop. With one Newton
  iteration (CheetahRun) that changes the contact forces.
* **Task code sees mjx.Data names.** At construction the task's functions are traced once with
  a recorder around an ``mjx.Data`` template to learn which fields they read (CheetahRun:
  ``qpos``, ``qvel``, ``xpos``). Exactly those fields are bound from the batch and handed to the
  task as a :class:`PhysicsView` pytree, cast to the MJX dtypes (float32) and reshaped to MJX's
  per-field shapes (``xmat`` is ``[nbody, 3, 3]`` in MJX, ``[nbody, 9]`` in C). A task reading
  a field that C MuJoCo's step does not compute fails at construction, not with garbage.
* **Same timing of derived fields as MJX.** After ``mj_step`` (and ``mjx.step``) position- and
  velocity-derived fields (``xpos``, ``sensordata``, ...) describe the state *before the last
  substep*; the batch reports them exactly so, so ``observe`` gets the same numbers on both
  backends. Reset envs get a full ``mj_forward`` (only the reset rows, so it is cheap).
* **Same episodes as MJX.** Resets draw ``(qpos, qvel, task_state)`` with
  :func:`~unilab_jax.envs.base.draw_initial_conditions`, the function ``Env.reset`` uses, from
  the same per-step key splits as ``Env.step``; the reset rows are written into the batch's
  state (float32 draws, exactly representable in float64).
* **No silent resets.** C MuJoCo normally resets a diverged simulation to ``qpos0`` with only a
  printed warning. The backend's model copy disables that (``mjDSBL_AUTORESET``) and every step
  checks the batch's bad-qpos/qvel/qacc/ctrl warning counters, raising ``FloatingPointError``
  naming the env, as the MJX path does for NaNs.
* MuJoCo computes in float64; observations, rewards and the view are float32.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import os
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import mujoco.batch as mujoco_batch  # ``import mujoco`` alone does not import it
import numpy as np

from unilab_jax.envs.base import (
    Task,
    draw_initial_conditions,
    observation_groups,
    reward_metrics,
)
from unilab_jax.envs.vec_env import VecEnv, VecEnvState

with contextlib.redirect_stdout(io.StringIO()):  # silence "Failed to import warp"
    from mujoco import mjx

__all__ = ["MujocoVecEnv", "PhysicsView", "default_nthread", "fields_read_by"]

#: mjx.Data fields that C MuJoCo's ``mj_step`` does not compute (MJX leaves them zero too):
#: a task reading one would get another simulation's stale value from the batch.
_NOT_COMPUTED_BY_STEP = frozenset({"qfrc_inverse"})

#: Warnings that mean the simulation diverged or was fed non-finite input.
_BAD_WARNINGS = {
    int(mujoco.mjtWarning.mjWARN_BADQPOS): "bad qpos",
    int(mujoco.mjtWarning.mjWARN_BADQVEL): "bad qvel",
    int(mujoco.mjtWarning.mjWARN_BADQACC): "bad qacc",
    int(mujoco.mjtWarning.mjWARN_BADCTRL): "bad ctrl",
}


def default_nthread() -> int:
    """CPU cores this process may run on (the default C MuJoCo thread count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@jax.tree_util.register_pytree_node_class
class PhysicsView:
    """The ``mjx.Data``-named fields a task reads, as a pytree with attribute access.

    Task code only reads fields (``data.qpos``, ``data.xpos[body]``), so a light view over the
    copied batch arrays replaces a full ``mjx.Data`` (whose ~50 fields would cost a copy each
    per step); under ``vmap`` each leaf is one env's slice, as with ``mjx.Data``.
    """

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name: str) -> Any:
        fields = object.__getattribute__(self, "_fields")
        try:
            return fields[name]
        except KeyError:
            raise AttributeError(
                f"PhysicsView has no field {name!r}; the mujoco backend copies only the fields "
                f"the task read when it was traced: {sorted(fields)}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("PhysicsView is read-only")

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[str, ...]]:
        keys = tuple(sorted(self._fields))
        return tuple(self._fields[k] for k in keys), keys

    @classmethod
    def tree_unflatten(cls, keys: tuple[str, ...], leaves: Any) -> PhysicsView:
        return cls(dict(zip(keys, leaves, strict=True)))

    def __repr__(self) -> str:
        return f"PhysicsView({sorted(self._fields)})"


class _FieldRecorder:
    """Wraps a data object and records every attribute the task reads from it."""

    __slots__ = ("_data", "_seen")

    def __init__(self, data: Any, seen: set[str]) -> None:
        self._data = data
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        self._seen.add(name)
        return getattr(self._data, name)


def _trace_task(task: Task, data: Any, key: jax.Array) -> tuple[dict, dict]:
    """Every task function that reads physics, in ``Env.step``'s order; returns obs and metrics
    (so one trace gives both the fields read and the output shapes)."""
    action = jnp.zeros((task.action_size,), jnp.float32)
    k_init, k_task = jax.random.split(key)
    task_state = task.init_task_state(k_init)
    observation_groups(task, data, task_state)
    _, components = task.reward(data, action, task_state)
    task.terminated(data, task_state)
    task_state = task.update_task_state(data, action, task_state, k_task)
    return observation_groups(task, data, task_state), reward_metrics(components)


def fields_read_by(task: Task, template: Any) -> tuple[str, ...]:
    """The ``mjx.Data`` fields ``task``'s functions read, found by tracing them on ``template``.

    Raises ValueError for attributes that are not public ``mjx.Data`` fields (the view supports
    field reads only) or that C MuJoCo's step does not compute.
    """
    seen: set[str] = set()
    jax.eval_shape(
        lambda d, k: _trace_task(task, _FieldRecorder(d, seen), k),
        template,
        jax.random.PRNGKey(0),
    )
    public = {f.name for f in dataclasses.fields(template) if not f.name.startswith("_")}
    unknown = sorted(seen - public)
    if unknown:
        raise ValueError(
            f"{type(task).__name__} reads {unknown} from its physics data; the mujoco backend "
            "provides only public mjx.Data fields (e.g. qpos, qvel, xpos, xmat, sensordata) "
            "and supports reads only"
        )
    stale = sorted(seen & _NOT_COMPUTED_BY_STEP)
    missing = sorted(seen - mujoco_batch.DATA_FIELDS)
    if stale or missing:
        raise ValueError(
            f"{type(task).__name__} reads {stale + missing}, which C MuJoCo's step does not "
            "compute for a batch; the mujoco backend cannot provide it"
        )
    return tuple(sorted(seen))


class MujocoVecEnv(VecEnv):
    """``sim_backend="mujoco"``: a batch of C MuJoCo envs on ``nthread`` CPU threads.

    Attributes beyond :class:`~unilab_jax.envs.vec_env.VecEnv`'s: ``batch`` (the
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
    ) -> None:
        self._cpu = jax.devices("cpu")[0]
        with jax.default_device(self._cpu):
            template = mjx.make_data(task.model, impl="jax")
            self.fields = fields_read_by(task, template)
            obs_shapes, metric_shapes = jax.eval_shape(
                lambda d, k: _trace_task(task, d, k), template, jax.random.PRNGKey(0)
            )
        super().__init__(
            task, name, num_envs, seed, {k: v.shape[-1] for k, v in obs_shapes.items()}
        )
        self._set_reward_keys(metric_shapes)

        nthread = default_nthread() if nthread is None else nthread
        if isinstance(nthread, bool) or not isinstance(nthread, int | np.integer) or nthread < 1:
            raise ValueError(f"nthread must be a positive int, got {nthread!r}")
        self.nthread = int(nthread)
        model = copy.copy(task.model)
        model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)
        self.model = model
        self.batch: mujoco_batch.Batch | None = mujoco_batch.Batch(
            model, self.num_envs, nthread=self.nthread
        )
        # Per field: the live batch array and MJX's per-env shape and dtype.
        self._bound = {f: self.batch.bind(f) for f in self.fields}
        self._layout = {
            f: (tuple(getattr(template, f).shape), getattr(template, f).dtype) for f in self.fields
        }
        self._qpos = self.batch.bind("qpos")
        self._qvel = self.batch.bind("qvel")
        self._ctrl = self.batch.bind("ctrl")
        self._warning_ids = sorted(_BAD_WARNINGS)
        # The default ctrl_from_action is the identity: skip a jit dispatch per step.
        self._identity_ctrl = type(task).ctrl_from_action is Task.ctrl_from_action
        self._build_functions()

        # Per-env carry between steps (set by init_state).
        self._task_state: Any = None
        self._keys: jax.Array | None = None
        self._step_count = np.zeros(self.num_envs, np.int32)

    # ----------------------------------------------------------------- jitted task code
    def _build_functions(self) -> None:
        task = self.task
        episode_length = self.max_episode_steps

        def ctrl_one(action: jax.Array, task_state: Any) -> jax.Array:
            return jnp.asarray(task.ctrl_from_action(action, task_state), jnp.float32)

        def observe_one(view: PhysicsView, task_state: Any) -> dict[str, jax.Array]:
            return observation_groups(task, view, task_state)

        def post_one(
            view: PhysicsView,
            action: jax.Array,
            task_state: Any,
            key: jax.Array,
            step_count: jax.Array,
        ) -> dict[str, Any]:
            # The same order and key splits as Env.step, so both backends agree step by step.
            key, k_reset, k_task = jax.random.split(key, 3)
            reward, components = task.reward(view, action, task_state)
            terminated = jnp.asarray(task.terminated(view, task_state), bool)
            task_state = task.update_task_state(view, action, task_state, k_task)
            obs = observation_groups(task, view, task_state)
            step_count = step_count + 1
            truncated = step_count >= episode_length
            done = terminated | truncated
            qpos0, qvel0, task_state0, _ = draw_initial_conditions(task, k_reset)
            task_state = jax.tree.map(
                lambda fresh, cont: jnp.where(done, fresh, cont), task_state0, task_state
            )
            return {
                "obs": obs,
                "reward": jnp.asarray(reward, jnp.float32),
                "terminated": terminated,
                "truncated": truncated,
                "done": done,
                "metrics": reward_metrics(components),
                "step_count": jnp.where(done, jnp.zeros_like(step_count), step_count),
                "qpos0": qpos0,
                "qvel0": qvel0,
                "task_state": task_state,
                "key": key,
            }

        self._ctrl_fn = jax.jit(jax.vmap(ctrl_one))
        self._observe_fn = jax.jit(jax.vmap(observe_one))
        self._initial_fn = jax.jit(jax.vmap(lambda k: draw_initial_conditions(task, k)))
        self._post_fn = jax.jit(jax.vmap(post_one))

    # ----------------------------------------------------------------- physics <-> view
    def _batch_or_raise(self) -> mujoco_batch.Batch:
        if self.batch is None:
            raise RuntimeError(f"{self!r} is closed")
        return self.batch

    def _read_fields(self) -> dict[str, np.ndarray]:
        """Copy the fields the task reads out of the batch, in MJX's shapes and dtypes."""
        return {
            f: np.array(self._bound[f], dtype=dtype).reshape(self.num_envs, *shape)
            for f, (shape, dtype) in self._layout.items()
        }

    def _refresh_rows(self, view: dict[str, np.ndarray], ids: np.ndarray) -> None:
        for f, (shape, dtype) in self._layout.items():
            view[f][ids] = np.asarray(self._bound[f][ids], dtype=dtype).reshape(len(ids), *shape)

    def _write_initial(self, ids: np.ndarray | None, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Reset rows ``ids`` (all when None) to ``(qpos, qvel)`` and run ``mj_forward``."""
        batch = self._batch_or_raise()
        batch.reset(ids, stage=int(mujoco.mjtStage.mjSTAGE_NONE))
        rows = slice(None) if ids is None else ids
        self._qpos[rows] = qpos
        self._qvel[rows] = qvel
        batch.forward(ids)

    def _check_physics(self) -> None:
        """Raise if MuJoCo reported a diverged simulation or a non-finite control."""
        counts = self.batch.warning[:, self._warning_ids, 1]  # [N, 4] occurrence counts
        if not counts.any():
            return
        idx = np.flatnonzero(counts.any(axis=1))
        first = int(idx[0])
        what = [
            _BAD_WARNINGS[w] for w, c in zip(self._warning_ids, counts[first], strict=True) if c
        ]
        raise FloatingPointError(
            f"{self.name} (mujoco): MuJoCo reported {', '.join(what)} in env {first} "
            f"({idx.size} of {self.num_envs} envs: {idx[:8].tolist()}); the simulation "
            "diverged (automatic reset is disabled so that this is not hidden)"
        )

    # ----------------------------------------------------------------- VecEnv hooks
    def _reset_all(self, keys: jax.Array, step_count: np.ndarray) -> dict[str, np.ndarray]:
        with jax.default_device(self._cpu):
            keys = jax.device_put(keys, self._cpu)
            qpos0, qvel0, task_state, keys = self._initial_fn(keys)
            self._write_initial(None, np.asarray(qpos0), np.asarray(qvel0))
            obs = jax.device_get(self._observe_fn(PhysicsView(self._read_fields()), task_state))
        self._task_state, self._keys = task_state, keys
        self._step_count = step_count.astype(np.int32, copy=True)
        return {k: np.asarray(v) for k, v in obs.items()}

    def _step(self, actions: np.ndarray) -> VecEnvState:
        batch = self._batch_or_raise()
        with jax.default_device(self._cpu):
            if self._identity_ctrl:
                ctrl = actions
            else:
                ctrl = np.asarray(self._ctrl_fn(actions, self._task_state))
            self._ctrl[:] = ctrl
            batch.step(nstep=self.task.n_frames)
            self._check_physics()

            view = self._read_fields()
            out = self._post_fn(
                PhysicsView(view), actions, self._task_state, self._keys, self._step_count
            )
            host = jax.device_get({k: v for k, v in out.items() if k not in ("task_state", "key")})
            done = np.asarray(host["done"])
            final_obs = {k: np.asarray(v) for k, v in host["obs"].items()}
            if done.any():
                ids = np.flatnonzero(done)
                self._write_initial(ids, host["qpos0"][ids], host["qvel0"][ids])
                self._refresh_rows(view, ids)
                fresh = jax.device_get(self._observe_fn(PhysicsView(view), out["task_state"]))
                obs = {k: np.where(done[:, None], fresh[k], v) for k, v in final_obs.items()}
            else:
                obs = dict(final_obs)  # VecEnv.step makes obs and final_observation distinct
        self._task_state, self._keys = out["task_state"], out["key"]
        self._step_count = np.asarray(host["step_count"], np.int32)
        return VecEnvState(
            obs=obs,
            reward=np.asarray(host["reward"]),
            terminated=np.asarray(host["terminated"]),
            truncated=np.asarray(host["truncated"]),
            final_observation=final_obs,
            info={
                "log": self._reward_log(host["metrics"]),
                "episode_step": self._step_count.copy(),
            },
        )

    def _release(self) -> None:
        # The batch's thread pool lives as long as any array bound from it: drop them all.
        self._bound = {}
        self._qpos = self._qvel = self._ctrl = None
        self._task_state = self._keys = None
        self.batch = None
