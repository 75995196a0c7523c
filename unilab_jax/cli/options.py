"""Command-line options generated from documented dataclass fields (``TrainConfig``,
``SACConfig``, ``TD3Config``): one ``--name`` per scalar field, its help the docstring written
under the field, ``--flag / --no-flag`` for booleans, and the default shown.

Options are added with ``default=argparse.SUPPRESS``, so a parsed namespace holds only the
options given: presets and ``--config`` files fill in the rest, and what was given wins.
(tyro 1.0.17 builds such parsers too, but it shows one algorithm's options per subcommand and
cannot say which options were given, which presets need.)
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing

__all__ = ["add_dataclass_options", "field_docs", "flag"]


def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of a dataclass (a string literal after the field),
    so the CLI's ``--help`` is written once, next to the field; a subclass's fields inherit the
    documentation of the dataclasses it extends unless it writes its own."""
    import ast
    import gc
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        source = textwrap.dedent(inspect.getsource(klass))
        # CPython 3.11 keeps one AST-building depth counter per interpreter: a garbage
        # collection inside ``ast.parse`` whose finalizer parses too (a logged traceback's
        # caret anchors, e.g. asyncio's "Task exception was never retrieved") leaves it
        # unbalanced and the outer parse fails with "AST constructor recursion depth
        # mismatch". No collection runs while it builds ours.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            tree = ast.parse(source)
        finally:
            if was_enabled:
                gc.enable()
        body = tree.body[0].body  # type: ignore[attr-defined]
        for prev, node in zip(body, body[1:], strict=False):
            if (
                isinstance(prev, ast.AnnAssign)
                and isinstance(prev.target, ast.Name)
                and isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                docs[prev.target.id] = " ".join(node.value.value.split())
    return docs


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _arg_type(annotation) -> type:
    """The scalar type of a (possibly optional) field annotation."""
    if isinstance(annotation, str):
        annotation = eval(annotation, {"__builtins__": __builtins__})  # noqa: S307 (our own dataclasses)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0]
    return annotation


def _defaults(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def add_dataclass_options(group, cls, skip=(), seen=None, others=()) -> list[str]:
    """Add one ``--option`` per documented field of ``cls``; returns the field names added.

    ``others`` are further ``(label, dataclass)`` pairs sharing some field names (TD3Config
    next to SACConfig): a shared option shows every default that differs."""
    docs = field_docs(cls)
    other_defaults = [(label, _defaults(other)) for label, other in others]
    added = []
    for f in dataclasses.fields(cls):
        if f.name in skip or (seen is not None and f.name in seen):
            continue
        typ = _arg_type(f.type)
        if typ not in (bool, int, float, str):
            continue
        default = f"{f.default}"
        for label, defaults in other_defaults:
            if f.name in defaults and defaults[f.name] != f.default:
                default += f"; {label}: {defaults[f.name]}"
        text = f"{docs.get(f.name, '')} (default: {default})".replace("%", "%%")
        if typ is bool:  # --use-cdq / --no-use-cdq
            group.add_argument(
                flag(f.name),
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=text,
            )
        else:
            group.add_argument(
                flag(f.name),
                dest=f.name,
                type=typ,
                default=argparse.SUPPRESS,
                metavar=typ.__name__.upper(),
                help=text,
            )
        added.append(f.name)
        if seen is not None:
            seen.add(f.name)
    return added
