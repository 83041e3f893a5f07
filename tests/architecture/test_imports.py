"""The import rules between the project's modules: no cycles, and the contracts in
pyproject.toml (`[tool.importlinter]`: a pure guard core, a ledger that never imports the
agents' services, the layers).

The cycle check reads the source (no import runs) and counts every import, at the top of a
module or inside a function: an import moved into a function to dodge a cycle is still one.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents", "ledger", "console", "loopwarden", "devtools")


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project's packages (migrations aside: Django imports those)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, wherever in the file the import statement is."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from a import b`: b is a module of a, or a name defined in a (then a below).
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    found = set()
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
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
                        found.append(sorted(component))
    return found


def test_no_import_cycle_between_the_projects_modules():
    assert cycles(import_graph()) == []


def test_the_cycle_check_sees_an_import_inside_a_function(tmp_path):
    """The check itself: a cycle closed by a function-level import is found."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "agents" / "jobs.py").write_text("from agents.services import stops\n")
    (tmp_path / "agents" / "services").mkdir()
    (tmp_path / "agents" / "services" / "__init__.py").write_text("")
    (tmp_path / "agents" / "services" / "stops.py").write_text(
        "def notify():\n    from agents.jobs import notify_needs_human\n"
    )
    (tmp_path / "ledger" / "services.py").write_text("from . import selectors\n")
    (tmp_path / "ledger" / "selectors.py").write_text("")

    graph = import_graph(tmp_path)

    assert graph["ledger.services"] == {"ledger.selectors"}
    assert cycles(graph) == [["agents.jobs", "agents.services.stops"]]


def imported_modules(path: Path) -> list[str]:
    """The absolute modules a file imports (relative imports are banned by ruff)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.append(node.module or "")
    return names


# The novelty rule (volatile keys, result hash) and the shape of evidence each have one home,
# the client distribution's pure modules, because clients need them (to send a data hash, to
# refuse malformed evidence before sending it) and must never import the server.
SHARED_RULES = {"loopwarden_client.novelty", "loopwarden_client.evidence"}


def test_the_guard_core_imports_only_the_standard_library_itself_and_the_shared_rule():
    stdlib = sys.stdlib_module_names | {"__future__"}
    for name, path in project_modules().items():
        if not name.startswith("agents.guard"):
            continue
        for module in imported_modules(path):
            head = module.partition(".")[0]
            if module in SHARED_RULES or head in stdlib:
                continue
            assert module.startswith("agents.guard"), f"{name} imports {module}"


@pytest.mark.parametrize("shared_rule", sorted(SHARED_RULES))
def test_the_shared_rule_modules_import_only_the_standard_library(shared_rule):
    shared = importlib.import_module(shared_rule)

    stdlib = sys.stdlib_module_names | {"__future__"}
    modules = imported_modules(Path(str(shared.__file__)))
    outside = [m for m in modules if m.partition(".")[0] not in stdlib]
    assert not outside, f"{shared_rule} imports {outside}"


def test_the_import_contracts_hold():
    """`lint-imports` with the contracts of pyproject.toml (import-linter)."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    report = done.stdout.partition("Contracts\n---------")[2] or done.stdout
    assert done.returncode == 0, report + done.stderr
