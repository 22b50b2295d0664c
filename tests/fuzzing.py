"""The fuzzing suite's generators and harness (tests/test_fuzz.py; docs/reliability.md, "Fuzzing").

Everything here drives paradnn as a user does: the command line in this process
(:func:`run_cli`: ``paradnn.cli.main`` with stdout and stderr captured, so that an exception
that escapes is a traceback the user would have seen), or ``python -m paradnn`` in a child
(:func:`run_child`, for what must happen before the command line is parsed, such as loading
plug-ins). The stores are real SQLite files written by :class:`paradnn.store.Store` from real
:class:`paradnn.record.Record` values (:func:`template_store`), then changed the way a hostile
user or a failing disk would: a row's JSON edited with sqlite3 (:func:`mutate_row`), bytes
overwritten at an offset (:func:`damage`).

The properties every case is held to (:func:`check_outcome`): exit status 0, 1, 2 or 3 (3:
``compare``'s inconclusive); no traceback; exit 2 with exactly one ``paradnn: error:`` line on
stderr that says what is allowed; a read command leaves its input byte for byte as it was
(:func:`digest`); every file a command writes has the mode an ordinary ``open()`` gives under
the umask (:func:`check_modes`).

The number of generated cases per property is ``PARADNN_FUZZ_EXAMPLES`` (default
:data:`DEFAULT_EXAMPLES`, CI's bounded run); the generation is seeded (hypothesis'
``derandomize``), so a CI failure reproduces; a longer local run sets the variable (e.g. 500).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import math
import os
import sqlite3
import subprocess
import sys
import re
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
#: Cases per property in CI (a bounded, seeded run); ``PARADNN_FUZZ_EXAMPLES`` overrides.
DEFAULT_EXAMPLES = 25
#: Exit statuses a command may end with: ok, a failed run or regression, a usage error or an
#: environment fault, compare's inconclusive.
EXIT_STATUSES = (0, 1, 2, 3)


def examples(scale: float = 1.0) -> int:
    """Cases per property: ``PARADNN_FUZZ_EXAMPLES`` (or :data:`DEFAULT_EXAMPLES`) x ``scale``,
    at least 1 (a property whose cases are slow, such as the report, runs fewer)."""
    raw = os.environ.get("PARADNN_FUZZ_EXAMPLES")
    base = int(raw) if raw and raw.isdigit() else DEFAULT_EXAMPLES
    return max(1, int(base * scale))


def fuzz_settings(scale: float = 1.0) -> settings:
    """hypothesis settings of one property: :func:`examples` cases, seeded (``derandomize``: the
    same cases on every run, so a CI failure reproduces), no deadline (commands read stores and
    render figures), the database off (nothing written into the checkout), and no shrinking
    (a failing case of a command that reads a store is already small, and shrinking one took
    minutes: the bound on CI's time comes first; hypothesis prints the case as generated)."""
    return settings(max_examples=examples(scale), derandomize=True, deadline=None, database=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate],
                    suppress_health_check=list(HealthCheck))


#: Survey mode: the JSON-lines file named here collects every failing case instead of stopping at
#: the first (:func:`surveyed`); ``python tests/fuzzing.py summarize FILE`` groups them.
SURVEY_ENV = "PARADNN_FUZZ_SURVEY"


def surveyed(fn: Callable) -> Callable:
    """A property (below ``@given``) that, in survey mode (``$PARADNN_FUZZ_SURVEY`` names a
    file), records each failing case there (the test, the failure's first line, the case) and
    goes on, so that one run lists every class of failure a checkout has; otherwise it fails at
    its first failing case, as a test does."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        path = os.environ.get(SURVEY_ENV)
        if not path:
            fn(*args, **kwargs)
            return
        try:
            fn(*args, **kwargs)
        except AssertionError as exc:
            with open(path, "a", encoding="utf-8") as f:
                for line in findings_of(exc):
                    f.write(json.dumps({"test": fn.__name__, "finding": line[:400],
                                        "detail": str(exc)[-600:], "case": repr(kwargs)[:600]}) + "\n")
    return wrapper


#: The prefix of one line per failure that a property joins several of (tests/test_fuzz.py).
ONE_PER_LINE = "paradnn "


def findings_of(exc: AssertionError) -> list[str]:
    """The findings of one failing case, one line each: every line of a failure that lists
    several (each starting with :data:`ONE_PER_LINE`), else the failure's first line and its
    last (a traceback's exception) joined."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()] or [type(exc).__name__]
    if all(x.startswith(ONE_PER_LINE) for x in lines):
        return lines
    return [lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1]}"]


def finding_class(text: str) -> str:
    """A finding's class: its text with paths, numbers and quoted values blanked, so that one
    bug found with many inputs counts once."""
    text = re.sub(r"/tmp/\S+", "PATH", text)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return re.sub(r"\d+(\.\d+)?", "N", text)[:200]


def summarize(path: Path) -> list[tuple[str, str, int, dict[str, Any]]]:
    """(test, finding class, cases, an example) of a survey file, most frequent first."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    if not Path(path).exists():  # a survey without a failing case writes nothing
        return []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        found[(item["test"], finding_class(item["finding"]))].append(item)
    return sorted(((t, c, len(v), v[0]) for (t, c), v in found.items()), key=lambda x: -x[2])


# -- the harness ------------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    """What one command did: its exit status, what it printed, and the traceback of an
    exception that escaped ``main`` (None if none did)."""

    argv: list[str]
    code: int | None
    out: str
    err: str
    escaped: str | None


def run_cli(argv: Sequence[str], cwd: Path | None = None) -> Outcome:
    """``paradnn ARGV`` in this process (``paradnn.cli.main``), stdout and stderr captured; an
    exception that escapes ``main`` (a traceback the user would see) is caught and returned."""
    from paradnn.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    escaped, code = None, None
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in argv])
            except SystemExit as exc:  # argparse's usage error (2) or --help (0)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            except BaseException:  # noqa: BLE001 - the finding: a traceback reached the user
                escaped = traceback.format_exc()
    finally:
        os.chdir(old)
    return Outcome([str(a) for a in argv], code, out.getvalue(), err.getvalue(), escaped)


def run_child(argv: Sequence[str], env: dict[str, str], cwd: Path | None = None,
              timeout: float = 300) -> Outcome:
    """``python -m paradnn ARGV`` in a child process with ``env``."""
    done = subprocess.run([sys.executable, "-m", "paradnn", *map(str, argv)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=timeout)
    escaped = done.stderr if "Traceback (most recent call last)" in done.stderr else None
    return Outcome([str(a) for a in argv], done.returncode, done.stdout, done.stderr, escaped)


def check_outcome(o: Outcome) -> None:
    """The properties of every command's outcome (module notes); AssertionError naming the
    command line otherwise."""
    line = "paradnn " + " ".join(o.argv)
    assert o.escaped is None, f"{line}: a traceback reached the user:\n{o.escaped}"
    assert "Traceback (most recent call last)" not in o.err, f"{line}:\n{o.err}"
    assert o.code in EXIT_STATUSES, f"{line}: exit status {o.code}\n{o.err[-2000:]}"
    if o.code == 2:
        errors = [x for x in o.err.splitlines() if x.startswith("paradnn: error:")]
        assert len(errors) == 1, f"{line}: exit 2 needs one 'paradnn: error:' line:\n{o.err[-2000:]}"
        assert len(errors[0]) > len("paradnn: error: ") + 10, f"{line}: an empty error: {errors[0]!r}"


def digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes (None if it does not exist)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def check_modes(paths: Sequence[Path], umask: int) -> None:
    """Every file among ``paths`` (folders walked) has mode 0666 & ~umask, what an ordinary
    ``open()`` would give it."""
    want = 0o666 & ~umask
    for p in paths:
        p = Path(p)
        files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else []
        for f in files:
            if f.name.startswith(".paradnn-outputs"):
                continue  # the output guard's own ledger
            mode = f.stat().st_mode & 0o777
            assert mode == want, f"{f}: mode {oct(mode)}, want {oct(want)} under umask {oct(umask)}"


# -- stores -----------------------------------------------------------------------------------

PLATFORM = {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1, "host": "fuzz",
            "cpu_model": "fuzz cpu"}
SOFTWARE = {"paradnn_version": "0.1.0", "paradnn_revision": "git:fuzz", "framework_version": "0.12",
            "jax_version": "0.12", "jaxlib_version": "0.12", "flax_version": "0.12",
            "optax_version": "0.2", "python_version": "3.12", "xla_flags": ""}
SETTINGS = {"steps_per_call": 4, "warmup_calls": 1, "min_calls": 6, "max_calls": 40,
            "cv_target": 0.5, "time_budget_s": 2.0}


def _record(spec: Any, batch: int, median: float, when: str, rng: np.random.Generator) -> Any:
    """An ok record with real timing statistics (:class:`paradnn.measure.Timing` of generated
    per-call times) and the metrics a measured record carries."""
    from paradnn.measure import Timing
    from paradnn.record import Record
    from paradnn.sizes import param_count
    from paradnn.workload import Workload

    samples = median * np.exp(rng.normal(0.0, 0.02, 12))
    metrics = Timing(samples, 1.0, 4, 1, 0.1, 0.5, 2.0).stats()
    flops = 6.0 * batch * param_count(spec)
    metrics.update(examples_per_sec=batch / metrics["step_time_s"], model_flops_per_step=flops,
                   flops_per_step=flops * 1.05, flops_per_sec=flops * 1.05 / metrics["step_time_s"],
                   peak_flops=2e11, peak_bytes_per_sec=5e10, peak_source="measured", peak_id="fuzz",
                   peak_method="fuzz", arithmetic_intensity=10.0, bytes_per_step=flops / 10.0,
                   model_flops_utilization=flops / metrics["step_time_s"] / 2e11,
                   flops_utilization=flops * 1.05 / metrics["step_time_s"] / 2e11,
                   useful_flops_ratio=1 / 1.05, params=param_count(spec), compile_s=0.5,
                   steps_per_call_used=4, timed_calls=12, phase_total_s=3.0)
    return Record("ok", Workload(spec, batch).to_dict(), PLATFORM, SOFTWARE, SETTINGS, metrics,
                  time_utc=when)


def template_store(path: Path, slow: float = 1.0, day: int = 1) -> Path:
    """A real store of 14 ok records: 12 FC configs over nodes x batch (a heat map, a roofline,
    a sensitivity and a prediction can be drawn from it), one CNN and one RNN; ``slow`` times
    their step times and ``day`` their date (a second store of the same configs that
    ``paradnn compare`` finds regressed, every config listed)."""
    from paradnn.families.cnn import CNN
    from paradnn.families.fc import FC
    from paradnn.families.rnn import RNN
    from paradnn.store import Store

    rng = np.random.default_rng(0)
    with Store(path) as store:
        i = 0
        for nodes in (32, 64, 128, 256):
            for batch in (8, 32, 128):
                i += 1
                store.add(_record(FC(2, nodes, 64, 10), batch, slow * 1e-5 * nodes * batch ** 0.7,
                                  f"2026-01-{day:02d}T00:00:{i:02d}+00:00", rng))
        store.add(_record(CNN("residual", 1, 4, 32, 10), 4, slow * 2e-3, f"2026-01-{day:02d}T00:01:00+00:00", rng))
        store.add(_record(RNN("lstm", 1, 16, 4, 32), 4, slow * 1e-3, f"2026-01-{day:02d}T00:01:01+00:00", rng))
    return path


def rows_of(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(rowid, row) of every stored row, read with sqlite3 (no paradnn in between)."""
    con = sqlite3.connect(path)
    try:
        return [(i, json.loads(t)) for i, t in con.execute("SELECT id, row FROM records ORDER BY id")]
    finally:
        con.close()


def mutate_row(path: Path, rowid: int, field: str, value: Any, drop: bool = False) -> None:
    """Set (or, with ``drop``, remove) ``field`` of stored row ``rowid`` in its JSON, as an
    editor or another tool writing the file would; the indexed key column follows the row's
    ``key`` where that is what changed (a text key only: the column is TEXT NOT NULL)."""
    con = sqlite3.connect(path)
    try:
        (text,) = con.execute("SELECT row FROM records WHERE id = ?", (rowid,)).fetchone()
        row = json.loads(text)
        if drop:
            row.pop(field, None)
        else:
            row[field] = value
        con.execute("UPDATE records SET row = ? WHERE id = ?", (json.dumps(row, allow_nan=True), rowid))
        con.commit()
    finally:
        con.close()


def damage(path: Path, offset: int, data: bytes) -> None:
    """Overwrite the file's bytes at ``offset`` (modulo its length) with ``data``, as a failing
    disk or a truncated copy would."""
    raw = bytearray(Path(path).read_bytes())
    at = offset % max(1, len(raw))
    raw[at:at + len(data)] = data
    Path(path).write_bytes(bytes(raw))


# -- generated values -------------------------------------------------------------------------

#: Strings a hostile user or another tool puts where paradnn expects a number or a name.
NASTY_TEXT = ("many", "", " ", "nan", "inf", "-1", "1e309", "0x10", "<script>alert(1)</script>",
              "<img src=x onerror=alert(1)>", "| a | b |", "line\nbreak", "\u202e\u0000nul",
              "\U0001F4A5", "x" * 10_000, "../../etc/passwd", "${HOME}", "'; DROP TABLE records; --")


def hostile_values() -> st.SearchStrategy:
    """Values of every JSON kind with the edges that break readers: NaN and infinities, huge
    and negative numbers, booleans where numbers belong, lists, mappings, markup, long and
    control-character strings, None."""
    return st.one_of(
        st.sampled_from(NASTY_TEXT),
        st.text(max_size=40),
        st.integers(min_value=-2**70, max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([math.nan, math.inf, -math.inf, 0, -1, 1e308, 2**63, True, False, None]),
        # Plausible but wrong for this host or this field: more devices than it has, a huge grid.
        st.sampled_from([2, 3, 8, 64, 1000, 4096, 10**6, 0.5, "1000", "2"]),
        st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=3)), max_size=3),
        st.dictionaries(st.text(max_size=3), st.integers(-5, 5), max_size=2),
    )


#: Fields of a stored row the row fuzz changes: the spec, workload, platform, settings, status,
#: identity and metric fields that every reader touches.
ROW_FIELDS = ("family", "layers", "nodes", "input", "output", "batch", "dtype", "optimizer", "devices",
              "framework", "status", "stable", "step_time_s", "step_times_s", "examples_per_sec",
              "model_flops_utilization", "flops_utilization", "peak_flops", "peak_source",
              "arithmetic_intensity", "params", "warnings", "time_utc", "key", "workload_key",
              "device_kind", "device_platform", "cpu_model", "host", "error", "time_budget_s",
              "min_calls", "schema_version", "retry_of", "contended", "step_time_ci_low_s")


if __name__ == "__main__":  # python tests/fuzzing.py summarize FILE
    import argparse

    parser = argparse.ArgumentParser(description="group the findings of a fuzzing survey")
    parser.add_argument("verb", choices=["summarize"])
    parser.add_argument("file", type=Path)
    args = parser.parse_args()
    for test, klass, n, example in summarize(args.file):
        print(f"{n:4d}  {test}: {klass}\n      e.g. {example['case'][:200]}")
