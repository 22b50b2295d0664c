"""The import rules of the package, read from its source (no import is executed):

* the core imports no framework: jax, flax, optax, TensorFlow, Keras, PyTorch and torchvision
  are imported only under ``paradnn/backends/`` (each framework's package);
* no module imports another module's private name (``from paradnn.x import _y``): what a module
  shares is public and documented;
* module-level imports form no cycle (a submodule importing its own package, as the family and
  framework registries' modules do to register themselves, is not a cycle: the package is
  initialised first).

A test of the running program (which frameworks ``import paradnn.runner`` loads) is in
tests/test_backends.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "paradnn"
FRAMEWORK_MODULES = ("jax", "jaxlib", "flax", "optax", "tensorflow", "keras", "torch", "torchvision")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path):
    """(imported module, imported names, at module level?) of every import statement."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def walk(node: ast.AST, in_function: bool):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, (), not in_function
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([base] if base else []))
                yield base, tuple(a.name for a in child.names), not in_function
            yield from walk(child, nested)

    yield from walk(ast.parse(path.read_text()), False)


def test_the_core_imports_no_framework():
    offenders = [(name, module) for name, path in MODULES.items()
                 if not name.startswith("paradnn.backends.")
                 for module, _, _ in _imports(name, path)
                 if module.split(".")[0] in FRAMEWORK_MODULES]
    assert not offenders, "frameworks are imported only under paradnn/backends/: " + repr(offenders)


def test_no_module_imports_a_private_name_of_another():
    offenders = [(name, module, imported) for name, path in MODULES.items()
                 for module, names, _ in _imports(name, path)
                 if module.startswith("paradnn") and module != name
                 for imported in names if imported.startswith("_") and not imported.startswith("__")]
    assert not offenders, repr(offenders)


def test_module_level_imports_have_no_cycle():
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, names, top in _imports(name, path):
            if not top:
                continue
            # ``from paradnn.a import b`` imports the module paradnn.a.b when there is one.
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES] or [module]
            for target in targets:
                if target in MODULES and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    # Depth-first search for a back edge; report the first cycle found.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            raise AssertionError("import cycle: " + " -> ".join(cycle))


def test_the_rules_see_the_whole_package():
    # The rules above are vacuous if the walk finds nothing: the package has its modules, and
    # the JAX backend imports jax (so the framework check does look at imports).
    assert "paradnn.runner" in MODULES and "paradnn.backends.jax.step" in MODULES
    assert any(m == "jax" for m, _, _ in _imports("paradnn.backends.jax.step",
                                                   MODULES["paradnn.backends.jax.step"]))


def test_analyses_never_reach_back_up_the_flow():
    """Stage order: analysis, plots and report read stored rows; they never import the runner,
    the executors or a framework's package (the registry ``paradnn.backends`` is metadata that
    imports no framework, as the family registry is, and they may read it)."""
    later = ("paradnn.analysis", "paradnn.plots", "paradnn.report")
    # (paradnn.measure is allowed: the settings' names, SETTINGS_FIELDS, are the store's schema.)
    earlier = ("paradnn.runner", "paradnn.executors", "paradnn.sweeper",
               *(f"paradnn.backends.{fw}" for fw in ("jax", "tensorflow", "torch")))
    offenders = [(name, module) for name, path in MODULES.items() if name.startswith(later)
                 for module, names, _ in _imports(name, path)
                 for target in [module, *(f"{module}.{n}" for n in names)]
                 if target.startswith(earlier)]
    assert not offenders, repr(offenders)
