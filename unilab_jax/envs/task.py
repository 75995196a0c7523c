"""The task API: :class:`Task`, an MJCF model plus pure functions over a physics state.

Also here: the helpers every task module uses to get its model and config,
:func:`load_packaged_model` (the MJCF files shipped in ``unilab_jax/envs/xml``), with
:class:`PackagedTask`, the base of the small control tasks built on those files, and
:func:`apply_config_override` (a task config with some fields replaced). How a task's pieces
are called in a control step is the step pipeline (``pipeline.py``; the order of operations is
in ``base.py``'s docstring).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import mujoco

from unilab_jax.envs.mirror import MirrorMap

__all__ = [
    "MODEL_PARAMS_KEY",
    "VelocityTracking",
    "XML_DIR",
    "PackagedTask",
    "Task",
    "apply_config_override",
    "load_packaged_model",
    "model_params",
]

#: Where a task keeps its per-episode model parameters in ``task_state`` (see
#: :attr:`Task.model_fields`).
MODEL_PARAMS_KEY = "model"

XML_DIR = Path(__file__).resolve().parent / "xml"


def load_packaged_model(filename: str) -> mujoco.MjModel:
    """Compile one of the MJCF files shipped in ``unilab_jax/envs/xml``."""
    return mujoco.MjModel.from_xml_path(str(XML_DIR / filename))


class Task(abc.ABC):
    """A task: an MJCF model plus pure observation / reward / termination functions.

    Subclasses hand ``config`` (a frozen dataclass) and the ``model`` they build from it to
    ``Task.__init__`` (or override the ``model`` property). Every method must be a pure JAX
    function of its arguments so it works under ``jit`` and ``vmap`` and with any physics
    backend that provides ``mjx.Data``-named fields.
    """

    #: Per-step reward bounds, padded with a margin, from which the default C51 value support
    #: is derived for any discount: ``reward_bounds / (1 - gamma)`` (``unilab_jax.algos.c51.
    #: value_support``). None: no suggestion (the algorithm's own default support).
    reward_bounds: tuple[float, float] | None = None
    #: Run a full ``mjx.forward`` at reset (needed when ``observe`` reads sensors or body
    #: velocities); kinematics alone otherwise.
    reset_forward: bool = False
    #: MjModel fields the task draws per episode (domain randomisation), by the names
    #: ``mujoco.batch`` uses: ``"actuator_gainprm"``, ``"body_mass"``, ``"opt.gravity"``, ...
    #: A task naming some returns, from ``init_task_state``, each env's full value of each field
    #: (the model field's shape) in ``task_state[MODEL_PARAMS_KEY]``; both physics backends step
    #: and reset every env on its own values (MJX: the field replaced per env under ``vmap``;
    #: C MuJoCo: the batch's per-simulation copy of the field). Derived constants the compiler
    #: computes from them (``body_subtreemass``, ``dof_invweight0``) are not recomputed, on
    #: either backend.
    model_fields: tuple[str, ...] = ()
    #: Keys of ``task_state`` that survive automatic resets: carries of the whole batch, such as
    #: a curriculum's level (:meth:`update_batch`) or a step counter the batch shares.
    persistent_state: tuple[str, ...] = ()
    #: False: every control step starts MuJoCo's constraint solver cold (``qacc_warmstart``
    #: zeroed before its first substep), on both backends, as the reference's batched pool does.
    solver_warmstart: bool = True
    #: True: C MuJoCo keeps the integration state (time, qpos, qvel) in float32 between control
    #: steps, rounding it after each, as the reference's batched pool does (MJX is float32).
    float32_state: bool = False
    #: True: C MuJoCo runs ``mj_forward`` after a control step's last substep, so that the
    #: derived fields the task reads (``sensordata``, ``xpos``, ...) describe the state after the
    #: step, as the reference's ``post_step_forward_sensor`` does, instead of the state before the
    #: last substep (``mj_step``'s and MJX's timing). C MuJoCo only; one more ``mj_forward`` a step.
    post_step_forward: bool = False
    #: Why MJX cannot run the task, one clause (e.g. "MJX refuses its contact sensors with
    #: net-force reduction"); None (default): it runs on both physics backends. A task that names
    #: one runs on C MuJoCo only: MJX is refused in one line before anything is built or compiled
    #: (``registry.mjx_refusal``: ``load``, ``make(..., sim_backend="mjx")``, ``TrainConfig``).
    mjx_unsupported: ClassVar[str | None] = None

    def __init__(self, config: Any, model: mujoco.MjModel | None = None) -> None:
        self.config = config
        self._model = model

    # ----------------------------------------------------------------- static description
    @property
    def model(self) -> mujoco.MjModel:
        """The MuJoCo model with config overrides applied."""
        return self._model

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
    def velocity_tracking(self) -> VelocityTracking | None:
        """A locomotion task's linear-velocity tracking (:class:`VelocityTracking`); None
        (default): the task follows no velocity command."""
        return None

    @property
    def mirror(self) -> MirrorMap | None:
        """The task's left-right mirror map (``unilab_jax.envs.mirror``), which symmetry
        augmentation (``use_symmetry``) needs; None: the task declares no symmetry."""
        return None

    # ----------------------------------------------------------------- pure pieces
    @abc.abstractmethod
    def init_qpos_qvel(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Randomised initial ``(qpos [nq], qvel [nv])``."""

    def xfrc_applied(self, task_state: dict[str, jax.Array]) -> jax.Array | None:
        """Forces and torques ``[nbody, 6]`` (world frame, at each body's centre of mass, as
        ``mjData.xfrc_applied``) held over the control step, from the carry in force when the
        action was chosen (a push); None (default): the task applies none."""
        del task_state
        return None

    @property
    def applies_forces(self) -> bool:
        """The task overrides :meth:`xfrc_applied`."""
        return type(self).xfrc_applied is not Task.xfrc_applied

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

    def init_episode(
        self,
        key_physics: jax.Array,
        key_task: jax.Array,
        carried: Mapping[str, jax.Array] | None,
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """A fresh episode's ``(qpos, qvel, task_state)``. ``carried``: the ending episode's
        :attr:`persistent_state` (None at the first reset), for a task whose draw depends on
        what the batch learned, such as a motion tracker's frame sampler. Default:
        :meth:`init_qpos_qvel` from ``key_physics``, :meth:`init_task_state` from
        ``key_task``."""
        del carried
        qpos, qvel = self.init_qpos_qvel(key_physics)
        return qpos, qvel, self.init_task_state(key_task)

    def reference_qpos(self, task_state: dict[str, jax.Array]) -> jax.Array | None:
        """A pose ``[nq]`` the task asks the robot to match on the coming step, drawn beside it
        in videos (a motion tracker's clip frame); None (default): none."""
        del task_state
        return None

    def data_description(self) -> dict[str, Any] | None:
        """The data the task was built from (a motion tracker's clips), JSON-serialisable, for
        an exported policy's metadata; None (default): none."""
        return None

    def privileged_values(self) -> dict[str, slice] | None:
        """The privileged values the critic observation ends with, by name, as slices of that
        tail (what a privileged actor reads and a deployed policy cannot observe); None
        (default): not named."""
        return None

    def start_episode(self, data: Any, task_state: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """A fresh episode's task state completed from its first physics state ``data`` (the
        one its first observation reads), e.g. an observation history filled with that
        observation's values. Runs after the reset draw's physics is built, before
        :meth:`observe`. Default: unchanged."""
        del data
        return task_state

    def ends_episode(self, task_state: dict[str, jax.Array]) -> jax.Array:
        """The task's own truncation (a motion clip's end), from the task state after the
        step; it counts only where the episode did not terminate. Default: never."""
        del task_state
        return jnp.zeros((), dtype=bool)

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

    def update_batch(
        self,
        task_state: dict[str, jax.Array],
        terminated: jax.Array,
        truncated: jax.Array,
        episode_length: jax.Array,
    ) -> dict[str, jax.Array]:
        """The batch's update after a control step, on batched leaves ``[N, ...]`` (not under
        ``vmap``): e.g. a curriculum over the episodes that ended on this step.
        ``terminated`` / ``truncated`` [N]: how the episode ended on this step;
        ``episode_length`` [N]: its control steps, counting this one (read where it ended).
        Runs after the automatic reset draw, so ``task_state`` is already the fresh episode's
        where one ended (with :attr:`persistent_state` kept). Under several devices the batch
        is one device's share. Default: unchanged."""
        del terminated, truncated, episode_length
        return task_state

    @property
    def has_batch_update(self) -> bool:
        """The task overrides :meth:`update_batch`."""
        return type(self).update_batch is not Task.update_batch


class PackagedTask(Task):
    """A task on one of the MJCF files in ``unilab_jax/envs/xml`` (``pendulum.py``,
    ``cartpole.py``, ``cheetah.py``): the model is compiled from :attr:`xml_file` with the
    config's physics step ``timestep``, and the config's ``control_cost`` weighs the reward's
    ``control`` component (:meth:`control_penalty`)."""

    #: The MJCF file in ``unilab_jax/envs/xml``.
    xml_file: ClassVar[str]
    #: The config dataclass; its defaults configure a task built without a config.
    config_class: ClassVar[type]

    def __init__(self, config: Any = None) -> None:
        config = config or self.config_class()
        model = load_packaged_model(self.xml_file)
        model.opt.timestep = config.timestep
        super().__init__(config, model)

    def control_penalty(self, action: jax.Array) -> jax.Array:
        """The reward's ``control`` component: ``-control_cost * mean(action^2)``."""
        return -self.config.control_cost * jnp.mean(jnp.square(action))


class VelocityTracking(NamedTuple):
    """How a locomotion task rewards following its velocity command, which the walking
    evaluation reads (``bench/learning/locomotion.py``): the reward component, its largest
    value per step (weight, times the control step where the task scales rewards by it), the
    tracking sigma of ``exp(-|cmd_xy - v_xy|^2 / sigma)``, and where the actor observation
    holds the command (vx, vy, yaw rate)."""

    component: str
    max_per_step: float
    sigma: float
    command: slice


def model_params(task_state: Mapping[str, Any]) -> dict[str, jax.Array]:
    """The per-episode model parameters in ``task_state`` (empty for a task without any)."""
    return dict(task_state.get(MODEL_PARAMS_KEY, {}))


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
