"""The scripts' imports of each other form no cycle, counting imports inside functions (export's
--int8 imported quantize lazily while quantize imported export), and the bundle writers import
no other writer: they share scripts.bundle_files."""

import ast
import os
import subprocess
import sys

import pytest

from scripts.tests.conftest import ROOT

SCRIPTS = os.path.join(ROOT, "scripts")


def _module(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-len(".py")].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _imports(path: str, name: str) -> set:
    """The scripts.* modules path imports anywhere in it (relative or absolute)."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("scripts.")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            if not base.startswith("scripts"):
                continue
            for a in node.names:  # "from . import x" names a module; "from .x import f" a name in one
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in FILES else base)
    return out - {name}


FILES = {}
for d, _, names in os.walk(SCRIPTS):
    if "tests" in d.split(os.sep):
        continue
    for n in names:
        if n.endswith(".py"):
            p = os.path.join(d, n)
            FILES[_module(p)] = p
GRAPH = {m: _imports(p, m) & set(FILES) for m, p in FILES.items()}


def test_no_import_cycle():
    state, cycles = {}, []

    def visit(m, path):
        state[m] = "open"
        for dep in sorted(GRAPH[m]):
            if state.get(dep) == "open":
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[m] = "done"

    for m in sorted(GRAPH):
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles
    assert "scripts.bundle_files" in GRAPH["scripts.quantize"]  # the graph is read at all


WRITERS = ("scripts.export", "scripts.quantize", "scripts.half", "scripts.upgrade_bundle")


@pytest.mark.parametrize("name", WRITERS + ("scripts.bundle_files", "scripts.graph_check"))
def test_each_module_imports_alone(name):
    # A fresh interpreter per module: an import that only works after another module was loaded
    # (an order-dependent cycle) fails here.
    code = (f"import sys, {name}; print(' '.join(sorted(m for m in sys.modules "
            f"if m.startswith('scripts.'))))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.split())
    others = (set(WRITERS) - {name}) & loaded
    if name == "scripts.half":
        others -= {"scripts.quantize"}  # half measures agreement as quantize does (GOLDEN, agreement)
    assert not others, f"{name} loads {others}"
