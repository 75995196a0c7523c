"""The facade's checkpoint files (``model_<iteration>.pt``) read as the core's ``Policy``.

``unilab_jax.load_policy`` reads a facade run (``unilab.algos.torch.offpolicy.OffPolicyRunner``,
either ``sim_backend``) through ``READER``, registered as the ``torch`` entry point of the group
``unilab_jax.policy_readers`` (``pyproject.toml``): the core never imports this package. A log
dir holding ``model_<iteration>.pt`` files (the newest, or ``step``) or one such file. Their
``"unilab_meta"`` entry records the algorithm, its hyperparameters, the sizes and the task; the
torch learner is rebuilt from it, loaded, and converted exactly into the JAX agent state
(``unilab.algos.torch.convert``), so the policy acts as the learner's deterministic actor does.
Finding the files needs no torch; reading one imports it (``pip install 'unilab-jax[torch]'``).
A file without the entry (written by the reference runner) cannot be read: it records no
hyperparameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from unilab_jax.algos.hyperparams import settings_from_json
from unilab_jax.errors import CheckpointError
from unilab_jax.policy import Policy, PolicyReader, agent_template
from unilab_jax.training.facade import META_FILE

__all__ = ["READER", "TorchMissingError", "find_torch_checkpoint", "read_torch_policy"]

TORCH_EXTRA = "pip install 'unilab-jax[torch]'"


class TorchMissingError(CheckpointError, ImportError):
    """A facade checkpoint (``model_<iteration>.pt``) given where torch is not installed."""


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
    if not path.is_dir() or (path / "checkpoints").is_dir() or (path / META_FILE).is_file():
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


def read_torch_policy(file: Path) -> Policy:
    """The policy of a facade checkpoint: its torch learner rebuilt from the file's metadata,
    loaded, and converted into the JAX agent state (exact: float32 both sides)."""
    try:
        import torch
    except ImportError as err:
        raise TorchMissingError(
            f"{file} is a torch checkpoint of the facade (unilab.algos.torch); reading it needs "
            f"torch, which is not installed: {TORCH_EXTRA}"
        ) from err
    from unilab.algos.torch.offpolicy.checkpoints import META_FORMAT, META_KEY
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
        exported = " (an exported policy: unilab_jax.policy.export.load_exported reads it)"
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
            "metadata: unilab.algos.torch.offpolicy.checkpoints.save_model(learner, path, "
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
    learner = _torch_learner(torch_spec.name, algo_config, *dims)
    learner.load_state_dict(saved)
    agent = spec.make_agent(algo_config, *dims, axis_name=None)
    # Every leaf of the agent state has a row in the converter's table (what it leaves out is
    # torch-side or constant), so a template of the right shapes is enough: no init to run.
    state = torch_spec.torch_to_jax(learner, agent_template(agent))
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
    algo: str, algo_config: Any, obs_dim: int, critic_obs_dim: int, action_dim: int
) -> Any:
    """A CPU learner of ``algo`` with exactly ``algo_config``'s hyperparameters (never a facade
    class default: ``registry.build_learner``), built to read a checkpoint: without symmetry
    (acting needs no mirror map; the agent gets ``algo_config`` itself)."""
    from unilab.algos.torch.registry import build_learner

    acting = {"use_symmetry": False} if getattr(algo_config, "use_symmetry", False) else {}
    return build_learner(algo, algo_config, obs_dim, critic_obs_dim, action_dim, **acting)


READER = PolicyReader("torch", find_torch_checkpoint, read_torch_policy)
