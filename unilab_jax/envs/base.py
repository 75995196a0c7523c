"""The environment model: tasks, the step pipeline every backend shares, and the MJX env.

Where each concept lives (this module first; it re-exports the names of ``task.py`` and
``pipeline.py``, so ``from unilab_jax.envs.base import ...`` reaches all of them):

* :class:`Task` (``task.py``): an MJCF model plus pure functions over a physics ``data`` object
  (anything with ``mjx.Data``-named fields: ``qpos``, ``qvel``, ``xpos``, ``xmat``,
  ``sensordata``, ...). Tasks never call a simulator, so the same observation and reward math
  runs on every backend. Also there: :func:`load_packaged_model` (with ``PackagedTask``, the
  base of the tasks on those files) and :func:`apply_config_override`.
* ``Task.mirror`` (``task.py``; the maps in ``mirror.py``): a task's left-right mirror map, which
  the robot tasks declare and symmetry augmentation (``use_symmetry``) needs; None elsewhere.
* :class:`EnvState` (``pipeline.py``): one env's state between steps (physics, observation
  groups, reward, flags, carry); :class:`UnknownEnvError` (here): a name no registry knows.
* The step pipeline (``pipeline.py``): :func:`draw_initial_conditions` (the random part of a
  reset), :func:`post_physics` (everything after the physics of a control step),
  :func:`time_limit` and :func:`auto_reset` (the two end pieces every env's ``step`` shares,
  adapters included). All are pure JAX functions of one env, called under ``vmap``.
* Physics backends: :class:`MjxPhysics` (here; jittable, per env) and C MuJoCo
  (``mujoco_backend.MujocoBatchPhysics``: a batch on CPU threads, not jittable). A backend only
  *advances* physics and *applies* a reset; it never decides rewards, time limits or resets.
* :class:`Env` (here): a task on MJX physics, a single, unbatched, jittable environment with
  ``reset(key)`` and ``step(state, action)``; callers ``jax.vmap`` both. ``registry.load(name,
  overrides)`` builds one. Playground / Brax envs get the same API from ``adapters``
  (:class:`FunctionalEnv`, here, is what the two share).
* The numpy-facing batch ``vec_env.make(env_name, num_envs, sim_backend, ...)``: the only place
  that chooses a physics backend (``"mjx"``: ``jit(vmap(Env.step))``; ``"mujoco"``: C MuJoCo).

Order of operations in one control step (``Env.step``; C MuJoCo's ``MujocoVecEnv`` runs the same
pieces, so task authors know which task state each piece sees):

1. ``action`` is clipped to [-1, 1]; ``ctrl = task.ctrl_from_action(action, task_state)``;
2. the backend advances ``n_frames`` physics steps with that ``ctrl``;
3. :func:`post_physics`, one pure function for every backend:

   a. the carried key splits into ``(next key, reset key, task key)``;
   b. ``reward`` and ``terminated`` are evaluated with the *old* task state (the one in force
      when the action was chosen, e.g. the previous action for an action-rate penalty);
   c. ``task_state = task.update_task_state(data, action, task_state, task key)``;
   d. ``obs = task.observe(data, task_state)`` with the *new* task state (this is
      ``final_obs``, the true last observation of an ending episode);
   e. :func:`time_limit`: ``step_count + 1``, ``truncated = step_count >= episode_length``
      or the task's own end (``task.ends_episode(task_state)`` where not terminated, e.g. a
      motion clip's end), independent of ``terminated``; ``done = terminated | truncated``,
      and the step count set back to 0 where ``done``;
   f. the reset draw: :func:`draw_initial_conditions` from the reset key and the persistent
      task state (``task.init_episode``; ``reset(key)`` draws with none); where ``done`` the
      task state becomes the fresh one, its persistent keys kept;
4. the backend applies the reset where ``done``: it builds the fresh physics from the drawn
   ``(qpos, qvel)`` (MJX: a fresh ``mjx.Data``, selected per leaf by :func:`auto_reset`; C
   MuJoCo: the ended rows of its batch are overwritten), completes the fresh task state from
   it (``task.start_episode``) and observes it (:func:`reset_observation`); ``obs`` is that
   fresh observation where ``done``, ``final_obs`` stays 3d's.

Playground / Brax adapters (``adapters/base.py``) replace 1-3d with the foreign env's own
``step`` and then end with the same :func:`time_limit` and :func:`auto_reset`.

Under ``vmap`` the reset is computed on every step and selected (no branch on traced values);
XLA drops the parts that are not used.

Non-finite physics is not masked here: a NaN observation or reward reaches the training loop,
which stops with an error naming the env index and iteration (a silent reset would hide a
broken model or reward).

Resets compute kinematics only (positions, orientations), not a full ``mjx.forward``: the
next ``mjx.step`` recomputes everything from ``qpos``/``qvel`` anyway, and the reset runs on
every step under ``vmap`` (a select, not a branch), so its cost matters. A task whose
``observe`` reads more than kinematics (sensors, velocities of bodies) sets
``Task.reset_forward = True``.
"""

from __future__ import annotations

import abc
import contextlib
import io
from collections.abc import Mapping
from functools import cached_property

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from unilab_jax.envs import cpu_linalg
from unilab_jax.envs.mirror import MirrorMap
from unilab_jax.envs.pipeline import (
    CRITIC_KEY,
    OBS_KEY,
    EnvState,
    auto_reset,
    draw_initial_conditions,
    finish_batch,
    observation_groups,
    post_physics,
    reset_observation,
    reward_metrics,
    time_limit,
    where_done,
)
from unilab_jax.envs.task import (
    MODEL_PARAMS_KEY,
    Task,
    apply_config_override,
    load_packaged_model,
    model_params,
)

# mujoco.mjx prints "Failed to import warp" when the optional MuJoCo-Warp backend is absent;
# we always select MJX's JAX implementation, so the message is noise for our users.
with contextlib.redirect_stdout(io.StringIO()):
    from mujoco import mjx

__all__ = [
    "CRITIC_KEY",
    "MODEL_PARAMS_KEY",
    "OBS_KEY",
    "Env",
    "EnvState",
    "FunctionalEnv",
    "MjxPhysics",
    "Task",
    "UnknownEnvError",
    "apply_config_override",
    "auto_reset",
    "draw_initial_conditions",
    "finish_batch",
    "load_packaged_model",
    "model_params",
    "mjx_step",
    "replace_model_fields",
    "observation_groups",
    "post_physics",
    "reset_observation",
    "reward_metrics",
    "time_limit",
    "where_done",
]


class UnknownEnvError(ValueError):
    """An environment name that is neither registered nor known to an adapter's source."""


# --------------------------------------------------------------------- environments
class FunctionalEnv(abc.ABC):
    """What the JAX training loop, the trainer and the CLI use from an environment.

    Implemented by :class:`Env` (our tasks on MJX) and ``adapters.AdapterEnv`` (Playground and
    Brax envs): pure, unbatched ``reset(key)`` / ``step(state, action)`` over
    :class:`EnvState`, plus the sizes below.
    """

    name: str

    @property
    @abc.abstractmethod
    def action_size(self) -> int:
        """Dimension of the policy's action (in [-1, 1])."""

    @property
    @abc.abstractmethod
    def episode_length(self) -> int:
        """Control steps before truncation."""

    @property
    def reward_bounds(self) -> tuple[float, float] | None:
        """Padded per-step reward bounds; the default C51 support is derived from them for the
        run's discount (None: no suggestion)."""
        return None

    @property
    def mirror(self) -> MirrorMap | None:
        """The left-right mirror map of observations and actions, for symmetry augmentation
        (None: no symmetry declared; adapters declare none)."""
        return None

    @abc.abstractmethod
    def reset(self, key: jax.Array) -> EnvState:
        """Start one episode from ``key``."""

    @abc.abstractmethod
    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        """Advance one control step; resets automatically when the episode ends."""

    def step_batch(self, states: EnvState, actions: jax.Array) -> EnvState:
        """Advance a batch (leaves ``[N, ...]``) one control step: :meth:`step` under ``vmap``,
        then whatever the batch shares (a task's :meth:`~Task.update_batch`). Every batched
        caller steps through here."""
        return jax.vmap(self.step)(states, actions)

    @cached_property
    def obs_size(self) -> dict[str, int]:
        """Sizes of the observation groups, derived by tracing ``reset`` (no compute)."""
        shapes = jax.eval_shape(self.reset, jax.random.PRNGKey(0))
        return {k: int(v.shape[-1]) for k, v in shapes.obs.items()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class MjxPhysics:
    """MJX backend: builds ``mjx.Data`` from (qpos, qvel) and advances it by ``n_frames``."""

    def __init__(
        self,
        model: mujoco.MjModel,
        n_frames: int,
        reset_forward: bool = False,
        solver_warmstart: bool = True,
    ) -> None:
        # Force the pure-JAX implementation so CPU and GPU runs use the same code path. On a
        # device of this process: MJX's default, jax.devices()[0], is process 0's in a
        # multi-process run (unilab_jax.distributed.processes).
        device = jax.local_devices()[0]
        self.mjx_model = mjx.put_model(model, device=device, impl="jax")
        self._template = mjx.make_data(self.mjx_model, device=device, impl="jax")
        self.n_frames = int(n_frames)
        self.reset_forward = reset_forward
        self.solver_warmstart = solver_warmstart

    def model_with(self, params: Mapping[str, jax.Array]) -> mjx.Model:
        """The model with some fields replaced by one env's values (``Task.model_fields``)."""
        return replace_model_fields(self.mjx_model, params)

    def init(
        self, qpos: jax.Array, qvel: jax.Array, params: Mapping[str, jax.Array] | None = None
    ) -> mjx.Data:
        """Physics state at ``(qpos, qvel)`` with kinematics (xpos, xmat, ...) computed, or
        everything (``mjx.forward``) when the task asks for it; ``params``: the env's
        per-episode model fields."""
        model = self.model_with(params or {})
        data = self._template.replace(
            qpos=jnp.asarray(qpos, self._template.qpos.dtype),
            qvel=jnp.asarray(qvel, self._template.qvel.dtype),
        )
        if self.reset_forward:
            return mjx.forward(model, data)
        return mjx.kinematics(model, data)

    def step(
        self,
        data: mjx.Data,
        ctrl: jax.Array,
        params: Mapping[str, jax.Array] | None = None,
        xfrc_applied: jax.Array | None = None,
    ) -> mjx.Data:
        """Apply ``ctrl`` (and ``xfrc_applied`` when given) and advance ``n_frames`` physics
        steps of the model with the env's per-episode fields ``params``."""
        model = self.model_with(params or {})
        data = data.replace(ctrl=jnp.asarray(ctrl, data.ctrl.dtype))
        if xfrc_applied is not None:
            data = data.replace(xfrc_applied=jnp.asarray(xfrc_applied, data.xfrc_applied.dtype))
        if not self.solver_warmstart:
            data = data.replace(qacc_warmstart=jnp.zeros_like(data.qacc_warmstart))
        return jax.lax.fori_loop(0, self.n_frames, lambda _, d: mjx_step(model, d), data)


def replace_model_fields(model: mjx.Model, params: Mapping[str, jax.Array]) -> mjx.Model:
    """``model`` with the fields ``params`` names replaced (``Task.model_fields`` names:
    ``"opt.<name>"`` for an option)."""
    fields = {k: v for k, v in params.items() if not k.startswith("opt.")}
    options = {k[4:]: v for k, v in params.items() if k.startswith("opt.")}
    if options:
        model = model.replace(opt=model.opt.replace(**options))
    return model.replace(**fields) if fields else model


def mjx_step(model: mjx.Model, data: mjx.Data) -> mjx.Data:
    """``mjx.step``, except that an implicitfast step leaves the actuators whose force is
    clamped to their ``forcerange`` out of the implicit velocity derivative, as C MuJoCo does
    (``mjd_actuator_vel``: a saturated force does not depend on the velocity). MJX 3.17's own
    ``implicit`` keeps their ``kv``, which damps a saturated joint C MuJoCo leaves free: G1's
    wrists (5 N m limit) moved 1.3 rad/s slower after one substep."""
    if model.opt.integrator != mjx.IntegratorType.IMPLICITFAST or not np.any(
        model.actuator_forcelimited
    ):
        return mjx.step(model, data)
    data = mjx.forward(model, data)
    force = data.actuator_force
    low, high = model.actuator_forcerange[:, 0], model.actuator_forcerange[:, 1]
    clamped = np.asarray(model.actuator_forcelimited, bool) & ((force <= low) | (force >= high))
    free = jnp.where(clamped, 0.0, 1.0)
    # Column 2 of gainprm / biasprm is the velocity coefficient the derivative reads.
    unclamped = model.replace(
        actuator_gainprm=model.actuator_gainprm.at[:, 2].multiply(free),
        actuator_biasprm=model.actuator_biasprm.at[:, 2].multiply(free),
    )
    return mjx.implicit(unclamped, data)


class Env(FunctionalEnv):
    """A task on MJX physics; ``reset``/``step`` are pure and vmappable."""

    def __init__(self, task: Task, name: str) -> None:
        self.task = task
        self.name = name
        self.physics = MjxPhysics(
            task.model, task.n_frames, task.reset_forward, task.solver_warmstart
        )
        # jaxlib 0.10.2's batched LAPACK Cholesky can deadlock on CPU (unilab_jax.envs.cpu_linalg).
        cpu_linalg.install_on_cpu()

    @property
    def action_size(self) -> int:
        return self.task.action_size

    @property
    def episode_length(self) -> int:
        return self.task.episode_length

    @property
    def reward_bounds(self) -> tuple[float, float] | None:
        return self.task.reward_bounds

    @property
    def mirror(self) -> MirrorMap | None:
        return self.task.mirror

    def step_batch(self, states: EnvState, actions: jax.Array) -> EnvState:
        return finish_batch(self.task, states, jax.vmap(self.step)(states, actions))

    def reset(self, key: jax.Array) -> EnvState:
        """Start one episode from ``key``."""
        qpos, qvel, task_state, key = draw_initial_conditions(self.task, key)
        data = self.physics.init(qpos, qvel, model_params(task_state))
        obs, task_state = reset_observation(self.task, data, task_state)
        # Evaluate the reward once only to learn the component names/shapes; XLA drops the math.
        _, components = self.task.reward(
            data, jnp.zeros((self.action_size,), jnp.float32), task_state
        )
        return EnvState.initial(data, obs, task_state, reward_metrics(components), key)

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        """Advance one control step; resets automatically when the episode ends."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        ctrl = self.task.ctrl_from_action(action, state.task_state)
        with jax.named_scope("physics"):  # names for profiles (bench/speed/profile.py)
            data = self.physics.step(
                state.physics,
                ctrl,
                model_params(state.task_state),
                self.task.xfrc_applied(state.task_state),
            )
        with jax.named_scope("task"):
            state, (qpos0, qvel0) = post_physics(
                self.task, data, action, state.task_state, state.key, state.step_count
            )
        # Applying the reset, MJX's way: the fresh episode's physics is built on every step
        # and selected per leaf (exactly ``reset(reset key)``'s physics and observation).
        with jax.named_scope("reset"):
            # Where done, the task state is already the fresh episode's (its model fields too).
            fresh = self.physics.init(qpos0, qvel0, model_params(state.task_state))
            obs, task_state = reset_observation(self.task, fresh, state.task_state)
            state = state.replace(task_state=where_done(state.done, task_state, state.task_state))
        return auto_reset(state, fresh, obs)
