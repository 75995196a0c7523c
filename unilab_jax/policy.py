"""After training: load a run's deterministic policy and evaluate it.

``load_policy(path)`` reads a checkpoint written by ``train`` (a run's log dir, its
``checkpoints/`` folder or one checkpoint's folder) and returns a ``Policy``: observations in,
actions out, the observation normaliser included. It restores only the checkpoint's ``agent``
item (never the replay) and builds no trainer, so it takes seconds; the run's configuration
comes from the checkpoint's own ``meta.json``.

It reads the torch facade's runs too (``unilab.algos.torch.offpolicy.OffPolicyRunner``, either
``sim_backend``): a log dir holding ``model_<iteration>.pt`` files (the newest, or ``step``) or
one such file. Their ``"unilab_meta"`` entry records the algorithm, its hyperparameters, the
sizes and the task; the torch learner is rebuilt from it, loaded, and converted exactly into the
JAX agent state (``unilab.algos.torch.convert``), so the policy acts as the learner's
deterministic actor does. torch is imported only then (``pip install 'unilab-jax[torch]'``).
A file without the entry (written by the reference runner) cannot be read: it records no
hyperparameters.

``evaluate(policy, episodes=...)`` runs one deterministic episode in each of ``episodes`` fresh
envs of the run's task (or another registered one with the same sizes) and returns every
return and length. ``python -m unilab_jax.evaluate RUN`` does both from the command line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from unilab_jax.algos.agent import Agent
from unilab_jax.algos.config import settings_from_json
from unilab_jax.algos.registry import get_algo
from unilab_jax.checkpoint import CheckpointError, latest_step, list_steps, read_meta, restore_item
from unilab_jax.envs import load
from unilab_jax.loop import make_evaluate

__all__ = [
    "EvalResult",
    "Policy",
    "TorchMissingError",
    "evaluate",
    "find_checkpoint",
    "find_torch_checkpoint",
    "load_policy",
]

TORCH_EXTRA = "pip install 'unilab-jax[torch]'"


class TorchMissingError(CheckpointError, ImportError):
    """A facade checkpoint (``model_<iteration>.pt``) given where torch is not installed."""


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

    def precision(self):
        """The run's matmul precision (``TrainConfig.matmul_precision``; full float32 unless
        the run opted out) as a context: the policy is traced under it, as in training."""
        train = (self.config or {}).get("train") or {}
        return jax.default_matmul_precision(train.get("matmul_precision") or "highest")

    def act(self, obs: jax.Array) -> jax.Array:
        """Actions ``[N, action_dim]`` in [-1, 1] for raw observations ``[N, obs_dim]``
        (jit-able; the normaliser is applied inside)."""
        with self.precision():
            return self._act(self.state, obs)

    def __call__(self, obs: Any) -> np.ndarray:
        """``act`` for numpy input and output; a single observation ``[obs_dim]`` works too."""
        obs = np.asarray(obs, np.float32)
        single = obs.ndim == 1
        actions = np.asarray(self.act(jnp.asarray(obs[None] if single else obs)))
        return actions[0] if single else actions


def find_checkpoint(path: str | Path, step: int | None = None) -> tuple[Path, int]:
    """``(checkpoints folder, iteration)`` for a run dir, a ``checkpoints/`` folder or one
    checkpoint's folder; the newest when ``step`` is None. (A facade run's ``model_<it>.pt``
    files: ``find_torch_checkpoint``.)"""
    path = Path(path)
    if (path / "meta.json").is_file() and path.name.isdigit():
        return path.parent, int(path.name) if step is None else step
    if (path / "checkpoints").is_dir():
        path = path / "checkpoints"
    newest = latest_step(path)
    if newest is None:
        raise FileNotFoundError(
            f"no checkpoint under {path}: pass a run's log dir, its checkpoints/ folder or one "
            "checkpoint's folder (written by python -m unilab_jax.train or train(log_dir=...)), "
            "or a torch facade run's log dir or one of its model_<iteration>.pt files"
        )
    if step is not None and step not in list_steps(path):
        raise FileNotFoundError(
            f"no checkpoint {step} under {path} (saved: {', '.join(map(str, list_steps(path)))})"
        )
    return path, newest if step is None else step


def _model_iteration(path: Path) -> int | None:
    """N of ``model_N.pt`` (None for another name)."""
    suffix = path.stem.removeprefix("model_")
    return int(suffix) if path.stem.startswith("model_") and suffix.isdigit() else None


def find_torch_checkpoint(path: str | Path, step: int | None = None) -> Path | None:
    """The facade checkpoint ``path`` names: a ``.pt`` file itself, or in a folder of
    ``model_<iteration>.pt`` files (a facade run's log dir) the newest one, or
    ``model_<step>.pt``. None when ``path`` is not such a file or folder (a folder holding the
    core's checkpoints is the core's)."""
    path = Path(path)
    if path.suffix == ".pt":
        if not path.is_file():
            raise FileNotFoundError(f"no such checkpoint file: {path}")
        if step is not None and _model_iteration(path) not in (None, step):
            raise ValueError(f"{path} is the checkpoint of iteration {_model_iteration(path)}, "
                             f"not {step}: pass its folder to choose the iteration")  # fmt: skip
        return path
    if not path.is_dir() or (path / "checkpoints").is_dir() or (path / "meta.json").is_file():
        return None
    models = {n: p for p in path.glob("model_*.pt") if (n := _model_iteration(p)) is not None}
    if not models:
        return None
    if step is None:
        return models[max(models)]
    if step not in models:
        held = ", ".join(map(str, sorted(models)))
        raise FileNotFoundError(f"no model_{step}.pt in {path}; it holds iterations {held}")
    return models[step]


def load_policy(path: str | Path, step: int | None = None) -> Policy:
    """The deterministic policy of the checkpoint at ``path``: the core's (see
    ``find_checkpoint``) or the torch facade's (``find_torch_checkpoint``: a run's log dir of
    ``model_<iteration>.pt`` files or one of them, which needs torch)."""
    torch_file = find_torch_checkpoint(path, step)
    if torch_file is not None:
        return _load_torch_policy(torch_file)
    directory, step = find_checkpoint(path, step)
    meta = read_meta(directory, step)
    config = meta.get("config") or {}
    if "train" not in config or "algo" not in config:
        raise ValueError(f"checkpoint {step} under {directory} records no run configuration")
    train = config["train"]
    spec = get_algo(train["algo"])
    algo_config = spec.config_cls(**settings_from_json(config["algo"]))
    env = load(train["env"], config_override=train.get("env_overrides"))
    obs_dim, critic_dim = env.obs_size["obs"], env.obs_size["critic"]
    agent = spec.make_agent(algo_config, obs_dim, critic_dim, env.action_size, axis_name=None)
    state = restore_item(directory, "agent", _agent_template(agent), step=step)
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


def _agent_template(agent: Agent) -> Any:
    """Zeros shaped like ``agent``'s state (traced, not run), to restore or convert into."""
    like = jax.eval_shape(agent.init, jax.random.PRNGKey(0))
    return jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), like)


def _load_torch_policy(file: Path) -> Policy:
    """The policy of a facade checkpoint: its torch learner rebuilt from the file's metadata,
    loaded, and converted into the JAX agent state (exact: float32 both sides)."""
    try:
        import torch
    except ImportError as err:
        raise TorchMissingError(
            f"{file} is a torch checkpoint of the facade (unilab.algos.torch); reading it needs "
            f"torch, which is not installed: {TORCH_EXTRA}"
        ) from err
    from unilab.algos.torch.offpolicy.run_state import META_FORMAT, META_KEY
    from unilab.algos.torch.registry import get_torch_algo

    try:
        saved = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, not a torch file, or objects beyond tensors
        raise CheckpointError(
            f"cannot read {file} as a torch checkpoint (read with weights_only=True: tensors "
            f"and plain values only): {err}"
        ) from err
    if not isinstance(saved, dict) or "actor" not in saved:
        keys = sorted(map(str, saved)) if isinstance(saved, dict) else type(saved).__name__
        exported = " (an exported policy: unilab_jax.export.load_exported reads it)"
        raise CheckpointError(
            f"{file} is not a facade checkpoint (model_<iteration>.pt: a learner's "
            f"get_state_dict() with a {META_KEY!r} entry); it holds {keys}"
            + (exported if isinstance(saved, dict) and "architecture" in saved else "")
        )
    meta = saved.get(META_KEY)
    if meta is None:
        raise CheckpointError(
            f"{file} records no hyperparameters (no {META_KEY!r} entry: written by the "
            "reference runner or an older facade), so its policy cannot be rebuilt from it "
            "alone. Build the learner with the settings it was trained with, load it "
            "(learner.load_state_dict(torch.load(path, weights_only=False))) and evaluate that "
            "learner (unilab.algos.torch.evaluation.evaluate_actor), or save it again with its "
            "metadata: unilab.algos.torch.offpolicy.run_state.save_model(learner, path, "
            "checkpoint_meta(learner, TrainConfig(env=TASK, algo=ALGO), 'mujoco')), "
            "TrainConfig from unilab_jax.config"
        )
    if meta.get("format", 0) > META_FORMAT:
        raise CheckpointError(
            f"{file} was written by a newer version (metadata format {meta.get('format')}, "
            f"this one reads {META_FORMAT}, versions {meta.get('versions')}): upgrade unilab-jax"
        )
    torch_spec = get_torch_algo(meta["algo"])
    spec = torch_spec.core
    algo_config = spec.config_cls(**settings_from_json(meta["config"]["algo"]))
    dims = int(meta["obs_dim"]), int(meta["critic_obs_dim"]), int(meta["action_dim"])
    learner = _torch_learner(torch_spec.learner_cls, algo_config, *dims)
    learner.load_state_dict(saved)
    agent = spec.make_agent(algo_config, *dims, axis_name=None)
    # Every leaf of the agent state has a row in the converter's table (what it leaves out is
    # torch-side or constant), so a template of the right shapes is enough: no init to run.
    state = torch_spec.torch_to_jax(learner, _agent_template(agent))
    config = meta["config"]
    iteration = meta.get("iteration", _model_iteration(file))
    return Policy(
        env=config["train"]["env"],
        algo=meta["algo"],
        iteration=int(iteration) if iteration is not None else 0,
        obs_dim=dims[0],
        action_dim=dims[2],
        config=config,
        checkpoint=str(file),
        agent=agent,
        state=state,
    )


def _torch_learner(
    learner_cls: type, algo_config: Any, obs_dim: int, critic_obs_dim: int, action_dim: int
) -> Any:
    """A CPU learner of ``learner_cls`` with the layout of ``algo_config``: the constructor
    takes the config's fields by name, TD3's exploration range as log-stds."""
    import inspect
    import math

    values = dataclasses.asdict(algo_config)
    for name in ("std_min", "std_max"):  # FastTD3Learner(log_std_min=..., log_std_max=...)
        if name in values:
            values[f"log_{name}"] = math.log(values.pop(name))
    accepted = inspect.signature(learner_cls).parameters
    kwargs = {k: v for k, v in values.items() if k in accepted}
    return learner_cls(
        obs_dim=obs_dim, action_dim=action_dim, critic_obs_dim=critic_obs_dim, **kwargs
    )


@dataclass(frozen=True)
class EvalResult:
    """Returns and lengths of one deterministic episode per env; on C MuJoCo also which
    episodes reached the time limit and each reward component's mean per step."""

    returns: np.ndarray
    lengths: np.ndarray
    time_limit: np.ndarray | None = None
    """[episodes] bool: the episode ran to the time limit without terminating."""
    components: dict[str, np.ndarray] | None = None
    """``{"reward/<name>": [episodes]}``: the component's mean per step of each episode."""

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths))

    def as_dict(self) -> dict:
        return {
            "episodes": len(self.returns),
            "mean_return": self.mean_return,
            "std_return": float(np.std(self.returns)),
            "min_return": float(np.min(self.returns)),
            "max_return": float(np.max(self.returns)),
            "mean_length": self.mean_length,
            **({} if self.time_limit is None else
               {"time_limit_rate": float(np.mean(self.time_limit))}),
            **{f"{k}_per_step": float(np.mean(v)) for k, v in (self.components or {}).items()},
        }  # fmt: skip


def evaluate(
    policy: Policy,
    env_name: str | None = None,
    episodes: int = 64,
    seed: int = 0,
    env_overrides: dict | None = None,
    physics: str | None = None,
) -> EvalResult:
    """One deterministic episode in each of ``episodes`` fresh envs of ``env_name`` (default:
    the policy's task with its run's overrides); an episode stops counting at termination or
    the time limit. ``physics``: ``"mjx"`` or ``"mujoco"`` (C MuJoCo on CPU threads, our
    registered tasks; its result also says which episodes reached the time limit and gives
    the reward components per step); default: the run's."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if physics is None:
        physics = policy.config.get("train", {}).get("physics", "mjx")
    if physics not in ("mjx", "mujoco"):
        raise ValueError(f"physics {physics!r} is not one of mjx, mujoco")
    if env_name is None:
        env_name = policy.env
        if env_overrides is None:
            env_overrides = policy.config["train"].get("env_overrides")
    env = load(env_name, config_override=env_overrides)
    if (env.obs_size["obs"], env.action_size) != (policy.obs_dim, policy.action_dim):
        raise ValueError(
            f"{env_name} has obs {env.obs_size['obs']} / action {env.action_size}, the policy "
            f"obs {policy.obs_dim} / action {policy.action_dim} (trained on {policy.env})"
        )
    if physics == "mujoco":
        return _evaluate_on_mujoco(policy, env, env_name, episodes, seed)
    run = make_evaluate(env, policy.agent.act, episodes)
    with policy.precision():
        _, returns, lengths = run(policy.state, jax.random.PRNGKey(seed))
    return EvalResult(np.asarray(returns), np.asarray(lengths))


def _evaluate_on_mujoco(policy: Policy, env: Any, name: str, episodes: int, seed: int):
    from unilab_jax.envs.episodes import mujoco_episodes
    from unilab_jax.envs.vec_env import MujocoVecEnv

    task = getattr(env, "task", None)
    if task is None:
        raise ValueError(f"{name} is a JAX environment and runs on MJX only (physics 'mjx')")
    vec = MujocoVecEnv(task, name, episodes, seed)
    try:
        with policy.precision():
            out = mujoco_episodes(vec, jax.jit(policy.agent.act), policy.state, seed)
    finally:
        vec.close()
    return EvalResult(out["returns"], out["lengths"], out["time_limit"], out["components"])
