"""The project's own import graph: no cycles, and configs/ never imports analysis/.

The graph is built from the source with ``ast``; nothing is imported or executed.
Every import statement counts, wherever it stands: at module level, inside a
function or method (an import hidden in a function is still a dependency, and
hiding one there is not how a cycle is broken), under ``if TYPE_CHECKING:`` and
in ``try``/``except``. ``import a.b.c`` depends on ``a.b.c`` and on the
``__init__`` of ``a`` and ``a.b`` (Python runs them); ``from a.b import c``
depends on ``a.b.c`` when that is a module, else on ``a.b``; relative imports
are resolved against the importing module's package.

Names resolve as the code resolves them: the project's scripts put their own
directories on ``sys.path`` (``configs/`` for ``numa_lb``, ``workloads/``,
``workloads/parsec/``, ``daemons/``, ``disk-image/``, ``disk-image/init/``,
``kernel-patches/``), and the repository root holds the ``analysis`` package and
``run_all.py``. A name that none of these roots holds (the standard library,
pandas, gem5's ``m5``/``gem5``) is not a project module and is left out. A
module loaded from a file path (``importlib.util.spec_from_file_location``,
``SourceFileLoader``) is an edge as well; such loads are listed in
``PATH_LOADS`` and the test fails when a file does one that is not listed.

Run as a script (``python3 tests/unit/test_import_graph.py``) it prints every
cycle and every configs/ -> analysis/ path.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("analysis", "configs", "workloads", "daemons", "disk-image", "kernel-patches")
# The directories the code puts on sys.path (and the repository root), in lookup order.
SEARCH_ROOTS = (
    "",
    "configs",
    "workloads",
    "workloads/parsec",
    "daemons",
    "disk-image",
    "disk-image/init",
    "kernel-patches",
)
# Python files without the .py suffix (scripts run by path).
EXTRA_FILES = ("disk-image/init/numa-lb-init", "run_all.py")
# file -> the file it loads by path (importlib), as project-relative paths.
PATH_LOADS = {
    "analysis/sweep/backends.py": ("disk-image/qemu_boot.py",),
    "disk-image/guest_io.py": ("disk-image/init/numa-lb-init",),
}
_PATH_LOADERS = {"spec_from_file_location", "SourceFileLoader"}


def project_files() -> list[str]:
    files = {str(p.relative_to(ROOT)) for part in PARTS for p in (ROOT / part).rglob("*.py")}
    files.update(EXTRA_FILES)
    return sorted(f for f in files if "/." not in f and "__pycache__" not in f)


def module_table(files: list[str]) -> dict[str, str]:
    """Importable name -> file, for every file under one of SEARCH_ROOTS.

    A file under a nested root (``workloads/parsec/x.py``) is named from that root
    (``x``); a name two files claim is an error (the import would depend on sys.path
    order)."""
    table: dict[str, str] = {}
    clashes: list[str] = []
    for f in files:
        if not f.endswith(".py"):
            continue
        for root in sorted(SEARCH_ROOTS, key=len, reverse=True):
            prefix = root + "/" if root else ""
            if not f.startswith(prefix):
                continue
            parts = f[len(prefix) : -len(".py")].split("/")
            if root == "" and parts[0] != "analysis" and len(parts) > 1:
                break  # a directory of scripts, not a package at the root
            # every directory between the root and the file must be a package
            if any(
                not (ROOT / prefix / "/".join(parts[:i]) / "__init__.py").exists()
                for i in range(1, len(parts))
            ):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            if name in table and table[name] != f:
                clashes.append(f"{name}: {table[name]} and {f}")
            table[name] = f
            break
    assert not clashes, "module names claimed twice: " + "; ".join(clashes)
    return table


def _package(f: str, table: dict[str, str]) -> list[str]:
    """The package parts of file f's module name ([] for a top-level module)."""
    for name, path in table.items():
        if path == f:
            return name.split(".") if f.endswith("__init__.py") else name.split(".")[:-1]
    return []


def _imports(tree: ast.AST, package: list[str]) -> Iterator[tuple[str, list[str]]]:
    """(module, [names imported from it]) for every import statement in the tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod, [a.name for a in node.names]


def _path_loads(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in _PATH_LOADERS:
                return True
    return False


def import_graph() -> dict[str, set[str]]:
    """file -> the project files it imports (project-relative paths)."""
    files = project_files()
    table = module_table(files)
    graph: dict[str, set[str]] = {f: set() for f in files}
    unlisted: list[str] = []
    for f in files:
        tree = ast.parse((ROOT / f).read_text(), filename=f)
        for mod, names in _imports(tree, _package(f, table)):
            parts = mod.split(".")
            for i in range(1, len(parts) + 1):  # the packages' __init__ run first
                target = table.get(".".join(parts[:i]))
                if target is not None:
                    graph[f].add(target)
            for n in names:
                target = table.get(f"{mod}.{n}")
                if target is not None:
                    graph[f].add(target)
        if _path_loads(tree):
            if f not in PATH_LOADS:
                unlisted.append(f)
            graph[f].update(PATH_LOADS.get(f, ()))
        graph[f].discard(f)
    assert not unlisted, f"files that load a module by path, not in PATH_LOADS: {unlisted}"
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth <= number of files (~100)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def path_between(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A shortest import path start -> ... -> a file under goal/, or None."""
    prev: dict[str, str | None] = {start: None}
    queue = [start]
    for v in queue:
        if v.startswith(goal + "/"):
            path = [v]
            while (p := prev[path[-1]]) is not None:
                path.append(p)
            return path[::-1]
        for w in sorted(graph[v]):
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return None


def configs_to_analysis(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every configs/ file that reaches analysis/ through imports, with one path each."""
    paths = (path_between(graph, f, "analysis") for f in sorted(graph) if f.startswith("configs/"))
    return [p for p in paths if p is not None]


def _cycle_edges(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    members = set(comp)
    return [f"{a} -> {b}" for a in comp for b in sorted(graph[a] & members)]


# ------------------------------------------------------------------------ tests
def test_the_resolver_sees_the_projects_imports() -> None:
    """Guards the resolver itself: known edges of each kind are found."""
    g = import_graph()
    assert "analysis/results/frames.py" in g["analysis/results/report.py"]  # relative
    assert "configs/numa_lb/topology.py" in g["analysis/sweep/spec.py"]  # via configs/ root
    assert "workloads/mixrunner.py" in g["analysis/sweep/spec.py"]  # via workloads/ root
    assert "disk-image/init/init_formats.py" in g["disk-image/init/init_handback.py"]
    assert "disk-image/qemu_boot.py" in g["analysis/sweep/backends.py"]  # loaded by path
    assert "analysis/__init__.py" in g["run_all.py"]  # packages' __init__ count


def test_cycles_are_found_in_a_synthetic_graph() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert cycles(g) == [["a", "b", "c"], ["d", "e"]]
    assert path_between(
        {"configs/x": {"y"}, "y": {"analysis/z"}, "analysis/z": set()}, "configs/x", "analysis"
    ) == ["configs/x", "y", "analysis/z"]


def test_function_level_imports_count(tmp_path: Path) -> None:
    tree = ast.parse("def f():\n    from .b import c\n    import x.y\n")
    assert list(_imports(tree, ["pkg", "sub"])) == [("pkg.sub.b", ["c"]), ("x.y", [])]
    tree = ast.parse("from .. import m\n")
    assert list(_imports(tree, ["pkg", "sub"])) == [("pkg", ["m"])]


def test_no_import_cycles() -> None:
    g = import_graph()
    found = cycles(g)
    assert not found, "import cycles:\n" + "\n".join(
        "  " + ", ".join(c) + "\n    " + "\n    ".join(_cycle_edges(g, c)) for c in found
    )


def test_configs_do_not_import_analysis() -> None:
    """configs/ runs inside gem5's Python: it must not depend on the host-side package."""
    found = configs_to_analysis(import_graph())
    assert not found, "configs/ reaches analysis/:\n" + "\n".join(" -> ".join(p) for p in found)


if __name__ == "__main__":
    graph = import_graph()
    print(f"{len(graph)} files, {sum(len(v) for v in graph.values())} import edges")
    for comp in cycles(graph):
        print("cycle:", ", ".join(comp))
        for e in _cycle_edges(graph, comp):
            print("   ", e)
    for p in configs_to_analysis(graph):
        print("configs -> analysis:", " -> ".join(p))
    sys.exit(1 if cycles(graph) or configs_to_analysis(graph) else 0)
