"""The report's sections on frameworks, memory breakdown, energy and host/device utilization:
each appears when the store has its data and is listed as missing, with what it needs and the
command that supplies it, when not. Stores are made of real tiny JAX runs (tests/data/fwrows.py)
and planted rows; the page is written by the library and by the real CLI."""

import base64
import math
import re
import struct
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import paradnn
from paradnn import grids, report
from paradnn.store import Store

from data import fwrows


FACTORS = [2.0, 0.5, 1.5]
EXTRA = ("frameworks", "memory", "energy", "host_utilization")


def _with_meters(rows: list[dict]) -> list[dict]:
    """Planted energy and host-utilization readings (a GPU host's NVML counter, /proc/stat)."""
    out = []
    for k, r in enumerate(rows):
        power = 100.0 + 10 * k
        out.append({**r, "energy_source": "nvml", "energy_note": "planted NVML reading",
                    "power_w": power, "energy_per_example_j": power / r["examples_per_sec"],
                    "energy_per_step_j": power * r["batch"] / r["examples_per_sec"],
                    "examples_per_joule": r["examples_per_sec"] / power,
                    "host_cpu_utilization": 0.25 + 0.1 * k, "device_busy_fraction": None,
                    "device_busy_note": "CPU backend: no device kernels to trace"})
    return out


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """A store with everything: real JAX rows and planted TensorFlow rows, with meters."""
    jax_rows = fwrows.jax_rows()
    rows = _with_meters(jax_rows) + _with_meters(fwrows.planted(jax_rows, "tensorflow", FACTORS))
    path = tmp_path_factory.mktemp("full") / "full.db"
    with Store(path) as s:
        s.add_rows(rows)
    return path, paradnn.load(path)


def _ids(df):
    sections, missing = report.plan(df)
    return [s.id for s in sections], {m.id: m for m in missing}


def test_sections_appear_with_their_data(full):
    _, df = full
    ok, missing = _ids(df)
    assert all(i in ok for i in EXTRA) and not any(i in missing for i in EXTRA)
    # Frameworks read with the speedups, before utilization; the meters at the end.
    assert ok.index("frameworks") == ok.index("utilization") - 1
    assert ok[-3:] == ["memory", "energy", "host_utilization"]


def test_real_runs_alone(full):
    """Only the real JAX rows: one framework, the memory breakdown measured; energy and
    utilization as this host's meters gave them."""
    _, df = full
    jax = df[df["framework"] == "jax"].drop(columns=[c for c in df.columns if c.startswith(
        ("energy", "power", "examples_per_joule", "host_cpu", "device_busy"))])
    real = pd.DataFrame(fwrows.jax_rows())
    ok, missing = _ids(real)
    assert "memory" in ok
    assert "frameworks" in missing and "two frameworks" in missing["frameworks"].needs
    assert "has jax" in missing["frameworks"].needs
    measured = (real["energy_source"] != "unavailable").any()
    assert ("energy" in ok) == bool(measured)
    if not measured:
        m = missing["energy"]
        # The reason comes from the records, and the fix names the counters.
        assert real["energy_note"].iloc[0] in m.needs
        assert "NVML" in m.change and "RAPL" in m.change and m.command.startswith("paradnn sweep")
    has_host = real["host_cpu_utilization"].notna().any()
    assert ("host_utilization" in ok) == bool(has_host)
    ok_old, missing_old = _ids(jax.drop(columns=[c for c in jax.columns if c.startswith("memory_")]))
    assert "memory" in missing_old and "memory_activations_bytes" in missing_old["memory"].needs
    assert "host_utilization" in missing_old and "energy" in missing_old


def test_missing_framework_gives_a_sweep_file_under_tensorflow(tmp_path):
    real = pd.DataFrame(fwrows.jax_rows())
    _, missing = _ids(real)
    m = missing["frameworks"]
    assert m.command == "paradnn sweep speedup-framework.yaml --store results.db"
    assert "tensorflow" in m.change and "paradnn[tf]" in m.change
    assert m.configs == 3 and m.seconds > 0
    path = tmp_path / "speedup-framework.yaml"
    path.write_text(m.sweep_file)
    plan = grids.load_sweep_file(str(path))
    workloads = plan.workloads if hasattr(plan, "workloads") else plan
    got = sorted((w.spec.family, w.batch, w.framework) for w in workloads)
    assert got == [("fc", 4, "tensorflow"), ("fc", 8, "tensorflow"), ("rnn", 2, "tensorflow")]


def test_frameworks_section_caption_and_table(full):
    _, df = full
    sections, _ = report.plan(df)
    fw = next(s for s in sections if s.id == "frameworks")
    (item,) = fw.items
    gm = math.exp(np.mean(np.log(FACTORS)))
    assert "tensorflow on" in item.caption and "over jax on" in item.caption
    assert f"geometric mean {gm:.2f}x" in item.caption and "95% CI" in item.caption
    assert "3 configurations" in item.caption and "67% faster under tensorflow" in item.caption
    np.testing.assert_allclose(sorted(item.table["speedup"]), sorted(FACTORS), rtol=1e-12)
    # Rooflines and utilization ranges: one per framework, never both in one.
    roof = next(s for s in sections if s.id == "roofline")
    assert len(roof.items) == 2
    assert [c for c in (i.caption for i in roof.items) if "jax" in c.split(".")[0]]
    util = next(s for s in sections if s.id == "utilization").items[0].table
    assert sorted(set(util["platform"].str.rsplit(", ", n=1).str[1])) == ["jax", "tensorflow"]


def _sections(page: str) -> list[str]:
    return re.findall(r'<section id="[^"]+" data-analysis="([^"]+)"', page)


def test_cli_report_has_the_sections_and_page_width_figures(full, tmp_path):
    path, _ = full
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "paradnn", "report", str(path), "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    page = (out / "index.html").read_text()
    assert all(i in _sections(page) for i in EXTRA)
    assert "Frameworks: jax, tensorflow." in page
    missing = re.findall(r'<li data-analysis="([^"]+)"', page)
    assert not any(i in missing for i in EXTRA)
    for width, data in re.findall(r'<img width="(\d+)"[^>]*src="data:image/png;base64,([^"]+)"', page):
        png = base64.b64decode(data[:64])
        assert int(width) == 1100 and struct.unpack(">I", png[16:20])[0] == 2200
    # Units in the new tables' headers; host utilization is a share of cores, not of a peak.
    for header in ("memory_activations_bytes [B]", "power_w [W]", "energy_per_example_j [J/example]",
                   "host_cpu_utilization [fraction of the host's cores]", "speedup [x]"):
        assert header in page


def test_memory_caption_names_the_axis_unit_and_titles_name_the_study(full):
    from paradnn import plots
    from paradnn.report.sections import TITLES

    _, df = full
    sections, _ = report.plan(df)
    memory = next(s for s in sections if s.id == "memory")
    item = memory.items[0]
    fig = item.make_figure()
    unit = re.search(r"memory per device \((\w+)\)", fig.axes[0].get_ylabel()).group(1)
    assert f"({unit}, the axis's unit" in item.caption and unit == plots.memory_unit(df)[0]
    # "TBD" is a study, named with its authors, never a bare "to be determined".
    for title in TITLES.values():
        assert "TBD" not in title or "Zhu et al. 2018" in title, title
