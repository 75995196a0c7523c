"""The environment model: tasks, the step pipeline every backend shares, and the MJX env.

Where each concept lives (this module first):

* :class:`Task` (here): an MJCF model plus pure functions over a physics ``data`` object
  (anything with ``mjx.Data``-named fields: ``qpos``, ``qvel``, ``xpos``, ``xmat``,
  ``sensordata``, ...). Tasks never call a simulator, so the same observation and reward math
  runs on every backend.
* ``Task.mirror`` (here; the maps in ``mirror.py``): a task's left-right mirror map, which the
  robot tasks declare and symmetry augmentation (``use_symmetry``) needs; None elsewhere.
* :class:`EnvState` (here): one env's state between steps (physics, observation groups,
  reward, flags, carry); :class:`UnknownEnvError` (here): a name no registry knows.
* The step pipeline (here): :func:`draw_initial_conditions` (the random part of a reset),
  :func:`post_physics` (everything after the physics of a control step), :func:`time_limit`
  and :func:`auto_reset` (the two end pieces every env's ``step`` shares, adapters included).
  All are pure JAX functions of one env, called under ``vmap``.
* Physics backends: :class:`MjxPhysics` (here; jittable, per env) and C MuJoCo
  (``mujoco_backend.MujocoBatchPhysics``: a batch on CPU threads, not jittable). A backend only
  *advances* physics and *applies* a reset; it never decides rewards, time limits or resets.
* :class:`Env` (here): a task on MJX physics, a single, unbatched, jittable environment with
  ``reset(key)`` and ``step(state, action)``; callers ``jax.vmap`` both. ``registry.load(name,
  overrides)`` builds one. Playground / Brax envs get the same API from ``adapters``
  (:class:`FunctionalEnv` is what the two share).
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
      (independent of ``terminated``), ``done = terminated | truncated``, and the step count
      set back to 0 where ``done``;
   f. the reset draw: :func:`draw_initial_conditions` from the reset key (what ``reset(key)``
      draws); where ``done`` the task state becomes the fresh one;
4. the backend applies the reset where ``done``: it builds the fresh physics from the drawn
   ``(qpos, qvel)`` (MJX: a fresh ``mjx.Data``, selected per leaf by :func:`auto_reset`; C
   MuJoCo: the ended rows of its batch are overwritten) and observes it with the fresh task
   state; ``obs`` is that fresh observation where ``done``, ``final_obs`` stays 3d's.

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
import dataclasses
import io
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
from flax import struct

from unilab_jax import cpu_linalg
from unilab_jax.envs.mirror import MirrorMap

# mujoco.mjx prints "Failed to import warp" when the optional MuJoCo-Warp backend is absent;
# we always select MJX's JAX implementation, so the message is noise for our users.
with contextlib.redirect_stdout(io.StringIO()):
    from mujoco import mjx

__all__ = [
    "CRITIC_KEY",
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
    "load_packaged_model",
    "observation_groups",
    "post_physics",
    "reward_metrics",
    "time_limit",
    "where_done",
]

OBS_KEY = "obs"
CRITIC_KEY = "critic"
XML_DIR = Path(__file__).resolve().parent / "xml"


class UnknownEnvError(ValueError):
    """An environment name that is neither registered nor known to an adapter's source."""


def load_packaged_model(filename: str) -> mujoco.MjModel:
    """Compile one of the MJCF files shipped in ``unilab_jax/envs/xml``."""
    return mujoco.MjModel.from_xml_path(str(XML_DIR / filename))


@struct.dataclass
class EnvState:
    """State of one environment; all leaves are JAX arrays so it can be vmapped and jitted."""

    physics: Any
    """The physics state: an ``mjx.Data`` for :class:`Env`, the foreign state for adapters."""
    obs: dict[str, jax.Array]
    """Observation groups: ``"obs"`` (actor) and ``"critic"`` (privileged, or a copy of obs)."""
    reward: jax.Array
    """[] float32, reward of the step that produced this state (0 after reset)."""
    terminated: jax.Array
    """[] bool, the task's termination condition on this step."""
    truncated: jax.Array
    """[] bool, the time limit was reached on this step (independent of ``terminated``)."""
    final_obs: dict[str, jax.Array]
    """Observation at the end of this step before any automatic reset (== obs if not done)."""
    step_count: jax.Array
    """[] int32, control steps since the current episode began (0 after reset)."""
    task_state: dict[str, jax.Array]
    """Task-specific carry (may be empty)."""
    metrics: dict[str, jax.Array]
    """This step's reward components, keys ``"reward/<name>"`` (zeros after reset)."""
    key: jax.Array
    """PRNG key; split on every step, one part seeds the automatic reset."""

    @classmethod
    def initial(
        cls,
        physics: Any,
        obs: dict[str, jax.Array],
        task_state: dict[str, jax.Array],
        metrics: dict[str, jax.Array],
        key: jax.Array,
    ) -> EnvState:
        """The state at the start of an episode (``metrics``: zeros of their shapes)."""
        return cls(
            physics=physics,
            obs=obs,
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            final_obs=obs,
            step_count=jnp.zeros((), jnp.int32),
            task_state=task_state,
            metrics=jax.tree.map(jnp.zeros_like, metrics),
            key=key,
        )

    @property
    def done(self) -> jax.Array:
        """The episode ended on this step (terminated or truncated)."""
        return self.terminated | self.truncated


class Task(abc.ABC):
    """A task: an MJCF model plus pure observation / reward / termination functions.

    Subclasses set ``config`` (a frozen dataclass) and build ``model`` in ``__init__``. Every
    method must be a pure JAX function of its arguments so it works under ``jit`` and ``vmap``
    and with any physics backend that provides ``mjx.Data``-named fields.
    """

    #: Per-step reward bounds, padded with a margin, from which the default C51 value support
    #: is derived for any discount: ``reward_bounds / (1 - gamma)`` (``unilab_jax.algos.c51.
    #: value_support``). None: no suggestion (the algorithm's own default support).
    reward_bounds: tuple[float, float] | None = None
    #: Run a full ``mjx.forward`` at reset (needed when ``observe`` reads sensors or body
    #: velocities); kinematics alone otherwise.
    reset_forward: bool = False

    def __init__(self, config: Any) -> None:
        self.config = config

    # ----------------------------------------------------------------- static description
    @property
    @abc.abstractmethod
    def model(self) -> mujoco.MjModel:
        """The MuJoCo model with config overrides applied."""

    @property
    def n_frames(self) -> int:
        """Physics steps per control step (default: ``config.n_frames``)."""
        return int(self.config.n_frames)

    @property
    def episode_length(self) -> int:
        """Control steps before truncation (default: ``config.episode_length``)."""
        return int(self.config.episode_length)

    @property
    def action_size(self) -> int:
        """Dimension of the policy's action (default: number of actuators)."""
        return int(self.model.nu)

    @property
    def control_dt(self) -> float:
        """Seconds of simulated time per control step."""
        return float(self.model.opt.timestep) * self.n_frames

    @property
    def mirror(self) -> MirrorMap | None:
        """The task's left-right mirror map (``unilab_jax.envs.mirror``), which symmetry
        augmentation (``use_symmetry``) needs; None: the task declares no symmetry."""
        return None

    # ----------------------------------------------------------------- pure pieces
    @abc.abstractmethod
    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Randomised initial ``(qpos [nq], qvel [nv])``."""

    def ctrl_from_action(self, action: jax.Array, task_state: dict[str, jax.Array]) -> jax.Array:
        """Map a policy action in [-1, 1] to actuator controls (default: identity)."""
        del task_state
        return action

    @abc.abstractmethod
    def observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """Observation groups; must contain ``"obs"``, may contain ``"critic"``."""

    @abc.abstractmethod
    def reward(
        self, data: Any, action: jax.Array, task_state: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """Scalar reward and its named components (names without the ``reward/`` prefix)."""

    def terminated(self, data: Any, task_state: dict[str, jax.Array]) -> jax.Array:
        """Task termination condition (default: never)."""
        del data, task_state
        return jnp.zeros((), dtype=bool)

    def init_task_state(self, key: jax.Array) -> dict[str, jax.Array]:
        """Task-specific carry at episode start (default: empty)."""
        del key
        return {}

    def update_task_state(
        self,
        data: Any,
        action: jax.Array,
        task_state: dict[str, jax.Array],
        key: jax.Array,
    ) -> dict[str, jax.Array]:
        """Advance the task carry after a control step (default: unchanged)."""
        del data, action, key
        return task_state


def apply_config_override(config: Any, override: Mapping[str, Any] | None) -> Any:
    """Return ``config`` with fields replaced by ``override``; unknown fields raise ValueError."""
    if not override:
        return config
    valid = [f.name for f in dataclasses.fields(config)]
    unknown = sorted(set(override) - set(valid))
    if unknown:
        raise ValueError(
            f"Unknown config field(s) {unknown} for {type(config).__name__}; "
            f"valid fields are: {', '.join(valid)}"
        )
    return dataclasses.replace(config, **dict(override))


def draw_initial_conditions(
    task: Task, key: jax.Array
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array], jax.Array]:
    """The random part of a reset: ``(qpos, qvel, task_state, carried_key)`` from ``key``.

    Shared by :meth:`Env.reset` and the C-MuJoCo backend so that both backends draw exactly the
    same episode from the same key (the parity tests rely on it).
    """
    key, k_init, k_task = jax.random.split(key, 3)
    qpos, qvel = task.init_qpos_qvel(k_init)
    task_state = task.init_task_state(k_task)
    return qpos, qvel, task_state, key


def observation_groups(
    task: Task, data: Any, task_state: dict[str, jax.Array]
) -> dict[str, jax.Array]:
    """``task.observe`` with the ``"critic"`` group defaulted to ``"obs"`` and float32 leaves.

    One function for every backend, so the groups and dtypes cannot drift between them.
    """
    groups = dict(task.observe(data, task_state))
    if OBS_KEY not in groups:
        raise KeyError(f"{type(task).__name__}.observe must return an {OBS_KEY!r} group")
    groups.setdefault(CRITIC_KEY, groups[OBS_KEY])
    return {k: jnp.asarray(v, jnp.float32) for k, v in groups.items()}


def reward_metrics(components: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Reward components as logged metrics: keys ``"reward/<name>"``, float32 values."""
    return {f"reward/{k}": jnp.asarray(v, jnp.float32) for k, v in components.items()}


# --------------------------------------------------------------------- the step pipeline
def where_done(done: jax.Array, fresh: Any, current: Any) -> Any:
    """Per leaf: ``fresh`` where ``done``, ``current`` elsewhere, in ``fresh``'s dtype.

    A select, not a branch, so it works under ``vmap``; keeping the fresh (reset) dtype means a
    carried pytree never changes type from one step to the next.
    """
    return jax.tree.map(lambda a, b: jnp.where(done, a, b).astype(a.dtype), fresh, current)


def time_limit(
    *,
    physics: Any,
    obs: dict[str, jax.Array],
    reward: jax.Array,
    terminated: jax.Array,
    metrics: dict[str, jax.Array],
    task_state: dict[str, jax.Array],
    key: jax.Array,
    step_count: jax.Array,
    episode_length: int,
) -> EnvState:
    """The state after a control step, with the time limit applied; not reset yet.

    ``step_count`` is the count before the step. ``truncated`` (``step_count + 1 >=
    episode_length``) is independent of ``terminated``; the returned count is already 0 where
    the episode ended (the next step starts a new one). ``obs`` is also ``final_obs``:
    :func:`auto_reset` then swaps in the fresh episode's physics and observation.
    """
    step_count = step_count + 1
    truncated = step_count >= episode_length
    done = terminated | truncated
    return EnvState(
        physics=physics,
        obs=obs,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        final_obs=obs,
        step_count=where_done(done, jnp.zeros_like(step_count), step_count),
        task_state=task_state,
        metrics=metrics,
        key=key,
    )


def auto_reset(state: EnvState, fresh_physics: Any, fresh_obs: dict[str, jax.Array]) -> EnvState:
    """Where ``state.done``: the fresh episode's physics and observation (``final_obs`` keeps
    the ended episode's last observation)."""
    done = state.done
    return state.replace(
        physics=where_done(done, fresh_physics, state.physics),
        obs=where_done(done, fresh_obs, state.obs),
    )


def post_physics(
    task: Task,
    data: Any,
    action: jax.Array,
    task_state: dict[str, jax.Array],
    key: jax.Array,
    step_count: jax.Array,
) -> tuple[EnvState, tuple[jax.Array, jax.Array]]:
    """The post-physics half of one env's control step, the same for every physics backend.

    ``data`` is the physics after the step (an ``mjx.Data`` or C MuJoCo's view), ``action`` the
    clipped action, ``task_state`` / ``key`` / ``step_count`` the carry before the step.
    Returns the :func:`time_limit` state (``physics`` is ``data``; the carry is already the
    fresh episode's where ``done``) and the reset draw's ``(qpos, qvel)``, which the backend
    applies where ``done`` (steps 3a-3f of the module docstring, in that order).
    """
    key, k_reset, k_task = jax.random.split(key, 3)
    reward, components = task.reward(data, action, task_state)
    terminated = jnp.asarray(task.terminated(data, task_state), bool)
    task_state = task.update_task_state(data, action, task_state, k_task)
    state = time_limit(
        physics=data,
        obs=observation_groups(task, data, task_state),
        reward=jnp.asarray(reward, jnp.float32),
        terminated=terminated,
        metrics=reward_metrics(components),
        task_state=task_state,
        key=key,
        step_count=step_count,
        episode_length=task.episode_length,
    )
    qpos0, qvel0, task_state0, _ = draw_initial_conditions(task, k_reset)
    state = state.replace(task_state=where_done(state.done, task_state0, state.task_state))
    return state, (qpos0, qvel0)


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

    @cached_property
    def obs_size(self) -> dict[str, int]:
        """Sizes of the observation groups, derived by tracing ``reset`` (no compute)."""
        shapes = jax.eval_shape(self.reset, jax.random.PRNGKey(0))
        return {k: int(v.shape[-1]) for k, v in shapes.obs.items()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class MjxPhysics:
    """MJX backend: builds ``mjx.Data`` from (qpos, qvel) and advances it by ``n_frames``."""

    def __init__(self, model: mujoco.MjModel, n_frames: int, reset_forward: bool = False) -> None:
        # Force the pure-JAX implementation so CPU and GPU runs use the same code path. On a
        # device of this process: MJX's default, jax.devices()[0], is process 0's in a
        # multi-process run (unilab_jax.distributed).
        device = jax.local_devices()[0]
        self.mjx_model = mjx.put_model(model, device=device, impl="jax")
        self._template = mjx.make_data(self.mjx_model, device=device, impl="jax")
        self.n_frames = int(n_frames)
        self.reset_forward = reset_forward

    def init(self, qpos: jax.Array, qvel: jax.Array) -> mjx.Data:
        """Physics state at ``(qpos, qvel)`` with kinematics (xpos, xmat, ...) computed, or
        everything (``mjx.forward``) when the task asks for it."""
        data = self._template.replace(
            qpos=jnp.asarray(qpos, self._template.qpos.dtype),
            qvel=jnp.asarray(qvel, self._template.qvel.dtype),
        )
        if self.reset_forward:
            return mjx.forward(self.mjx_model, data)
        return mjx.kinematics(self.mjx_model, data)

    def step(self, data: mjx.Data, ctrl: jax.Array) -> mjx.Data:
        """Apply ``ctrl`` and advance ``n_frames`` physics steps."""
        data = data.replace(ctrl=jnp.asarray(ctrl, data.ctrl.dtype))
        return jax.lax.fori_loop(0, self.n_frames, lambda _, d: mjx.step(self.mjx_model, d), data)


class Env(FunctionalEnv):
    """A task on MJX physics; ``reset``/``step`` are pure and vmappable."""

    def __init__(self, task: Task, name: str) -> None:
        self.task = task
        self.name = name
        self.physics = MjxPhysics(task.model, task.n_frames, task.reset_forward)
        # jaxlib 0.10.2's batched LAPACK Cholesky can deadlock on CPU (unilab_jax.cpu_linalg).
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

    def reset(self, key: jax.Array) -> EnvState:
        """Start one episode from ``key``."""
        qpos, qvel, task_state, key = draw_initial_conditions(self.task, key)
        data = self.physics.init(qpos, qvel)
        obs = observation_groups(self.task, data, task_state)
        # Evaluate the reward once only to learn the component names/shapes; XLA drops the math.
        _, components = self.task.reward(
            data, jnp.zeros((self.action_size,), jnp.float32), task_state
        )
        return EnvState.initial(data, obs, task_state, reward_metrics(components), key)

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        """Advance one control step; resets automatically when the episode ends."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        ctrl = self.task.ctrl_from_action(action, state.task_state)
        with jax.named_scope("physics"):  # names for profiles (bench/profile.py)
            data = self.physics.step(state.physics, ctrl)
        with jax.named_scope("task"):
            state, (qpos0, qvel0) = post_physics(
                self.task, data, action, state.task_state, state.key, state.step_count
            )
        # Applying the reset, MJX's way: the fresh episode's physics is built on every step
        # and selected per leaf (exactly ``reset(reset key)``'s physics and observation).
        with jax.named_scope("reset"):
            fresh = self.physics.init(qpos0, qvel0)
            obs = observation_groups(self.task, fresh, state.task_state)
        return auto_reset(state, fresh, obs)
