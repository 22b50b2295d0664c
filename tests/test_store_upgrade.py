"""Keys survive the upgrade to the framework registry: a store written by paradnn before it
(commit f953315, record schema 2; tests/data/make_store_schema2.py) holds a JAX and a PyTorch
record, whose keys covered every framework's version fields and options. Reading it gives each
row the key the current code gives the same config, opening it for writing migrates the file,
and a sweep of the same configs resumes instead of measuring them again."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import paradnn
from paradnn import backends
from paradnn.measure import PROTOCOL_FIELDS, MeasureSettings
from paradnn.record import CORE_SOFTWARE_FIELDS, PLATFORM_FIELDS, SCHEMA_VERSION, Record, row_key
from paradnn.families.fc import FC
from paradnn.workload import Workload
from paradnn.store import STORE_SCHEMA_VERSION, Store, migrate_row

OLD = Path(__file__).parent / "data" / "store_schema2.db"
SPEC, BATCH = FC(2, 16, 8, 4), 8
#: The settings the old store's records ran with (PyTorch's record with torch_compile eager, the
#: system's malloc and torch's default layout),
#: but for their 2-3 timed calls, which the protocol refuses since record schema 5 (at least 6):
#: the resume test gives the old rows 6 (:func:`_as_if_written_here`). The old rows stopped by
#: the calls' spread: stop_rule cv, as the migration reads them.
SETTINGS = MeasureSettings(steps_per_call=2, warmup_calls=1, warmup_s=0.0, min_calls=6, max_calls=6,
                           cv_target=0.5, time_budget_s=0.2, torch_compile="eager", stop_rule="cv",
                           cpu_allocator="system", memory_format="contiguous")


def _raw_rows() -> list[dict]:
    con = sqlite3.connect(OLD)
    try:
        return [json.loads(t) for (t,) in con.execute("SELECT row FROM records ORDER BY id")]
    finally:
        con.close()


def test_old_store_is_schema_2_with_old_keys():
    raw = _raw_rows()
    assert [r["framework"] for r in raw] == ["jax", "torch"] and {r["schema_version"] for r in raw} == {2}
    # The old keys covered other frameworks' fields: a JAX row keyed on tf_version/torch_compile.
    assert "tf_version" in raw[0] and "torch_compile" in raw[0] and "jax_version" in raw[1]


def test_reading_and_opening_give_the_current_keys(tmp_path):
    raw = _raw_rows()
    df = paradnn.load(OLD)
    assert list(df["key"]) == [row_key(migrate_row(dict(r))) for r in raw]
    assert all(k != r["key"] for k, r in zip(df["key"], raw))  # the keys did change
    assert (df["schema_version"] == SCHEMA_VERSION).all() and set(raw[0]) <= set(df.columns)  # every field kept
    assert list(df["matmul_precision"]) == ["default", "default"]  # what paradnn then ran with
    assert list(df["stop_rule"]) == ["cv", "cv"]  # the spread of calls stopped their timing
    assert df["cpu_allocator"].tolist()[1] == "system" and pd.isna(df["cpu_allocator"].tolist()[0])  # torch's only
    assert df["memory_format"].tolist()[1] == "contiguous" and pd.isna(df["memory_format"].tolist()[0])
    copy = tmp_path / "old.db"
    shutil.copy(OLD, copy)
    with Store(copy) as db:
        version = db._con.execute("SELECT value FROM paradnn_meta WHERE name='schema_version'").fetchone()[0]
        assert int(version) == STORE_SCHEMA_VERSION == 7
        assert db.counts_by_key() == {k: 1 for k in df["key"]}
    assert paradnn.load(copy).equals(df)


def test_an_old_store_reads_with_empty_ceilings_and_the_report_says_so():
    """Rows written before ceilings were recorded load with the ceiling columns empty (no
    migration invents them), and the report's header says the ceiling was not recorded."""
    from paradnn.analysis.columns import ok_rows
    from paradnn.report.html import peaks_and_ceilings

    df = paradnn.load(OLD)
    assert not any(c.startswith("ceiling_") for r in _raw_rows() for c in r)
    for column in ("ceiling_flops", "ceiling_id", "ceiling_utilization", "model_ceiling_utilization"):
        assert column in df.columns and df[column].isna().all(), column
    text = peaks_and_ceilings(ok_rows(df))
    assert text and text.count("ceiling not recorded") == text.count("peak ")


def test_migrated_keys_use_the_fields_the_backends_record():
    """The key of an old row is rebuilt from the same field names a new record of its
    framework carries: the core software fields and FrameworkInfo.software_fields (checked
    against what the JAX backend really returns), the protocol and the framework's options."""
    from paradnn.runner import context

    platform, software = context("jax")
    assert set(software) - {"paradnn_revision"} == {*CORE_SOFTWARE_FIELDS, *backends.meta("jax").software_fields}
    assert set(platform) == set(PLATFORM_FIELDS)
    jax_row = _raw_rows()[0]
    # The old row's own protocol values (its 2-3 timed calls), the settings added since as the
    # migration fills them in.
    settings = {**SETTINGS.to_dict(), **{k: jax_row[k] for k in PROTOCOL_FIELDS if k in jax_row}}
    new = Record("ok", Workload(SPEC, BATCH).to_dict(), {k: jax_row[k] for k in PLATFORM_FIELDS},
                 {k: jax_row[k] for k in software}, settings)
    assert new.key == row_key(migrate_row(dict(jax_row)))


def _as_if_written_here(db: Path) -> None:
    """Give the old rows of ``db`` this host's platform and version fields (a schema-2 row as
    the old paradnn would have written it here), leaving everything else, the schema and the
    old keys included, as it was: the file was written on another host with other versions,
    whose configs could never resume here."""
    from paradnn.runner import context

    con = sqlite3.connect(db)
    try:
        for id_, text in con.execute("SELECT id, row FROM records").fetchall():
            row = json.loads(text)
            platform, software = context(row["framework"])
            for k, v in {**platform, **software}.items():
                if k != "paradnn_revision":
                    assert k in row, k  # a field the old key did not have would not be this test
                    row[k] = v
            row["min_calls"], row["max_calls"] = SETTINGS.min_calls, SETTINGS.max_calls
            con.execute("UPDATE records SET row = ?, host = ? WHERE id = ?", (json.dumps(row), row["host"], id_))
        con.commit()
    finally:
        con.close()


@pytest.mark.slow
def test_a_sweep_resumes_an_old_store(tmp_path):
    """With the old records' host and versions made this host's (and their timed calls the
    fewest the protocol allows now), the same configs get the same keys from the current code:
    a sweep of them (stop_rule cv, what the old rows ran) measures nothing (without the
    migration of their schema-2 keys it would measure both again)."""
    if backends.available("torch") is not None:
        pytest.skip(f"torch backend unavailable: {backends.available('torch')}")
    raw = _raw_rows()
    copy = tmp_path / "old.db"
    shutil.copy(OLD, copy)
    _as_if_written_here(copy)
    con = sqlite3.connect(copy)
    assert [json.loads(t)["schema_version"] for (t,) in con.execute("SELECT row FROM records")] == [2, 2]
    con.close()
    grid = [Workload(SPEC, BATCH), Workload(SPEC, BATCH, framework="torch")]
    df = paradnn.sweep(grid, store=copy, executor="inprocess", settings=SETTINGS, progress=False, cache_dir=None)
    assert len(paradnn.load(copy)) == 2 and len(df) == 2  # nothing measured again
    assert set(df["time_utc"]) == {r["time_utc"] for r in raw}


def test_a_schema_3_row_keys_as_the_same_config_at_default_precision():
    """Rows before schema 4 lack matmul_precision; paradnn never changed the frameworks'
    precision then, so they read as "default" and key as a new default-precision run does (a
    sweep resumes them), while a run at another precision is another config."""
    from paradnn.runner import context

    platform, software = context("jax")
    workload = Workload(SPEC, BATCH).to_dict()
    new = Record("ok", workload, platform, software, SETTINGS.to_dict("jax"))
    old = {**new.to_dict(), "schema_version": 3}
    del old["matmul_precision"]
    assert row_key(old) != new.key  # without the migration the old row would be measured again
    migrated = migrate_row(dict(old))
    assert migrated["matmul_precision"] == "default" and migrated["schema_version"] == SCHEMA_VERSION
    assert migrated["key"] == new.key
    tf32 = Record("ok", workload, platform, software, SETTINGS.replace().to_dict("jax") | {"matmul_precision": "tf32"})
    assert tf32.key != new.key


def test_a_schema_4_row_keys_as_the_same_config_under_the_cv_rule():
    """Rows before schema 5 stopped their timing by the spread of calls (cv_target): they read
    as stop_rule "cv" (ci_target as the setting came, unused by that rule) and key as a run of
    today with stop_rule cv does; today's default rule (ci) is another config."""
    from paradnn.runner import context

    platform, software = context("jax")
    workload = Workload(SPEC, BATCH).to_dict()
    new = Record("ok", workload, platform, software, SETTINGS.to_dict("jax"))
    old = {**new.to_dict(), "schema_version": 4}
    del old["stop_rule"], old["ci_target"]
    migrated = migrate_row(dict(old))
    assert (migrated["stop_rule"], migrated["ci_target"], migrated["schema_version"]) == ("cv", 0.02, SCHEMA_VERSION)
    assert migrated["key"] == new.key
    today = Record("ok", workload, platform, software, SETTINGS.replace(stop_rule="ci").to_dict("jax"))
    assert today.key != new.key


@pytest.mark.parametrize("version, option, then, now", [
    (5, "cpu_allocator", "system", "reuse"),              # schema 6: before it, the system's malloc
    (6, "memory_format", "contiguous", "channels_last"),  # schema 7: before it, image models in NCHW
])
def test_an_older_torch_row_keys_as_the_same_config_with_the_option_it_ran_with(version, option, then, now):
    """Rows of schema ``version`` predate PyTorch's ``option``: they read as the value they ran
    with (``then``) and key as a run of today with that setting does; today's default (``now``)
    is another config. A JAX row does not gain the option."""
    from paradnn.runner import context

    platform, software = context("torch")
    workload = Workload(SPEC, BATCH, framework="torch").to_dict()
    assert getattr(SETTINGS, option) == then and getattr(MeasureSettings(), option) == now
    new = Record("ok", workload, platform, software, SETTINGS.to_dict("torch"))
    old = {**new.to_dict(), "schema_version": version}
    del old[option]
    migrated = migrate_row(dict(old))
    assert (migrated[option], migrated["schema_version"]) == (then, SCHEMA_VERSION)
    assert migrated["key"] == new.key
    today = Record("ok", workload, platform, software, SETTINGS.replace(**{option: now}).to_dict("torch"))
    assert today.key != new.key
    jax_platform, jax_software = context("jax")
    jax = Record("ok", Workload(SPEC, BATCH).to_dict(), jax_platform, jax_software, SETTINGS.to_dict("jax"))
    assert option not in migrate_row({**jax.to_dict(), "schema_version": version})
