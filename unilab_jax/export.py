"""``python -m unilab_jax.export RUN --format torch|torchscript|onnx --out FILE``.

Exports a trained run's deterministic policy (the one ``unilab_jax.load_policy`` returns and
``Policy.act`` computes) as a plain PyTorch module, a TorchScript archive or an ONNX model, for
deployment without JAX. RUN is a run's log dir (as written by ``python -m unilab_jax.train``),
its ``checkpoints/`` folder or one checkpoint's folder; ``--step N`` picks a checkpoint
(default: the newest).

What the exported network computes, exactly as the JAX actor does (``unilab_jax.algos``):

1. the observation normaliser (when the run used one, the default):
   ``x = (obs - mean) / (std + 0.01)`` with the checkpoint's running mean and ``std =
   sqrt(var)`` stored as buffers (no clipping, as in ``unilab_jax.algos.normalizer``);
2. the run's algorithm's own torch actor (``AlgoSpec.torch_actor``: ``unilab_jax.torch.actors``,
   the class the facade's learner trains) with the checkpoint's weights, copied by the exact
   tables of ``unilab_jax.torch.weights``, and its deterministic action: FastSAC
   ``tanh(clip(mu(x), -10, 10))`` (a NaN mean becomes 0), the tanh of the Gaussian's mean;
   FastTD3 ``tanh(mu(x))``, the actor without exploration noise.

Input ``obs`` is ``[batch, obs_dim]`` float32, the env's raw (un-normalised) ``"obs"`` group;
output ``action`` is ``[batch, action_dim]`` in [-1, 1], what the env's ``step`` takes. The
env itself maps that action to actuator controls (recorded in the metadata under
``action_scaling``: the identity ``ctrl = action`` for the classic tasks, ``ctrl =
clip(action_bias + action_scale * action, ctrl_min, ctrl_max)`` joint position targets for the
robot tasks); the exported network does not apply it, so its output is the policy's own.

Formats (each carries the same metadata dict: task, algorithm, iteration, observation and
action layout, action scaling, normaliser, unilab_jax version and the run's configuration):

- ``torch``: ``torch.save({"state_dict", "architecture", "metadata"})``, readable with
  ``torch.load(FILE)`` alone; ``module, metadata = unilab_jax.export.load_exported(FILE)``
  rebuilds the ``nn.Module`` (needs only torch at run time).
- ``torchscript``: ``torch.jit.script`` of the same module with ``metadata.json`` as an extra
  file: ``extra = {"metadata.json": ""}; module = torch.jit.load(FILE, _extra_files=extra)``
  needs no unilab_jax at all.
- ``onnx``: ``torch.onnx.export`` (the dynamo exporter, which needs ``onnxscript``); input
  ``obs`` with a dynamic batch axis, output ``action``; the metadata as ONNX
  ``metadata_props`` (``metadata.json`` holds the whole dict, the other keys single fields):
  ``onnxruntime.InferenceSession(FILE).run(["action"], {"obs": obs})``.

Every export is checked before it is in place, from Python (``export_policy``) and from the
command line alike: the file, written under a temporary name beside ``--out``, is loaded back
with the plain library (``torch.load`` / ``torch.jit.load`` / ``onnxruntime``), run on
``--samples`` random observations (spread around the normaliser's statistics) and compared
with the JAX policy (computed at full float32 matmul precision, also on a GPU); only then is
it renamed to ``--out``. A difference above ``TOLERANCE`` (float32 round-off, 1e-5) or any
other failure deletes the temporary file, leaves ``--out`` as it was and exits with status 1.
Needs ``pip install 'unilab-jax[export]'`` (torch; onnx, onnxruntime and onnxscript for
``--format onnx``).

Examples::

    python -m unilab_jax.export logs/fast_sac/PendulumSwingup/2026-12-01_10-00-00_mjx \\
        --format onnx --out policy.onnx
    python -m unilab_jax.export RUN --format torchscript --out policy.ts --step 500
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any

__all__ = [
    "EXPORT_EXTRA",
    "FORMATS",
    "TOLERANCE",
    "ExportDependencyError",
    "ExportError",
    "ExportVerificationError",
    "build_module",
    "export_metadata",
    "export_policy",
    "load_exported",
    "missing_dependencies",
    "run_exported",
    "sample_observations",
    "to_torch_module",
    "verify_export",
    "write_checked",
]

FORMATS = ("torch", "torchscript", "onnx")
"""The export formats, as ``--format`` names them."""

EXPORT_EXTRA = (
    "pip install 'unilab-jax[export]' "
    "(torch==2.13.0 onnx==1.23.2 onnxruntime==1.31.1 onnxscript==0.7.2)"
)
"""The install line for the optional packages the exporter needs."""

TOLERANCE = 1e-5
"""Largest accepted ``|exported - JAX policy|`` on any action entry (float32 round-off)."""

# What each format needs besides the JAX core (the dynamo ONNX exporter needs onnxscript; onnx
# writes the metadata, onnxruntime runs the check).
_REQUIRED = {
    "torch": ("torch",),
    "torchscript": ("torch",),
    "onnx": ("torch", "onnx", "onnxscript", "onnxruntime"),
}

_TORCH_FORMAT = "unilab_jax.export/torch-v2"
# v1 (before the exporter used the algorithms' own actors) held another module layout.
_OLD_TORCH_FORMATS = ("unilab_jax.export/torch-v1",)
_METADATA_FILE = "metadata.json"


class ExportError(Exception):
    """An export that cannot be made (a policy of an unsupported shape, a bad format)."""


class ExportDependencyError(ExportError, ImportError):
    """A package the requested format needs is not installed (the message names the extra)."""


class ExportVerificationError(ExportError):
    """The exported file does not compute the JAX policy's actions within ``TOLERANCE``."""


def missing_dependencies(fmt: str) -> list[str]:
    """The packages ``fmt`` needs that are not importable here (checked without importing)."""
    return [
        name for name in _REQUIRED[_check_format(fmt)] if importlib.util.find_spec(name) is None
    ]


def _check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def _require(fmt: str) -> None:
    missing = missing_dependencies(fmt)
    if missing:
        raise ExportDependencyError(
            f"--format {fmt} needs {', '.join(missing)}, not installed: {EXPORT_EXTRA}"
        )


# ------------------------------------------------------------------------- the torch module
@functools.cache
def _module_class() -> type:
    """The ``nn.Module`` class of an exported policy (defined on first use: torch is optional)."""
    import torch
    from torch import nn

    from unilab_jax.algos.registry import get_algo

    class ExportedPolicy(nn.Module):
        """A unilab_jax deterministic policy: raw observations ``[..., obs_dim]`` in, actions
        ``[..., action_dim]`` in [-1, 1] out, the observation normaliser included.

        ``forward``: ``x = (obs - obs_mean) / (obs_std + obs_eps)`` (when ``normalize``), then
        ``actor.deterministic(x)``: ``actor`` is the algorithm's torch actor
        (``unilab_jax.torch.actors``) built with the ``actor`` settings.
        """

        def __init__(
            self,
            algorithm: str,
            obs_dim: int,
            action_dim: int,
            actor: dict,
            normalize: bool,
            obs_eps: float,
        ) -> None:
            super().__init__()
            actor_cls = get_algo(algorithm).torch_actor_class()
            self.actor = actor_cls(int(obs_dim), int(action_dim), **actor)
            self.register_buffer("obs_mean", torch.zeros(int(obs_dim)))
            self.register_buffer("obs_std", torch.ones(int(obs_dim)))
            self.normalize = bool(normalize)
            self.obs_eps = float(obs_eps)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            x = obs.to(self.obs_mean.dtype)
            if self.normalize:
                x = (x - self.obs_mean) / (self.obs_std + self.obs_eps)
            return self.actor.deterministic(x)

    # Importable as unilab_jax.export.ExportedPolicy (the module's __getattr__), so a module
    # pickles: torch.save(module, path) / torch.load(path, weights_only=False).
    ExportedPolicy.__module__ = __name__
    ExportedPolicy.__qualname__ = "ExportedPolicy"
    return ExportedPolicy


def __getattr__(name: str) -> Any:
    if name == "ExportedPolicy":  # the nn.Module class, defined once torch is imported
        return _module_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_module(architecture: dict, state_dict: dict | None = None) -> Any:
    """The ``nn.Module`` described by ``architecture`` (the dict a torch-format export stores),
    in eval mode with its parameters frozen (``requires_grad`` False: an inference module), with
    ``state_dict`` loaded (strictly) when given. Needs torch (and this package's actors)."""
    module = _module_class()(**architecture)
    if state_dict is not None:
        module.load_state_dict(state_dict, strict=True)
    return module.requires_grad_(False).eval()


def _actor_structure(policy: Any) -> tuple[dict, dict]:
    """``(architecture, tensors)`` of the policy's export: the module's constructor arguments
    and its state dict as float32 numpy arrays, the actor's weights and the normaliser's
    statistics copied from ``policy.state`` by the actor's own table (``jax_rows``)."""
    from unilab_jax.algos.normalizer import NORMALIZER_EPS
    from unilab_jax.algos.registry import UnknownAlgoError, get_algo
    from unilab_jax.torch.weights import Row, jax_to_torch

    try:
        actor_cls = get_algo(policy.algo).torch_actor_class()
    except UnknownAlgoError as err:
        raise ExportError(f"cannot export a {policy.algo!r} policy: {err}") from None
    config = policy.algo_config
    architecture = {
        "algorithm": policy.algo,
        "obs_dim": int(policy.obs_dim),
        "action_dim": int(policy.action_dim),
        "actor": actor_cls.settings(config),
        "normalize": bool(config.obs_normalization),
        "obs_eps": float(NORMALIZER_EPS),
    }
    module = build_module(architecture)
    rows = module.actor.jax_rows("actor") + [
        Row("obs_mean", ("obs_normalizer", "mean"), "copy"),
        Row("obs_std", ("obs_normalizer", "var"), "sqrt"),
    ]
    try:
        jax_to_torch(policy.state, rows, module)
    except (ValueError, RuntimeError, KeyError) as err:
        raise ExportError(f"the checkpoint's actor does not fit its config: {err}") from None
    tensors = {name: value.numpy() for name, value in module.state_dict().items()}
    return architecture, tensors


def to_torch_module(policy: Any) -> Any:
    """The policy's deterministic actor as a plain ``torch.nn.Module`` (eval mode, frozen,
    float32; see ``build_module``):
    ``module(obs [N, obs_dim]) -> actions [N, action_dim]`` in [-1, 1], equal to
    ``policy(obs)`` up to float32 round-off; the observation normaliser is inside."""
    _require("torch")
    import torch

    architecture, tensors = _actor_structure(policy)
    return build_module(architecture, {k: torch.from_numpy(v) for k, v in tensors.items()})


# ------------------------------------------------------------------------- metadata
def _env_description(
    env_name: str, overrides: dict | None, obs_dim: int, action_dim: int
) -> tuple[dict, dict]:
    """``(observation layout, action scaling)``: what the network's input is, and how the env
    turns the policy's action in [-1, 1] into actuator controls."""
    from unilab_jax.envs.adapters import ADAPTER_PREFIXES
    from unilab_jax.envs.base import Task
    from unilab_jax.envs.registry import make_task

    observation = {
        "group": "obs",
        "obs_dim": int(obs_dim),
        "dtype": "float32",
        "normalized": False,
        "description": "the env's raw actor observation group 'obs' (the normaliser is "
        "inside the exported network)",
    }
    in_range = "actions in [-1, 1]: the env clips the action to [-1, 1] first"
    if env_name.startswith(ADAPTER_PREFIXES):
        return observation, {
            "kind": "adapter",
            "action_scale": 1.0,
            "action_bias": 0.0,
            "description": f"{in_range}, then passes it to the wrapped Playground / Brax "
            "environment's step unchanged (any scaling is that environment's own)",
        }
    task = make_task(env_name, overrides)
    cls = type(task)
    # The tasks name no observation entries; each documents its layout in its docstring.
    observation["documented_in"] = f"{cls.__module__}.{cls.__qualname__}"
    if cls.ctrl_from_action is Task.ctrl_from_action:
        return observation, {
            "kind": "identity",
            "action_scale": 1.0,
            "action_bias": 0.0,
            "description": f"{in_range}; the actuator controls are the action itself "
            "(ctrl = action)",
        }
    # A task with a mapping of its own: described as clip(bias + scale * action, lo, hi) when
    # that is what it computes (the robot tasks' joint position targets), checked at sample
    # actions; otherwise the metadata names the method.
    where = f"{cls.__module__}.{cls.__qualname__}.ctrl_from_action"
    described = {"kind": "task_specific", "description": f"{in_range}; then {where}"}
    return observation, _affine_scaling(task, action_dim, in_range, where) or described


def _affine_scaling(task: Any, action_dim: int, in_range: str, where: str) -> dict | None:
    """``ctrl = clip(action_bias + action_scale * action, ctrl_min, ctrl_max)`` with the
    task's ``config.action_scale``, when its ``ctrl_from_action`` computes exactly that at 18
    probe actions; None otherwise."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    scale = getattr(task.config, "action_scale", None)
    if not isinstance(scale, int | float) or isinstance(scale, bool):
        return None
    task_state = task.init_task_state(jax.random.PRNGKey(0))

    def ctrl(action: np.ndarray) -> np.ndarray:
        out = task.ctrl_from_action(jnp.asarray(action, jnp.float32), task_state)
        return np.asarray(out, np.float64)

    bias = ctrl(np.zeros(action_dim))
    lo, hi = ctrl(np.full(action_dim, -1e6)), ctrl(np.full(action_dim, 1e6))
    probes = np.random.default_rng(0).uniform(-1.0, 1.0, (16, action_dim))
    probes = np.concatenate([probes, np.ones((1, action_dim)), -np.ones((1, action_dim))])
    if bias.shape != (action_dim,) or not all(
        np.allclose(ctrl(a), np.clip(bias + scale * a, lo, hi), atol=1e-5) for a in probes
    ):
        return None

    def floats(x: np.ndarray) -> list[float]:  # float32 values, written shortest
        return [float(str(np.float32(v))) for v in x]

    return {
        "kind": "affine_clipped",
        "action_scale": float(scale),
        "action_bias": floats(bias),
        "ctrl_min": floats(lo),
        "ctrl_max": floats(hi),
        "description": f"{in_range}; ctrl = clip(action_bias + action_scale * action, ctrl_min, "
        f"ctrl_max) (joint position targets; {where})",
    }


def export_metadata(policy: Any, fmt: str, architecture: dict | None = None) -> dict:
    """The metadata every export carries (JSON-serialisable)."""
    import unilab_jax
    from unilab_jax.algos.registry import get_algo

    if architecture is None:
        architecture, _ = _actor_structure(policy)
    train = dict(policy.config.get("train") or {})
    normalize = architecture["normalize"]
    observation, action_scaling = _env_description(
        policy.env, train.get("env_overrides"), policy.obs_dim, policy.action_dim
    )
    actor_cls = get_algo(policy.algo).torch_actor_class()
    head = " ".join((actor_cls.deterministic.__doc__ or "").split())
    metadata = {
        "format": fmt,
        "task": policy.env,
        "algorithm": policy.algo,
        "algorithm_name": get_algo(policy.algo).display_name,
        "iteration": int(policy.iteration),
        "checkpoint": getattr(policy, "checkpoint", None),
        "unilab_jax_version": unilab_jax.__version__,
        "obs_dim": int(policy.obs_dim),
        "action_dim": int(policy.action_dim),
        "input": {"name": "obs", "shape": ["batch", int(policy.obs_dim)], "dtype": "float32"},
        "output": {
            "name": "action",
            "shape": ["batch", int(policy.action_dim)],
            "dtype": "float32",
            "range": [-1.0, 1.0],
        },
        "observation": observation,
        "action_scaling": action_scaling,
        "normalizer": {
            "included": bool(normalize),
            "formula": f"(obs - mean) / (sqrt(var) + {architecture['obs_eps']})"
            if normalize
            else "none: the run trained without observation normalisation",
            "epsilon": architecture["obs_eps"],
            "clip": None,
            "count": float(policy.state.obs_normalizer.count),
        },
        "policy": head,
        "network": architecture,
        "config": policy.config,
    }
    # A JSON round trip: plain dicts, lists and scalars only (what every format can hold).
    return json.loads(json.dumps(metadata, default=str))


# ------------------------------------------------------------------------- export
def export_policy(policy: Any, fmt: str, out: str | Path, samples: int = 256) -> Path:
    """Write ``policy`` (a ``unilab_jax.policy.Policy``) to ``out`` in format ``fmt`` (one of
    ``FORMATS``), checked, and return the path; see the module docstring for each format's
    contents and how to load it.

    The file is written beside ``out`` under a temporary name, loaded back and run on
    ``samples`` random observations against the JAX policy (``verify_export``), and only then
    renamed to ``out``. Any failure (a miss of the tolerance, an exporter error, an interrupt)
    deletes the temporary file and leaves ``out`` as it was, an earlier file included."""
    return write_checked(policy, fmt, out, samples)[0]


def write_checked(policy: Any, fmt: str, out: str | Path, samples: int) -> tuple[Path, float]:
    """``export_policy``, also returning the largest difference the check measured (what
    ``python -m unilab_jax.export`` prints)."""
    _check_format(fmt)
    _require(fmt)
    out = Path(out)
    if out.is_dir():
        raise ExportError(f"--out {out} is a directory; name the file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.stem}.partial-{os.getpid()}{out.suffix}")
    try:
        _write(policy, fmt, partial)
        try:
            diff = verify_export(policy, partial, fmt, samples)
        except ExportVerificationError as err:
            raise ExportVerificationError(
                str(err).replace(str(partial), str(out)) + f"; {out} was not written"
            ) from None
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out, diff


def _write(policy: Any, fmt: str, out: Path) -> None:
    """The export itself, unchecked."""
    import torch

    architecture, tensors = _actor_structure(policy)
    state_dict = {k: torch.from_numpy(v) for k, v in tensors.items()}
    module = build_module(architecture, state_dict)
    metadata = export_metadata(policy, fmt, architecture)
    if fmt == "torch":
        torch.save(
            {
                "format": _TORCH_FORMAT,
                "state_dict": state_dict,
                "architecture": architecture,
                "metadata": metadata,
            },
            out,
        )
    elif fmt == "torchscript":
        scripted = torch.jit.script(module)
        torch.jit.save(scripted, str(out), _extra_files={_METADATA_FILE: json.dumps(metadata)})
    else:
        _export_onnx(module, metadata, out)


def _export_onnx(module: Any, metadata: dict, out: Path) -> None:
    import onnx
    import torch

    example = torch.zeros((2, metadata["obs_dim"]), dtype=torch.float32)
    # The exporter logs that torchvision's operators are not registered (we use none) and
    # torch.export warns about its own deprecated internals: noise for this small network.
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            torch.onnx.export(
                module,
                (example,),
                str(out),
                input_names=["obs"],
                output_names=["action"],
                dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
                dynamo=True,
                external_data=False,
                verbose=False,
            )
    finally:
        registration.setLevel(level)
    model = onnx.load(str(out))
    props = {_METADATA_FILE: json.dumps(metadata)}
    for key, value in metadata.items():
        if isinstance(value, str | int | float | bool):
            props[key] = str(value)
    onnx.helper.set_model_props(model, props)
    model.doc_string = (
        f"unilab_jax {metadata['algorithm_name']} policy of {metadata['task']} (iteration "
        f"{metadata['iteration']}): obs [batch, {metadata['obs_dim']}] raw -> action [batch, "
        f"{metadata['action_dim']}] in [-1, 1]; metadata_props['{_METADATA_FILE}'] has the rest"
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(out))


def _is_torchscript(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return any("/code/" in name for name in archive.namelist())
    except zipfile.BadZipFile:
        return False


def load_exported(path: str | Path) -> tuple[Any, dict]:
    """``(module, metadata)`` of a ``torch`` or ``torchscript`` export (torch only, no JAX):
    the torch format's ``nn.Module`` is rebuilt from its state dict and architecture, a
    TorchScript archive is ``torch.jit.load``-ed with its ``metadata.json``. ONNX files are
    run with ``onnxruntime.InferenceSession`` instead (see ``run_exported``)."""
    import torch

    path = Path(path)
    if _is_torchscript(path):
        extra = {_METADATA_FILE: ""}
        module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
        return module.eval(), json.loads(extra[_METADATA_FILE])
    saved = torch.load(path, map_location="cpu", weights_only=True)
    written = saved.get("format") if isinstance(saved, dict) else None
    if written in _OLD_TORCH_FORMATS:
        raise ExportError(
            f"{path} is a {written} export of an earlier unilab_jax; this version reads "
            f"{_TORCH_FORMAT}: export the run again (python -m unilab_jax.export RUN ...)"
        )
    if written != _TORCH_FORMAT:
        raise ExportError(f"{path} is not a unilab_jax torch export ({_TORCH_FORMAT})")
    return build_module(saved["architecture"], saved["state_dict"]), saved["metadata"]


def run_exported(path: str | Path, fmt: str, obs: Any) -> tuple[Any, dict]:
    """``(actions, metadata)``: the exported file at ``path`` loaded with its plain library
    (``torch.load`` / ``torch.jit.load`` / ``onnxruntime``) and run on ``obs`` ``[N, obs_dim]``
    (float32 numpy) -> actions ``[N, action_dim]`` as numpy."""
    import numpy as np

    _check_format(fmt)
    obs = np.asarray(obs, np.float32)
    if fmt == "onnx":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        props = session.get_modelmeta().custom_metadata_map
        (actions,) = session.run(["action"], {"obs": obs})
        return np.asarray(actions), json.loads(props[_METADATA_FILE])
    import torch

    module, metadata = load_exported(path)
    with torch.no_grad():
        actions = module(torch.from_numpy(obs)).numpy()
    return actions, metadata


def sample_observations(policy: Any, n: int, seed: int = 0) -> Any:
    """``n`` random observations ``[n, obs_dim]`` (float32): normal around the normaliser's
    mean with twice its std plus one, so both in- and out-of-distribution inputs are covered."""
    import numpy as np

    normalizer = policy.state.obs_normalizer
    mean = np.asarray(normalizer.mean, np.float64)
    std = np.sqrt(np.asarray(normalizer.var, np.float64))
    noise = np.random.default_rng(seed).standard_normal((n, policy.obs_dim))
    return (mean + noise * (2.0 * std + 1.0)).astype(np.float32)


def verify_export(
    policy: Any, path: str | Path, fmt: str, samples: int = 256, seed: int = 0
) -> float:
    """Load the export back, run it on ``samples`` random observations and return the largest
    ``|exported - policy(obs)|``; ``ExportVerificationError`` above ``TOLERANCE`` or when the
    file's metadata does not name the policy's task, algorithm and sizes.

    The JAX reference runs at full float32 matmul precision (``"highest"``): a GPU's default
    (TF32 on recent NVIDIA GPUs) rounds matmul inputs to 10 mantissa bits, about 1e-3 off,
    which is the device's shortcut, not a property of the policy or of the export."""
    import jax
    import numpy as np

    obs = sample_observations(policy, samples, seed)
    with jax.default_matmul_precision("highest"):
        expected = np.asarray(policy(obs))
    actions, metadata = run_exported(path, fmt, obs)
    if actions.shape != expected.shape:
        raise ExportVerificationError(
            f"{path}: actions of shape {list(actions.shape)}, the policy's are "
            f"{list(expected.shape)}"
        )
    recorded = {k: metadata.get(k) for k in ("task", "algorithm", "obs_dim", "action_dim")}
    wanted = {
        "task": policy.env,
        "algorithm": policy.algo,
        "obs_dim": policy.obs_dim,
        "action_dim": policy.action_dim,
    }
    if recorded != wanted:
        raise ExportVerificationError(f"{path}: metadata records {recorded}, expected {wanted}")
    diff = float(np.max(np.abs(actions.astype(np.float64) - expected)))
    if not diff <= TOLERANCE:
        raise ExportVerificationError(
            f"{path} ({fmt}) differs from the JAX policy by up to {diff:.3g} on {samples} random "
            f"observations (tolerance {TOLERANCE:g})"
        )
    return diff


if __name__ == "__main__":  # python -m unilab_jax.export starts the program, unilab_jax.cli.export
    import runpy

    runpy.run_module("unilab_jax.cli.export", run_name="__main__")
