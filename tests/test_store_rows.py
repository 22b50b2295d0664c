"""What a store's content can do to the commands that read it, and what a failed command leaves.

Real SQLite stores, written by ``paradnn.store.Store`` and then edited the way a hostile user
(or a bug, or another tool) would: a row's JSON rewritten with sqlite3, a page of the file
zeroed. The commands run as the user runs them, ``python -m paradnn`` in a subprocess:

* a row whose field has the wrong type is unreadable, named in the store's one warning, and
  every reading command exits 0 without a traceback (paradnn.rowschema);
* a zero-byte file is a store with no rows to every command;
* reading a store leaves its folder as it was (no -wal/-shm files), and a command that fails
  before writing a row leaves no new store;
* two stores that give one key and time two different rows are said so when read together;
* a store whose records table cannot take a row is refused before anything is measured.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from helpers import SMALL_FILE, child_env, paradnn_messages
from paradnn import FC, ParadnnError, Workload
from paradnn.errors import ParadnnWarning, SpecError, StoreError
from paradnn.record import Record
from paradnn.rowschema import read_row, row_schema
from paradnn.store import DAMAGE_ATTR, Store, check_store, load, merge

PLATFORM = {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1, "host": "h1",
            "cpu_model": "test"}
SOFTWARE = {"paradnn_version": "0", "framework_version": "0", "jax_version": "0",
            "python_version": "3.11"}
SETTINGS = {"steps_per_call": 2, "warmup_calls": 1, "min_calls": 6, "max_calls": 6,
            "cv_target": 0.02, "time_budget_s": 0.2}
T0 = "2026-01-01T00:00:00+00:00"


def record(nodes: int, t: str = T0, step: float = 0.008) -> Record:
    """An ok FC record with per-call step times (what compare tests) and a few metrics."""
    w = Workload(FC(layers=2, nodes=nodes, input=64, output=10), batch=8)
    times = [step * (1 + 0.001 * i) for i in range(8)]
    metrics = {"examples_per_sec": 8 / step, "step_time_s": step, "step_times_s": times,
               "timed_calls": len(times), "params": nodes * 100, "stable": True,
               "peak_source": "measured"}
    return Record(status="ok", workload=w.to_dict(), platform=PLATFORM, software=SOFTWARE,
                  settings=SETTINGS, metrics=metrics, time_utc=t)


def make_store(path: Path, nodes: list[int], t: str = T0, step: float = 0.008) -> list[Record]:
    recs = [record(n, t, step) for n in nodes]
    with Store(path) as s:
        for r in recs:
            s.add(r)
    return recs


def edit_row(path: Path, rowid: int, **fields: str) -> None:
    """Set fields of a stored row to JSON *text* (so NaN, Infinity and any JSON can be planted),
    through SQLite, as a user with the sqlite3 shell would."""
    con = sqlite3.connect(path)
    (text,) = con.execute("SELECT row FROM records WHERE id = ?", (rowid,)).fetchone()
    for name, value in fields.items():
        row = json.loads(text)
        if name in row:
            row[name] = "@@"
        else:
            row = {**row, name: "@@"}
        text = json.dumps(row).replace('"@@"', value, 1)
    con.execute("UPDATE records SET row = ? WHERE id = ?", (text, rowid))
    con.commit()
    con.close()


def cli(*args: object, cwd: Path, **environ: str) -> subprocess.CompletedProcess:
    """``python -m paradnn ARGS`` in ``cwd``, its caches in a hidden folder there."""
    env = child_env(PARADNN_CACHE=str(cwd / ".cache"), **environ)
    return subprocess.run([sys.executable, "-m", "paradnn", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


def warning_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("paradnn: warning: ")]


def folder(path: Path) -> list[str]:
    """The names in ``path``, the commands' hidden cache folder left out."""
    return sorted(p.name for p in path.iterdir() if p.name != ".cache")


# -- 1. one typed reader for record rows -------------------------------------------------------

#: Fields planted in the rows of a store (row id -> JSON text of the field), and the field a
#: warning must name for each row that becomes unreadable.
HOSTILE = {
    1: ({"nodes": '"many"'}, "nodes='many'"),
    2: ({"batch": "[1, 2]"}, "batch=[1, 2]"),
    3: ({"examples_per_sec": '{"a": 1}'}, "examples_per_sec={'a': 1}"),
    4: ({"layers": "NaN"}, "layers=nan"),
    5: ({"device_count": "Infinity"}, "device_count=inf"),
    6: ({"batch": "100000000000000000000000000000"}, "batch=100000000000000000000000000000"),
    7: ({"step_times_s": '{"x": 1}'}, "step_times_s={'x': 1}"),
    8: ({"stable": '"maybe"'}, "stable='maybe'"),
    9: ({"status": "[1]"}, "status=[1]"),
}
#: Rows whose odd content is readable: coerced to its type, or kept as it is.
READABLE = {
    10: {"nodes": '"48"', "batch": "8.0", "examples_per_sec": '"1e3"', "params": "NaN"},
    11: {"host": json.dumps("<script>alert(1)</script>" * 40_000),  # 1 MB of markup
         "future_metric": "7", "future_note": '"new"', "future_list": "[1, 2]"},
}


@pytest.fixture
def hostile_store(tmp_path) -> tuple[Path, list[Record]]:
    db = tmp_path / "hostile.db"
    recs = make_store(db, list(range(32, 32 + 12)))
    for rowid, (fields, _) in HOSTILE.items():
        edit_row(db, rowid, **fields)
    for rowid, fields in READABLE.items():
        edit_row(db, rowid, **fields)
    return db, recs


def test_rows_of_the_wrong_type_are_unreadable_named_and_not_measured(hostile_store):
    db, recs = hostile_store
    with pytest.warns(ParadnnWarning) as caught:
        df = load(db)
    (message,) = paradnn_messages(caught)
    assert message.startswith(f"store {db}: ")
    assert f"{len(HOSTILE)} row(s) cannot be read" in message
    # Each unreadable row: its key, row id, field, value and what is allowed (the warning names
    # the first five; the frame's attrs list every one).
    for rowid in list(HOSTILE)[:5]:
        assert f"key '{recs[rowid - 1].key}' (row id {rowid})" in message, message
        assert HOSTILE[rowid][1] in message, (HOSTILE[rowid][1], message)
    assert "allowed an integer" in message and "allowed a number" in message
    lost = {u["rowid"]: u for u in df.attrs[DAMAGE_ATTR]["unreadable"]}
    assert set(lost) == set(HOSTILE)
    for rowid, (_, named) in HOSTILE.items():
        assert lost[rowid]["cause"] == "wrong type" and named in lost[rowid]["detail"], lost[rowid]
        assert lost[rowid]["key"] == recs[rowid - 1].key
    # The readable rows: coerced to their types, odd but typed content kept.
    assert len(df) == 12 - len(HOSTILE)
    by_id = {row["key"]: row for row in df.to_dict("records")}
    coerced = by_id[recs[9].key]
    assert coerced["nodes"] == 48 and coerced["batch"] == 8
    assert coerced["examples_per_sec"] == 1000.0
    assert math.isnan(coerced["params"])  # NaN for a number: missing, as the writer stores it
    kept = by_id[recs[10].key]
    assert kept["host"].startswith("<script>") and kept["future_metric"] == 7
    assert kept["future_note"] == "new" and kept["future_list"] == "[1, 2]"  # a list: its JSON text
    assert df["nodes"].map(type).isin([int, float]).all()  # one type per column
    # Unreadable rows count as not measured: a sweep's claim hands their configs out again.
    with pytest.warns(ParadnnWarning), Store(db) as s:
        counts = s.counts_by_key()
        for rowid in HOSTILE:
            assert recs[rowid - 1].key not in counts
            assert s.claim(recs[rowid - 1].key, wanted=1, stale_after_s=60) is not None
        assert s.claim(recs[11].key, wanted=1, stale_after_s=60) is None


def test_every_reading_command_exits_0_on_rows_of_the_wrong_type(hostile_store, tmp_path):
    db, recs = hostile_store
    new = tmp_path / "new.db"
    make_store(new, list(range(32, 32 + 12)), t="2026-02-01T00:00:00+00:00")
    runs = {
        "status": cli("status", db, cwd=tmp_path),
        "export csv": cli("export", db, "-o", tmp_path / "rows.csv", cwd=tmp_path),
        "export parquet": cli("export", db, "-o", tmp_path / "rows.parquet", cwd=tmp_path),
        "report": cli("report", db, "-o", tmp_path / "report", cwd=tmp_path),
        "compare": cli("compare", db, new, cwd=tmp_path),
    }
    for name, proc in runs.items():
        no_traceback(proc)
        assert proc.returncode == 0, (name, proc.returncode, proc.stderr)
        (line,) = warning_lines(proc)  # one warning line for the store, however often it is read
        assert f"store {db}: damaged: {len(HOSTILE)} row(s) cannot be read" in line, (name, line)
        assert "nodes='many'" in line, (name, line)
    status = runs["status"].stdout
    assert "unreadable: wrong type: 9 row(s)" in status and "nodes='many'" in status, status
    parquet = pd.read_parquet(tmp_path / "rows.parquet")
    assert len(parquet) == 12 - len(HOSTILE) == len(pd.read_csv(tmp_path / "rows.csv"))
    assert set(parquet["nodes"]) == {48, 43, 42}
    assert (tmp_path / "report" / "index.html").is_file()
    assert "<script>alert(1)</script>" not in (tmp_path / "report" / "index.html").read_text()


def test_parquet_takes_an_extra_field_of_mixed_types(tmp_path):
    """A field no registry declares is kept as it is; text in one row and a number in another
    (or an integer past 64 bits) cannot be a Parquet column of one type: it is written as text."""
    db = tmp_path / "r.db"
    make_store(db, [32, 33, 34])
    edit_row(db, 1, extra='"text"')
    edit_row(db, 2, extra="5", huge="100000000000000000000000000000")
    out = tmp_path / "rows.parquet"
    proc = cli("export", db, "-o", out, cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    table = pd.read_parquet(out)
    assert list(table["extra"][:2]) == ["text", "5"] and pd.isna(table["extra"][2])
    assert table["huge"][1] == "100000000000000000000000000000"


def test_the_reader_coerces_or_refuses_each_kind():
    schema = row_schema()
    base = {"key": "k", "status": "ok", "time_utc": T0, "family": "fc"}

    def read(**fields):
        return read_row({**base, **fields}, schema)

    assert read(nodes=" 32 ", batch=8.0, devices="2")["nodes"] == 32
    assert read(batch="1e3")["batch"] == 1000
    assert read(examples_per_sec="2.5", params=12)["examples_per_sec"] == 2.5
    assert read(examples_per_sec=float("inf"))["examples_per_sec"] is None
    assert read(params=10**30)["params"] == 1e30  # a number past 64 bits: its magnitude
    assert read(stable=1)["stable"] is True and read(contended=0.0)["contended"] is False
    assert read(step_times_s="[0.1, 2]")["step_times_s"] == [0.1, 2.0]
    assert read(device_kind=3.5, python_version=3)["device_kind"] == "3.5"
    assert read(cell="lstm")["cell"] == "lstm"  # another family's field, of its type
    assert read(min_calls=2)["min_calls"] == 2  # an older row's setting below today's minimum
    assert read(stop_rule="newer-rule")["stop_rule"] == "newer-rule"  # a newer row's choice
    assert read(new_field={"a": 1})["new_field"] == '{"a": 1}'
    refused = {"nodes": 2.5, "batch": True, "devices": 2**63, "layers": float("nan"),
               "dtype": ["float32"], "examples_per_sec": "fast", "stable": 2,
               "step_times_s": [0.1, None], "framework": False, "time_budget_s": {"s": 1}}
    for name, value in refused.items():
        with pytest.raises(SpecError, match=f"invalid {name}=") as info:
            read(**{name: value})
        assert info.value.parameter == name and info.value.allowed
    original = {**base, "nodes": "32"}
    read_row(original, schema)
    assert original["nodes"] == "32"  # the caller's row is not changed


def test_real_rows_of_every_kind_read_back_unchanged():
    """The schema must not refuse what paradnn itself writes: the golden stores of older
    versions and a real CPU sweep's rows read back exactly as stored."""
    from helpers import ROOT

    schema = row_schema()
    seen = 0
    for db in sorted((ROOT / "tests" / "data").glob("*.db")):
        con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
        for (text,) in con.execute("SELECT row FROM records"):
            row = json.loads(text)
            assert read_row(row, schema) == row, (db.name, row.get("key"))
            seen += 1
        con.close()
    assert seen >= 10


# -- 2. a zero-byte store ----------------------------------------------------------------------

def test_a_zero_byte_file_is_a_store_without_rows_to_every_command(tmp_path):
    empty = tmp_path / "touched.db"
    empty.touch()
    assert len(load(empty)) == 0
    status = cli("status", empty, cwd=tmp_path)
    no_traceback(status)
    assert status.returncode == 0 and "0 rows" in status.stdout, status.stderr
    assert "nothing measured yet" in status.stdout
    (tmp_path / "s.yaml").write_text(SMALL_FILE)
    plan = cli("plan", tmp_path / "s.yaml", "--store", empty, cwd=tmp_path)
    no_traceback(plan)
    assert plan.returncode == 0, plan.stderr
    other = tmp_path / "other.db"
    make_store(other, [32])
    assert merge([empty, other], tmp_path / "m.db") == (1, 0)
    assert empty.stat().st_size == 0  # no reader wrote to it
    assert check_store(empty) == str(empty)  # a sweep adopts it
    with Store(empty) as s:
        s.add(record(40))
    assert list(load(empty)["nodes"]) == [40]
    assert cli("status", tmp_path / "missing.db", cwd=tmp_path).returncode == 2  # missing: refused


# -- 3. reads leave the folder as they found it; failures leave no new store ------------------

def test_reading_commands_leave_no_wal_or_shm_files(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db = data / "s.db"
    make_store(db, [32, 33])
    before, content = folder(data), db.read_bytes()
    assert before == ["s.db"]
    (tmp_path / "s.yaml").write_text(SMALL_FILE)
    for args in (["status", db], ["export", db, "-o", tmp_path / "x.csv"],
                 ["report", db, "-o", tmp_path / "report"],
                 ["plan", tmp_path / "s.yaml", "--store", db]):
        proc = cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, (args, proc.stderr)
        assert folder(data) == before, (args[0], folder(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ParadnnWarning)
        assert len(load(db)) == 2
    assert folder(data) == before and db.read_bytes() == content
    # A store another process has open keeps its -wal and -shm: they are that process's.
    with Store(db) as s:
        s.add(record(34))
        assert len(load(db)) == 3
        assert (data / "s.db-wal").exists()
    assert folder(data) == before  # the writer's last close removed them


def test_a_store_made_by_a_block_that_fails_before_a_row_is_taken_away(tmp_path):
    new = tmp_path / "sub" / "dir" / "new.db"
    with pytest.raises(RuntimeError), Store(new):
        raise RuntimeError("the executor cannot start")
    assert not (tmp_path / "sub").exists()  # neither the store nor the folders made for it
    touched = tmp_path / "touched.db"
    touched.touch()
    with pytest.raises(RuntimeError), Store(touched):
        raise RuntimeError
    assert folder(tmp_path) == ["touched.db"] and touched.stat().st_size == 0
    kept = tmp_path / "kept.db"
    with pytest.raises(RuntimeError), Store(kept) as s:
        s.add(record(32))
        raise RuntimeError  # after a row: the store stays, with its row
    assert len(load(kept)) == 1
    existing = tmp_path / "existing.db"
    Store(existing).close()  # a store with no rows, made by a block that ended well: it stays
    with pytest.raises(RuntimeError), Store(existing):
        raise RuntimeError
    assert existing.exists()


def test_a_new_store_another_process_has_open_is_never_taken_away(tmp_path):
    """Two sweeps started together on a new store: the one that fails must not remove the file
    the other is writing."""
    new = tmp_path / "shared.db"
    code = textwrap.dedent(f"""
        import sys
        from test_store_rows import record
        from paradnn.store import Store
        with Store({str(new)!r}) as s:
            print("open", flush=True)
            sys.stdin.readline()
            s.add(record(99))
        print("added", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert child.stdout.readline().strip() == "open"
        with pytest.raises(RuntimeError), Store(new):
            raise RuntimeError
        assert new.exists()
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "added"
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert list(load(new)["nodes"]) == [99]


def test_failed_commands_leave_no_new_store(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_store(a, [32, 33])
    make_store(b, [32, 33])
    edit_row(b, 2, examples_per_sec="1.5")  # same key and time as a's row 2, another value
    out = tmp_path / "out" / "merged.db"
    proc = cli("merge", a, b, "-o", out, cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2 and "share key and time" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
    # A sweep whose config meets a fault of the environment (an OSError) before any row.
    from paradnn.sweeper import sweep

    new = tmp_path / "sweep" / "new.db"
    with pytest.raises(ParadnnError):
        sweep([Workload(FC(1, 8, 8, 2), 4)], store=new, executor="inprocess",
              run_fn=_environment_fault, cache_dir=None, progress=False)
    assert not (tmp_path / "sweep").exists()


def _environment_fault(workload, settings, memory_limit_bytes):
    raise OSError(30, "Read-only file system")


# -- 4. two stores, one key and time, two rows -------------------------------------------------

def test_two_stores_with_different_rows_under_one_identity_say_so(tmp_path):
    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    make_store(a, [32, 33, 34])
    make_store(b, [32, 33, 34])
    make_store(c, [32])  # the same rows as a's first: no conflict
    edit_row(b, 2, examples_per_sec="1.5")
    edit_row(b, 3, examples_per_sec="2.5")
    with pytest.warns(ParadnnWarning) as caught:
        df = load([a, b, c])
    (message,) = paradnn_messages(caught)
    assert f"stores {a}, {b}: 2 row(s) share key and time" in message, message
    assert str(c) not in message
    assert len(df) == 5  # both rows of each conflicting pair kept, identical rows once
    with warnings.catch_warnings():
        warnings.simplefilter("error", ParadnnWarning)
        assert len(load([a, c])) == 3
    for args in (["status", a, b], ["report", a, b, "-o", tmp_path / "report"]):
        proc = cli(*args, cwd=tmp_path)
        no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
        (line,) = warning_lines(proc)
        assert "2 row(s) share key and time with a different row of another store" in line
    with pytest.raises(StoreError, match="share key and time"):
        merge([a, b], tmp_path / "m.db")  # merge refuses what load warns about


# -- 5. a records table that cannot take a row -------------------------------------------------

def zero_records_root(db: Path) -> None:
    con = sqlite3.connect(db)
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'records'").fetchone()
    (size,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * size)
        f.write(bytes(size))


def test_a_damaged_records_root_is_refused_before_anything_is_measured(tmp_path):
    db = tmp_path / "r.db"
    make_store(db, [32, 33, 34])
    zero_records_root(db)
    content = db.read_bytes()
    for opening in (lambda: check_store(db), lambda: Store(db)):
        with pytest.raises(StoreError, match="damaged where a new row goes") as info:
            opening()
        assert "restore it from a copy" in str(info.value)
    (tmp_path / "s.yaml").write_text(SMALL_FILE)
    t0 = time.monotonic()
    proc = cli("sweep", tmp_path / "s.yaml", "--store", db, "--quiet", cwd=tmp_path)
    no_traceback(proc)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "records table is damaged where a new row goes" in lines[0]
    assert "nothing was measured or written" in lines[0] and "restore it from a copy" in lines[0]
    assert time.monotonic() - t0 < 60 and "measured now" not in proc.stdout
    assert db.read_bytes() == content and folder(tmp_path) == ["r.db", "s.yaml"]
    # Reading it still works (what can be read is read, with the warning).
    status = cli("status", db, cwd=tmp_path)
    no_traceback(status)
    assert status.returncode == 0 and warning_lines(status), status.stderr


def test_a_store_whose_last_page_reads_stays_writable(tmp_path):
    """Damage away from where rows go (here: a row's content) does not refuse the store."""
    db = tmp_path / "r.db"
    make_store(db, [32, 33])
    edit_row(db, 1, nodes='"many"')
    assert check_store(db) == str(db)
    with Store(db) as s:
        assert s.add(record(34))
        with pytest.warns(ParadnnWarning, match="row id 1"):
            assert len(s.counts_by_key()) == 2
