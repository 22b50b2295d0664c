"""Plugins and the environment, as a hostile user meets them (docs/reliability.md, "Plugins and
the environment").

Plugins: a ``PARADNN_PLUGINS`` module that raises, has a syntax error or registers a framework
whose package is missing is one line naming the module and its error in every command, and in
the process executor's child processes (the sweep stops, storing nothing); a plugin cannot
silently take a built-in framework's or family's name (``replaces=True`` says so, and every
record it makes carries ``replaced_by``, in its key, while rows of the built-ins keep theirs);
a registry entry that cannot work is refused, and no message offers an empty list.

The environment: every ``PARADNN_*`` variable is checked before a command does anything, and an
unwritable cache folder (read-only, a file in the way) is one line naming the folder, the cause
and the remedy, before anything is measured or stored.

Everything runs for real: the ``paradnn`` command in subprocesses, plugin modules written to
files, read-only folders mounted read-only in a private mount namespace (``unshare -rm``; the
test machines run as root, for whom chmod does not stop a write).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import pytest
from helpers import TINY, child_env

from paradnn import backends, families, plugins
from paradnn.envcheck import VARIABLES, os_cause
from paradnn.errors import ParadnnError, SpecError
from paradnn.families.fc import FC
from paradnn.record import REPLACED_BY, Record, record_key, replaced_by, row_key

TESTS = Path(__file__).resolve().parent
TINY_RUN = ["fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "4", "--batch", "4",
            "--steps-per-call", "2", "--warmup-s", "0", "--min-calls", "6", "--max-calls", "6",
            "--ci-target", "0.5", "--time-budget-s", "0.2"]
SWEEP = """\
family: fc
layers: 1
nodes: 8
input: 8
output: 4
batch: 4
settings: {steps_per_call: 1, warmup_calls: 1, min_calls: 6, max_calls: 6, time_budget_s: 0.2}
"""


@dataclasses.dataclass(frozen=True)
class Lonely(FC):
    """The spec of a family that is not built in (FC's fields)."""

    family: ClassVar[str] = "lonely"


def cli(*args: object, environ: dict[str, str], prefix: list[str] = (), timeout: float = 300,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "paradnn", *map(str, args)],
                          capture_output=True, text=True, env=environ, timeout=timeout, cwd=cwd, check=False)


def one_error_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, one stderr line ``paradnn: error: ...`` holding ``words``, no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("paradnn: error: "), lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def with_plugins(folder: Path, modules: str, **extra: str | None) -> dict[str, str]:
    """The environment of a command whose ``PARADNN_PLUGINS`` is ``modules``, found in
    ``folder`` (and the toy framework's package in tests/); ``extra`` None removes a variable."""
    e = child_env(**{plugins.ENV: modules})
    e["PYTHONPATH"] = os.pathsep.join([str(folder), e["PYTHONPATH"]])
    for k, v in extra.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def write_module(folder: Path, name: str, code: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(code))
    return path


def stored_rows(store: Path) -> int:
    """Rows in a store file (0 where the command created none)."""
    if not store.exists():
        return 0
    with sqlite3.connect(store) as con:
        return con.execute("SELECT COUNT(*) FROM records").fetchone()[0]


# -- 1. a plugin that fails to load is one line, in every command and in child processes ---------

BAD_PLUGINS = {
    # module name -> (its code, words its error line must hold besides the module's name)
    "plug_raises": ("import os\nraise RuntimeError('boom in the plugin')\n",
                    ("RuntimeError: boom in the plugin", "plug_raises.py:2")),
    "plug_syntax": ("def broken(:\n    pass\n", ("SyntaxError", "plug_syntax.py:1")),
    "plug_nopkg": ("from paradnn import backends\nbackends.register('mlx', 'no_such_pkg_for_mlx')\n",
                   ("framework 'mlx'", "no_such_pkg_for_mlx", "ModuleNotFoundError", "plug_nopkg.py:2")),
    "plug_exits": ("import sys\nsys.exit(3)\n", ("SystemExit: 3", "plug_exits.py:2")),
}


def test_a_plugin_that_fails_to_load_is_one_line_in_every_command(tmp_path):
    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text(SWEEP)
    for name, (code, words) in BAD_PLUGINS.items():
        write_module(tmp_path, name, code)
        environ = with_plugins(tmp_path, name, PARADNN_CACHE=str(tmp_path / "cache"))
        for args in (["list"], ["run", *TINY_RUN], ["sweep", sweep_file, "--store", tmp_path / f"{name}.db"]):
            line = one_error_line(cli(*args, environ=environ), f"plugin module {name!r}", "PARADNN_PLUGINS", *words)
            assert len(line) < 1000, line
        assert stored_rows(tmp_path / f"{name}.db") == 0


def test_a_plugin_failure_is_remembered_in_the_process(tmp_path):
    """In a fresh process (a command, a child, a user's script): a plugin that failed fails
    every later lookup of either registry too, with the same one line, so nothing goes on
    without it (before: the registries counted as loaded and went on without the plugin)."""
    write_module(tmp_path, "plug_raises_once", "raise ValueError('first import fails')\n")
    script = textwrap.dedent("""\
        import json
        from paradnn import backends, families, plugins

        out = []
        for lookup in (families.names, backends.names, lambda: families.get("fc"), plugins.load_plugins):
            try:
                lookup()
                out.append("no error")
            except plugins.PluginError as exc:
                out.append(str(exc))
        print(json.dumps(out))
        """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=with_plugins(tmp_path, "plug_raises_once"), check=False)
    assert proc.returncode == 0, proc.stderr
    messages = json.loads(proc.stdout)
    assert len(messages) == 4 and len(set(messages)) == 1, messages
    assert "plugin module 'plug_raises_once'" in messages[0] and "ValueError: first import fails" in messages[0]


@pytest.mark.slow
def test_a_plugin_that_fails_only_in_a_child_stops_the_sweep_storing_nothing(tmp_path):
    """The parent loads the plugin; the executor's child cannot (here: the plugin refuses to
    run in a child). The child says so in one line, the sweep stops with it, and no config's
    row holds the plugin's error (before: one ``error`` row per config, with that message)."""
    write_module(tmp_path, "plug_child_only", """\
        import sys

        if sys.argv[0].endswith("child.py"):  # python -m paradnn.executors.child
            raise RuntimeError("this plugin fails in executor children")
        """)
    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text(SWEEP)
    store = tmp_path / "r.db"
    environ = with_plugins(tmp_path, "plug_child_only", PARADNN_CACHE=str(tmp_path / "cache"))
    one_error_line(cli("sweep", sweep_file, "--store", store, "--quiet", environ=environ),
                   "plugin module 'plug_child_only'", "RuntimeError: this plugin fails in executor children",
                   "plug_child_only.py:4")
    assert stored_rows(store) == 0


# -- 2. a built-in name is not taken silently --------------------------------------------------

def test_a_builtin_name_is_refused_unless_the_registration_says_replaces():
    torch_package = backends.BUILTIN["torch"]
    with pytest.raises(ParadnnError, match=r"framework 'jax' is built into paradnn.*replaces=True"):
        backends.register("jax", torch_package)
    assert backends.meta("jax").package == backends.BUILTIN["jax"] and backends.replaced_by("jax") is None
    with pytest.raises(SpecError, match=r"invalid replaces=True: allowed only with a built-in framework's name"):
        backends.register("jaxx", torch_package, replaces=True)
    assert "jaxx" not in backends.names()
    backends.register("jax", backends.BUILTIN["jax"])  # its own package: no clash, nothing marked
    assert backends.replaced_by("jax") is None

    fc = families.get("fc")
    with pytest.raises(ParadnnError, match=r"family 'fc' is built into paradnn.*replaces=True"):
        families.register(dataclasses.replace(fc, default_batch=lambda spec: 3))
    assert families.get("fc") is fc and families.replaced() == {}
    with pytest.raises(SpecError, match="only with a built-in family's name"):
        families.register(dataclasses.replace(fc, name="lonely", spec=Lonely), replaces=True)
    assert "lonely" not in families.names()
    # Teaching a built-in family to build in a new framework changes no built-in row: allowed,
    # and not a replacement (the toy framework's plugin does this).
    extended = dataclasses.replace(fc, builders={**fc.builders, "numpy": "toy_numpy.model:build_fc"})
    try:
        families.register(extended)
        assert families.get("fc") is extended and families.replaced() == {}
    finally:
        families.register(fc)
    assert families.get("fc") is fc
    assert replaced_by("jax") == {}  # this process replaced nothing: built-in rows get no field


def test_a_clashing_plugin_is_one_line_naming_it_and_the_way_to_replace(tmp_path):
    write_module(tmp_path, "plug_takes_jax", """\
        from paradnn import backends

        backends.register("jax", "paradnn.backends.torch")
        """)
    write_module(tmp_path, "plug_takes_fc", """\
        import dataclasses

        from paradnn import families

        families.register(dataclasses.replace(families.get("fc"), default_optimizer=lambda spec: "sgd"))
        """)
    how = "backends.register('jax', 'paradnn.backends.torch', replaces=True)"
    for name, words in (("plug_takes_jax", ("framework 'jax' is built into paradnn", how, "plug_takes_jax.py:3")),
                        ("plug_takes_fc", ("family 'fc' is built into paradnn", "replaces=True",
                                           "plug_takes_fc.py:5"))):
        environ = with_plugins(tmp_path, name, PARADNN_CACHE=str(tmp_path / "cache"))
        one_error_line(cli("list", environ=environ), f"plugin module {name!r}", *words)
        one_error_line(cli("run", *TINY_RUN, environ=environ), f"plugin module {name!r}", *words)


def test_rows_of_builtins_keep_their_keys_and_a_replacement_is_keyed():
    w = {"family": "fc", "layers": 1, "nodes": 8, "input": 8, "output": 4, "batch": 4, "dtype": "float32",
         "optimizer": "rmsprop", "devices": 1, "framework": "jax"}
    platform = {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1, "host": "h", "cpu_model": "x"}
    software = {"paradnn_version": "1", "framework_version": "0.4", "python_version": "3.11", "jax_version": "0.4",
                "jaxlib_version": "0.4", "xla_flags": ""}
    settings = TINY.to_dict("jax")
    builtin = Record("ok", w, platform, software, settings)
    # The key of a built-in row is what it always was: no replaced_by, not even as None.
    assert builtin.key == record_key(w, platform, software, settings) and REPLACED_BY not in builtin.to_dict()
    replaced = Record("ok", w, platform, {**software, REPLACED_BY: "framework jax: mylab.fastjax"}, settings)
    assert replaced.key != builtin.key
    # A store's table has the column on every row (NaN or None where unset): rebuilt keys match.
    for row, record in ((builtin.to_dict(), builtin), (replaced.to_dict(), replaced)):
        assert row_key(row) == record.key
        for missing in (None, math.nan):
            if REPLACED_BY not in row or row[REPLACED_BY] is None:
                assert row_key({**row, REPLACED_BY: missing}) == record.key


@pytest.mark.slow
def test_a_declared_replacement_is_recorded_in_every_row_and_resumes(tmp_path):
    """A plugin that says it replaces the built-in tensorflow with the toy numpy framework: its
    rows say so (``replaced_by``, in the key), a second sweep resumes them (the predicted keys
    carry the field too), and the jax rows of the same sweep are untouched."""
    write_module(tmp_path, "plug_numpy_as_tf", """\
        from paradnn import backends

        backends.register("tensorflow", "toy_numpy", replaces=True)
        """)
    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text(SWEEP.replace("batch: 4\n", "batch: 4\naxes: {framework: [jax, tensorflow]}\n"))
    store = tmp_path / "r.db"
    environ = with_plugins(tmp_path, "plug_numpy_as_tf", PARADNN_CACHE=str(tmp_path / "cache"))
    for _ in range(2):
        proc = cli("sweep", sweep_file, "--store", store, "--quiet", environ=environ, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    with sqlite3.connect(store) as con:
        rows = [json.loads(text) for (text,) in con.execute("SELECT row FROM records")]
    assert sorted(r["framework"] for r in rows) == ["jax", "tensorflow"]  # measured once: resumed
    by = {r["framework"]: r for r in rows}
    assert by["tensorflow"][REPLACED_BY] == "framework tensorflow: plug_numpy_as_tf"
    assert by["tensorflow"]["numpy_version"] and by["tensorflow"]["status"] == "ok"
    assert REPLACED_BY not in by["jax"]


# -- 3. an entry that cannot work is refused; no empty "one of" -----------------------------------

def test_a_family_no_framework_can_build_is_refused_and_no_message_lists_nothing(tmp_path):
    fc = families.get("fc")
    with pytest.raises(SpecError, match="invalid builders={}: allowed at least one framework"):
        families.register(dataclasses.replace(fc, builders={}), replaces=True)
    with pytest.raises(SpecError, match=r"builders\['jax'\]"):
        families.register(dataclasses.replace(fc, name="lonely", spec=Lonely, builders={"jax": "no-colon"}))
    assert families.get("fc") is fc and "lonely" not in families.names()

    # A family whose frameworks narrow a spec to none: the message says so, not "one of  for".
    lonely = families.register(dataclasses.replace(fc, name="lonely", spec=Lonely, builders=fc.framework_builders(),
                                                     frameworks=lambda spec: ()))
    try:
        with pytest.raises(SpecError) as info:
            families.builder(Lonely(1, 8, 8, 4), "jax")
        assert "one of  " not in str(info.value) and "none: no registered framework can build family lonely" in str(info.value)
    finally:
        families.unregister(lonely.name)

    write_module(tmp_path, "plug_empty_fc", """\
        import dataclasses

        from paradnn import families

        families.register(dataclasses.replace(families.get("fc"), builders={}), replaces=True)
        """)
    environ = with_plugins(tmp_path, "plug_empty_fc", PARADNN_CACHE=str(tmp_path / "cache"))
    line = one_error_line(cli("run", *TINY_RUN, environ=environ), "plugin module 'plug_empty_fc'", "builders")
    assert "one of  " not in line and "one of for" not in line


# -- 4, 5. an unwritable cache folder is one line: the folder, the cause, the remedy ----------------

def _namespace_works() -> bool:
    try:
        script = ("mount -t tmpfs tmpfs /mnt && mount --bind /mnt /mnt && "
                  "mount -o remount,bind,ro /mnt && ! touch /mnt/x 2>/dev/null")
        probe = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


needs_namespace = pytest.mark.skipif(
    not _namespace_works(), reason="needs `unshare -rm` (user + mount namespaces) to mount a "
    "read-only folder; chmod cannot make a folder read-only for root")


def read_only(folder: Path) -> list[str]:
    """A command prefix that runs the rest with ``folder`` bind-mounted read-only (EROFS)."""
    return ["unshare", "-rm", "sh", "-c",
            'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"',
            "sh", str(folder)]


@needs_namespace
def test_a_read_only_home_is_one_line_before_anything_is_measured(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    environ = child_env(HOME=str(home))
    environ.pop("PARADNN_CACHE", None)
    environ.pop("XDG_CACHE_HOME", None)
    folder = home / ".cache" / "paradnn"
    for args in (["probe"], ["run", *TINY_RUN, "--no-cache"], ["maxbatch", *TINY_RUN[:9]]):
        one_error_line(cli(*args, environ=environ, prefix=read_only(home)),
                       f"the probe cache folder {folder} is not writable", "Read-only file system",
                       "read-only", "set PARADNN_CACHE to a writable folder")
    assert list(home.iterdir()) == []


def test_a_cache_path_below_a_file_is_one_line_naming_the_file(tmp_path):
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("mine\n")
    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text(SWEEP)
    store = tmp_path / "r.db"
    # PARADNN_CACHE naming a file (or a folder below one): refused as the variable's value.
    for value in (a_file, a_file / "sub"):
        environ = child_env(PARADNN_CACHE=str(value))
        for args in (["probe"], ["run", *TINY_RUN], ["sweep", sweep_file, "--store", store], ["list"]):
            one_error_line(cli(*args, environ=environ), f"invalid PARADNN_CACHE='{value}'",
                           f"{a_file} is a file, not a folder", "allowed a folder")
    # The default folder below a file (HOME is a file): named with the cause and the remedy.
    environ = child_env(HOME=str(a_file))
    environ.pop("PARADNN_CACHE", None)
    environ.pop("XDG_CACHE_HOME", None)
    for args in (["probe"], ["run", *TINY_RUN, "--no-cache"]):
        one_error_line(cli(*args, environ=environ), f"the probe cache folder {a_file}/.cache/paradnn",
                       f"a file is where a folder should be ({a_file})", "set PARADNN_CACHE")
    assert a_file.read_text() == "mine\n" and stored_rows(store) == 0


def test_os_cause_is_classified_from_the_errno(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("")
    for target, cause in ((a_file / "sub", f"a file is where a folder should be ({a_file})"),
                          (a_file, f"a file is where a folder should be ({a_file})")):
        try:
            target.mkdir(parents=True)
        except OSError as exc:
            assert cause in os_cause(exc), os_cause(exc)
        else:
            pytest.fail(f"{target} was created")
    try:
        Path("/proc/paradnn-test").mkdir()
    except OSError as exc:  # a file system where nobody creates files: the system's own words
        assert os_cause(exc).startswith(exc.strerror)
    # The classification reads the number, whatever the text says.
    assert os_cause(OSError(errno.EROFS, "whatever the C library says")).endswith("the file system is mounted read-only")
    assert os_cause(OSError(errno.ENOSPC, "x")).endswith("the disk is full")


# -- 6. every PARADNN_* variable is checked before anything runs ----------------------------------

BAD_VALUES = {
    "PARADNN_PROBE_MAX_CV": ("abc", "a positive number"),
    "PARADNN_PROBE_MAX_LOAD": ("-1", "a positive number"),
    "PARADNN_PROBE_BUDGET_S": ("nan", "a positive number of seconds"),
    "PARADNN_RETRY_UNSTABLE_S": ("soon", "a finite number"),
    "PARADNN_CACHE": ("", "a folder"),
    "PARADNN_PLUGINS": ("not a/module", "module name"),
    "PARADNN_CPUS_MEASURE": ("4096", "CPU numbers"),
    "PARADNN_CPUS_PREPARE": ("0-x", "CPU numbers"),
    "PARADNN_TF_INTRA_OP_THREADS": ("0", "a positive integer"),
    "PARADNN_TF_INTER_OP_THREADS": ("many", "a positive integer"),
}


def test_every_variable_paradnn_reads_has_a_bad_value_case():
    """Each variable of paradnn.envcheck.VARIABLES (but PARADNN_DEBUG, any value) is tried
    below; and each PARADNN_* name in paradnn's source is one of them."""
    import re

    assert set(VARIABLES) - {"PARADNN_DEBUG"} == set(BAD_VALUES)
    source = "\n".join(p.read_text() for p in (TESTS.parent / "paradnn").rglob("*.py"))
    # Whole names only ("PARADNN_PROBE_*" in a comment is the family of three variables).
    named = set(re.findall(r"PARADNN_[A-Z0-9_]+(?![A-Z0-9_*])", source))
    assert named <= set(VARIABLES), named - set(VARIABLES)


def test_a_bad_variable_is_one_line_before_any_measurement(tmp_path):
    """Before: PARADNN_PROBE_MAX_CV=abc was refused after the run and a 20 s probe."""
    cache = tmp_path / "cache"
    for name, (value, allowed) in BAD_VALUES.items():
        environ = child_env(**{"PARADNN_CACHE": str(cache), name: value})
        one_error_line(cli("run", *TINY_RUN, environ=environ, timeout=120), name, repr(value), allowed)
    assert not cache.exists()  # nothing measured, nothing probed
