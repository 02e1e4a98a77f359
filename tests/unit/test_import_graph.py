"""The collection's import graph read from the source (every import statement, late ones inside
functions included): arrows run one way, and no module reaches itself through its imports."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "ansible_collections.sentinel.remediation"
DRIVER = "sentinel_remediate"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] == "driver":
        return ".".join(parts[1:])
    return ".".join([PACKAGE] + parts)


def _sources() -> dict[str, Path]:
    files = list((ROOT / "plugins").rglob("*.py")) + list((ROOT / "driver" / DRIVER).rglob("*.py"))
    return {_module_name(p): p for p in files if "__pycache__" not in p.parts}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module ``name`` refers to (a module, or the package holding the name)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # `from package import submodule` imports the submodule; any other name, the module.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            resolved = _resolve(target, modules)
            if resolved and resolved != module:
                found.add(resolved)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _sources()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> str:
    if module.startswith(DRIVER):
        return "driver"
    return module[len(PACKAGE) + 1:].split(".")[1]


def test_the_graph_sees_late_and_relative_imports() -> None:
    graph = _graph()
    # A late import (inside a function) and a relative one, both known to exist.
    assert f"{PACKAGE}.plugins.plugin_utils.preload" in graph[f"{PACKAGE}.plugins.callback.remediation_report"]
    assert f"{PACKAGE}.plugins.plugin_utils.policy._rules" in graph[f"{PACKAGE}.plugins.plugin_utils.policy._tools"]


def test_no_module_reaches_itself_through_its_imports() -> None:
    graph = _graph()
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert cycles == []


def test_nothing_below_the_plugins_imports_an_action_or_a_callback() -> None:
    wrong = sorted(f"{src} -> {dst}" for src, dsts in _graph().items() for dst in dsts
                   if _layer(src) in ("plugin_utils", "module_utils", "callback", "driver", "filter", "lookup", "modules")
                   and _layer(dst) in ("action", "callback") and _layer(src) != _layer(dst))
    assert wrong == []


def test_an_action_never_imports_another_action() -> None:
    wrong = sorted(f"{src} -> {dst}" for src, dsts in _graph().items() for dst in dsts
                   if _layer(src) == "action" and _layer(dst) == "action")
    assert wrong == []


def test_host_code_imports_only_host_code() -> None:
    wrong = sorted(f"{src} -> {dst}" for src, dsts in _graph().items() for dst in dsts
                   if _layer(src) == "module_utils" and _layer(dst) != "module_utils")
    assert wrong == []
