"""Fault injection against the real CLI and real SQLite files (docs/reliability.md).

Every case ends with exit status 2 and exactly one line on stderr (``paradnn: error: ...``), or
with a recorded outcome, never with a traceback; the store is byte-identical afterwards or holds
exactly the expected rows.

Read-only media and full disks are real, not simulated: the command runs in a private mount
namespace (``unshare -rm``, no privileges needed beyond user namespaces) where a folder is
bind-mounted read-only, or a tiny tmpfs is mounted, so the kernel itself returns EROFS/ENOSPC.
chmod cannot be used because the test machines run as root, for whom permission bits do not
stop writes. Other unwritable places are a path below a regular file (ENOTDIR) and /proc (a
file system where nobody can create files). Tests that need the namespace skip, saying so,
where user namespaces are disabled.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import SMALL_FILE, TINY, TINY_FIELDS, child_env, paradnn_messages
from paradnn.errors import InfrastructureError, ParadnnError, ParadnnWarning
from paradnn.grids import grid
from paradnn.record import Record
from paradnn.store import Store, load

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1, "host": "h", "cpu_model": "x"}
SOFTWARE = {"paradnn_version": "0", "jax_version": "0"}


# -- helpers ---------------------------------------------------------------------------------

def env(**changes: str | None) -> dict[str, str]:
    e = child_env()  # paradnn from this checkout, test modules (run_fns) from tests/
    for k, v in changes.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def cli(*args: str, cwd: Path | None = None, environ: dict | None = None, prefix: list[str] = (),
        timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "paradnn", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=environ or env(),
                          timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, nothing on stdout, one stderr line ``paradnn: error: ...`` with ``words``."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("paradnn: error: "), lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def digest(path: Path) -> str:
    """SHA-256 of a store's content: the file and its -wal journal (an empty or absent -wal holds
    nothing). The -shm file is left out: it is SQLite's shared-memory index of the -wal, which
    any reader, even a read-only one, may create."""
    h = hashlib.sha256(path.read_bytes())
    wal = Path(f"{path}-wal")
    h.update(wal.read_bytes() if wal.exists() else b"")
    return h.hexdigest()


def row(nodes: int, time_utc: str = "2026-01-01T00:00:00+00:00", **metrics) -> dict:
    w = grid("fc", layers=2, nodes=nodes, input=8, output=2, batch=4)[0]
    return Record(status="ok", workload=w.to_dict(), platform=PLATFORM, software=SOFTWARE,
                  settings=TINY_FIELDS, metrics={"examples_per_sec": 1.0, **metrics},
                  time_utc=time_utc).to_dict()


def make_store(path: Path, n: int = 3, compact: bool = False) -> Path:
    """A store of ``n`` rows; ``compact``: the rows without their None fields, so that a page
    holds several of them whatever metrics the schema adds (the page-damage tests need a leaf
    with more than one row)."""
    rows = [row(8 + i) for i in range(n)]
    if compact:
        rows = [{k: v for k, v in r.items() if v is not None} for r in rows]
    with Store(path) as s:
        s.add_rows(rows)
    return path  # closing checkpoints the WAL: the file alone is the store


def sweep_file(path: Path, body: str) -> Path:
    path.write_text(textwrap.dedent(body))
    return path




def _namespace_works() -> bool:
    try:
        probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt && "
                                "mount --bind /mnt /mnt && mount -o remount,bind,ro /mnt && "
                                "! touch /mnt/x 2>/dev/null"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


NAMESPACE = _namespace_works()
needs_namespace = pytest.mark.skipif(
    not NAMESPACE, reason="needs `unshare -rm` (user + mount namespaces) to mount a read-only "
    "folder or a tiny tmpfs; chmod cannot make a folder read-only for root")


def read_only(folder: Path) -> list[str]:
    """A command prefix that runs the rest with ``folder`` bind-mounted read-only (EROFS)."""
    return ["unshare", "-rm", "sh", "-c",
            'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"',
            "sh", str(folder)]


# -- outputs never overwrite inputs or files paradnn did not write ------------------------------

def test_export_plot_report_onto_the_store_leave_it_byte_identical(tmp_path):
    # A store may have any name, so name it like the output each command writes.
    cases = {"results.csv": ["export", "{s}", "-o", "{s}"],
             "results.png": ["plot", "params", "{s}", "-o", "{s}"]}
    for name, args in cases.items():
        store = make_store(tmp_path / name)
        before = digest(store)
        for extra in ([], ["--force"]):  # --force never makes an input an output
            one_error_line(cli(*[a.format(s=store) for a in args], *extra), "also an input")
            assert digest(store) == before
    store = make_store(tmp_path / "r.db")
    before = digest(store)
    one_error_line(cli("report", store, "-o", store), "not a directory")
    one_error_line(cli("profile", "-o", store, *FC_ARGS), "not a directory")
    assert digest(store) == before


def test_report_keeps_a_foreign_index_html_unless_forced(tmp_path):
    store = make_store(tmp_path / "r.db")
    out = tmp_path / "site"
    out.mkdir()
    page = out / "index.html"
    page.write_text("<p>my own page</p>")
    one_error_line(cli("report", store, "-o", out), "not written by paradnn", "--force")
    assert page.read_text() == "<p>my own page</p>"
    assert sorted(p.name for p in out.iterdir()) == ["index.html"]  # no temporary left behind
    proc = cli("report", store, "-o", out, "--force")
    assert proc.returncode == 0, proc.stderr
    assert "my own page" not in page.read_text()
    # paradnn wrote it now (its ledger says so): a second report replaces it without --force.
    proc = cli("report", store, "-o", out)
    assert proc.returncode == 0, proc.stderr


def test_export_replaces_only_its_own_files(tmp_path):
    store = make_store(tmp_path / "r.db", n=2)
    out = tmp_path / "rows.csv"
    assert cli("export", store, "-o", out).returncode == 0
    assert cli("export", store, "-o", out).returncode == 0  # its own output: replaced
    out.write_text("edited by hand\n")  # no longer what paradnn wrote
    one_error_line(cli("export", store, "-o", out), "not written by paradnn")
    assert out.read_text() == "edited by hand\n"
    assert cli("export", store, "-o", out, "--force").returncode == 0
    assert len(out.read_text().splitlines()) == 3  # header + 2 rows


def test_unwritable_output_folder_is_one_line(tmp_path):
    store = make_store(tmp_path / "r.db")
    a_file = tmp_path / "plain"
    a_file.write_text("x")
    for target in (a_file / "out.csv", Path("/proc/paradnn-test/out.csv")):
        one_error_line(cli("export", store, "-o", target), str(target))
        one_error_line(cli("plot", "params", store, "-o", target.with_suffix(".png")))
        one_error_line(cli("report", store, "-o", target.parent / "site"))


@needs_namespace
def test_output_into_a_read_only_folder_is_one_line(tmp_path):
    store = make_store(tmp_path / "r.db")
    ro = tmp_path / "ro"
    ro.mkdir()
    one_error_line(cli("export", store, "-o", ro / "out.csv", prefix=read_only(ro)),
                   "Read-only file system")
    one_error_line(cli("report", store, "-o", ro / "site", prefix=read_only(ro)),
                   "Read-only file system")
    assert list(ro.iterdir()) == []


def test_plan_csv_never_onto_the_store_nor_a_user_file(tmp_path):
    # issue 24: `plan --csv r.db` replaced the store with a CSV, and --csv overwrote any file.
    smoke = ROOT / "sweeps" / "smoke.yaml"
    store = make_store(tmp_path / "r.db")
    before = digest(store)
    for extra in ([], ["--force"]):
        one_error_line(bounded("plan", smoke, "--store", store, "--csv", store, *extra),
                       "--csv", "allowed: a .csv file")
    # A store may be named like a CSV, or be reached through a symbolic link: still an input.
    named = make_store(tmp_path / "r.csv")
    link = tmp_path / "link.csv"
    link.symlink_to(named)
    named_before = digest(named)
    for out in (named, link):
        for extra in ([], ["--force"]):
            one_error_line(bounded("plan", smoke, "--store", named, "--csv", out, *extra),
                           "plan --csv", "also an input")
    assert digest(store) == before and digest(named) == named_before and link.is_symlink()
    # A file paradnn did not write is kept unless --force; what paradnn wrote it may replace.
    mine = tmp_path / "mine.csv"
    mine.write_text("user data\n")
    one_error_line(bounded("plan", smoke, "--store", store, "--csv", mine),
                   "not written by paradnn", "--force")
    assert mine.read_text() == "user data\n"
    out = tmp_path / "plan.csv"
    for extra in ([], []):  # the second run replaces paradnn's own file without --force
        proc = cli("plan", smoke, "--store", store, "--csv", out, *extra)
        assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("key,")
    proc = cli("plan", smoke, "--store", store, "--csv", mine, "--force")
    assert proc.returncode == 0, proc.stderr
    assert mine.read_text().startswith("key,")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


INFEED_ARGS = ["infeed", "cnn", "--block", "residual", "--blocks", "1", "--filters", "4", "--image",
               "32", "--output", "4", "--batch", "2", "--files", "4", "--steps", "1",
               "--warmup-steps", "0", "--workers", "1"]


def test_infeed_plot_keeps_a_user_file_and_checks_its_suffix_before_measuring(tmp_path):
    # issue 24: `infeed --plot fig.png` overwrote the user's fig.png, and `--plot fig.txt`
    # failed only after the whole measurement.
    data = tmp_path / "jpegs"
    fig = tmp_path / "fig.png"
    fig.write_text("user\n")
    one_error_line(bounded(*INFEED_ARGS, "--data-dir", data, "--plot", fig),
                   "infeed --plot", "not written by paradnn", "--force")
    assert fig.read_text() == "user\n"
    store = make_store(tmp_path / "r.png")
    before = digest(store)
    one_error_line(bounded(*INFEED_ARGS, "--data-dir", data, "--store", store, "--plot", store,
                           "--force"), "also an input")
    assert digest(store) == before
    t0 = time.monotonic()
    line = one_error_line(bounded(*INFEED_ARGS, "--data-dir", data, "--plot", tmp_path / "fig.txt"),
                          "--plot", "fig.txt", "allowed: a .png, .svg or .pdf file")
    assert time.monotonic() - t0 < 15, line  # argparse refused it: no model, no JPEG made
    assert not data.exists() and not (tmp_path / "fig.txt").exists()


def test_every_suffix_is_checked_while_parsing(tmp_path, capsys):
    from paradnn.cli import build_parser, main

    store = make_store(tmp_path / "r.db")
    for args in (["plot", "params", store, "-o", tmp_path / "f.txt"],
                 ["export", store, "-o", tmp_path / "rows.xlsx"],
                 ["compare", store, store, "--plot", tmp_path / "h.jpg"],
                 ["compare", store, "--json", tmp_path / "r.txt"],
                 ["infeed", *INFEED_ARGS[1:], "--plot", tmp_path / "f.jpeg"]):
        with pytest.raises(SystemExit) as info:
            build_parser().parse_args(list(map(str, args)))
        assert info.value.code == 2, args
    # plan reads the flags after a family itself, before it plans anything.
    with pytest.raises(SystemExit) as info:
        main(list(map(str, ["plan", "fc", "--layers", "1", "--nodes", "8", "--input", "8",
                            "--output", "2", "--csv", tmp_path / "p.tsv"])))
    assert info.value.code == 2
    assert "--csv" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [store]
    proc = cli("plot", "params", store, "-o", tmp_path / "f.txt")
    one_error_line(proc, "-o", "f.txt", "allowed: a .png, .svg or .pdf file")


# -- stores -------------------------------------------------------------------------------------

def test_dev_null_and_foreign_files_as_store(tmp_path):
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE)
    one_error_line(cli("status", "/dev/null"), "not a regular file")
    one_error_line(cli("sweep", f, "--store", "/dev/null", "--quiet"), "not a regular file")
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes\n")
    for args in (["status", foreign], ["sweep", f, "--store", foreign, "--quiet"],
                 ["merge", make_store(tmp_path / "a.db"), "-o", foreign]):
        one_error_line(cli(*args), "not a paradnn store")
    assert foreign.read_text() == "my notes\n"


def test_corrupt_row_is_skipped_with_a_warning_naming_it(tmp_path):
    store = make_store(tmp_path / "r.db", n=3)
    with sqlite3.connect(store) as con:
        con.execute("UPDATE records SET row = '{not json' WHERE id = 2")
    con.close()
    before = digest(store)
    proc = cli("status", store)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paradnn: warning:") and "row id 2" in lines[0]
    assert "2 rows" in proc.stdout
    out = tmp_path / "rows.csv"
    proc = cli("export", store, "-o", out)
    assert proc.returncode == 0 and len(out.read_text().splitlines()) == 3  # header + 2 rows
    assert digest(store) == before


@needs_namespace
def test_read_only_store_is_read_immutable_and_refused_for_writing(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    store = make_store(ro / "r.db", n=3)
    before = digest(store)
    proc = cli("status", store, prefix=read_only(ro))
    assert proc.returncode == 0, proc.stderr
    assert "3 rows" in proc.stdout and "Traceback" not in proc.stderr
    warning = proc.stderr.strip().splitlines()
    assert len(warning) == 1 and "read-only" in warning[0] and "immutable" in warning[0]
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE)
    one_error_line(cli("sweep", f, "--store", store, "--quiet", prefix=read_only(ro)),
                   "read-only")
    assert digest(store) == before


def test_merge_refuses_two_different_rows_with_one_key_and_time(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    with Store(a) as s:
        s.add(row(8, examples_per_sec=1.0))
    with Store(b) as s:
        s.add(row(8, examples_per_sec=2.0))  # same key and time, different measurement
    out = tmp_path / "m.db"
    before = digest(a), digest(b)
    one_error_line(cli("merge", a, b, "-o", out), "share key and time", "nothing was written")
    assert (digest(a), digest(b)) == before
    assert not out.exists() or len(load(out)) == 0
    # Into a store that holds one of them: refused too, and that store keeps its row.
    assert cli("merge", a, "-o", out).returncode == 0
    one_error_line(cli("merge", b, "-o", out), "share key and time")
    assert list(load(out)["examples_per_sec"]) == [1.0]
    # Both rows survive side by side when read together, rather than one hiding the other, and
    # the reader says so.
    with pytest.warns(ParadnnWarning, match=r"1 row\(s\) share key and time with a different row of another store"):
        assert sorted(load([a, b])["examples_per_sec"]) == [1.0, 2.0]


def test_merge_counts_identical_rows_as_present(tmp_path):
    a = make_store(tmp_path / "a.db", n=2)
    b = tmp_path / "b.db"
    b.write_bytes(a.read_bytes())
    proc = cli("merge", a, b, "-o", tmp_path / "m.db")
    assert proc.returncode == 0, proc.stderr
    assert "2 rows added, 2 already present" in proc.stdout
    assert len(load(tmp_path / "m.db")) == 2


def big_ok(workload, settings, memory_limit_bytes):
    """A record with 50 kB of payload, to fill a small disk quickly."""
    return Record(status="ok", workload=workload.to_dict(), platform=PLATFORM, software=SOFTWARE,
                  settings=settings.to_dict(), metrics={"payload": "x" * 50_000})


@pytest.mark.slow
@needs_namespace
def test_full_disk_stops_the_sweep_and_keeps_every_committed_row(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from paradnn.cli import main
        import paradnn.sweeper as sw
        from paradnn.grids import grid
        from test_faults import big_ok
        from paradnn.errors import ParadnnError
        try:
            sw.sweep(grid("fc", layers=1, nodes=list(range(8, 208)), input=8, output=2, batch=4),
                     store={str(disk / 'r.db')!r}, executor="inprocess", run_fn=big_ok,
                     cache_dir=None, progress=False, settings={TINY_FIELDS!r})
        except ParadnnError as exc:
            print(f"paradnn: error: {{exc}}", file=sys.stderr); sys.exit(2)
    """))
    check = ("import sqlite3, sys; con = sqlite3.connect(sys.argv[1]); "
             "print(con.execute('PRAGMA integrity_check').fetchone()[0], "
             "con.execute('SELECT COUNT(*) FROM records').fetchone()[0], "
             "con.execute('SELECT COUNT(*) FROM claims').fetchone()[0])")
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c",
         'mount -t tmpfs -o size=2m tmpfs "$1" && "$2" "$3"; rc=$?; '
         '"$2" -c "$4" "$1/r.db"; exit $rc',
         "sh", str(disk), sys.executable, str(script), check],
        capture_output=True, text=True, env=env(), timeout=600)
    line = one_error_line(proc, "the disk is full")
    committed = int(re.search(r"(\d+) record\(s\) of this run were committed", line).group(1))
    integrity, rows, _claims = proc.stdout.split()
    assert integrity == "ok"
    assert 0 < committed == int(rows) < 200  # exactly the rows the sweep said it committed


# -- infrastructure faults are never a workload's result ------------------------------------------

@pytest.mark.slow
def test_unwritable_home_stops_the_sweep_unrecorded_then_resume_runs_it(tmp_path):
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE)
    store = tmp_path / "r.db"
    home = tmp_path / "home-is-a-file"
    home.write_text("")  # HOME below which nothing can be created (ENOTDIR): like a read-only home
    bad = env(HOME=str(home), PARADNN_CACHE=None, XDG_CACHE_HOME=None)
    one_error_line(cli("sweep", f, "--store", store, "--quiet", environ=bad),
                   "not writable", "resume")
    # Nothing stored as the workload's result: the sweep stopped before it made the store.
    assert not store.exists()
    good = tmp_path / "home"
    good.mkdir()
    proc = cli("sweep", f, "--store", store, "--quiet",
               environ=env(HOME=str(good), PARADNN_CACHE=None, XDG_CACHE_HOME=None))
    assert proc.returncode == 0, proc.stderr
    df = load(store)
    assert list(df["status"]) == ["ok"]


@pytest.mark.slow
@needs_namespace
def test_read_only_home_mount_stops_the_sweep_unrecorded(tmp_path):
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE)
    store = tmp_path / "r.db"
    home = tmp_path / "home"
    home.mkdir()
    one_error_line(cli("sweep", f, "--store", store, "--quiet", prefix=read_only(home),
                       environ=env(HOME=str(home), PARADNN_CACHE=None, XDG_CACHE_HOME=None)),
                   "read-only")
    assert not store.exists()  # nothing stored: the sweep stopped before it made the store


def test_absent_jax_platform_is_one_line(tmp_path):
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE)
    store = tmp_path / "r.db"
    absent = env(JAX_PLATFORMS="absent")
    one_error_line(cli("sweep", f, "--store", store, "--quiet", environ=absent), "JAX_PLATFORMS")
    run = cli("run", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "2", environ=absent)
    # run says what it measures before the framework starts (the first line within seconds);
    # the fault that follows is then one line.
    first, *rest = run.stderr.strip().splitlines()
    assert first.startswith("paradnn: measuring fc "), run.stderr
    one_error_line(subprocess.CompletedProcess(run.args, run.returncode, run.stdout, "\n".join(rest)),
                   "JAX_PLATFORMS")
    assert not store.exists()  # the executor starts before the store is opened: nothing made


def fake_ok(workload, settings, memory_limit_bytes):
    from paradnn.runner import context

    platform, software = context(workload.framework)  # what the runner records
    return Record(status="ok", workload=workload.to_dict(), platform=platform,
                  software=software, settings=settings.to_dict(),
                  metrics={"examples_per_sec": 1.0})


def exits_or_faults(workload, settings, memory_limit_bytes):
    """nodes 9 exits by itself with status 7, 10 is SIGKILLed from outside, 11 meets a
    read-only file system; the rest succeed."""
    nodes = workload.spec.nodes
    if nodes == 9:
        os._exit(7)
    if nodes == 10:
        os.kill(os.getpid(), signal.SIGKILL)
    if nodes == 11:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), "/cache/x")
    return fake_ok(workload, settings, memory_limit_bytes)


def test_child_exit_status_and_signal_are_told_apart(tmp_path):
    from paradnn.sweeper import sweep

    db = tmp_path / "r.db"
    g = grid("fc", layers=1, nodes=[8, 9, 10], input=8, output=2, batch=4)
    df = sweep(g, store=db, settings=TINY, run_fn=exits_or_faults, cache_dir=None,
               progress=False, timeout_s=120)
    by = {r["nodes"]: r for r in df.to_dict("records")}
    assert by[8]["status"] == "ok"
    assert by[9]["status"] == "crashed" and by[9]["child_exit_status"] == 7
    assert "exited by itself with status 7" in by[9]["error"] and "SIGKILL" not in by[9]["error"]
    assert by[10]["status"] == "crashed" and by[10]["child_signal"] == "SIGKILL"
    assert "killed by SIGKILL" in by[10]["error"]


def test_environment_fault_in_a_config_is_not_stored_and_resume_runs_it(tmp_path):
    from paradnn.sweeper import sweep

    db = tmp_path / "r.db"
    g = grid("fc", layers=1, nodes=[8, 11, 12], input=8, output=2, batch=4)
    with pytest.raises(InfrastructureError, match="Read-only file system") as info:
        sweep(g, store=db, settings=TINY, run_fn=exits_or_faults, cache_dir=None,
              progress=False, timeout_s=120)
    assert "1 record(s) of this run are committed" in str(info.value)
    assert list(load(db)["nodes"]) == [8]  # 11 was not stored as an error
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    df = sweep(g, store=db, settings=TINY, run_fn=fake_ok, cache_dir=None, progress=False,
               timeout_s=120)
    assert sorted(df["nodes"]) == [8, 11, 12] and set(df["status"]) == {"ok"}


def test_unreachable_ray_address_fails_fast(tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra")
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE)
    t0 = time.monotonic()
    one_error_line(cli("sweep", f, "--store", tmp_path / "r.db", "--executor", "ray",
                       "--address", "127.0.0.1:1", "--quiet"), "127.0.0.1:1", "refused")
    assert time.monotonic() - t0 < 60
    from paradnn.executors.ray import check_reachable

    t0 = time.monotonic()  # a black-hole address (TEST-NET-1, RFC 5737): the stated timeout
    with pytest.raises(ParadnnError, match="within 1 s"):
        check_reachable("192.0.2.1:6379", timeout_s=1.0)
    assert time.monotonic() - t0 < 10


# -- cheap checks first --------------------------------------------------------------------------

def test_huge_model_is_oom_before_tracing(tmp_path):
    proc = cli("run", "fc", "--layers", "1000000000", "--nodes", "32", "--input", "64",
               "--output", "10", "--memory-limit", "16GB", "--json", timeout=120)
    assert proc.returncode == 1, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["status"] == "oom" and rec["oom_predicted"] is True
    assert rec["params"] == 1000000000 * (32 * 32 + 32) - 32 * 32 + 64 * 32 + 32 * 10 + 10
    # In-process the check itself takes well under a second (the CLI also imports JAX).
    from paradnn.runner import run_workload
    from paradnn.families.fc import FC
    from paradnn.workload import Workload

    run_workload(Workload(FC(1, 8, 8, 2), 4), None, 10)  # warm the platform context
    t0 = time.perf_counter()
    rec = run_workload(Workload(FC(10**9, 32, 64, 10), 256), None, 16 * 10**9)
    assert rec.status == "oom" and rec.metrics["oom_predicted"]
    assert time.perf_counter() - t0 < 1.0


DEPTH = {"fc": "layers", "cnn": "blocks", "rnn": "layers", "transformer": "layers"}


@pytest.mark.parametrize("family", sorted(DEPTH))
def test_closed_form_counts_cost_nothing_per_layer(family):
    # issue 24: a CNN of 10^9 blocks spun for hours in its parameter count. Every count is
    # linear in the depth; at 10^9 it must be that line's value, computed without a loop.
    from paradnn import families, sizes
    from paradnn.workload import Workload

    fam = families.get(family)
    fields = {k: v for k, v in fam.tiny[0].items() if k != "batch"}

    def workload(depth: int) -> Workload:
        return Workload(fam.spec(**{**fields, DEPTH[family]: depth}), 2)

    t0 = time.perf_counter()
    big = workload(10**9)
    got = {"params": sizes.param_count(big.spec), "flops": sizes.model_flops_per_step(big),
           "state": sizes.non_trainable_count(big.spec), "floor": sizes.floor_bytes(big)["total_bytes"],
           "sizes": sizes.config_sizes(big)["memory_bytes"]}
    assert time.perf_counter() - t0 < 0.5, time.perf_counter() - t0
    one, two = workload(1), workload(2)
    for name, f in (("params", lambda w: sizes.param_count(w.spec)),
                    ("state", lambda w: sizes.non_trainable_count(w.spec)),
                    ("floor", lambda w: sizes.floor_bytes(w)["total_bytes"])):
        assert got[name] == f(one) + (10**9 - 1) * (f(two) - f(one)), name
    assert got["flops"] == pytest.approx(sizes.model_flops_per_step(one) + (10**9 - 1)
                                         * (sizes.model_flops_per_step(two)
                                            - sizes.model_flops_per_step(one)), rel=1e-9)


BILLION_BLOCKS = ["cnn", "--block", "residual", "--blocks", "1000000000", "--filters", "4",
                  "--image", "32", "--output", "4", "--batch", "2"]


@pytest.mark.slow
def test_a_cnn_of_a_billion_blocks_is_refused_or_planned_within_bounds(tmp_path):
    # issue 24: plan, maxbatch, sweep and infeed looped per block; profile and plan --compile
    # traced the model. Each now ends (exit 2 with one line, or its result) within 30 s / 1 GB.
    store = tmp_path / "r.db"
    for args in (["plan", *BILLION_BLOCKS, "--store", store],
                 ["plan", *BILLION_BLOCKS, "--compile", "--store", store]):
        proc = bounded(*args)
        assert proc.returncode == 0, proc.stderr
        assert "predicted oom (1;" in proc.stdout
    proc = bounded("maxbatch", *BILLION_BLOCKS)
    assert proc.returncode == 1 and "even the smallest batch does not fit" in proc.stdout, proc
    for command in ("profile", "infeed"):
        one_error_line(bounded(command, *BILLION_BLOCKS), f"{command}: the cnn model cannot fit",
                       "predicted before compiling", "nothing traced")
    f = sweep_file(tmp_path / "big.yaml", """\
        family: cnn
        fixed: {block: residual, blocks: 1000000000, filters: 4, image: 32, output: 4, batch: 2}
        settings: {steps_per_call: 1, warmup_calls: 1, min_calls: 6, max_calls: 6, time_budget_s: 0.2}
        """)
    proc = bounded("sweep", f, "--store", store, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert load(store)["status"].tolist() == ["oom"]


def test_a_huge_repeat_is_refused_while_reading_the_sweep_file(tmp_path):
    # issue 24: `repeat: 1000000000000` built every key in memory before the first config.
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE + "run: {repeat: 1000000000000}\n")
    store = tmp_path / "r.db"
    for command in ("sweep", "plan"):
        one_error_line(bounded(command, f, "--store", store), "run.repeat", "1000000000000",
                       "1,000,000")
    one_error_line(bounded("plan", *FC_ARGS, "--store", store, "--repeat", "1000000000000"),
                   "repeat", "1000000")
    assert not store.exists()
    with pytest.raises(ParadnnError, match="repeat"):
        from paradnn import sweep

        sweep(grid("fc", layers=1, nodes=8, input=8, output=2, batch=4), store=store,
              repeat=10**12, executor="inprocess", progress=False)
    assert not store.exists()


def test_default_limit_on_a_cpu_is_the_host_memory():
    from paradnn import backends, hardware

    if backends.get("jax").device_info()["device_platform"] != "cpu":
        pytest.skip("a device with its own memory size")
    assert hardware.device_memory_bytes() == hardware.host_memory_bytes() > 2**20


def test_analytic_floor_is_a_lower_bound_of_the_real_state():
    """The pre-trace check must never refuse a model that fits: its optimizer slots and
    parameter count may not exceed what the real optax state holds."""
    from paradnn.backends.jax import step as wl
    from paradnn.backends.jax.models import build
    from paradnn.sizes import floor_bytes
    from paradnn.backends.jax.backend import state_bytes
    from paradnn.families.cnn import CNN
    from paradnn.families.fc import FC
    from paradnn.families.rnn import RNN
    from paradnn.sizes import OPTIMIZERS
    from paradnn.workload import Workload

    from paradnn.sizes import OPTIMIZERS as SLOTS

    assert set(SLOTS) == set(OPTIMIZERS)
    for spec in (FC(2, 16, 8, 4), CNN("residual", 1, 4, 32, 10), RNN("lstm", 1, 8, 4, 16)):
        for opt in OPTIMIZERS:
            w = Workload(spec, 4, "float32", opt)
            model = build(spec, "float32")
            state, _ = wl.abstract_inputs(w, model, opt)
            floor = floor_bytes(w)
            assert floor["weights_bytes"] + floor["optimizer_bytes"] <= state_bytes(state), opt
            if opt in ("rmsprop", "adam", "momentum", "sgd"):  # full slots: exact
                params = state_bytes(state["params"])
                assert floor["weights_bytes"] == params
                assert floor["optimizer_bytes"] == SLOTS[opt].floor_slots * params


# -- sweep files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("body, words", [
    # 10^15 configs: counted from the axes, refused before anything is expanded.
    ("family: fc\nlayers: {from: 1, to: 100000, step: 1}\nnodes: {from: 1, to: 100000, step: 1}\n"
     "input: {from: 1, to: 100000, step: 1}\noutput: 2\nbatch: 4\n", ["1,000,000,000,000,000",
                                                                     "max_configs"]),
    ("family: fc\nlayers: 1\nnodes: 8\ninput: 8\noutput: 2\nbatch: 4\nnodes: 16\n",
     ["duplicate key 'nodes'", "line 7"]),
    ("family: fc\nlayers: 1\nnodes: 8\ninput: 8\noutput: 2\nbatch: 4\nmax_params: .nan\n",
     ["max_params", "finite"]),
    ("family: fc\nlayers: 1\nnodes: 8\ninput: 8\noutput: 2\nbatch: 4\n"
     "settings: {time_budget_s: .inf}\n", ["time_budget_s", "finite"]),
    ("family: fc\nlayers: 1\nnodes: 8\ninput: 8\noutput: 2\nbatch: 4\nrun: {timeout_s: .nan}\n",
     ["run.timeout_s"]),
    ("family: fc\nlayers: 1\nnodes: 8\ninput: 8\noutput: 2\nbatch: 4\n"
     "settings: {steps_per_call: 1000000000000}\n", ["steps_per_call", "100000"]),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", ["nested deeper than"]),
    ("a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
     "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
     "family: fc\nlayers: 1\nnodes: 8\ninput: 8\noutput: 2\nbatch: 4\nrun: {resources: {x: *h}}\n",
     ["aliases"]),
])
def test_hostile_sweep_files_are_one_line(tmp_path, body, words):
    f = tmp_path / "s.yaml"
    f.write_text(body)
    store = tmp_path / "r.db"
    t0 = time.monotonic()
    line = one_error_line(cli("sweep", f, "--store", store, "--quiet"), str(f), *words)
    assert len(line) < 600  # echoed values are bounded
    assert time.monotonic() - t0 < 60
    assert not store.exists()  # refused before the store was opened


def test_grid_cap_is_overridable_and_counts_without_expanding(tmp_path):
    from paradnn.grids import load_sweep_file

    body = "family: fc\nlayers: {from: 1, to: 3000, step: 1}\nnodes: 8\ninput: 8\noutput: 2\nbatch: 4\n"
    f = tmp_path / "s.yaml"
    f.write_text(body)
    with pytest.raises(ParadnnError, match="3,000 configs, more than max_configs=1,000"):
        load_sweep_file(f, max_configs=1000)
    f.write_text(body + "run: {max_configs: 5000}\n")
    assert len(load_sweep_file(f).workloads) == 3000
    with pytest.raises(ParadnnError, match="max_configs"):
        grid("fc", layers=range(1, 10**12), nodes=8, input=8, output=2, batch=4)


def test_non_utf8_sweep_file(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_bytes(b"family: fc\nlayers: \xff\xfe\n")
    one_error_line(cli("sweep", f, "--store", tmp_path / "r.db", "--quiet"),
                   "not UTF-8", "0xff", "offset 19")


# -- numbers --------------------------------------------------------------------------------------

FC_ARGS = ["fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "2"]


@pytest.mark.parametrize("args, words", [
    (["run", *FC_ARGS, "--memory-limit", "1e999"], ["memory limit", "1e999"]),
    (["run", *FC_ARGS, "--batch", "99999999999999999999999"],
     ["batch='99999999999999999999999'", "9223372036854775807"]),
    (["run", *FC_ARGS, "--steps-per-call", "1e12"], ["steps_per_call", "100000"]),
    (["run", *FC_ARGS, "--cv-target", "nan"], ["cv_target", "finite"]),
    (["run", *FC_ARGS, "--batch", "2.5"], ["batch"]),
    (["sweep", "s.yaml", "--timeout", "nan"], ["timeout", "finite"]),
    (["sweep", "s.yaml", "--timeout", "inf"], ["timeout"]),
    (["sweep", "s.yaml", "--repeat", "1e999"], ["repeat"]),
    (["plot", "params", "r.db", "-o", "x.png", "--dpi", "0"], ["dpi"]),
    (["plot", "roofline", "r.db", "-o", "x.png", "--peak-flops", "inf"], ["peak-flops"]),
    (["maxbatch", *FC_ARGS, "--memory-limit=-1GB"], ["memory limit"]),
])
def test_bad_numbers_are_one_line(tmp_path, args, words):
    one_error_line(cli(*args, cwd=tmp_path), *words)


def test_big_exact_integers_and_a_huge_batch_are_handled(tmp_path):
    # "1e15" is exactly 10^15; such a batch is an oom found before tracing (the analytic floor
    # counts the input batch one device holds), never an allocation attempt or a hang.
    t0 = time.monotonic()
    proc = cli("run", *FC_ARGS, "--batch", "1e15", "--memory-limit", "1GB", "--json")
    assert proc.returncode == 1, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["batch"] == 10**15 and rec["status"] == "oom", rec["error"]
    assert "input batch" in rec["error"] and rec["oom_predicted"] and rec["step_time_s"] is None
    assert time.monotonic() - t0 < 120


# -- the CLI as a whole ----------------------------------------------------------------------------

def test_every_flag_has_help_and_store_commands_default_to_results_db(tmp_path):
    import argparse

    from paradnn.cli import build_parser

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, path + [name])
            elif action.option_strings and action.dest not in ("help", "version"):
                yield path, action

    missing = [(" ".join(p), a.option_strings[0]) for p, a in walk(build_parser(), []) if not a.help]
    assert missing == []
    make_store(tmp_path / "results.db", n=2)
    proc = cli("status", cwd=tmp_path)
    assert proc.returncode == 0 and "2 rows" in proc.stdout, proc.stderr
    proc = cli("export", "-o", "rows.csv", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "rows.csv").exists(), proc.stderr


def test_every_path_argument_goes_through_the_guard():
    """Every argument of every subcommand that names a file or folder declares what the command
    does with it (paradnn.outputs.path_type): a new file-writing option that skips the guard
    fails here. Arguments are found by their names (flag, dest, metavar), not by the tag."""
    import argparse
    import dataclasses

    from paradnn import families
    from paradnn.cli import build_parser
    from paradnn.outputs import ROLES, path_arg

    path_words = {"o", "output", "out", "dir", "file", "path", "csv", "json", "md", "markdown",
                  "html", "png", "svg", "pdf", "parquet", "plot", "figure", "save", "dump",
                  "write", "store", "stores", "log", "trace", "report", "data", "cache"}
    # A workload's own parameters are numbers (FC's --output is its classes), not paths.
    spec_flags = {f"--{f.name}" for n in families.names()
                  for f in dataclasses.fields(families.get(n).spec)}

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, path + [name])
            else:
                yield path, parser, action

    def check(root):
        undeclared, outputs, forced = [], [], set()
        for path, parser, action in walk(root, []):
            if action.dest in ("help", "version") or action.nargs == 0:
                if action.dest == "force":
                    forced.add(id(parser))
                continue
            names = [*action.option_strings, action.dest, str(action.metavar or "")]
            words = {w for n in names for w in re.split(r"[^a-z0-9]+", n.lower()) if w}
            spec = path_arg(action)
            if spec is not None:
                assert spec.role in ROLES
                if spec.role in ("output", "folder"):
                    outputs.append((path, parser, action, spec))
                continue
            if words & path_words and not set(action.option_strings) & spec_flags:
                undeclared.append((" ".join(path), action.option_strings or action.dest))
        return undeclared, outputs, forced

    # The detector finds an option added without the guard (so the check below can fail).
    probe = build_parser()
    sub = next(a for a in probe._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["status"].add_argument("--svg", metavar="FILE", help="a new figure")
    sub.choices["status"].add_argument("--save-to", help="a new output")
    assert check(probe)[0] == [("status", ["--svg"]), ("status", ["--save-to"])]

    undeclared, outputs, forced = check(build_parser())
    assert undeclared == []
    assert {s.flag for *_, s in outputs} >= {"plot -o", "export -o", "report -o", "profile -o",
                                              "plan --csv", "infeed --plot", "compare --plot",
                                              "compare --json", "compare --markdown"}
    for path, parser, action, spec in outputs:
        # An output file's format is its suffix, checked while parsing; a command that replaces
        # files has --force (the only way past a file paradnn did not write).
        assert spec.role == "folder" or spec.suffixes, spec
        assert id(parser) in forced, (" ".join(path), action.option_strings)


# -- damaged store files (issue 24) -----------------------------------------------------------------
# Real SQLite files damaged by the test: cut short, header bytes overwritten, one data page
# zeroed, or a page's cell count lowered (SQLite then loses a row without any error).

LIMIT_S, LIMIT_RSS = 30.0, 1 << 30  # each case: within 30 s and 1 GB (issue 24)


#: Runs a command and writes its peak resident set (KiB, its descendants included) to a file.
#: Linux starts a forked child's ``ru_maxrss`` at its parent's resident set (the copied address
#: space's high-water mark survives exec), so a command started straight from a test worker that
#: has loaded TensorFlow and PyTorch "peaks" at the worker's 1.6 GB. This small interpreter is
#: that worker's child; the command is a child of the small interpreter, so its own peak counts.
_MEASURE_RSS = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[2:]); "
                "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN)"
                ".ru_maxrss)); sys.exit(rc)")


def bounded(*args: str, cwd: Path | None = None, environ: dict | None = None) -> subprocess.CompletedProcess:
    """``cli(*args)`` that also asserts the command's wall time and peak memory (its maximum
    resident set, children included, from getrusage in a small launcher: _MEASURE_RSS) stay
    within LIMIT_S and LIMIT_RSS."""
    import signal
    import tempfile
    import threading

    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp) / "maxrss"
        t0 = time.monotonic()
        with open(os.devnull, "rb") as stdin, \
                subprocess.Popen([sys.executable, "-c", _MEASURE_RSS, str(rss_file), sys.executable,
                                  "-m", "paradnn", *map(str, args)], stdin=stdin,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                                 env=environ or env(), start_new_session=True) as proc:
            streams: dict[str, bytes] = {}
            readers = [threading.Thread(target=lambda n, s: streams.__setitem__(n, s.read()),
                                        args=(n, s)) for n, s in (("out", proc.stdout), ("err", proc.stderr))]
            for r in readers:
                r.start()
            # The launcher and the command share a new session: a kill reaches both.
            killer = threading.Timer(4 * LIMIT_S, lambda: os.killpg(proc.pid, signal.SIGKILL))
            killer.start()
            proc.wait()
            killer.cancel()
            for r in readers:
                r.join()
        seconds = time.monotonic() - t0
        max_rss_kib = int(rss_file.read_text()) if rss_file.exists() else None
    done = subprocess.CompletedProcess(args, proc.returncode, streams["out"].decode(),
                                       streams["err"].decode())
    assert seconds < LIMIT_S, (args, seconds, done.stderr)
    assert max_rss_kib is not None, (args, "killed before its peak memory was read", done.stderr)
    assert max_rss_kib * 1024 < LIMIT_RSS, (args, max_rss_kib, "KiB")
    return done


def page_size(store: Path) -> int:
    raw = int.from_bytes(store.read_bytes()[16:18], "big")  # SQLite's header: 1 means 65536
    return 65536 if raw == 1 else raw


def leaf_of(store: Path, key: str) -> int:
    """Number (from 1) of the table-leaf page that holds the row with ``key``: the one page of
    type 0x0D (a table b-tree leaf; SQLite's file format) whose bytes contain the key (the
    key column sits at the start of the row's cell, so on the leaf even when the row overflows).
    """
    data, size = store.read_bytes(), page_size(store)
    pages = set()
    at = data.find(key.encode())
    while at >= 0:
        n = at // size
        if data[n * size + (100 if n == 0 else 0)] == 0x0D:
            pages.add(n + 1)
        at = data.find(key.encode(), at + 1)
    assert len(pages) == 1, (key, pages)
    return pages.pop()


def damage_page(store: Path, page: int, how: str) -> None:
    """``zero``: every byte of the page 0 (SQLite reports the page corrupt); ``drop cell``: the
    page's cell count one lower, so the page's last row is silently gone from every scan."""
    size = page_size(store)
    data = bytearray(store.read_bytes())
    at = (page - 1) * size
    if how == "zero":
        data[at:at + size] = bytes(size)
    else:
        count = int.from_bytes(data[at + 3:at + 5], "big")
        assert count >= 1
        data[at + 3:at + 5] = (count - 1).to_bytes(2, "big")
    store.write_bytes(bytes(data))


def truncate_whole_pages(store: Path) -> None:
    os.truncate(store, store.stat().st_size // page_size(store) // 2 * page_size(store))


def truncate_mid_page(store: Path) -> None:
    os.truncate(store, store.stat().st_size - 1000)


def truncate_in_header(store: Path) -> None:
    os.truncate(store, 60)


def damage_page_size(store: Path) -> None:
    with open(store, "r+b") as f:
        f.seek(16)
        f.write(b"\x00\x03")  # page size 3: not a power of two from 512 to 65536


def damage_payload_fractions(store: Path) -> None:
    with open(store, "r+b") as f:
        f.seek(21)
        f.write(b"\x00\x00\x00")


def damage_schema_format(store: Path) -> None:
    with open(store, "r+b") as f:
        f.seek(44)
        f.write((251).to_bytes(4, "big"))


UNOPENABLE = {
    "truncated to whole pages": (truncate_whole_pages, "truncated"),
    "truncated inside the header": (truncate_in_header, "truncated"),
    "page size damaged": (damage_page_size, "page size (bytes 16-17)"),
    "payload fractions damaged": (damage_payload_fractions, "payload fractions (bytes 21-23)"),
    "schema format damaged": (damage_schema_format, "schema format (bytes 44-47)"),
}


def store_commands(store: Path, tmp_path: Path) -> dict[str, list]:
    """Every command that reads or writes a store, with the outputs it would write."""
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE)
    return {
        "status": ["status", store],
        "export": ["export", store, "-o", tmp_path / "rows.csv"],
        "report": ["report", store, "-o", tmp_path / "report"],
        "merge": ["merge", store, "-o", tmp_path / "merged.db"],
        "sweep": ["sweep", f, "--store", store, "--quiet"],
        "plot": ["plot", "heatmap", store, "-o", tmp_path / "fig.png"],
        "plan --store": ["plan", f, "--store", store],
        "ops --store": ["ops", "--matmul", "8x8x8", "--store", store],
    }


@pytest.mark.slow
@pytest.mark.parametrize("case", ["truncated to whole pages", "page size damaged"])
def test_unopenable_store_is_one_line_from_every_command(tmp_path, case):
    damage, words = UNOPENABLE[case]
    store = make_store(tmp_path / "r.db", n=40)
    damage(store)
    before = store.read_bytes()
    for name, args in store_commands(store, tmp_path).items():
        line = one_error_line(bounded(*args), f"store {store}", words)
        assert "restore it from a copy" in line, (name, line)
        assert store.read_bytes() == before, name
    for out in ("rows.csv", "report", "merged.db", "fig.png"):
        assert not (tmp_path / out).exists(), out


@pytest.mark.parametrize("case", sorted(UNOPENABLE))
def test_unopenable_store_is_one_store_error_naming_what_is_wrong(tmp_path, case):
    from paradnn.errors import StoreError
    from paradnn.store import check_store, merge

    damage, words = UNOPENABLE[case]
    store = make_store(tmp_path / "r.db", n=40)
    damage(store)
    before = store.read_bytes()
    for attempt in (lambda: load(store), lambda: Store(store), lambda: check_store(store),
                    lambda: merge([store], tmp_path / "m.db")):
        with pytest.raises(StoreError) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith(f"store {store}: ") and words in message and "\n" not in message
    assert store.read_bytes() == before and not (tmp_path / "m.db").exists()


def test_every_header_byte_damaged_is_one_error_or_loses_nothing(tmp_path):
    """Each byte after the 16-byte magic string, flipped: reading either fails with one
    StoreError naming the store or gives every row, leaving the file as it was; writing either
    fails the same way or adds the row with every old row still there."""
    from paradnn.errors import ParadnnWarning, StoreError

    good = make_store(tmp_path / "good.db", n=12).read_bytes()
    store, outcomes = tmp_path / "r.db", {"refused": 0, "read": 0, "written": 0}
    for offset in range(16, 100):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
        data = bytearray(good)
        data[offset] ^= 0xFF
        store.write_bytes(bytes(data))
        t0 = time.monotonic()
        with _ignore(ParadnnWarning):
            try:
                assert len(load(store)) == 12, offset
                outcomes["read"] += 1
            except StoreError as exc:
                assert str(exc).startswith(f"store {store}: ") and "\n" not in str(exc), offset
                outcomes["refused"] += 1
            assert store.read_bytes() == bytes(data), offset  # reading changed nothing
            try:
                with Store(store) as s:
                    s.add(row(99, time_utc="2027-01-01T00:00:00+00:00"))
                assert len(load(store)) == 13, offset
                outcomes["written"] += 1
            except StoreError as exc:
                assert str(exc).startswith(f"store {store}: ") and "\n" not in str(exc), offset
        assert time.monotonic() - t0 < LIMIT_S
    assert outcomes["refused"] >= 10 and outcomes["read"] >= 50, outcomes


def _ignore(category):
    import contextlib
    import warnings

    @contextlib.contextmanager
    def quiet():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category)
            yield

    return quiet()


def index_pages(store: Path) -> list[int]:
    """Numbers of every index b-tree page (type 0x0A leaf or 0x02 interior; page 1 is a table)."""
    data, size = store.read_bytes(), page_size(store)
    return [n + 1 for n in range(1, len(data) // size) if data[n * size] in (0x02, 0x0A)]


def keys_in_order(store: Path) -> list[str]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as con:
        keys = [k for (k,) in con.execute("SELECT key FROM records ORDER BY id")]
    con.close()
    return keys


@pytest.mark.parametrize("how", ["zero", "drop cell"])
def test_rows_on_a_damaged_page_are_named_and_count_as_not_measured(tmp_path, how):
    from paradnn.errors import ParadnnWarning
    from paradnn.store import DAMAGE_ATTR

    store = make_store(tmp_path / "r.db", n=30, compact=how == "drop cell")
    keys = keys_in_order(store)
    page = leaf_of(store, keys[10])
    assert page not in (1, leaf_of(store, keys[-1]))
    # The rows that page holds (its header's cell count): as many rows per page as their size
    # allows (a row past SQLite's local payload limit keeps only its head on the leaf).
    size = page_size(store)
    cells = int.from_bytes(store.read_bytes()[(page - 1) * size + 3:(page - 1) * size + 5], "big")
    assert 1 <= cells < 30
    damage_page(store, page, how)
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as con:
        if how == "drop cell":  # the silent case: SQLite itself loses the row without an error
            assert len(con.execute("SELECT key FROM records NOT INDEXED").fetchall()) == 29
        else:
            with pytest.raises(sqlite3.DatabaseError):
                con.execute("SELECT key FROM records NOT INDEXED").fetchall()
    con.close()
    before = store.read_bytes()
    with pytest.warns(ParadnnWarning) as caught:
        df = load(store)
    lost = set(keys) - set(df["key"])
    assert len(lost) == (cells if how == "zero" else 1) and len(df) == 30 - len(lost)
    messages = paradnn_messages(caught)
    assert len(messages) == 1 and f"{len(lost)} row(s) cannot be read" in messages[0]
    # The message names the first few and counts the rest; the damage attribute lists them all.
    from paradnn.store.damage import _NAMED

    assert sum(k in messages[0] for k in lost) == min(len(lost), _NAMED) and "quick_check" in messages[0]
    assert len(lost) <= _NAMED or f"and {len(lost) - _NAMED} more" in messages[0]
    damage = df.attrs[DAMAGE_ATTR]
    assert {u["key"] for u in damage["unreadable"]} == lost and damage["problems"][str(store)]
    assert store.read_bytes() == before  # reading changed nothing
    with pytest.warns(ParadnnWarning, match="quick_check"), Store(store) as s:
        counts = s.counts_by_key()
        assert set(counts) == set(keys) - lost
        gone = sorted(lost)[0]
        assert s.claim(gone, 1, 60) is not None  # measured again
        assert s.claim(keys[-1], 1, 60) is None  # intact: done
        s.add(row(99, time_utc="2027-01-01T00:00:00+00:00"))
    with pytest.warns(ParadnnWarning):
        assert len(load(store)) == 31 - len(lost)


def test_unreadable_table_past_a_page_with_no_index_left_is_an_unknown_number(tmp_path):
    from paradnn.errors import ParadnnWarning
    from paradnn.store import DAMAGE_ATTR

    store = make_store(tmp_path / "r.db", n=30)
    keys = keys_in_order(store)
    damage_page(store, leaf_of(store, keys[10]), "zero")
    for page in index_pages(store):
        damage_page(store, page, "zero")
    with pytest.warns(ParadnnWarning) as caught:
        df = load(store)
    assert 0 < len(df) < 30 and list(df["key"]) == keys[:len(df)]  # the rows before the page
    message = paradnn_messages(caught)[0]
    assert "an unknown number of row(s) cannot be read" in message
    assert f"the rows after row id {len(df)}" in message
    assert df.attrs[DAMAGE_ATTR]["unreadable"][-1]["cause"] == "unreachable"


def test_store_cut_inside_its_last_page_loads_the_rows_before_the_cut(tmp_path):
    from paradnn.errors import ParadnnWarning

    store = make_store(tmp_path / "r.db", n=30)
    keys = keys_in_order(store)
    os.truncate(store, store.stat().st_size - 1000)
    with pytest.warns(ParadnnWarning) as caught:
        df = load(store)
    message = paradnn_messages(caught)[0]
    assert "truncated" in message and "not a whole number of 4096-byte pages" in message
    lost = set(keys) - set(df["key"])
    assert lost and all(k in message for k in lost) and len(df) == 30 - len(lost)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["zero", "drop cell"])
def test_damaged_page_is_reported_by_status_and_a_resumed_sweep_measures_it_again(tmp_path, how):
    # 12 configs: a record row is about 4.3 KB, past SQLite's largest cell on a 4 KiB page, so a
    # leaf holds the first ~490 bytes of about 8 rows (the rest on overflow pages); 12 rows
    # span two leaves, and the first can be damaged while the last stays sound.
    nodes = list(range(8, 20))
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE.replace("nodes: 8", f"nodes: {nodes}"))
    store = tmp_path / "r.db"
    first = cli("sweep", f, "--store", store, "--quiet", "--executor", "inprocess")
    assert first.returncode == 0 and f"{len(nodes)} measured now" in first.stdout, first.stderr
    keys = keys_in_order(store)
    page = leaf_of(store, keys[0])
    assert page != leaf_of(store, keys[-1])  # new rows go to the last leaf, which stays sound
    damage_page(store, page, how)
    from paradnn.errors import ParadnnWarning

    with pytest.warns(ParadnnWarning):
        lost = set(keys) - set(load(store)["key"])
    assert lost
    status = bounded("status", store)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert "no failures" not in status.stdout and "unreadable" in status.stdout
    # The table counts them and shows an example (its message line is cut to the terminal);
    # the warning line names every lost key.
    assert f": {len(lost)} row(s)" in status.stdout, status.stdout
    assert any(k in status.stdout for k in lost), status.stdout
    warning = status.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("paradnn: warning: ")
    # It counts them and names the first few keys ("and N more" beyond).
    from paradnn.store.damage import _NAMED

    named = [k for k in lost if k in warning[0]]
    assert f"{len(lost)} row(s) cannot be read" in warning[0], warning[0]
    assert len(named) == min(len(lost), _NAMED)
    assert len(lost) <= _NAMED or f"and {len(lost) - _NAMED} more" in warning[0]
    resumed = cli("sweep", f, "--store", store, "--quiet", "--executor", "inprocess")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(lost)} measured now" in resumed.stdout, resumed.stdout
    with pytest.warns(ParadnnWarning):
        df = load(store)
    assert set(df["key"]) == set(keys) and len(df) == len(keys)  # each config once, intact
    again = cli("sweep", f, "--store", store, "--quiet", "--executor", "inprocess")
    assert again.returncode == 0 and "0 measured now" in again.stdout, again.stdout


def test_structure_damage_without_lost_rows_is_a_status_group(tmp_path):
    """A damaged free-list count (header bytes 36-39) loses no row but breaks the next page
    allocation: quick_check finds it, status shows it (count 0), and a write fails with one
    StoreError that names the way out, leaving every row."""
    from paradnn.errors import ParadnnWarning, StoreError
    from paradnn.status import failures
    from paradnn.store import merge

    store = make_store(tmp_path / "r.db", n=12)
    data = bytearray(store.read_bytes())
    data[39] ^= 0xFF
    store.write_bytes(bytes(data))
    with pytest.warns(ParadnnWarning, match="quick_check found 1 problem"):
        table = failures(store)
    (group,) = table.to_dict("records")
    assert group["status"] == "damaged" and group["count"] == 0 and "freelist" in group["error"]
    assert group["next_command"] == f"paradnn merge {store} -o NEW.db"
    with pytest.warns(ParadnnWarning), pytest.raises(StoreError, match="paradnn merge"):
        with Store(store) as s:
            s.add_rows([row(99 + i, time_utc=f"2027-01-01T00:00:{i:02d}+00:00") for i in range(40)])
    merged = tmp_path / "new.db"
    with pytest.warns(ParadnnWarning):
        assert merge([store], merged) == (12, 0)
    assert len(load(merged)) == 12


# -- the newer commands (issue 23): each hostile input ends in one line, within 30 s and 1 GB ----

TINY_CNN = ["cnn", "--block", "residual", "--blocks", "1", "--filters", "4", "--image", "32",
            "--output", "10", "--batch", "2"]
TRANSFORMER = ["transformer", "--layers", "1", "--d_model", "32", "--heads", "2", "--d_ff", "64",
               "--vocab", "64", "--batch", "1"]


OUTCOMES = ("ok", "oom", "error", "timeout", "crashed")


def without_progress(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``proc`` with the progress lines of ``run`` left out of its stderr (the first line
    naming what it measures, and heartbeats naming a phase): what is left is the outcome."""
    lines = [line for line in proc.stderr.strip().splitlines()
             if not line.startswith("paradnn: measuring ")
             and not re.match(r"paradnn: [^:]+: .* for .* so far\)", line)]
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, "\n".join(lines))


def one_outcome_line(proc: subprocess.CompletedProcess, status: str, *words: str) -> str:
    """Exit 1 with a recorded outcome, said in one stderr line ``paradnn: <status>: ...``, the
    last one (after the progress lines)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    outcomes = [line for line in lines if any(line.startswith(f"paradnn: {o}: ") for o in OUTCOMES)]
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert outcomes == lines[-1:] and outcomes[0].startswith(f"paradnn: {status}: "), proc.stderr
    lines = outcomes
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_transformer_at_a_billion_tokens_is_refused_before_tracing(positions):
    # Sinusoidal positions have no parameters per token: only the activation floor (block inputs
    # and logits) and the token batch can refuse it before anything is traced.
    proc = bounded("run", *TRANSFORMER, "--length", "1000000000", "--positions", positions, "--json")
    one_outcome_line(proc, "oom", "predicted before compiling", "B per device > limit")
    rec = json.loads(proc.stdout)
    assert rec["status"] == "oom" and rec["oom_predicted"] is True
    if positions == "sinusoidal":
        assert "activations at least" in rec["error"]


def test_activation_floor_is_below_the_compiled_total():
    """The floor must never refuse a Transformer that fits: below XLA's compiled peak."""
    from paradnn.measure import MeasureSettings
    from paradnn.runner import run_workload
    from paradnn.sizes import floor_bytes
    from paradnn.workload import Workload, spec_from_dict

    spec = spec_from_dict({"family": "transformer", "layers": 2, "d_model": 32, "heads": 2,
                           "d_ff": 64, "length": 64, "vocab": 512, "positions": "sinusoidal"})
    w = Workload(spec, 4)
    rec = run_workload(w, MeasureSettings(steps_per_call=1, warmup_calls=1, min_calls=6, max_calls=6,
                                          time_budget_s=0.1))
    assert rec.status == "ok", rec.error
    assert floor_bytes(w)["activations_bytes"] > 0
    assert floor_bytes(w)["total_bytes"] <= rec.metrics["memory_peak_bytes"]


@pytest.mark.parametrize("args, words", [
    (["rnn", "--cell", "lstm", "--layers", "1", "--embed", "16", "--length", "4", "--vocab", "1e12",
      "--batch", "2"], ["rnn on jax", "33000000002112 parameters"]),
    (TINY_CNN[:7] + ["--image", "100000", "--output", "10", "--batch", "2"], ["input batch", "B per device"]),
])
def test_recorded_oom_of_run_says_so_in_one_line(args, words):
    one_outcome_line(bounded("run", *args), "oom", *words)


def test_ok_run_says_so_in_one_line():
    # Not bounded: on a busy host the CPU's peak probe is not cached and runs with every command.
    proc = cli("run", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "2",
                   "--steps-per-call", "1", "--warmup-calls", "1", "--warmup-s", "0", "--min-calls", "6",
                   "--max-calls", "6", "--time-budget-s", "0.1")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("paradnn: ok: fc on jax measured: "), proc.stderr


def test_ops_step_counts_and_sizes_are_bounded():
    one_error_line(bounded("ops", "--matmul", "2048x2048x2048", "--steps-per-call", "100000"),
                   "steps_per_call=100000", "time budget")
    proc = bounded("ops", "--matmul", "1000000x1000000x1000000")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "oom: predicted before compiling" in proc.stderr


@pytest.mark.parametrize("args", [
    ["collectives", "--devices", "65536", "--simulate-devices"],
    ["scaling", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "2",
     "--devices", "1,65536", "--simulate-devices"],
])
def test_simulated_device_counts_are_bounded_by_the_host(args):
    one_error_line(bounded(*args), "devices=65536", "simulated devices")


def test_collective_beyond_memory_is_an_oom_row():
    proc = bounded("collectives", "--devices", "2", "--simulate-devices", "--sizes", "100GB",
                   "--collective", "all_reduce")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "all_reduce 100000000000 B over 2 devices: oom: predicted before compiling" in proc.stderr


@pytest.mark.slow
def test_collectives_defaults_on_simulated_cpu_devices_finish_with_progress():
    from paradnn import backends

    if backends.get("jax").device_info()["device_platform"] != "cpu":
        pytest.skip("the CPU defaults apply on a CPU host")
    t0 = time.monotonic()
    proc = cli("collectives", "--devices", "8", "--simulate-devices", timeout=240)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert time.monotonic() - t0 < 120
    lines = proc.stderr.splitlines()
    assert any(line.startswith("paradnn: collectives: defaults for a CPU host: --sizes 1KB..1MB") for line in lines)
    progress = [line for line in lines if re.match(r"paradnn: collectives \d+/40: ", line)]
    assert len(progress) == 40, proc.stderr


@pytest.mark.parametrize("content, attrs, words", [
    (bytes(range(256)) * 8, [], ["not a CSV file"]),
    (b'a,b\n1,2\n"x\n', [], ["not a CSV file"]),
    (b"a,b\n1,2\n", [], ["column 'category' missing"]),
    (b"category,time_s,time_fraction,flops,bytes,flops_per_sec,arithmetic_intensity\nmatmul,x,1,2,3,2,0.6\n",
     [], ["column 'time_s'", "not numbers"]),
    (b"category,time_s,time_fraction,flops,bytes,flops_per_sec,arithmetic_intensity\nmatmul,1,1,2,3,2,0.6\n",
     ["--ops-attr", "peak_flops=banana"], ["peak_flops", "banana", "finite number"]),
])
def test_report_ops_input_is_checked(tmp_path, content, attrs, words):
    store = make_store(tmp_path / "r.db")
    ops = tmp_path / "ops.csv"
    ops.write_bytes(content)
    one_error_line(bounded("report", store, "-o", tmp_path / "rep", "--ops", ops, *attrs), *words)
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("command", ["plan --store", "ops --store"])
def test_truncated_store_is_one_line_for_plan_and_ops(tmp_path, command):
    store = make_store(tmp_path / "r.db", n=40)
    truncate_whole_pages(store)
    before = store.read_bytes()
    one_error_line(bounded(*store_commands(store, tmp_path)[command]), f"store {store}", "truncated")
    assert store.read_bytes() == before


def test_infeed_file_side_is_bounded_before_compiling(tmp_path):
    one_error_line(bounded("infeed", *TINY_CNN, "--jpeg-side", "8192", "--data-dir", tmp_path / "jpegs"),
                   "jpeg_side=8192", "128 px")
    assert not (tmp_path / "jpegs").exists()


def _has_cuda() -> bool:
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia").exists()


@pytest.mark.skipif(_has_cuda(), reason="this host has an NVIDIA GPU: JAX_PLATFORMS=cuda starts")
def test_cuda_platform_on_a_host_without_cuda_is_one_line(tmp_path):
    cuda = env(JAX_PLATFORMS="cuda")
    f = sweep_file(tmp_path / "s.yaml", SMALL_FILE)
    store = tmp_path / "r.db"
    run = bounded("run", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "2", environ=cuda)
    one_error_line(without_progress(run), "JAX_PLATFORMS='cuda'")
    one_error_line(bounded("sweep", f, "--store", store, "--quiet", environ=cuda), "JAX_PLATFORMS='cuda'")
    assert not store.exists()  # the executor starts before the store is opened: nothing made


def thread_masks(workload, settings, memory_limit_bytes):
    """A record of the CPU masks of every thread of the measuring worker (numpy's BLAS pool
    included: it started before the worker pinned itself)."""
    import numpy  # noqa: F401 - its BLAS threads are what is checked

    masks = sorted({",".join(map(str, sorted(os.sched_getaffinity(int(t)))))
                    for t in os.listdir("/proc/self/task")})
    record = fake_ok(workload, settings, memory_limit_bytes)
    return record.with_metrics(thread_masks=";".join(masks))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two CPUs to tell apart")
def test_a_pinned_measuring_worker_keeps_every_thread_to_its_cpus(tmp_path, monkeypatch):
    """PARADNN_CPUS_MEASURE (benchmarks) pins the whole worker, not only its main thread: a
    worker whose BLAS threads kept every core probed a one-CPU peak on two."""
    from paradnn.sweeper import sweep

    one = min(os.sched_getaffinity(0))
    monkeypatch.setenv("PARADNN_CPUS_MEASURE", str(one))
    df = sweep(grid("fc", layers=1, nodes=8, input=8, output=2, batch=4), store=tmp_path / "p.db",
               settings=TINY, run_fn=thread_masks, cache_dir=None, progress=False)
    assert list(df["thread_masks"]) == [str(one)]
    assert df["device_kind"].iloc[0].startswith("cpu (affinity 1 of ")
