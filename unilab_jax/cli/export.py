"""``unilab-jax export RUN --format torch|torchscript|onnx --out FILE``: a run's
deterministic policy as a torch module, TorchScript or ONNX, checked against the JAX policy
before it is in place (``unilab_jax.policy.export``, whose module docstring describes the
formats)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from unilab_jax.policy.export import (
    EXPORT_EXTRA,
    FORMATS,
    TOLERANCE,
    ExportError,
    ExportVerificationError,
    missing_dependencies,
    write_checked,
)

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unilab-jax export",
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Export a training run's deterministic policy (observation normaliser\n"
        "included, actions in [-1, 1]) as a PyTorch module, TorchScript or ONNX, then\n"
        "load the file back and check it against the JAX policy on random observations.",
        epilog="loading the result:\n"
        "  torch:        module, metadata = unilab_jax.policy.export.load_exported(FILE)\n"
        "  torchscript:  extra = {'metadata.json': ''}\n"
        "                module = torch.jit.load(FILE, _extra_files=extra)\n"
        "  onnx:         onnxruntime.InferenceSession(FILE).run(['action'], {'obs': obs})\n"
        "\n"
        f"needs: {EXPORT_EXTRA}",
    )
    parser.add_argument("run", help="a run's log dir, its checkpoints/ folder or one checkpoint")
    parser.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="torch: torch.save of the state dict, architecture and metadata (load with "
        "unilab_jax.policy.export.load_exported); torchscript: torch.jit.script archive with "
        "metadata.json (torch.jit.load, no unilab_jax needed); onnx: ONNX model, input 'obs' "
        "[batch, obs_dim], output 'action', metadata in metadata_props (onnxruntime)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="the file to write (parent folders are created)"
    )
    parser.add_argument(
        "--step", type=int, default=None, help="checkpoint iteration to export (default: newest)"
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=256,
        help="random observations the written file is checked on against the JAX policy (256)",
    )
    return parser


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.samples < 1:
        return _error(f"--samples must be >= 1, got {args.samples}")
    missing = missing_dependencies(args.format)
    if missing:
        return _error(f"--format {args.format} needs {', '.join(missing)}: {EXPORT_EXTRA}")
    if not Path(args.run).exists():
        return _error(
            f"{args.run} does not exist: pass a run's log dir, its checkpoints/ "
            "folder or one checkpoint's folder"
        )
    if args.out.is_dir():
        return _error(f"--out {args.out} is a directory; name the file to write")

    from unilab_jax.envs import UnknownEnvError
    from unilab_jax.policy import load_policy
    from unilab_jax.training.checkpoint import CheckpointError

    try:
        policy = load_policy(args.run, args.step)
    except (FileNotFoundError, CheckpointError, UnknownEnvError, ValueError) as err:
        return _error(str(err))
    try:
        path, diff = write_checked(policy, args.format, args.out, args.samples)
    except ExportVerificationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except ExportError as err:
        return _error(str(err))
    normalizes = getattr(policy.algo_config, "obs_normalization", False)
    normaliser = "normaliser included" if normalizes else "no separate normaliser"
    print(
        f"wrote {path} ({args.format}, {path.stat().st_size} bytes): {policy.algo} policy of "
        f"{policy.env} at iteration {policy.iteration}, obs [batch, {policy.obs_dim}] -> action "
        f"[batch, {policy.action_dim}] in [-1, 1], {normaliser}"
    )
    print(
        f"checked: max |exported - JAX policy| = {diff:.3g} over {args.samples} random "
        f"observations (tolerance {TOLERANCE:g})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
