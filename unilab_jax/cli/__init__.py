"""The command-line programs, apart from the library they call.

``unilab-jax <command> [options]`` (a console script; ``python -m unilab_jax.cli <command>``
is the same) starts one of them; ``python -m unilab_jax.train`` also starts ``train``. Each
does only what a command line needs: parse and check its options, call the library, print,
and map failures to exit codes (2 bad input, 1 a failed save or check, 130 / 143 stopped by
SIGINT / SIGTERM).

- ``train``: ``TrainConfig`` and the algorithms' configs as options (generated from their
  documented fields), presets, ``--config`` reruns, ``--resume``; calls ``trainer.train``
  (the parser and how options become settings: ``train_options``).
- ``launch``: one run over several local processes (``unilab_jax.distributed``).
- ``evaluate``: ``policy.evaluate`` of a run's checkpoint.
- ``play``: episodes and video of a trained policy (``unilab_jax.policy.play``).
- ``export``: ``policy.export.export_policy`` (torch, TorchScript, ONNX), checked.
- ``plot``: ``analysis.plot.plot_runs`` of TensorBoard runs.
"""

from __future__ import annotations

import importlib
import sys

#: The commands, each a module here with ``main(argv) -> int``.
COMMANDS = {
    "train": "train a policy",
    "launch": "one training run over several local processes",
    "evaluate": "the deterministic return of a trained policy",
    "play": "watch a trained policy (episodes, video)",
    "export": "a trained policy as a torch, TorchScript or ONNX file",
    "plot": "learning curves of runs",
}


def _usage() -> str:
    rows = "\n".join(f"  {name:<9} {what}" for name, what in COMMANDS.items())
    return (
        "usage: unilab-jax <command> [options]   (unilab-jax <command> --help for its options)\n"
        f"\ncommands:\n{rows}\n"
    )


def main(argv: list[str] | None = None) -> int:
    """``unilab-jax <command> ...``: start ``command``'s program with the rest of ``argv``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage(), end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"{_usage()}\nunilab-jax: unknown command {command!r}", file=sys.stderr)
        return 2
    program = importlib.import_module(f"unilab_jax.cli.{command}")
    return program.main(rest)
