"""The command-line programs: ``unilab-jax <command> [options]`` (a console script; ``python -m
unilab_jax.cli <command>`` is the same, and ``python -m unilab_jax.train`` is ``train``). Each
command is a module here (``convert-motion``: ``convert_motion``) whose ``main(argv)`` parses its
options (tyro, from a documented dataclass: ``options``), calls the library, prints, and returns
its exit code (2: bad input)."""

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
    "convert-motion": "a motion clip into the reference's format, joints and bodies by name",
    "sharpa-grasps": "SharpaInhandRotation's grasp caches, collected with the reference's rule",
}


def main(argv: list[str] | None = None) -> int:
    """``unilab-jax <command> ...``: start ``command``'s program with the rest of ``argv``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:  # the module of convert-motion is convert_motion
        module = args[0].replace("-", "_")
        return importlib.import_module(f"unilab_jax.cli.{module}").main(args[1:])
    if args[:1] == ["--version"]:
        from unilab_jax import __version__

        print(f"unilab-jax {__version__}")
        return 0
    helping = args[:1] in (["-h"], ["--help"])
    width = max(map(len, COMMANDS))
    rows = "".join(f"\n  {name:<{width}}  {what}" for name, what in COMMANDS.items())
    print(f"usage: unilab-jax <command> [options]  (unilab-jax <command> --help: its options;"
          f" unilab-jax --version)\n"
          f"\ncommands:{rows}", file=sys.stdout if helping else sys.stderr)  # fmt: skip
    if args and not helping:
        print(f"unilab-jax: unknown command {args[0]!r}", file=sys.stderr)
    return 0 if helping else 2
