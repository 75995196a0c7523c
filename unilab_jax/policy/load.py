"""After training: load a run's deterministic policy.

``load_policy(path)`` reads a checkpoint written by ``train`` (a run's log dir, its
``checkpoints/`` folder or one checkpoint's folder) and returns a ``Policy``: observations in,
actions out, the observation normaliser included. It restores only the checkpoint's ``agent``
item (never the replay) and builds no trainer, so it takes seconds; the run's configuration
comes from the checkpoint's own ``meta`` item.

Checkpoints the core does not write are read by a ``PolicyReader`` another package registers,
as an entry point of the group ``unilab_jax.policy_readers`` (found when first needed) or with
``register_reader``. The torch facade registers one for its ``model_<iteration>.pt`` files
(``unilab.torch_policy``); the core itself never imports the facade.

``unilab_jax.policy.evaluate`` runs the policy; ``unilab-jax evaluate RUN`` does both from the
command line.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.algos.agent import Agent
from unilab_jax.algos.hyperparams import settings_from_json
from unilab_jax.algos.registry import get_algo
from unilab_jax.envs import load
from unilab_jax.training.checkpoint import (
    META_FILE,
    best_step,
    list_steps,
    read_meta,
    restore_item,
)

__all__ = [
    "Policy",
    "PolicyReader",
    "agent_template",
    "find_checkpoint",
    "load_policy",
    "register_reader",
]

#: The entry-point group of ``PolicyReader`` objects (``[project.entry-points]``).
READERS_GROUP = "unilab_jax.policy_readers"


@dataclass
class Policy:
    """A trained deterministic policy (SAC: tanh of the mean; TD3: the actor, no noise)."""

    env: str
    """The task it was trained on."""
    algo: str
    iteration: int
    """The training iteration of the checkpoint."""
    obs_dim: int
    action_dim: int
    config: dict
    """The run's settings: ``{"train": ..., "algo": ...}`` as in ``run_config.json``."""
    checkpoint: str
    agent: Agent
    state: Any
    """The agent's state (parameters and normalisers)."""

    def __post_init__(self) -> None:
        self._act = jax.jit(self.agent.act)

    @property
    def algo_config(self) -> Any:
        """The run's algorithm config (``SACConfig`` / ``TD3Config``), defaults filled in."""
        from unilab_jax.algos.hyperparams import settings_from_json
        from unilab_jax.algos.registry import get_algo

        settings = settings_from_json(dict((self.config or {}).get("algo") or {}))
        return get_algo(self.algo).config_cls(**settings)

    def precision(self):
        """The run's matmul precision (``TrainConfig.matmul_precision``; full float32 unless
        the run opted out) as a context: the policy is traced under it, as in training."""
        train = (self.config or {}).get("train") or {}
        return jax.default_matmul_precision(train.get("matmul_precision") or "highest")

    @property
    def input_dim(self) -> int:
        """The width of a row ``act`` takes: ``obs_dim``, plus the privileged values a
        privileged actor (HORA-SAC) reads after the observation (``actor_observation``)."""
        return int(self.obs_dim) + int(self.agent.privileged_dim)

    def act(self, obs: jax.Array) -> jax.Array:
        """Actions ``[N, action_dim]`` in [-1, 1] for raw observations ``[N, input_dim]``
        (jit-able; the normaliser is applied inside): the ``"obs"`` group, followed for a
        privileged actor by the critic observation's privileged values
        (``unilab_jax.algos.agent.actor_observation`` of the env's observation dict)."""
        with self.precision():
            return self._act(self.state, obs)

    def __call__(self, obs: Any) -> np.ndarray:
        """``act`` for numpy input and output; a single observation ``[obs_dim]`` works too."""
        obs = np.asarray(obs, np.float32)
        single = obs.ndim == 1
        actions = np.asarray(self.act(jnp.asarray(obs[None] if single else obs)))
        return actions[0] if single else actions


def find_checkpoint(path: str | Path, step: int | str | None = None) -> tuple[Path, int]:
    """``(checkpoints folder, iteration)`` for a run dir, a ``checkpoints/`` folder or one
    checkpoint's folder: the newest when ``step`` is None (or that one checkpoint), the one of
    the best evaluation return when ``step`` is ``"best"``, else iteration ``step``. (Other
    packages' files: their ``PolicyReader``.)"""
    path = Path(path)
    if path.name.isdigit() and (path / META_FILE).is_file():  # one checkpoint's folder
        path, step = path.parent, int(path.name) if step is None else step
    elif (path / "checkpoints").is_dir():
        path = path / "checkpoints"
    steps = list_steps(path)
    if not steps:
        raise FileNotFoundError(
            f"no checkpoint under {path}: pass a run's log dir, its checkpoints/ folder or one "
            "checkpoint's folder (written by unilab-jax train or train(log_dir=...)), or a "
            "torch facade run's log dir or one of its model_<iteration>.pt files"
        )
    saved = ", ".join(map(str, steps))
    if step == "best":
        step = best_step(path)
        if step is None:
            raise FileNotFoundError(
                f"no evaluated checkpoint under {path} (saved: {saved}): the run saved none at "
                "an evaluation (eval_envs 0, or no save then); load the newest (no step) or "
                "one of those iterations"
            )
    elif step is None:
        step = steps[-1]
    elif step not in steps:
        raise FileNotFoundError(f"no checkpoint {step} under {path} (saved: {saved})")
    return path, step


@dataclass(frozen=True)
class PolicyReader:
    """How ``load_policy`` reads checkpoints another package writes."""

    name: str
    find: Callable[[Path, int | None], Path | None]
    """The file ``(path, step)`` names when it is one of this reader's (it may raise to say
    why the file it names cannot be used), None when ``path`` is not its kind."""
    read: Callable[[Path], Policy]
    """The deterministic policy of one such file."""


_READERS: dict[str, PolicyReader] = {}
_ENTRY_POINTS_READ = False


def register_reader(reader: PolicyReader) -> None:
    """Make ``load_policy`` try ``reader`` before the core's own checkpoints (one per name)."""
    _READERS[reader.name] = reader


def _readers() -> list[PolicyReader]:
    global _ENTRY_POINTS_READ
    if not _ENTRY_POINTS_READ:
        for point in entry_points(group=READERS_GROUP):
            if point.name in _READERS:
                continue
            try:
                register_reader(point.load())
            except Exception as err:  # a broken plugin must not stop the core's own files
                warnings.warn(
                    f"policy reader {point.name!r} ({point.value}) could not be loaded and is "
                    f"skipped: {type(err).__name__}: {err}",
                    stacklevel=3,
                )
        _ENTRY_POINTS_READ = True
    return list(_READERS.values())


def load_policy(path: str | Path, step: int | str | None = None) -> Policy:
    """The deterministic policy of the checkpoint at ``path``: the core's (see
    ``find_checkpoint``: the newest by default, ``step="best"`` the one of the best evaluation
    return, or an iteration) or one a registered ``PolicyReader`` finds there (the torch
    facade's: a run's log dir of ``model_<iteration>.pt`` files or one of them, which needs
    torch)."""
    for reader in _readers():
        file = reader.find(Path(path), step)
        if file is not None:
            return reader.read(file)
    directory, step = find_checkpoint(path, step)
    meta = read_meta(directory, step)
    config = meta.get("config") or {}
    if "train" not in config or "algo" not in config:
        raise ValueError(f"checkpoint {step} under {directory} records no run configuration")
    train = config["train"]
    spec = get_algo(train["algo"])
    algo_config = spec.config_cls(**settings_from_json(config["algo"]))
    env = load(
        train["env"],
        config_override=train.get("env_overrides"),
        physics=train.get("physics", "mjx"),
    )
    obs_dim, critic_dim = env.obs_size["obs"], env.obs_size["critic"]
    agent = spec.make_agent(
        algo_config, obs_dim, critic_dim, env.action_size, axis_name=None,
        num_envs=train["num_envs"],
    )  # fmt: skip
    state = restore_item(directory, "agent", agent_template(agent), step=step)
    return Policy(
        env=train["env"],
        algo=train["algo"],
        iteration=step,
        obs_dim=obs_dim,
        action_dim=env.action_size,
        config=config,
        checkpoint=str(directory / str(step)),
        agent=agent,
        state=state,
    )


def agent_template(agent: Agent) -> Any:
    """Zeros shaped like ``agent``'s state (traced, not run), to restore or convert into."""
    like = jax.eval_shape(agent.init, jax.random.PRNGKey(0))
    return jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), like)
