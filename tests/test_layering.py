"""The packages' layering, read from the source (``ast``, nothing imported): the JAX core
(``unilab_jax``) never imports the facade (``unilab``), its packages only import down their
order (``LAYERS``, drawn in docs/layout.md), the facade reaches the core's run machinery
through one entrance (``FACADE_ENTRANCE``), and no modules import each other in a circle,
counting every import (function-local and ``TYPE_CHECKING`` ones too)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("unilab", "unilab_jax")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def known(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(head + ([node.module] if node.module else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            targets = subs if len(subs) == len(node.names) else [base, *subs]
        else:
            continue
        out |= {t for t in map(known, targets) if t and t != name}
    return out


GRAPH = {name: _imports(name, path, _modules()) for name, path in _modules().items()}

#: The core's packages and top modules, bottom to top (docs/layout.md): a module imports its own
#: package's modules and those of the packages below it, never one above. ``unilab_jax`` is the
#: root package itself (its ``__version__``).
LAYERS = (
    "unilab_jax",
    "errors",
    "envs",
    "algos",
    "torch",
    "distributed",
    "config",
    "collection",
    "training",
    "policy",
    "analysis",
    "cli",
    "train",
)

#: The one module of ``unilab_jax.training`` the facade imports: its entrance to the core's run
#: machinery. The facade imports the core's other packages directly, but never ``cli`` or
#: ``train`` (the programs, not the library).
FACADE_ENTRANCE = "unilab_jax.training.facade"


def _layer(module: str) -> str:
    """The package (or top module) of the core that ``module`` belongs to."""
    return module.split(".")[1] if "." in module else module


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return sorted(
        f"{a} ({_layer(a)}) imports {b} ({_layer(b)})"
        for a, targets in graph.items()
        if a.split(".")[0] == "unilab_jax"
        for b in targets
        if b.split(".")[0] == "unilab_jax" and rank[_layer(b)] > rank[_layer(a)]
    )


def _facade_side_doors(graph: dict[str, set[str]]) -> list[str]:
    def side_door(target: str) -> bool:
        if target.split(".")[0] != "unilab_jax":
            return False
        layer = _layer(target)
        return layer in ("cli", "train") or (layer == "training" and target != FACADE_ENTRANCE)

    return sorted(
        f"{a} imports {b}"
        for a, targets in graph.items()
        if a.split(".")[0] == "unilab"
        for b in targets
        if side_door(b)
    )


def test_the_core_never_imports_the_facade():
    upward = sorted(
        f"{a} imports {b}"
        for a, targets in GRAPH.items()
        if a.startswith("unilab_jax")
        for b in targets
        if b.split(".")[0] == "unilab"
    )
    assert not upward, upward


def test_core_packages_only_import_down_their_order():
    """Every package of the core has its place in ``LAYERS``, and no module imports a package
    above its own (each offending edge is named)."""
    layers = {_layer(m) for m in GRAPH if m.split(".")[0] == "unilab_jax"}
    assert layers == set(LAYERS), (
        f"place these in LAYERS and docs/layout.md: {layers ^ set(LAYERS)}"
    )
    upward = _upward_imports(GRAPH)
    assert not upward, "imports against the layer order (docs/layout.md):\n" + "\n".join(upward)


def test_the_facade_reaches_the_run_machinery_through_one_entrance():
    """``unilab/`` imports ``unilab_jax.training`` only through ``FACADE_ENTRANCE``, and never the
    core's programs (``cli``, ``train``)."""
    assert FACADE_ENTRANCE in GRAPH
    assert any(
        FACADE_ENTRANCE in targets for a, targets in GRAPH.items() if a.startswith("unilab.")
    )
    side_doors = _facade_side_doors(GRAPH)
    assert not side_doors, f"import these from {FACADE_ENTRANCE}:\n" + "\n".join(side_doors)


def test_the_layer_checks_catch_a_wrong_import():
    """The two checks above, on the graph with wrong imports added: they name each one."""
    graph = {name: set(targets) for name, targets in GRAPH.items()}
    graph["unilab_jax.collection.mjx"].add("unilab_jax.training.trainer")
    graph["unilab_jax.envs.base"].add("unilab_jax.algos.agent")
    graph["unilab.torch_policy"].add("unilab_jax.training.checkpoint")
    assert _upward_imports(graph) == [
        "unilab_jax.collection.mjx (collection) imports unilab_jax.training.trainer (training)",
        "unilab_jax.envs.base (envs) imports unilab_jax.algos.agent (algos)",
    ]
    assert _facade_side_doors(graph) == [
        "unilab.torch_policy imports unilab_jax.training.checkpoint"
    ]


def test_no_import_circles():
    """Tarjan's strongly connected components of the import graph: each must be one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while component[-1:] != [v]:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert len(GRAPH) > 50 and not circles, circles


def _top_level_imports(path: Path) -> set[str]:
    """Modules imported when ``path`` is (statements outside functions and classes, ``if`` and
    ``try`` blocks included; ``TYPE_CHECKING`` blocks left out)."""
    found: set[str] = set()
    body = list(ast.parse(path.read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            body += node.orelse
        elif isinstance(node, (ast.If, ast.Try)):
            body += node.body + node.orelse + getattr(node, "finalbody", [])
            body += [s for h in getattr(node, "handlers", []) for s in h.body]
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found |= {node.module or ""} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_no_core_module_imports_torch_at_load_time():
    """The JAX core runs without torch: only ``unilab_jax/torch/`` (plain ``nn.Module``
    classes) imports it when imported, and no other core module imports those modules (or
    torch) when it is imported; they do inside the functions that need torch."""
    offenders = sorted(
        f"{name} imports {target}"
        for name, path in _modules().items()
        if name.startswith("unilab_jax") and not name.startswith("unilab_jax.torch")
        for target in _top_level_imports(path)
        if target.split(".")[0] == "torch" or target.startswith("unilab_jax.torch")
    )
    assert len(_modules()) > 50 and not offenders, offenders
    # The torch side is plain classes: torch is imported at the top, nothing built on first use.
    actors = _top_level_imports(ROOT / "unilab_jax" / "torch" / "actors.py")
    assert "torch" in actors and not (ROOT / "unilab_jax" / "torch" / "lazy.py").exists()


def test_the_core_is_packages_by_role_with_four_top_modules():
    """The tree is the architecture: at the top of ``unilab_jax`` only ``__init__``, ``config``,
    ``errors`` and ``train`` (``python -m unilab_jax.train``); everything else in a package
    named after its role (docs/layout.md draws the tree)."""
    top = sorted(p.name for p in (ROOT / "unilab_jax").glob("*.py"))
    assert top == ["__init__.py", "config.py", "errors.py", "train.py"]
    packages = sorted(p.parent.name for p in (ROOT / "unilab_jax").glob("*/__init__.py"))
    assert packages == [
        "algos", "analysis", "cli", "collection", "distributed", "envs", "policy", "torch",
        "training",
    ]  # fmt: skip


def test_no_private_name_is_imported_across_modules():
    """A ``_name`` is its module's own: a file that needs another's private name was cut to a
    size, not around a concept (what one module lends another is public)."""
    borrowed = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGES):
                private = [
                    a.name
                    for a in node.names
                    if a.name.startswith("_") and not a.name.endswith("__")  # __version__ is public
                ]
                borrowed += [f"{name}:{node.lineno} {node.module}.{p}" for p in private]
    assert borrowed == []
