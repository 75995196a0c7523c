"""``unilab-jax export RUN --format torch|torchscript|onnx --out FILE``: a run's deterministic
policy as a file, checked against the JAX policy before it is in place
(``unilab_jax.policy.export``, whose module docstring describes the formats)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tyro.conf import Positional

from unilab_jax.cli.options import STEP_HELP, documented, error, parse, values
from unilab_jax.policy import export

__all__ = ["Export", "main"]

_DESCRIPTION = f"""Export a training run's deterministic policy (observation normaliser included,
actions in [-1, 1]) as a PyTorch module, TorchScript or ONNX, then load the file back and check it
against the JAX policy on random observations. Loading the result: torch:
unilab_jax.policy.export.load_exported(FILE) -> (module, metadata); torchscript:
torch.jit.load(FILE, _extra_files={{'metadata.json': ''}}); onnx:
onnxruntime.InferenceSession(FILE).run(['action'], {{'obs': obs}}). Needs: {export.EXPORT_EXTRA}"""


@dataclass(frozen=True)
class Export:
    run: Positional[str]
    """A run's log dir, its checkpoints/ folder or one checkpoint."""
    format: Literal[export.FORMATS]
    """torch: torch.save of the state dict, architecture and metadata (load_exported);
    torchscript: a torch.jit.script archive with metadata.json (no unilab_jax needed to load);
    onnx: input 'obs' [batch, obs_dim], output 'action', metadata in metadata_props."""
    out: Path
    """The file to write (parent folders are created)."""
    step: int | Literal["best"] | None = None
    samples: int = 256
    """Random observations the written file is checked on against the JAX policy."""


def main(argv: list[str] | None = None) -> int:
    options, about = documented(Export, step=STEP_HELP), " ".join(_DESCRIPTION.split())
    args = parse(options, argv, prog="unilab-jax export", description=about)
    try:
        print(export.export_run(**values(args)))
    except export.ExportVerificationError as err:  # written, but it failed its check
        error(str(err))
        return 1
    except export.EXPORT_ERRORS as err:
        return error(str(err))
    return 0
