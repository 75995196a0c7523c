"""``unilab-jax export RUN --format torch|torchscript|onnx --out FILE``.

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
  ``torch.load(FILE)`` alone; ``module, metadata = unilab_jax.policy.export.load_exported(FILE)``
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

    unilab-jax export logs/fast_sac/PendulumSwingup/2026-12-01_10-00-00_mjx \\
        --format onnx --out policy.onnx
    unilab-jax export RUN --format torchscript --out policy.ts --step 500

This module is the entry point (``export_policy``, ``write_checked``, ``verify_export``, and
the program); the exporter's parts live in modules of their own, each importing only those
above it:

- ``unilab_jax.policy.export.common``: ``FORMATS``, ``TOLERANCE``, ``EXPORT_EXTRA``, the errors and
  the check for the optional packages (``missing_dependencies``);
- ``unilab_jax.policy.export.module``: the ``nn.Module`` (``build_module`` and ``to_torch_module``
  make ``unilab_jax.torch.exported.ExportedPolicy``) and the copy of the checkpoint's weights
  into it;
- ``unilab_jax.policy.export.metadata``: the metadata (``export_metadata``) and the environment's
  observation layout and action scaling it records;
- ``unilab_jax.policy.export.formats``: the torch, TorchScript and ONNX writers and readers
  (``load_exported``, ``run_exported``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unilab_jax.errors import CheckpointError
from unilab_jax.policy.export.common import (
    EXPORT_EXTRA,
    FORMATS,
    TOLERANCE,
    ExportDependencyError,
    ExportError,
    ExportVerificationError,
    check_format,
    missing_dependencies,
    require,
)
from unilab_jax.policy.export.formats import load_exported, run_exported, write_file
from unilab_jax.policy.export.metadata import env_description as env_description  # for the tests
from unilab_jax.policy.export.metadata import export_metadata
from unilab_jax.policy.export.module import (
    actor_structure,
    build_module,
    to_torch_module,
)

__all__ = [
    "EXPORT_ERRORS",
    "EXPORT_EXTRA",
    "FORMATS",
    "TOLERANCE",
    "ExportDependencyError",
    "ExportError",
    "ExportVerificationError",
    "Exported",
    "build_module",
    "export_metadata",
    "export_policy",
    "export_run",
    "load_exported",
    "missing_dependencies",
    "run_exported",
    "sample_observations",
    "to_torch_module",
    "verify_export",
    "write_checked",
]


#: What :func:`export_run` raises on bad input (``ExportVerificationError``: written, but it
#: failed its check; ``UnknownEnvError`` is a ``ValueError``).
EXPORT_ERRORS = (FileNotFoundError, CheckpointError, ValueError, ExportError)


@dataclass(frozen=True)
class Exported:
    """A run's policy written by :func:`export_run`: the file, its format, the policy and the
    check's largest difference over ``samples`` random observations."""

    path: Path
    format: str
    policy: Any
    diff: float
    samples: int

    def __str__(self) -> str:
        policy = self.policy
        normaliser = getattr(policy.algo_config, "obs_normalization", False)
        return (
            f"wrote {self.path} ({self.format}, {self.path.stat().st_size} bytes): {policy.algo} "
            f"policy of {policy.env} at iteration {policy.iteration}, obs [batch, "
            f"{policy.obs_dim}] -> action [batch, {policy.action_dim}] in [-1, 1], "
            f"{'normaliser included' if normaliser else 'no separate normaliser'}\nchecked: max "
            f"|exported - JAX policy| = {self.diff:.3g} over {self.samples} random observations "
            f"(tolerance {TOLERANCE:g})"
        )


def export_run(
    run: str | Path, format: str, out: str | Path, step: int | str | None = None,
    samples: int = 256,
) -> Exported:  # fmt: skip
    """``unilab-jax export``: the checkpoint ``step`` of ``run`` (``load_policy``) written as
    ``format`` to ``out`` and checked (:func:`write_checked`). Bad input raises one of
    :data:`EXPORT_ERRORS`, found before the checkpoint is read where it can be."""
    missing = missing_dependencies(format)
    if samples < 1:
        raise ValueError(f"--samples must be >= 1, got {samples}")
    if missing:
        raise ExportDependencyError(f"--format {format} needs {', '.join(missing)}: {EXPORT_EXTRA}")
    if not Path(run).exists():
        raise FileNotFoundError(
            f"{run} does not exist: pass a run's log dir, its checkpoints/ folder or one "
            "checkpoint's folder"
        )
    if Path(out).is_dir():
        raise ExportError(f"--out {out} is a directory; name the file to write")
    from unilab_jax.policy.load import load_policy

    policy = load_policy(run, step)
    path, diff = write_checked(policy, format, out, samples)
    return Exported(path, format, policy, diff, samples)


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
    ``unilab-jax export`` prints)."""
    check_format(fmt)
    require(fmt)
    _check_finite(policy)
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


def _check_finite(policy: Any) -> None:
    """A policy whose weights are not all finite (a diverged run's) is never exported: its
    outputs would be NaN on every robot, and the check on random observations could pass
    where the NaN parameters are masked."""
    import jax
    import numpy as np

    bad = [
        jax.tree_util.keystr(path)
        for path, x in jax.tree_util.tree_leaves_with_path(policy.state)
        if np.issubdtype(np.asarray(x).dtype, np.floating) and not np.all(np.isfinite(x))
    ]
    if bad:
        raise ExportError(
            f"the checkpoint's weights are not finite ({', '.join(bad[:3])}"
            f"{', ...' if len(bad) > 3 else ''}): a diverged run; nothing was exported"
        )


def _write(policy: Any, fmt: str, out: Path) -> None:
    """The export itself, unchecked."""
    import torch

    architecture, tensors = actor_structure(policy)
    state_dict = {k: torch.from_numpy(v) for k, v in tensors.items()}
    module = build_module(architecture, state_dict)
    metadata = export_metadata(policy, fmt, architecture)
    write_file(fmt, out, module, state_dict, architecture, metadata)


def sample_observations(policy: Any, n: int, seed: int = 0) -> Any:
    """``n`` random observations ``[n, obs_dim]`` (float32): normal around the normaliser's
    mean with twice its std plus one, so both in- and out-of-distribution inputs are covered
    (around 0 with std 3 for a policy without a normaliser)."""
    import numpy as np

    normalizer = getattr(policy.state, "obs_normalizer", None)  # FlashSAC keeps none
    mean = np.asarray(normalizer.mean if normalizer else np.zeros(policy.obs_dim), np.float64)
    std = np.sqrt(np.asarray(normalizer.var if normalizer else np.ones(policy.obs_dim), np.float64))
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
