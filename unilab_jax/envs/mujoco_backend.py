"""C MuJoCo physics for a batch of envs on CPU threads: :class:`MujocoBatchPhysics`.

The reference system steps its envs with C MuJoCo on CPU cores; this module is that physics,
at the same height as :class:`~unilab_jax.envs.base.MjxPhysics`: it only advances the physics
(``step``), applies resets (``init`` of some rows) and shows the task a view of the state
(``view``). Everything else in a step is the task's JAX code, the same that runs on MJX:
``vec_env.MujocoVecEnv`` (``make(..., sim_backend="mujoco")``) runs ``ctrl_from_action`` and
:func:`~unilab_jax.envs.base.post_physics` (jitted, vmapped) on the CPU device around it. This
module does not know about ``VecEnv``.

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
  backends. Reset envs get a full ``mj_forward`` (only the reset rows, so it is cheap). A task
  that sets ``Task.post_step_forward`` (the reference's ``post_step_forward_sensor``: a task
  reading contact sensors) gets one ``mj_forward`` after the step instead, so its derived fields
  describe the state after the step.
* **Same episodes as MJX.** ``MujocoVecEnv`` draws resets with
  :func:`~unilab_jax.envs.base.post_physics`, the function ``Env.step`` calls;
  :meth:`MujocoBatchPhysics.init` writes the reset rows into the batch's state (float32 draws,
  exactly representable in float64).
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
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import mujoco.batch as mujoco_batch  # ``import mujoco`` alone does not import it
import numpy as np

from unilab_jax.envs.base import EnvState, Task, post_physics, reset_observation

with contextlib.redirect_stdout(io.StringIO()):  # silence "Failed to import warp"
    from mujoco import mjx

__all__ = [
    "MujocoBatchPhysics",
    "PhysicsView",
    "TaskTrace",
    "default_nthread",
    "fields_read_by",
    "trace_step",
    "trace_task",
]

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


def trace_step(task: Task, data: Any, key: jax.Array) -> EnvState:
    """Every task function that reads physics, as a step runs them (:func:`post_physics` after
    an initial observation); one trace gives the fields read and the output shapes."""
    k_init, k_step = jax.random.split(key)
    task_state = task.init_task_state(k_init)
    action = jnp.zeros((task.action_size,), jnp.float32)
    # The reset's observation sees the initial task state (a task may read fields only then).
    reset_observation(task, data, task_state)
    state, _ = post_physics(task, data, action, task_state, k_step, jnp.zeros((), jnp.int32))
    return state.replace(physics=None)  # ``data`` may be a field recorder, not a pytree


def fields_read_by(task: Task, template: Any) -> tuple[str, ...]:
    """The ``mjx.Data`` fields ``task``'s functions read, found by tracing them on ``template``.

    Raises ValueError for attributes that are not public ``mjx.Data`` fields (the view supports
    field reads only) or that C MuJoCo's step does not compute.
    """
    seen: set[str] = set()
    jax.eval_shape(
        lambda d, k: trace_step(task, _FieldRecorder(d, seen), k),
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


class TaskTrace(NamedTuple):
    """What :func:`trace_task` learns about a task without running it."""

    template: Any
    """An ``mjx.Data`` of the task's model (its fields' MJX shapes and dtypes)."""
    fields: tuple[str, ...]
    """The ``mjx.Data`` fields the task reads (:func:`fields_read_by`)."""
    state: EnvState
    """Shapes of one env's state after :func:`~unilab_jax.envs.base.post_physics` (physics
    left out)."""


def trace_task(task: Task, device: jax.Device) -> TaskTrace:
    """Trace ``task``'s step on ``device`` (no compute) to learn its fields and output shapes.

    A task MJX cannot run (``Task.mjx_unsupported``) is traced on an ``mjx.Data`` of its model
    with collisions switched off (the fields' shapes are the same; MJX cannot build one for a
    model whose geom pairs it cannot collide)."""
    model = task.model
    if task.mjx_unsupported is not None:
        model = copy.copy(model)
        model.geom_contype[:] = 0
        model.geom_conaffinity[:] = 0
    with jax.default_device(device):
        template = mjx.make_data(model, impl="jax")
        fields = fields_read_by(task, template)
        state = jax.eval_shape(lambda d, k: trace_step(task, d, k), template, jax.random.PRNGKey(0))
    return TaskTrace(template, fields, state)


class MujocoBatchPhysics:
    """``num_envs`` C MuJoCo simulations of ``model`` in one ``mujoco.batch.Batch``.

    The C MuJoCo counterpart of :class:`~unilab_jax.envs.base.MjxPhysics`, for a whole batch
    (C MuJoCo cannot be vmapped): :meth:`init` sets rows to ``(qpos, qvel)``, :meth:`step`
    advances every env ``n_frames`` substeps, :meth:`view` copies the ``fields`` the task reads
    in MJX's shapes and dtypes. ``batch`` (live float64 views: ``batch.qpos``, ...) and ``model``
    (the given one with automatic reset disabled) are public for tests and tools.
    :meth:`close` drops the batch and every array bound from it, which stops its threads.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        n_frames: int,
        num_envs: int,
        template: Any,
        fields: tuple[str, ...],
        *,
        name: str,
        nthread: int | None = None,
        model_fields: tuple[str, ...] = (),
        solver_warmstart: bool = True,
        float32_state: bool = False,
        post_step_forward: bool = False,
    ) -> None:
        nthread = default_nthread() if nthread is None else nthread
        if isinstance(nthread, bool) or not isinstance(nthread, int | np.integer) or nthread < 1:
            raise ValueError(f"nthread must be a positive int, got {nthread!r}")
        self.name = name
        self.num_envs = int(num_envs)
        self.n_frames = int(n_frames)
        self.nthread = int(nthread)
        self.fields = tuple(fields)
        model = copy.copy(model)
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
        self.solver_warmstart = solver_warmstart
        self.float32_state = float32_state
        self.post_step_forward = post_step_forward
        self._xfrc = self.batch.bind("xfrc_applied")
        self._warmstart = self.batch.bind("qacc_warmstart")
        self._time = self.batch.bind("time")
        # The task's per-episode model fields (Task.model_fields): each simulation runs on a
        # model of its own, whose derived constants (body_subtreemass, *_invweight0, ...) are
        # recomputed with mj_setConst after its fields change, as C MuJoCo requires.
        self.model_fields = tuple(model_fields)
        self._models: list[mujoco.MjModel] = []
        if self.model_fields:
            self._models = [copy.copy(model) for _ in range(self.num_envs)]
            self._const_data = mujoco.MjData(model)
            self.batch.set_models(self._models)
        self._warning_ids = sorted(_BAD_WARNINGS)

    def _batch_or_raise(self) -> mujoco_batch.Batch:
        if self.batch is None:
            raise RuntimeError(f"{self.name} (mujoco) is closed")
        return self.batch

    def init(
        self,
        ids: np.ndarray | None,
        qpos: np.ndarray,
        qvel: np.ndarray,
        params: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Reset rows ``ids`` (all when None) to ``(qpos, qvel)`` with their per-episode model
        fields ``params`` (rows in the order of ``ids``), and run ``mj_forward``."""
        batch = self._batch_or_raise()
        self.set_params(ids, params or {})
        batch.reset(ids, stage=int(mujoco.mjtStage.mjSTAGE_NONE))
        rows = slice(None) if ids is None else ids
        self._qpos[rows] = qpos
        self._qvel[rows] = qvel
        batch.forward(ids)

    @property
    def model_params(self) -> dict[str, np.ndarray]:
        """A copy of every simulation's per-episode model fields, ``[N, ...]`` each."""
        return {f: np.stack([_field(m, f) for m in self._models]) for f in self.model_fields}

    def set_params(self, ids: np.ndarray | None, params: Mapping[str, np.ndarray]) -> None:
        """Write rows ``ids``' (all when None) per-episode model fields (every field the task
        names, and no other) and recompute those models' derived constants."""
        if set(params) != set(self.model_fields):
            raise ValueError(
                f"{self.name}: model fields {sorted(params)} given, the task draws "
                f"{sorted(self.model_fields)}"
            )
        if not self.model_fields:
            return
        rows = range(self.num_envs) if ids is None else np.asarray(ids).tolist()
        for j, i in enumerate(rows):
            model = self._models[i]
            for f, values in params.items():
                target = _field(model, f)
                target[...] = np.asarray(values[j], np.float64).reshape(target.shape)
            mujoco.mj_setConst(model, self._const_data)
        self._batch_or_raise().set_models(self._models)

    def step(self, ctrl: np.ndarray, xfrc_applied: np.ndarray | None = None) -> None:
        """Apply ``ctrl`` [N, nu] (and ``xfrc_applied`` [N, nbody, 6] when given) and advance
        every env ``n_frames`` substeps; raises ``FloatingPointError`` if MuJoCo reported a
        diverged simulation."""
        batch = self._batch_or_raise()
        self._ctrl[:] = ctrl
        if xfrc_applied is not None:
            self._xfrc[:] = np.asarray(xfrc_applied).reshape(self._xfrc.shape)
        if not self.solver_warmstart:
            self._warmstart[:] = 0.0
        batch.step(nstep=self.n_frames)
        self._check_physics()
        if self.post_step_forward:  # derived fields of the state after the step (Task docs)
            batch.forward(None)
        if self.float32_state:
            for state in (self._time, self._qpos, self._qvel):
                state[:] = state.astype(np.float32)

    def view(self) -> dict[str, np.ndarray]:
        """Copy the fields the task reads out of the batch, in MJX's shapes and dtypes."""
        return {
            f: np.array(self._bound[f], dtype=dtype).reshape(self.num_envs, *shape)
            for f, (shape, dtype) in self._layout.items()
        }

    def refresh_rows(self, view: dict[str, np.ndarray], ids: np.ndarray) -> None:
        """Update rows ``ids`` of a :meth:`view` copy in place (after :meth:`init` of them)."""
        for f, (shape, dtype) in self._layout.items():
            view[f][ids] = np.asarray(self._bound[f][ids], dtype=dtype).reshape(len(ids), *shape)

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

    def close(self) -> None:
        """Drop the batch: its thread pool lives as long as any array bound from it."""
        self._bound = {}
        self._qpos = self._qvel = self._ctrl = None
        self._xfrc = self._warmstart = self._time = None
        self._models = []
        self.batch = None


def _field(model: mujoco.MjModel, name: str) -> np.ndarray:
    """A model field by ``mujoco.batch``'s name (``"opt.gravity"`` for an option): a live view."""
    if name.startswith("opt."):
        return getattr(model.opt, name[4:])
    return getattr(model, name)
