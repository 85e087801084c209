"""The package's layers: no module imports a module of a higher layer, no backend folder imports another, and the
module import graph has no cycle.

Every `import` statement counts wherever it stands: at module level, inside a function, under `if TYPE_CHECKING:`.
Relative imports are resolved; `from coopnn.x import y` imports the module `coopnn.x.y` when y is a submodule, else
`coopnn.x`. Nodes are modules, a package's `__init__` named by the package; importing `coopnn.x.y` is not counted as
importing the package `coopnn.x` (that would tie every module to the top-level `coopnn`).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "coopnn"
SOURCE = Path(__file__).resolve().parents[1] / PACKAGE

# Lowest first. An entry holds the module it names and, for a package, every module below it; the longest entry
# that holds a module decides its layer (`coopnn` itself holds only its own __init__). A module may import from its
# own layer and those below it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("coopnn.errors", "coopnn.dtypes", "coopnn.registry", "coopnn.tables", "coopnn.progress",
              "coopnn.disk_cache")),
    # The tensor language itself (reading, checking, printing, interpreting, model functions), which the graph,
    # kernel and training layers use; its compiler, kernels and model uses sit in "api".
    ("language", tuple(f"coopnn.tl.{name}" for name in (
        "ast", "types", "errors", "arguments", "scanner", "parser", "parse_base", "parse_control", "parse_coopmatrix",
        "parse_memory", "parse_ops", "parse_types", "checker", "check_base", "check_collectives", "check_control",
        "check_coopmatrix", "check_memory", "check_scalar", "printer", "interp", "launch", "functions"))),
    ("graph", ("coopnn.graph",)),
    ("layouts", ("coopnn.layouts",)),
    ("shaders", ("coopnn.shaders",)),
    ("runtime", ("coopnn.runtime",)),
    ("interop", ("coopnn.interop",)),
    ("train", ("coopnn.train",)),
    ("backends", ("coopnn.backends",)),
    ("api", ("coopnn.model", "coopnn.compiler", "coopnn.trainer", "coopnn.tl", "coopnn.tl.functions.uses",
             "coopnn.export")),
    ("top", ("coopnn.nets", "coopnn.torch", "coopnn.distributed", "coopnn.examples", "coopnn.bench", "coopnn.cli", "coopnn.cli_arrays",
             "coopnn.cli_stream", "coopnn.cli_format", "coopnn.cli_export", "coopnn.cli_tl", "coopnn.__main__",
             "coopnn")),
]

# Each folder below it is one backend; the modules beside the folders are what the backends share.
BACKENDS = "coopnn.backends"

Modules = dict[str, tuple[Path, bool]]


def _modules(source: Path) -> Modules:
    """Module name -> (source file, whether it is a package's __init__), for the package in folder `source`."""
    found = {}
    for path in sorted(source.rglob("*.py")):
        parts = list(path.relative_to(source.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _owning_module(modules: Modules, name: str) -> str | None:
    """The longest prefix of the dotted `name` that is one of `modules`."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(modules: Modules, module: str) -> set[tuple[str, int]]:
    """(imported module among `modules`, line) for every import statement in `module`."""
    path, is_package = modules[module]
    package = (module if is_package else module.rpartition(".")[0]).split(".")
    edges = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [_owning_module(modules, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = ".".join(package[:len(package) - node.level + 1] if node.level else [])
            source = ".".join(p for p in (source, node.module) if p)
            targets = [_owning_module(modules, f"{source}.{alias.name}") for alias in node.names]
        else:
            continue
        edges.update((target, node.lineno) for target in targets if target is not None and target != module)
    return edges


def _graph(modules: Modules) -> dict[str, set[tuple[str, int]]]:
    return {module: _imports(modules, module) for module in modules}


MODULES = _modules(SOURCE)
GRAPH = _graph(MODULES)


def _layer(module: str) -> int | None:
    best = None
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            holds = module == entry or (entry != PACKAGE and module.startswith(entry + "."))
            if holds and (best is None or len(entry) > best[1]):
                best = (index, len(entry))
    return None if best is None else best[0]


def _backend_folder(module: str) -> str | None:
    """The backend folder holding `module` (`coopnn.backends.<name>`), or None for the shared modules and the rest."""
    if not module.startswith(BACKENDS + "."):
        return None
    folder = ".".join(module.split(".")[:3])
    return folder if MODULES[folder][1] else None


def _where(module: str, line: int) -> str:
    return f"{MODULES[module][0].relative_to(SOURCE.parent)}:{line}"


def test_every_module_has_a_layer():
    unplaced = [m for m in MODULES if _layer(m) is None]
    assert not unplaced, "modules in no layer (add them to LAYERS): " + ", ".join(unplaced)


def test_no_module_imports_from_a_higher_layer():
    upward = [f"{_where(m, line)} {m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})"
              for m, edges in sorted(GRAPH.items()) for t, line in sorted(edges) if _layer(t) > _layer(m)]
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_backend_imports_another_backend():
    across = [f"{_where(m, line)} {m} imports {t}" for m, edges in sorted(GRAPH.items()) for t, line in sorted(edges)
              if _backend_folder(m) and _backend_folder(t) and _backend_folder(m) != _backend_folder(t)]
    assert not across, "backends importing another backend:\n" + "\n".join(across)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module, iteratively (the package is deep enough to matter)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def test_the_import_graph_has_no_cycle():
    cycles = []
    for component in _strongly_connected({m: {t for t, _ in edges} for m, edges in GRAPH.items()}):
        inside = [f"{_where(m, line)} {m} imports {t}" for m in component for t, line in sorted(GRAPH[m])
                  if t in component]
        cycles.append("cycle among " + ", ".join(component) + ":\n  " + "\n  ".join(inside))
    assert not cycles, "\n".join(cycles)


def test_the_walk_sees_every_kind_of_import(tmp_path):
    """The checks above are only as good as the walk: imports at module level, inside functions and under
    TYPE_CHECKING, relative ones and `from package import submodule` are all edges."""
    files = {
        "pkg/__init__.py": "from pkg import a\n",
        "pkg/a.py": "import pkg.sub.b as b\nfrom .sub import c\n",
        "pkg/sub/__init__.py": "from ..a import thing\n",
        "pkg/sub/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.c import C\n",
        "pkg/sub/c.py": "def f():\n    from . import b\n    from pkg.sub.b import name\n    import os\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = _graph(_modules(tmp_path / "pkg"))
    assert graph == {"pkg": {("pkg.a", 1)}, "pkg.a": {("pkg.sub.b", 1), ("pkg.sub.c", 2)},
                     "pkg.sub": {("pkg.a", 1)}, "pkg.sub.b": {("pkg.sub.c", 3)},
                     "pkg.sub.c": {("pkg.sub.b", 2), ("pkg.sub.b", 3)}}
    assert _strongly_connected({m: {t for t, _ in edges} for m, edges in graph.items()}) == [["pkg.sub.b", "pkg.sub.c"]]
