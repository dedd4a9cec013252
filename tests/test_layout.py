"""The package's layout (issue 14): no import circles among its modules, and no file past its
line budget.

Imports inside functions count (a lazy import is still a dependency); imports under
`if TYPE_CHECKING:` do not (they never run). The Cython core (_core.pyx and its includes) is
a module too: its Python-level imports are read line by line."""
import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "imperative"
MAX_LINES = 600             # any .py, .pyx or .pxi
MAX_CORE_LINES = 300        # _core.pyx: the compile unit and little else


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    """Module name -> its source: the .py files and the extension modules' .pyx."""
    return {_module_name(p): p for p in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx")]}


def _cython_imports(path):
    """The Python-level imports of a .pyx and of the .pxi files it includes, as ast nodes
    (`cimport` lines are C-level and left out)."""
    text = "\n".join([path.read_text()] + [p.read_text() for p in PACKAGE.glob("*.pxi")]
                     if path.name == "_core.pyx" else [path.read_text()])
    for line in text.splitlines():
        line = line.strip()
        if re.match(r"(from \S+ import (?!.*\bcimport\b)|import )", line) and "cimport" not in line:
            yield from ast.parse(line.rstrip("(").split("#")[0].strip()).body


def _is_type_checking(node):
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree):
    """Every import statement of a module, at any depth, outside `if TYPE_CHECKING:`."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _edges(name, path, modules):
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = (_cython_imports(path) if path.suffix == ".pyx" else
             _imports(ast.parse(path.read_text())))
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[:len(parent) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            # `from pkg import mod` depends on pkg.mod; `from mod import name` on mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        for target in targets:
            if target in modules and target != name:
                yield target


def _circles(graph):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circles_among_the_packages_modules():
    modules = _modules()
    graph = {name: set(_edges(name, path, modules)) for name, path in modules.items()}
    # (the package face imports most modules: one that imports it back, as the demo and the
    # models do, is a circle unless the face leaves it out)
    assert _circles(graph) == []


def test_no_file_is_over_its_line_budget():
    sizes = {p.name if p.parent == PACKAGE else str(p.relative_to(PACKAGE)):
             len(p.read_text().splitlines())
             for p in PACKAGE.rglob("*") if p.suffix in (".py", ".pyx", ".pxi")}
    assert sizes["_core.pyx"] <= MAX_CORE_LINES
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert over == {}


def test_the_contract_in_the_repository_is_the_shared_one():
    """docs/contract.md is a copy of the shared contract (../shared/API.md, beside the
    repository where the project is developed; a fresh clone or an sdist has only the copy)."""
    shared = PACKAGE.parent.parent / "shared" / "API.md"
    if not shared.exists():
        pytest.skip("no ../shared/API.md beside this tree")
    copy = PACKAGE.parent / "docs" / "contract.md"
    assert copy.read_text() == shared.read_text(), "copy ../shared/API.md to docs/contract.md"
