"""The framework registry and the import boundary: every framework is a package under
paradnn/backends/ (the only importer of its framework), the core imports none, frameworks and
their options are read from the registry, and plugins named in $PARADNN_PLUGINS register."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import paradnn
from paradnn import backends, plugins
from paradnn.errors import ParadnnError, SpecError
from paradnn.measure import SETTINGS_FIELDS, MeasureSettings, parse_setting

PACKAGE = Path(paradnn.__file__).parent
#: Every framework runtime, by the top-level module names it is imported under.
FRAMEWORK_MODULES = ("jax", "jaxlib", "flax", "optax", "tensorflow", "keras", "torch", "torchvision")
#: Which built-in framework package owns which runtime modules.
OWNERS = {"jax": ("jax", "jaxlib", "flax", "optax"), "tensorflow": ("tensorflow", "keras"),
          "torch": ("torch", "torchvision")}
#: Imports of another framework's runtime that a backend package makes, with the reason.
CROSS_IMPORTS = {
    # XLA's cost model of TensorFlow's HLO is reached through jax.extend (the public route;
    # TensorFlow exposes no cost analysis of its XLA programs).
    ("tensorflow", "jax"): "backends/tensorflow/backend.py: XLA cost analysis through jax.extend",
}


def _core_modules() -> list[str]:
    """Every module of paradnn except the modules of the framework packages (their
    ``__init__`` and ``options`` modules are core: the registry reads them)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[:2] == ("paradnn", "backends") and len(parts) > 3 and parts[3] not in ("__init__", "options"):
            continue
        if parts[-1] == "__main__":
            continue
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


@pytest.mark.slow
def test_core_modules_import_no_framework():
    """A fresh interpreter imports every core module (the CLI, store, analyses, report, runner,
    executors, the registry with every framework's metadata and options) and no framework."""
    modules = _core_modules()
    assert "paradnn.runner" in modules and "paradnn.backends.jax.options" in modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            "from paradnn import backends\n"
            "[backends.meta(n) for n in backends.names()]\n"
            "import paradnn.cli; paradnn.cli.build_parser()\n"
            f"print(sorted(m for m in {FRAMEWORK_MODULES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_only_a_framework_package_imports_its_framework():
    """Anywhere in paradnn (module level or inside functions): jax, flax, optax only under
    backends/jax/, tensorflow and keras only under backends/tensorflow/, torch only under
    backends/torch/ (and the listed cross imports)."""
    owner_of = {m: fw for fw, mods in OWNERS.items() for m in mods}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).parts
        package = rel[1] if rel[0] == "backends" and len(rel) > 2 else None
        for root in _imported_roots(path) & set(owner_of):
            if owner_of[root] != package and (package, owner_of[root]) not in CROSS_IMPORTS:
                found.append(f"{'/'.join(rel)} imports {root}")
    assert found == []


def test_registry_lists_the_frameworks_and_reads_their_packages():
    assert backends.names()[:3] == ("jax", "tensorflow", "torch")
    assert paradnn.families.FRAMEWORKS[:3] == ["jax", "tensorflow", "torch"] or \
        tuple(paradnn.families.FRAMEWORKS)[:3] == ("jax", "tensorflow", "torch")
    jax = backends.meta("jax")
    assert jax.package == "paradnn.backends.jax" and "jax_version" in jax.software_fields
    assert backends.option_names("jax") == ("step_loop", "xla_preset", "matmul_precision")
    assert backends.option_names("torch") == ("torch_compile", "matmul_precision", "cpu_allocator", "memory_format")
    assert backends.option_names("tensorflow") == ("step_loop", "matmul_precision")
    assert backends.meta("torch").extra == "torch" and "tensorflow" in backends.meta("torch").exclusive_with
    with pytest.raises(SpecError, match="framework='caffe'"):
        backends.meta("caffe")
    with pytest.raises(SpecError, match="lower-case identifier"):
        backends.register("Not A Name", "x")


def test_options_are_settings_generated_from_the_registry():
    """MeasureSettings holds the protocol; each framework's options are parsed by its options
    class, read as attributes, and a record keeps only its own framework's."""
    assert "xla_preset" in SETTINGS_FIELDS and "torch_compile" in SETTINGS_FIELDS
    s = MeasureSettings(steps_per_call=2, torch_compile="eager")
    assert s.torch_compile == "eager" and s.xla_preset == "best"  # the default of an option not given
    assert s.options_for("torch").torch_compile == "eager"
    assert set(s.to_dict("jax")) >= {"xla_preset", "step_loop"} and "torch_compile" not in s.to_dict("jax")
    assert "xla_preset" not in s.to_dict("torch") and s.to_dict("torch")["torch_compile"] == "eager"
    assert s.replace(step_loop="host").options_for("tensorflow").step_loop == "host"
    assert parse_setting("stock", "xla_preset") == "stock"
    with pytest.raises(SpecError, match="torch_compile='fast'"):
        MeasureSettings(torch_compile="fast")
    with pytest.raises(SpecError, match="invalid setting='bogus'.*time_budget_s.*torch_compile"):
        MeasureSettings(bogus=1)


def test_cli_flags_come_from_the_registered_options():
    from paradnn.cli import build_parser

    text = build_parser()._subparsers._group_actions[0].choices["run"]
    fc = next(a for a in text._actions if a.dest == "family").choices["fc"]
    flags = {o for a in fc._actions for o in a.option_strings}
    assert {"--xla-preset", "--step-loop", "--torch-compile", "--time-budget-s"} <= flags
    framework = next(a for a in fc._actions if a.dest == "framework")
    assert tuple(framework.choices) == (*backends.names(), "best")  # best: paradnn.beststack


def test_record_key_ignores_other_frameworks_options():
    """A sweep predicts keys from settings holding every framework's options; a record keeps
    its own: both give one key."""
    from paradnn.record import Record

    w = paradnn.Workload(paradnn.FC(1, 4, 4, 2), 2, framework="torch").to_dict()
    s = MeasureSettings(torch_compile="eager")
    every = Record("ok", w, {}, {}, s.to_dict())
    own = Record("ok", w, {}, {}, s.to_dict("torch"))
    assert every.key == own.key
    assert Record("ok", w, {}, {}, MeasureSettings().to_dict("torch")).key != own.key


def test_a_backend_without_a_capability_says_so():
    with pytest.raises(ParadnnError, match="framework 'torch' cannot run operator micro-benchmarks"):
        backends.capability("torch", "op_program", "run operator micro-benchmarks")


def test_plugins_are_imported_from_the_environment(monkeypatch, tmp_path):
    (tmp_path / "my_plugin_mod.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(plugins.ENV, " my_plugin_mod , ")
    assert plugins.load_plugins() == ["my_plugin_mod"]
    assert plugins.load_plugins() == []  # once per process
    monkeypatch.setenv(plugins.ENV, "no_such_plugin_module")
    with pytest.raises(ParadnnError, match="PARADNN_PLUGINS='no_such_plugin_module'"):
        plugins.load_plugins()
    monkeypatch.setenv(plugins.ENV, "not a/module")
    with pytest.raises(ParadnnError, match="is not a module name"):
        plugins.load_plugins()


@pytest.mark.slow
def test_a_bad_plugin_is_one_line_on_the_command_line(paradnn_cmd):
    env = {**os.environ, plugins.ENV: "no_such_plugin_module"}
    out = subprocess.run([*paradnn_cmd, "list"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2 and "PARADNN_PLUGINS" in out.stderr and "Traceback" not in out.stderr


def test_sweep_files_take_the_frameworks_options_as_settings(tmp_path):
    from paradnn.grids import load_sweep_file

    path = tmp_path / "sweep.yaml"
    path.write_text("family: fc\naxes: {nodes: [8], batch: [4], framework: [jax, torch]}\n"
                    "fixed: {layers: 1, input: 8, output: 4}\n"
                    "settings: {xla_preset: stock, torch_compile: eager, steps_per_call: 2}\n")
    settings = MeasureSettings(**load_sweep_file(path).settings)
    assert settings.options_for("jax").xla_preset == "stock"
    assert settings.to_dict("torch")["torch_compile"] == "eager" and "xla_preset" not in settings.to_dict("torch")
    path.write_text("family: fc\naxes: {nodes: [8], batch: [4]}\nfixed: {layers: 1, input: 8, output: 4}\n"
                    "settings: {torch_compile: fastest}\n")
    with pytest.raises(ParadnnError, match="settings.torch_compile.*allowed one of default, eager"):
        load_sweep_file(path)
