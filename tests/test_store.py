"""The SQLite store: one row per record, load/merge/export round trips, refusing foreign files,
and concurrent writers. Records here are built directly (no JAX): the store does not care how a
record was measured."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from helpers import child_env, paradnn_messages
from paradnn import FC, RNN, ParadnnError, Workload
from paradnn.record import METRICS, Record
from paradnn.store import COLUMNS, STORE_SCHEMA_VERSION, Store, export, load, merge

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1, "host": "h1",
            "cpu_model": "test"}
SOFTWARE = {"paradnn_version": "0", "jax_version": "0", "jaxlib_version": "0",
            "flax_version": "0", "optax_version": "0", "tf_version": None,
            "python_version": "3.11", "xla_flags": ""}
SETTINGS = {"steps_per_call": 2, "warmup_calls": 1, "min_calls": 6, "max_calls": 6,
            "cv_target": 0.02, "time_budget_s": 0.2}


def record(nodes: int, status: str = "ok", t: str = "2026-01-01T00:00:00+00:00",
           host: str = "h1") -> Record:
    w = Workload(FC(layers=2, nodes=nodes, input=64, output=10), batch=8)
    metrics = {"examples_per_sec": 1000.0 + nodes, "step_time_s": 0.008, "params": nodes * 100,
               "peak_source": "measured"} if status == "ok" else {}
    return Record(status=status, workload=w.to_dict(), platform={**PLATFORM, "host": host},
                  software=SOFTWARE, settings=SETTINGS, metrics=metrics,
                  error=None if status == "ok" else "boom", time_utc=t)


def fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_add_and_load_one_column_per_field(tmp_path):
    db = tmp_path / "r.db"
    recs = [record(32), record(64, "oom"), record(128, t="2026-01-02T00:00:00+00:00")]
    rnn = Record(status="ok", workload=Workload(RNN("lstm", 1, 16, 4, 32), 4).to_dict(),
                 platform=PLATFORM, software=SOFTWARE, settings=SETTINGS,
                 metrics={"examples_per_sec": 5.0, "custom_metric": 7})
    with Store(db) as s:
        for r in recs + [rnn]:
            assert s.add(r)
        assert not s.add(recs[0])  # same key and time: already there
        assert len(s) == 4
    df = load(db)
    assert list(df.columns[:len(COLUMNS)]) == list(COLUMNS)
    assert "custom_metric" in df.columns  # extra fields are kept as their own columns
    for name in [*METRICS, "layers", "cell", "vocab", "host", "jax_version", "steps_per_call"]:
        assert name in df.columns
    assert df["status"].tolist() == ["ok", "oom", "ok", "ok"]
    assert df.loc[0, "examples_per_sec"] == 1032.0
    assert df.loc[0, "key"] == recs[0].key
    assert df.loc[3, "cell"] == "lstm" and df.loc[3, "custom_metric"] == 7
    for r, (_, row) in zip(recs, df.iterrows()):
        for k, v in r.to_dict().items():
            if v is not None:
                assert row[k] == v, k


def test_wal_and_schema_version(tmp_path):
    db = tmp_path / "r.db"
    Store(db).close()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    meta = dict(con.execute("SELECT name, value FROM paradnn_meta"))
    assert meta["format"] == "paradnn-store"
    assert int(meta["schema_version"]) == STORE_SCHEMA_VERSION
    con.close()


def test_foreign_and_newer_files_refused_unmodified(tmp_path):
    text = tmp_path / "notes.db"
    text.write_text("these are my notes, not a database\n")
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.execute("INSERT INTO customers VALUES (1, 'a')")
    con.commit()
    con.close()
    newer = tmp_path / "newer.db"
    with Store(newer) as s:
        s.add(record(32))
    con = sqlite3.connect(newer)
    con.execute("UPDATE paradnn_meta SET value = ? WHERE name = 'schema_version'",
                (str(STORE_SCHEMA_VERSION + 1),))
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()

    good = tmp_path / "good.db"
    with Store(good) as s:
        s.add(record(64))
    cases = [(text, "not an SQLite file"), (other, "without a paradnn_meta table"),
             (newer, f"schema version {STORE_SCHEMA_VERSION + 1} is newer")]
    for path, reason in cases:
        before = fingerprint(path)
        for action in (lambda: Store(path), lambda: load(path), lambda: load([good, path]),
                       lambda: merge([good, path], tmp_path / "out.db"),
                       lambda: merge([good], path), lambda: export(path, tmp_path / "x.csv")):
            with pytest.raises(ParadnnError, match=reason) as info:
                action()
            assert str(path) in str(info.value)
        assert fingerprint(path) == before, f"{path} was modified"
    assert not (tmp_path / "out.db").exists()  # nothing written when an input is refused


def test_merge_without_duplicates_and_round_trips(tmp_path):
    a, b, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "all.db"
    shared = record(32)
    with Store(a) as s:
        for r in (shared, record(64), record(64, "error", t="2026-01-03T00:00:00+00:00")):
            s.add(r)
    with Store(b) as s:
        # the same config measured on a second identical host: same key, different time
        for r in (shared, record(32, t="2026-02-01T00:00:00+00:00", host="h2"), record(128)):
            s.add(r)
    assert merge([a, b], out) == (5, 1)
    assert merge([a, b], out) == (0, 6)  # merging again adds nothing
    merged = load(out)
    assert len(merged) == 5
    assert merged[["key", "time_utc"]].duplicated().sum() == 0
    # load of several stores = the merge (same rows, same columns)
    both = load([a, b])
    key = ["key", "time_utc"]
    pd.testing.assert_frame_equal(merged.sort_values(key).reset_index(drop=True),
                                  both.sort_values(key).reset_index(drop=True))
    # export round trips
    csv, parquet = tmp_path / "all.csv", tmp_path / "all.parquet"
    assert export(out, csv) == 5 and export(out, parquet) == 5
    from_parquet = pd.read_parquet(parquet)
    assert list(from_parquet.columns) == list(merged.columns)
    pd.testing.assert_frame_equal(from_parquet, merged, check_dtype=False)
    from_csv = pd.read_csv(csv)
    assert list(from_csv.columns) == list(merged.columns)
    for col in ("key", "time_utc", "status", "host"):
        assert from_csv[col].tolist() == merged[col].tolist()
    assert from_csv["examples_per_sec"].equals(merged["examples_per_sec"].astype(float))
    with pytest.raises(ParadnnError, match=r"\.csv or \.parquet"):
        export(out, tmp_path / "all.xlsx")


def test_export_csv_writes_lists_as_json_and_reads_back_typed(tmp_path):
    """The CSV (Arrow's writer): a list field is one JSON text, a flag reads back as a bool, a
    number as the same float, a missing value as empty."""
    import csv

    db, out = tmp_path / "r.db", tmp_path / "r.csv"
    r = record(32)
    r = r.with_metrics(step_times_s=[0.0081, 0.0079, 1e-05], stable=True, step_time_cv=0.0123456789012345)
    with Store(db) as s:
        s.add(r)
        s.add(record(64, status="error"))
    assert export(db, out) == 2
    rows = list(csv.DictReader(out.open()))
    ok = next(row for row in rows if row["status"] == "ok")
    assert json.loads(ok["step_times_s"]) == [0.0081, 0.0079, 1e-05]
    assert ok["stable"] == "true" and float(ok["step_time_cv"]) == 0.0123456789012345
    failed = next(row for row in rows if row["status"] == "error")
    assert failed["step_times_s"] == "" and failed["error"] == "boom"
    frame = pd.read_csv(out)
    assert frame["stable"].dropna().tolist() == [True]
    assert frame["examples_per_sec"].dropna().tolist() == [1032.0]


WRITER = textwrap.dedent("""
    import sys
    from paradnn import FC, Workload
    from paradnn.record import Record
    from paradnn.store import Store
    tag, n = sys.argv[1], int(sys.argv[2])
    with Store(sys.argv[3]) as s:
        for i in range(n):
            w = Workload(FC(layers=2, nodes=8 + i, input=4, output=2), batch=1)
            s.add(Record(status="ok", workload=w.to_dict(), platform={"host": tag},
                         software={}, settings={}, metrics={"params": i}))
""")


def test_concurrent_writers_lose_nothing(tmp_path):
    db = tmp_path / "shared.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    n = 150
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, tag, str(n), str(db)], env=env)
             for tag in ("w1", "w2", "w3")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    df = load(db)
    assert len(df) == 3 * n
    assert df.groupby("host").size().to_dict() == {"w1": n, "w2": n, "w3": n}
    assert df[["key", "time_utc"]].duplicated().sum() == 0
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_reading_a_store_this_process_writes_keeps_its_locks(tmp_path):
    """SQLite's locks belong to the process, and closing any descriptor of the file drops them:
    if load() opened the file that an open Store holds, another process closing its connection
    would take itself for the last one, checkpoint and delete the -wal file, and the Store's
    next commit would go to the deleted file, unseen by every other process. load() and a
    second Store in the same process must leave the first Store's locks alone."""
    db = tmp_path / "r.db"
    env = child_env()  # the child imports test_store's record() from tests/
    add = textwrap.dedent("""
        import sys
        from paradnn.store import Store
        from test_store import record
        with Store(sys.argv[1]) as s:
            s.add(record(40))
    """)
    nodes = "import sys; from paradnn.store import load; print(sorted(load(sys.argv[1])['nodes']))"
    with Store(db) as s:
        s.add(record(32))
        assert len(load(db)) == 1
        with Store(db) as s2:
            assert len(s2.rows()) == 1
        done = subprocess.run([sys.executable, "-c", add, str(db)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        s.add(record(33))
        seen = subprocess.run([sys.executable, "-c", nodes, str(db)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert seen.stdout.strip() == "[32, 33, 40]", seen.stderr
    assert sorted(load(db)["nodes"]) == [32, 33, 40]


def test_claims_split_work_and_dead_claims_expire(tmp_path):
    db = tmp_path / "c.db"
    with Store(db) as s1, Store(db) as s2:
        c1 = s1.claim("k", wanted=1, stale_after_s=60)
        assert c1 is not None
        assert s2.claim("k", wanted=1, stale_after_s=60) is None  # live claim: skip
        assert s2.claim("k", wanted=2, stale_after_s=60) is not None  # a second repeat is free
        s1.add(record(32), claim=c1)
        assert s1.claim(record(32).key, wanted=1, stale_after_s=60) is None
    # a claim left by a dead process on this host is taken over
    dead = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os
        from paradnn.store import Store
        s = Store({str(db)!r})
        assert s.claim("orphan", 1, 60) is not None
        os._exit(0)
        """)], env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert dead.returncode == 0
    with Store(db) as s:
        assert s.claim("orphan", 1, 60) is not None


# -- graceful degradation (the CLI side is in test_faults.py) ---------------------------------

def test_corrupt_row_is_skipped_with_a_warning_and_the_rest_loads(tmp_path):
    from paradnn.errors import ParadnnWarning

    db = tmp_path / "r.db"
    with Store(db) as s:
        for n in (32, 33, 34):
            s.add(record(n))
    with sqlite3.connect(db) as con:
        con.execute("UPDATE records SET row = '[1, 2' WHERE id = 2")
        con.execute("UPDATE records SET row = '{\"no\": \"key\"}' WHERE id = 3")
    con.close()
    with pytest.warns(ParadnnWarning) as caught:
        df = load(db)
    assert list(df["nodes"]) == [32]
    assert any("row id 2" in str(w.message) and "not valid JSON" in str(w.message) for w in caught)
    with pytest.warns(ParadnnWarning) as caught, Store(db) as s:
        assert len(s.rows()) == 1 and len(s) == 3  # the corrupt rows stay in the file
    messages = " ".join(str(w.message) for w in caught)
    assert "row id 2" in messages and "row id 3" in messages and "not a record" in messages


def test_rows_that_do_not_read_back_intact_are_named_and_count_as_not_measured(tmp_path):
    """A row whose bytes are not UTF-8, or whose indexed key differs from its content, is
    unreadable like a row of bad JSON: named (key and row id) in one warning, listed with its
    cause in the frame's attrs, and not counted, so claim hands its config out again."""
    from paradnn.errors import ParadnnWarning
    from paradnn.store import DAMAGE_ATTR

    db = tmp_path / "r.db"
    recs = [record(n) for n in (32, 33, 34, 35)]
    with Store(db) as s:
        for r in recs:
            s.add(r)
    with sqlite3.connect(db) as con:
        # 0xFF is never valid UTF-8: fetched as text, it fails the query that reads it.
        con.execute("UPDATE records SET row = CAST(X'7B22FF' AS TEXT) WHERE id = 1")
        con.execute("UPDATE records SET row = replace(row, ?, 'other') WHERE id = 2",
                    (recs[1].key,))
        con.execute("UPDATE records SET row = '[1, 2' WHERE id = 3")
    con.close()
    with pytest.warns(ParadnnWarning) as caught:
        df = load(db)
    assert list(df["nodes"]) == [35]
    (message,) = paradnn_messages(caught)
    for i, r in enumerate(recs[:3]):
        assert f"key '{r.key}' (row id {i + 1})" in message
    assert "3 row(s) cannot be read" in message and "differs from its content" in message
    causes = {u["rowid"]: u["cause"] for u in df.attrs[DAMAGE_ATTR]["unreadable"]}
    assert causes == {1: "not JSON", 2: "identity mismatch", 3: "not JSON"}
    with pytest.warns(ParadnnWarning), Store(db) as s:
        assert s.counts_by_key() == {recs[3].key: 1}
        for r in recs[:3]:
            assert s.claim(r.key, wanted=1, stale_after_s=60) is not None
        assert s.claim(recs[3].key, wanted=1, stale_after_s=60) is None


def test_a_sound_store_has_no_damage_attrs_and_counts_every_row(tmp_path):
    from paradnn.errors import ParadnnWarning
    from paradnn.store import DAMAGE_ATTR

    db = tmp_path / "r.db"
    with Store(db) as s:
        s.add(record(32))
        s.add(record(32, t="2026-01-02T00:00:00+00:00"))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ParadnnWarning)  # not one of paradnn's warnings
        df = load(db)
        with Store(db) as s:
            assert s.counts_by_key() == {record(32).key: 2}
    assert DAMAGE_ATTR not in df.attrs and len(df) == 2


def test_merge_conflict_writes_nothing_and_identical_rows_are_duplicates(tmp_path):
    from paradnn.errors import StoreError

    a, b, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "m.db"
    with Store(a) as s:
        s.add(record(32))
        s.add(record(33))
    changed = record(33).with_metrics(examples_per_sec=1.0)  # same key and time, another measurement
    with Store(b) as s:
        s.add(record(32))
        s.add(changed)
    with pytest.raises(StoreError, match="1 row\\(s\\) share key and time"):
        merge([a, b], out)
    assert not out.exists()  # refused before a row was written: no empty store is left behind
    assert merge([a], out) == (2, 0)
    assert merge([a], tmp_path / "m2.db") == (2, 0)
    assert merge([tmp_path / "m2.db"], out) == (0, 2)  # the same rows: present, not conflicts


def test_special_files_are_not_stores(tmp_path):
    for path in (Path("/dev/null"), tmp_path):
        with pytest.raises(ParadnnError, match="not a regular file|is a directory"):
            Store(path)
        with pytest.raises(ParadnnError):
            load(path)


def test_status_of_a_store_whose_every_row_is_unreadable_lists_them(tmp_path, capsys):
    """No row reads back: status must not say "nothing measured yet" (a sweep would measure
    the configs again, but the user must learn that rows were lost)."""
    from paradnn.cli import main

    db = tmp_path / "r.db"
    with Store(db) as s:
        s.add(record(32))
    with sqlite3.connect(db) as con:
        con.execute("UPDATE records SET row = '[1, 2' WHERE id = 1")
    con.close()
    assert main(["status", str(db)]) == 0
    out, err = capsys.readouterr()
    assert "1 row(s) cannot be read" in err  # the store's one-line damage warning
    assert "nothing measured yet" not in out
    assert "unreadable: not JSON: 1 row(s)" in out and "row id 1" in out


def test_records_are_frozen_values_that_pickle():
    """No step patches a record after it exists: fields and mappings are read-only, with_metrics
    returns a changed copy (time and identity kept), and records survive pickling (process
    pipes, Ray) still read-only."""
    import dataclasses
    import pickle

    rec = record(32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.status = "error"  # type: ignore[misc]
    for mapping in (rec.metrics, rec.workload, rec.platform, rec.software, rec.settings, rec.tags):
        with pytest.raises(TypeError, match="read-only"):
            mapping["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        rec.metrics.update(step_time_s=1.0)  # type: ignore[attr-defined]
    changed = rec.with_metrics({"step_time_s": 0.5}, stable=True)
    assert rec.metrics["step_time_s"] == 0.008 and "stable" not in rec.metrics
    assert changed.metrics["step_time_s"] == 0.5 and changed.metrics["stable"] is True
    assert (changed.key, changed.time_utc) == (rec.key, rec.time_utc)
    back = pickle.loads(pickle.dumps(changed))
    assert back == changed and back.to_dict() == changed.to_dict()
    with pytest.raises(TypeError, match="read-only"):
        back.metrics["x"] = 1  # type: ignore[index]
    source = {"examples_per_sec": 1.0}
    own = dataclasses.replace(rec, metrics=source)
    source["examples_per_sec"] = 2.0  # the caller's dict, changed later: not the record's
    assert own.metrics["examples_per_sec"] == 1.0


def test_one_row_per_config_a_later_attempt_replaces_the_unstable_one(tmp_path):
    """paradnn.load gives one row per config: an attempt naming the row it replaces
    (retry_of: its time, or key@time under other settings) leaves that row out; a retry of an
    older version (a longer budget, no retry_of) replaces the newest earlier unstable row of its
    key; rows a config was asked to have twice (repeat) both stay; attempts=True gives every
    row; the file keeps them all."""
    from paradnn.record import superseded

    def row(key, t, stable=True, **more):
        return {"key": key, "time_utc": t, "status": "ok", "stable": stable, **more}

    rows = [
        row("a", "1", stable=False), row("a", "2", retry_of="1"),                   # a retry
        row("b", "1"), row("b", "2"),                                               # repeat 2
        row("c", "1", stable=False), row("c", "3", time_budget_s=1.0, time_budget_used_s=4.0),  # old retry
        row("d", "1", stable=False), row("e", "5", retry_of="d@1"),                 # other settings
        row("f", "1", stable=False),                                                # not replaced
    ]
    assert superseded(rows) == {0, 4, 6}
    db = tmp_path / "s.db"
    with Store(db) as s:
        for r in rows:
            s.add({**r, "workload_key": r["key"], "family": "fc"})
    one = load(db)
    assert sorted(zip(one["key"], one["time_utc"])) == [("a", "2"), ("b", "1"), ("b", "2"), ("c", "3"),
                                                         ("e", "5"), ("f", "1")]
    assert len(load(db, attempts=True)) == len(rows)
    with Store(db) as s:
        assert len(s) == len(rows) and len(s.frame()) == 6 and len(s.frame(attempts=True)) == len(rows)
        assert s.counts_by_key(["a", "b", "c", "d", "f"]) == {"a": 1, "b": 2, "c": 1, "f": 1}


def test_time_stamps_are_every_rows_time_read_alone(tmp_path):
    """time_stamps: the time_utc of every row, every attempt (what `paradnn sweep` counts when it
    is stopped), the same as a full load gives; empty for a missing or empty store."""
    from paradnn.store import time_stamps

    db = tmp_path / "t.db"
    assert time_stamps(db).tolist() == []
    Store(db).close()
    assert time_stamps(db).tolist() == []
    times = ["2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00.5+00:00"]
    with Store(db) as s:
        s.add(record(32, t=times[0]))
        s.add(record(32, t=times[1]))  # the same config again: both attempts count
        s.add(record(64, "oom", t=times[2]))
    assert sorted(time_stamps(db)) == sorted(load(db, attempts=True)["time_utc"]) == times
    foreign = tmp_path / "mine.db"
    foreign.write_text("not a store")
    with pytest.raises(ParadnnError, match="not a paradnn store"):
        time_stamps(foreign)
