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
    the executors or a framework's package (the registry ``paradnn.frameworks`` is metadata that
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


#: The ground floor: the framework registry and its interface, the settings helpers, errors,
#: units, the plug-in loader and a convolution's real taps. They import nothing of paradnn above
#: them, so that every module (families, sizes, precision, hardware...) may read the registry
#: without climbing.
GROUND = ("paradnn.errors", "paradnn.units", "paradnn.plugins", "paradnn.settings", "paradnn.frameworks",
          "paradnn.convolution")
FRAMEWORK_PACKAGES = ("jax", "tensorflow", "torch")


def _paradnn_targets(name: str, path: Path):
    """Every paradnn module ``name`` imports (module level or in a function), as dotted names:
    ``from paradnn.a import b`` counts as paradnn.a.b where that is a module."""
    for module, names, _ in _imports(name, path):
        if not module.startswith("paradnn"):
            continue
        subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES]
        yield from subs or [module]


def test_the_ground_floor_imports_only_the_ground_floor():
    offenders = [(name, target) for name in GROUND for target in _paradnn_targets(name, MODULES[name])
                 if target not in GROUND]
    assert not offenders, repr(offenders)


def test_no_framework_package_imports_another_and_no_one_else_imports_one():
    """A framework is reached only through the registry: no module outside
    ``paradnn.backends.<fw>`` imports that package (its names are strings in its own INFO), and
    paradnn's own modules import the registry from paradnn.frameworks, not through the
    ``paradnn.backends`` facade kept for plug-in authors."""
    offenders = []
    for name, path in MODULES.items():
        own = next((fw for fw in FRAMEWORK_PACKAGES if name.startswith(f"paradnn.backends.{fw}")), None)
        for target in _paradnn_targets(name, path):
            fw = next((f for f in FRAMEWORK_PACKAGES if target == f"paradnn.backends.{f}"
                       or target.startswith(f"paradnn.backends.{f}.")), None)
            if fw is not None and fw != own:
                offenders.append((name, target))
            if target == "paradnn.backends" and name != "paradnn.backends":
                offenders.append((name, target))
    assert not offenders, repr(offenders)


def test_families_and_sizes_do_not_reach_up_to_workloads():
    """Families define their specs on ``paradnn.families.spec.Spec``; the workload (spec plus
    training settings) is above them, sizes too: neither families nor sizes import it."""
    lower = [n for n in MODULES if n.startswith("paradnn.families") or n == "paradnn.sizes"]
    offenders = [(name, target) for name in lower for target in _paradnn_targets(name, MODULES[name])
                 if not (target.startswith("paradnn.families") or target in GROUND or target == "paradnn.sizes")]
    assert not offenders, repr(offenders)
    # Vacuous if nothing is looked at: the families import the ground floor and each other.
    assert any(t == "paradnn.frameworks" for t in _paradnn_targets("paradnn.families", MODULES["paradnn.families"]))


#: The floors of the package, bottom to top, as the data flows: what a module may import is on
#: its own floor or below (docs/architecture.md draws them). A module belongs to the first
#: floor whose prefix names it; every module has one.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", GROUND + ("paradnn.outputs", "paradnn.hostutil", "paradnn.hostmem")),
    ("models", ("paradnn.families", "paradnn.sizes", "paradnn.precision", "paradnn.workload", "paradnn.metrics")),
    ("platform", ("paradnn.energy", "paradnn.gpuclocks", "paradnn.meters", "paradnn.hardware", "paradnn.measure", "paradnn.spawn",
                  "paradnn.envcheck")),
    ("records", ("paradnn.record", "paradnn.rowschema", "paradnn.progress")),
    ("analysis", ("paradnn.analysis",)),
    ("run", ("paradnn.backends", "paradnn.runner", "paradnn.ledger", "paradnn.beststack", "paradnn.experiments")),
    ("store", ("paradnn.store", "paradnn.status", "paradnn.ledger_store")),
    ("sweep", ("paradnn.grids", "paradnn.executors", "paradnn.sweeper", "paradnn.plan", "paradnn.calibration",
               "paradnn.predictor", "paradnn.compare")),
    ("figures", ("paradnn.plots", "paradnn.report")),
    ("commands", ("paradnn.cli", "paradnn.__main__")),  # and the package's own __init__, the public API
)

#: Imports that climb, each with its reason: (module, imported module) -> why.
CLIMBS = {
    # A command's first step checks every PARADNN_* variable with the parser of the module that
    # reads it (one parser per fact), imported in the function: the check must not import a
    # sweep's modules (pandas) into every command.
    ("paradnn.envcheck", "paradnn.executors.child"): "PARADNN_CPUS_* parsed by the executor's own parser",
    ("paradnn.envcheck", "paradnn.grids.sweepfile"): "PARADNN_RETRY_UNSTABLE_S parsed by the sweep file's parser",
}


def _floor(module: str) -> int:
    if module == "paradnn":
        return len(FLOORS) - 1
    for i, (_, prefixes) in enumerate(FLOORS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} is on no floor: add it to FLOORS (and docs/architecture.md)")


def test_every_module_is_on_a_floor_and_no_import_climbs():
    climbs = []
    for name, path in MODULES.items():
        own = _floor(name)
        for target in _paradnn_targets(name, path):
            if target == "paradnn":  # the package's own metadata: paradnn.__version__, __file__
                continue
            if _floor(target) > own and (name, target) not in CLIMBS:
                climbs.append(f"{name} ({FLOORS[own][0]}) -> {target} ({FLOORS[_floor(target)][0]})")
    assert not climbs, "imports from a lower floor to a higher one:\n" + "\n".join(climbs)
    # The rule is not vacuous: the floors order what the data flow orders.
    assert _floor("paradnn.frameworks") < _floor("paradnn.families.fc") < _floor("paradnn.record") \
        < _floor("paradnn.analysis.heatmap") < _floor("paradnn.runner") < _floor("paradnn.store.writer") \
        < _floor("paradnn.sweeper.loop") < _floor("paradnn.report") < _floor("paradnn.cli.run")
    # Each allowed climb is still there (else it is stale and goes).
    for name, target in CLIMBS:
        assert target in set(_paradnn_targets(name, MODULES[name])), (name, target)


#: The longest a module may be (lines): a longer one holds more than one job; split it by job.
MAX_MODULE_LINES = 600


def test_no_module_is_longer_than_one_job():
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
