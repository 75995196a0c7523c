"""A command's options: a frozen dataclass whose fields' docstrings are the ``--help``, parsed
by tyro (``--kebab-case`` options, ``--flag / --no-flag`` booleans, defaults shown; nested ones
unprefixed). ``documented`` gives tyro each docstring on one line (tyro 1.0.17 keeps the breaks
of an indented one). Both read sources with ``ast`` while no garbage collection runs: in CPython
3.11 a finalizer that parses Python meanwhile fails the outer parse ("AST constructor recursion
depth mismatch")."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
import typing
from typing import Annotated

import docstring_parser
import tyro

__all__ = ["STEP_HELP", "documented", "error", "parse", "values"]

#: ``--step`` of the commands that load a run's policy (``load_policy(run, step)``).
STEP_HELP = "The checkpoint: an iteration, or best (the best-evaluated one); None: the newest."
_CONFIG = (tyro.conf.OmitArgPrefixes, tyro.conf.PositionalMetavarFromFieldName)


def documented(
    cls: type, types: dict | None = None, metavars: dict | None = None, **helps: str | None
) -> type:
    """``cls`` with each field's docstring as its help; ``helps`` replace some (a None one
    hides its field, which keeps the default's value); ``types`` replace some fields' types
    on the command line (a ``Literal`` of a registry's names: tyro shows and checks the
    choices); ``metavars`` name some fields' values in the help."""
    docs: dict[str, str | None] = {}
    with _no_collection():
        # The class's own field docstrings over its bases' (a subclass of a config, such as
        # HoraSACConfig of SACConfig, documents only the fields it adds).
        for base in reversed(cls.__mro__):
            if dataclasses.is_dataclass(base):
                parsed = docstring_parser.parse_from_object(base).params
                docs.update({p.arg_name: p.description for p in parsed if p.description})
    docs.update(helps)
    hints = {**typing.get_type_hints(cls, include_extras=True), **(types or {})}
    metavars = metavars or {}

    def option(name: str):
        if name in docs and docs[name] is None:
            return Annotated[hints[name], tyro.conf.Suppress]
        text = " ".join((docs.get(name) or "").split())
        return Annotated[hints[name], tyro.conf.arg(help=text, metavar=metavars.get(name))]

    fields = [(f.name, option(f.name), dataclasses.field(default=f.default))
              for f in dataclasses.fields(cls)]  # fmt: skip
    namespace = {"__doc__": cls.__doc__}
    return dataclasses.make_dataclass(
        cls.__name__, fields, bases=(cls,), frozen=True, namespace=namespace
    )


def values(options) -> dict:
    """A dataclass's field values, by name (not recursing, unlike ``dataclasses.asdict``)."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def parse(cls: type, argv: list[str] | None, **kwargs):
    """``tyro.cli(cls, args=argv, **kwargs)``."""
    with _no_collection():
        return tyro.cli(cls, args=argv, config=_CONFIG, **kwargs)


def error(message: str) -> int:
    """Say ``message`` as the one line of a bad input; its exit code, 2."""
    print(f"error: {message}", file=sys.stderr)
    return 2


@contextlib.contextmanager
def _no_collection():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
