"""The GPU check's packaging (issue 32): a device machine returns at most 8 files of 16 MiB, so
``benchmarks/gpu_validation.sh`` leaves exactly three in its output folder (one archive, repacked
after every step, and the two summaries). Rehearsed on the CPU with ``--cpu-smoke``, two steps
selected by ``STEPS`` and a short budget, so the test stays within seconds of a CPU run."""

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_validation.sh"


@pytest.mark.slow
def test_cpu_smoke_part_returns_three_files_with_everything_inside(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    env = dict(os.environ, PYTHON=sys.executable, STEPS="env,fc_bfloat16", BUDGET_S="240",
               WORK_DIR=str(work), PARADNN_CACHE=str(tmp_path / "cache"))
    run = subprocess.run(["bash", str(SCRIPT), "--cpu-smoke", "--part", "1", str(out)], env=env,
                         capture_output=True, text=True, timeout=600)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["results-part1.tar.gz", "summary.json", "summary.md"], (files, run.stdout[-3000:], run.stderr[-3000:])
    assert all((out / f).stat().st_size < 16 * 2**20 for f in files)
    with tarfile.open(out / "results-part1.tar.gz") as tar:
        names = {n.removeprefix("./") for n in tar.getnames()}
    assert {"steps.jsonl", "summary.md", "env.json", "fc_bfloat16.json", "logs/fc_bfloat16.log"} <= names, names
    summary = json.loads((out / "summary.json").read_text())
    assert [s["step"] for s in summary["steps"]] == ["env", "fc_bfloat16"]
    assert all(s["status"] == "ok" for s in summary["steps"]), summary["steps"]
    verdicts = {c["check"]: c["verdict"] for c in summary["checks"]}
    # The steps that ran were checked; those of part 2 read "not run", and none failed.
    assert verdicts["FC bfloat16 memory limit"] == "pass"
    assert verdicts["paper LSTM config (bfloat16)"].startswith("not run")
    assert "FAIL" not in verdicts.values() and run.returncode == 0, verdicts


def test_a_bad_part_is_refused_with_exit_status_2(tmp_path):
    run = subprocess.run(["bash", str(SCRIPT), "--part", "3", str(tmp_path / "out")], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and "--part must be 1, 2 or all, not '3'" in run.stderr
    assert not (tmp_path / "out").exists()


def _script_steps() -> set[str]:
    """The step names gpu_validation.sh can run: every ``step NAME``, with the loop variable of
    ``for dt in ...; do step "fc_$dt"`` expanded."""
    text = SCRIPT.read_text()
    loop = re.search(r"^for dt in ([\w ]+); do$", text, re.M).group(1).split()
    names = set()
    for name in re.findall(r"^\s*step\s+(\S+)", text, re.M):
        name = name.strip('"')
        if "$dt" in name:
            names.update(name.replace("$dt", dt) for dt in loop)
        else:
            names.add(name)
    return names


def test_the_documented_commands_name_only_steps_the_script_has():
    """A misspelt name in STEPS runs nothing for it, silently: on a GPU lent for minutes that is a
    lost step. Every STEPS list in docs/gpu.md must name steps the script has."""
    steps = _script_steps()
    assert {"env", "fc_bfloat16", "fc_float32", "gpu_peers_cnn_lstm", "best_cnn", "report"} <= steps, steps
    lists = re.findall(r"STEPS=([\w,]+)", (ROOT / "docs" / "gpu.md").read_text())
    assert len(lists) >= 3, lists
    for listed in lists:
        names = listed.strip(",").split(",")
        if names == ["a", "b"]:  # the prose's placeholder
            continue
        assert set(names) <= steps, (listed, set(names) - steps)


def test_steps_the_budget_cut_read_not_run_rather_than_fail(tmp_path):
    """A step skipped for want of time measured nothing: its checks say so and why, and do not
    count as failures (the first H100 run's summary read FAIL with "None: None" for them)."""
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, STEPS="env,lstm,cnn", BUDGET_S="10", WORK_DIR=str(tmp_path / "work"),
               PARADNN_CACHE=str(tmp_path / "cache"))
    run = subprocess.run(["bash", str(SCRIPT), "--cpu-smoke", "--part", "all", str(out)], env=env,
                         capture_output=True, text=True, timeout=300)
    summary = json.loads((out / "summary.json").read_text())
    assert [(s["step"], s["status"]) for s in summary["steps"]] == [("env", "skipped"), ("lstm", "skipped"),
                                                                    ("cnn", "skipped")]
    checks = {c["check"]: c for c in summary["checks"]}
    for name in ("paper LSTM config (bfloat16)", "paper CNN config (bfloat16)"):
        assert checks[name]["verdict"] == "not run (skipped)", checks[name]
        assert checks[name]["value"] == "time budget of 10 s spent"
    assert checks["FC bfloat16 at twice the batch"]["verdict"].startswith("not run (the other part")
    assert "FAIL" not in {c["verdict"] for c in checks.values()} and run.returncode == 0, (checks, run.stderr[-2000:])
