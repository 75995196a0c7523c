"""Functional task API and the MJX physics backend.

A :class:`Task` is a set of pure functions over a physics ``data`` object (anything with
``mjx.Data``-named fields: ``qpos``, ``qvel``, ``xpos``, ``xmat``, ``sensordata``, ...) plus an
``mujoco.MjModel``. Tasks never call MJX themselves, so the same observation and reward math is
reused by the C-MuJoCo backend (``unilab_jax.envs.mujoco_backend``) that steps a batch on CPU
threads.

:class:`Env` binds a task to the MJX physics backend and exposes a single, unbatched, jittable
environment: ``reset(key)`` and ``step(state, action)``. Callers ``jax.vmap`` both. (C MuJoCo
cannot be jitted, so it is only reachable through the vectorised ``envs.make``.)
``step`` resets automatically when an episode ends and keeps the true last observation in
``EnvState.final_obs``.

Order of operations inside ``Env.step`` (so task authors know which task state each piece sees):

1. ``ctrl = task.ctrl_from_action(action, task_state)``;
2. ``n_frames`` physics steps with that ``ctrl``;
3. ``reward`` and ``terminated`` are evaluated with the *old* task state (the one in force when
   the action was chosen, e.g. the previous action for an action-rate penalty);
4. ``task_state = task.update_task_state(data, action, task_state, key)``;
5. ``obs = task.observe(data, task_state)`` with the *new* task state;
6. time limit, then automatic reset where ``terminated | truncated``.

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

# mujoco.mjx prints "Failed to import warp" when the optional MuJoCo-Warp backend is absent;
# we always select MJX's JAX implementation, so the message is noise for our users.
with contextlib.redirect_stdout(io.StringIO()):
    from mujoco import mjx

__all__ = [
    "CRITIC_KEY",
    "OBS_KEY",
    "Env",
    "EnvState",
    "MjxPhysics",
    "Task",
    "apply_config_override",
    "draw_initial_conditions",
    "load_packaged_model",
    "observation_groups",
    "reward_metrics",
]

OBS_KEY = "obs"
CRITIC_KEY = "critic"
XML_DIR = Path(__file__).resolve().parent / "xml"


def load_packaged_model(filename: str) -> mujoco.MjModel:
    """Compile one of the MJCF files shipped in ``unilab_jax/envs/xml``."""
    return mujoco.MjModel.from_xml_path(str(XML_DIR / filename))


@struct.dataclass
class EnvState:
    """State of one environment; all leaves are JAX arrays so it can be vmapped and jitted."""

    physics: Any
    """The backend's physics state (an ``mjx.Data`` for ``sim_backend="mjx"``)."""
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


class Task(abc.ABC):
    """A task: an MJCF model plus pure observation / reward / termination functions.

    Subclasses set ``config`` (a frozen dataclass) and build ``model`` in ``__init__``. Every
    method must be a pure JAX function of its arguments so it works under ``jit`` and ``vmap``
    and with any physics backend that provides ``mjx.Data``-named fields.
    """

    #: Suggested C51 value support for this task's returns at gamma 0.97 (None: no suggestion).
    value_bounds: tuple[float, float] | None = None
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


class MjxPhysics:
    """MJX backend: builds ``mjx.Data`` from (qpos, qvel) and advances it by ``n_frames``."""

    def __init__(self, model: mujoco.MjModel, n_frames: int, reset_forward: bool = False) -> None:
        # Force the pure-JAX implementation so CPU and GPU runs use the same code path.
        self.mjx_model = mjx.put_model(model, impl="jax")
        self._template = mjx.make_data(self.mjx_model, impl="jax")
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


class Env:
    """One environment bound to a physics backend; ``reset``/``step`` are pure and vmappable."""

    def __init__(self, task: Task, name: str, sim_backend: str = "mjx") -> None:
        if sim_backend != "mjx":
            raise ValueError(
                f"Unsupported sim_backend {sim_backend!r} for the functional Env: only 'mjx' is "
                "implemented (C MuJoCo is not jittable; use unilab_jax.envs.make(name, num_envs, "
                "sim_backend='mujoco') for the CPU backend)."
            )
        self.task = task
        self.name = name
        self.sim_backend = sim_backend
        self.physics = MjxPhysics(task.model, task.n_frames, task.reset_forward)
        # jaxlib 0.10.2's batched LAPACK Cholesky can deadlock on CPU (unilab_jax.cpu_linalg).
        cpu_linalg.install_on_cpu()

    # ----------------------------------------------------------------- properties
    @property
    def action_size(self) -> int:
        return self.task.action_size

    @property
    def episode_length(self) -> int:
        return self.task.episode_length

    @property
    def value_bounds(self) -> tuple[float, float] | None:
        return self.task.value_bounds

    @cached_property
    def obs_size(self) -> dict[str, int]:
        """Sizes of the observation groups, derived by tracing ``reset`` (no compute)."""
        shapes = jax.eval_shape(self.reset, jax.random.PRNGKey(0))
        return {k: int(v.shape[-1]) for k, v in shapes.obs.items()}

    def __repr__(self) -> str:
        return f"Env(name={self.name!r}, sim_backend={self.sim_backend!r})"

    # ----------------------------------------------------------------- internals
    def _observe(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        return observation_groups(self.task, data, task_state)

    @staticmethod
    def _metrics(components: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        return reward_metrics(components)

    # ----------------------------------------------------------------- API
    def reset(self, key: jax.Array) -> EnvState:
        """Start one episode from ``key``."""
        qpos, qvel, task_state, key = draw_initial_conditions(self.task, key)
        data = self.physics.init(qpos, qvel)
        obs = self._observe(data, task_state)
        # Evaluate the reward once only to learn the component names/shapes; XLA drops the math.
        _, components = self.task.reward(
            data, jnp.zeros((self.action_size,), jnp.float32), task_state
        )
        metrics = jax.tree.map(jnp.zeros_like, self._metrics(components))
        return EnvState(
            physics=data,
            obs=obs,
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            final_obs=obs,
            step_count=jnp.zeros((), jnp.int32),
            task_state=task_state,
            metrics=metrics,
            key=key,
        )

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        """Advance one control step; resets automatically when the episode ends."""
        task = self.task
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        key, k_reset, k_task = jax.random.split(state.key, 3)

        ctrl = task.ctrl_from_action(action, state.task_state)
        data = self.physics.step(state.physics, ctrl)
        reward, components = task.reward(data, action, state.task_state)
        terminated = jnp.asarray(task.terminated(data, state.task_state), bool)
        task_state = task.update_task_state(data, action, state.task_state, k_task)
        obs = self._observe(data, task_state)
        metrics = self._metrics(components)
        reward = jnp.asarray(reward, jnp.float32)

        step_count = state.step_count + 1
        truncated = step_count >= self.episode_length
        done = terminated | truncated

        # Always compute a fresh episode (exactly ``reset(k_reset)``) and select per leaf: no
        # Python branching on traced values. XLA drops the parts of the reset that are not used.
        fresh = self.reset(k_reset)

        def pick(fresh: Any, cont: Any) -> Any:
            return jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, cont)

        return EnvState(
            physics=pick(fresh.physics, data),
            obs=pick(fresh.obs, obs),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=obs,
            step_count=jnp.where(done, jnp.zeros_like(step_count), step_count),
            task_state=pick(fresh.task_state, task_state),
            metrics=metrics,
            key=key,
        )
