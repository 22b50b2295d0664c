"""The HTML report: exactly the analyses the data supports, self-contained, and rendered by a real
headless Chromium (page loads, every image decodes, no console errors); and the CLI."""

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from paradnn import report, units
from paradnn.analysis import oplevel

from data import golden


ROOT = Path(__file__).resolve().parents[1]
ALL = ["params_range", "heatmap:fc", "sensitivity:fc", "heatmap:cnn", "sensitivity:cnn",
       "heatmap:rnn", "sensitivity:rnn", "heatmap:transformer", "sensitivity:transformer",
       "roofline", "speedup:platform", "speedup:dtype",
       "speedup:software", "utilization", "saturation", "compare"]
# Analyses the golden store predates: its synthetic records have one framework and no memory
# breakdown, energy, utilization or time-ledger metrics (tests/test_report_extra.py has stores with
# the first three, tests/test_ledger.py a report with ledgers).
PREDATES = ["energy", "frameworks", "host_utilization", "ledger", "memory"]


@pytest.fixture(scope="module")
def gold():
    return golden.make_frame()


@pytest.fixture(scope="module")
def registry():
    """paradnn.record's warning registry (a test-only fallback until the record module has it)."""
    with pytest.MonkeyPatch.context() as mp:
        golden.ensure_warning_registry(mp)
        yield


@pytest.fixture(scope="module")
def trust(registry):
    return golden.make_trust_frame()


def _ids(df, ops=None):
    sections, missing = report.plan(df, ops)
    return [s.id for s in sections], sorted(m.id for m in missing)


def test_golden_supports_everything_but_the_op_profile(gold):
    ok, missing = _ids(gold)
    assert ok == ALL
    assert missing == sorted(["oplevel", "prediction", *PREDATES])


def test_single_platform_single_dtype_has_no_speedups(gold):
    one = gold[(gold.device_kind == "synthetic-b")]
    ok, missing = _ids(one)
    # One software version too: nothing to compare against (paradnn compare's section).
    assert ok == [s for s in ALL if not s.startswith("speedup") and s != "compare"]
    assert missing == sorted(["oplevel", "speedup:dtype", "speedup:platform", "speedup:software",
                              "compare", "prediction", *PREDATES])


def test_tiny_store_lists_what_it_cannot_support(gold):
    tiny = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-a") & (gold.layers == 4)
                & (gold.nodes == 256) & (gold.dtype == "float32") & (gold.jax_version == "0.10.2")]
    assert len(tiny) == 4  # one model at four batch sizes
    sections, missing = report.plan(tiny)
    assert [s.id for s in sections] == ["params_range", "roofline", "utilization", "saturation"]
    needs = {m.id: m.needs for m in missing}
    assert set(needs) == {"heatmap:fc", "heatmap:cnn", "heatmap:rnn", "heatmap:transformer",
                          "sensitivity:fc", "sensitivity:cnn", "sensitivity:rnn",
                          "sensitivity:transformer", "oplevel", "speedup:platform",
                          "speedup:dtype", "speedup:software", "compare", "prediction",
                          *PREDATES}
    assert "varying two hyperparameters" in needs["heatmap:fc"]
    assert "at least 8 stable ok FC runs of one dtype on one platform" in needs["sensitivity:fc"]
    assert "two platforms" in needs["speedup:platform"]


def test_no_metrics_supports_nothing():
    df = pd.DataFrame({"status": ["oom", "error"], "family": ["fc", "fc"], "batch": [8, 16]})
    ok, missing = _ids(df)
    assert ok == [] and "params_range" in missing and "roofline" in missing


def _ops():
    ops = pd.DataFrame({
        "name": ["fusion.1", "fusion.2", "copy"], "opcode": ["fusion", "fusion", "copy"],
        "category": [oplevel.MATMUL, oplevel.ELEMENTWISE, oplevel.FORMATTING],
        "time_s": [0.5, 0.4, 0.1], "flops": [1e10, 1e6, 0.0], "bytes": [1e8, 4e6, 1e6],
    })
    ops["time_fraction"] = ops["time_s"] / ops["time_s"].sum()
    ops["flops_per_sec"] = ops["flops"] / ops["time_s"]
    ops["arithmetic_intensity"] = ops["flops"] / ops["bytes"]
    ops.attrs.update(peak_flops=1e11, peak_bytes_per_sec=1e9, peak_source="measured",
                     approximate=True, note="per-operation times are approximate on CPU")
    return ops


def test_op_profile_adds_the_op_level_section(gold):
    ok, missing = _ids(gold[gold.device_kind == "synthetic-b"], _ops())
    assert "oplevel" in ok and "oplevel" not in missing


@pytest.fixture(scope="module")
def written(gold, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path = report.write_report(gold, out, ops=_ops())
    return path, path.read_text()


def test_html_is_self_contained_and_lists_exactly_the_analyses(written, gold):
    path, page = written
    assert path.name == "index.html"
    sections = re.findall(r'<section id="[^"]+" data-analysis="([^"]+)"', page)
    after = ALL.index("roofline") + 1  # the op-level roofline follows the model-level one
    assert sections == ALL[:after] + ["oplevel"] + ALL[after:]
    missing = re.findall(r'<li data-analysis="([^"]+)"', page)
    # golden + ops: nothing else missing (the golden store holds no predictions)
    assert sorted(missing) == sorted(["prediction", *PREDATES])
    srcs = re.findall(r'<img[^>]*src="([^"]{0,30})', page)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    # Figures at full page width (1100 px) and 2x resolution behind it.
    import base64
    import struct

    for width, data in re.findall(r'<img width="(\d+)"[^>]*src="data:image/png;base64,([^"]+)"', page):
        png = base64.b64decode(data[:64])
        assert int(width) == 1100 and struct.unpack(">I", png[16:20])[0] == 2200
    assert not re.search(r'(src|href)="(https?:|//|file:)', page)
    assert page.count("table behind this figure") >= len(ALL)
    assert "[examples/s]" in page and "spec = vendor spec sheet" in page
    assert "approximate on CPU" in page


@pytest.fixture(scope="module")
def trust_written(trust, tmp_path_factory):
    out = tmp_path_factory.mktemp("trust-report")
    path = report.write_report(trust, out, store="trust.db")
    return path, path.read_text()


def test_report_marks_unstable_runs_and_says_how_many_were_left_out(trust_written, trust):
    _, page = trust_written
    n_ok = int((trust.status == "ok").sum())
    assert f"4 of {n_ok} ok runs are unstable" in page
    caption = re.search(r"<figcaption>(Speedup of bfloat16 on synthetic-a \(tpu\) over float32[^<]*)",
                        page).group(1)
    assert "12 workloads" in caption and "4 unstable runs left out of this summary" in caption
    m = re.search(r"geometric mean ([0-9.]+)x, 95% CI ([0-9.]+)x-([0-9.]+)x", caption)
    assert m and float(m.group(2)) <= float(m.group(1)) <= float(m.group(3))
    assert "4 cross-hatched cells rest on unstable runs only" in page
    # Utilization ranges draw unstable runs, marked, and say how many.
    assert re.search(r"\d+ of \d+ runs are unstable \(timing missed its precision target\): their ranges are "
                     "hatched", page)


def test_report_warnings_section_lists_flagged_runs_with_cause(trust_written, trust):
    from paradnn import record

    _, page = trust_written
    section = re.search(r'<section id="warnings">(.*?)</section>', page, re.S).group(1)
    for code in ("utilization_above_1", "above_roof", "flops_mismatch"):
        assert code in section and html.escape(record.WARNINGS[code].text) in section
    flagged = trust[trust.warnings.fillna("") != ""]
    n = sum(len(w.split(",")) for w in flagged["warnings"])
    assert f"{n} physics warnings on {len(flagged)} runs" in section
    assert "cells framed red and marked !" in page and "ringed red" in page
    assert "1 run above its roof (roof_fraction &gt; 1, ringed red)" in page


def test_report_headline_is_model_flops_utilization_with_xla_beside(trust_written):
    _, page = trust_written
    assert "model FLOPS utilization (MFU)" in page or "model FLOPS utilization" in page
    assert "XLA&#x27;s executed-FLOPs utilization (flops_utilization) is" in page


def test_old_store_report_says_precision_is_unknown(written):
    _, page = written
    assert "Timing precision: unknown" in page
    assert 'id="warnings"' not in page  # no warnings column: no section, no guess


def test_missing_analyses_are_listed_with_needs(gold, tmp_path):
    rows = gold[(gold.device_kind == "synthetic-a") & (gold.family == "rnn")].head(6)
    page = report.write_report(rows, tmp_path).read_text()
    missing = re.findall(r'<li data-analysis="([^"]+)"><b>[^<]+</b>: needs ([^<]+?)\.<', page)
    assert {m for m, _ in missing} >= {"oplevel", "speedup:platform"}
    assert all(needs.strip() for _, needs in missing)
    # Every entry says what to run and how long it takes.
    entries = re.findall(r'<li data-analysis="[^"]+">(.*?)</li>', page, re.S)
    assert entries and all('class="command"' in e and "Estimated time" in e for e in entries)


def test_missing_analysis_gives_a_sweep_file_that_supplies_it(gold, tmp_path):
    """The suggested sweep file parses, has the promised number of configs, and once its
    configs are in the store the analysis is supported; its timing settings are the ones the
    store's own timings call for, and its estimate is the one estimator's (paradnn plan's) for
    its configs and settings."""
    from paradnn.analysis import cost
    from paradnn.grids import load_sweep_file
    from paradnn.measure import MeasureSettings
    from paradnn.report.recipes import precise_settings

    tiny = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-a") & (gold.layers == 4)
                & (gold.nodes == 256) & (gold.dtype == "float32") & (gold.jax_version == "0.10.2")]
    _, missing = report.plan(tiny, store="tiny.db")
    m = {u.id: u for u in missing}["heatmap:fc"]
    assert m.command == "paradnn sweep fc-grid.yaml --store tiny.db"
    path = tmp_path / "fc-grid.yaml"
    path.write_text(m.sweep_file)
    plan = load_sweep_file(path)
    assert len(plan.workloads) == m.configs == 12
    # the settings the store's own timings call for (its per-call spread: precise_settings)
    assert plan.settings == precise_settings(tiny[tiny.status == "ok"])[0]
    assert "the store's own timings" in m.change
    # joins the store's own runs: same fixed hyperparameters and dtype
    assert {(w.spec.layers, w.spec.input, w.spec.output, w.dtype) for w in plan.workloads} == \
        {(4, 2000, 1000, "float32")}
    one = cost.estimate(tiny, plan.workloads, MeasureSettings(**plan.settings))
    assert m.seconds == pytest.approx(one.seconds) and m.basis == one.basis
    # The one duration format of paradnn (plan, progress lines, the report).
    assert m.estimate.startswith(f"about {units.duration(m.seconds)} for 12 configs (")
    # Simulate the sweep: the golden store has those configs' kind of data; with them the
    # FC heat map and sensitivity are supported.
    fc = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-a") & (gold.layers == 4)
              & (gold.dtype == "float32") & (gold.jax_version == "0.10.2")]
    assert {"heatmap:fc", "sensitivity:fc"} <= set(report.supported(fc))


def test_sensitivity_rule_is_counted_per_dtype(gold):
    """12 ok FC runs split 6 float32 + 6 bfloat16 are not 12 runs of one setting."""
    fc = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-a") & (gold.layers == 4)
              & (gold.jax_version == "0.10.2") & (gold.status == "ok") & (gold.nodes.isin([64, 256]))]
    six = pd.concat([fc[fc.dtype == d].head(6) for d in ("float32", "bfloat16")])
    assert len(six) == 12
    _, missing = report.plan(six)
    needs = {m.id: m.needs for m in missing}["sensitivity:fc"]
    assert "of one dtype on one platform" in needs
    assert "bfloat16 on synthetic-a (tpu): 6" in needs and "float32 on synthetic-a (tpu): 6" in needs


def test_missing_estimate_without_records_uses_a_stated_default():
    from paradnn.analysis import cost

    df = pd.DataFrame({"status": ["oom", "error"], "family": ["fc", "fc"], "batch": [8, 16]})
    _, missing = report.plan(df)
    m = {u.id: u for u in missing}["heatmap:fc"]
    assert m.seconds == 12 * cost.DEFAULT_CONFIG_S and "default" in m.basis
    quick = {u.id: u for u in missing}["params_range"]
    assert quick.command == "paradnn sweep sweeps/quickstart.yaml --store results.db"
    assert len(__import__("paradnn.grids", fromlist=["x"]).load_sweep_file(
        ROOT / "sweeps" / "quickstart.yaml").workloads) == quick.configs


def test_speedups_resting_on_unstable_runs_make_no_claim_in_either_section(gold):
    """Platform speedups and framework speedups say the same thing, through one helper, when
    every common workload rests on unstable runs: no claim, the figure with hollow points."""
    fc = gold[(gold.family == "fc") & (gold.status == "ok") & (gold.jax_version == "0.10.2")
              & (gold.dtype == "float32")].assign(stable=True)
    fc.loc[fc.device_kind == "synthetic-b", "stable"] = False
    toy = fc[fc.device_kind == "synthetic-a"].assign(
        framework="toyfw", stable=False, key=lambda d: d.key + "-toy",
        workload_key=lambda d: d.workload_key + "-toy")
    sections = {s.id: s for s in report.plan(pd.concat([fc, toy], ignore_index=True))[0]}
    for sid in ("speedup:platform", "frameworks"):
        items = [i for i in sections[sid].items if "so no claim is made" in i.caption]
        assert len(items) == 1, sid
        assert "unstable runs" in items[0].caption and len(items[0].table)
    platform = next(i for i in sections["speedup:platform"].items if "no claim" in i.caption)
    framework = next(i for i in sections["frameworks"].items if "no claim" in i.caption)
    # Each section draws its own kind of figure of every point, unstable ones included.
    assert "per configuration" not in platform.make_figure().axes[0].get_title()
    assert "per configuration" in framework.make_figure().axes[0].get_title()


# -- a real headless Chromium over the DevTools protocol --------------------------------------

def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class _DevTools:
    def __init__(self, ws):
        self.ws, self.next_id, self.events = ws, 0, []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait(self, method, timeout=30.0):
        end = time.time() + timeout
        for e in self.events:
            if e.get("method") == method:
                return e
        while time.time() < end:
            msg = json.loads(self.ws.recv())
            self.events.append(msg)
            if msg.get("method") == method:
                return msg
        raise TimeoutError(method)


class _Browser:
    """One headless Chromium page driven over the DevTools protocol."""

    def __init__(self, width: int, height: int = 1000):
        chromium = _chromium()
        if chromium is None:
            pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
        websocket = pytest.importorskip("websocket", reason="needs websocket-client for DevTools")
        self.profile = tempfile.mkdtemp(prefix="paradnn-chromium-")
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", "--remote-allow-origins=*",
             f"--window-size={width},{height}", "--hide-scrollbars", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port_file = Path(self.profile) / "DevToolsActivePort"
            end = time.time() + 30
            while not port_file.exists() or not port_file.read_text().strip():
                assert self.proc.poll() is None, "chromium exited before opening DevTools"
                assert time.time() < end, "chromium did not open DevTools within 30 s"
                time.sleep(0.1)
            port = int(port_file.read_text().split()[0])
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
            page = next(t for t in targets if t["type"] == "page")
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                                  suppress_origin=True)
            self.dt = _DevTools(self.ws)
            for domain in ("Page", "Runtime", "Log"):
                self.dt.call(f"{domain}.enable")
            # The page as a reader sees it at this width, at 100% zoom, on a 1x screen.
            self.dt.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                         deviceScaleFactor=1, mobile=False)
        except BaseException:
            self.close()
            raise

    def open(self, url: str) -> None:
        self.dt.call("Page.navigate", url=url)
        self.dt.wait("Page.loadEventFired", timeout=60)

    def eval(self, expression: str):
        return self.dt.call("Runtime.evaluate", returnByValue=True, awaitPromise=True,
                            expression=expression)["result"]["value"]

    def screenshot(self, clip: dict | None = None) -> bytes:
        import base64

        params = {"format": "png"}
        if clip:
            params.update(clip={**clip, "scale": 1}, captureBeyondViewport=True)
        return base64.b64decode(self.dt.call("Page.captureScreenshot", **params)["data"])

    def errors(self) -> list:
        return [e for e in self.dt.events if
                (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
                or e.get("method") == "Runtime.exceptionThrown"
                or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.profile, ignore_errors=True)


_LAYOUT = """
(async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  const doc = document.documentElement;
  const body = document.body.getBoundingClientRect();
  return {title: document.title, images: imgs.length,
          broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length,
          sections: Array.from(document.querySelectorAll('section[data-analysis]'))
                         .map(s => s.dataset.analysis),
          viewport: window.innerWidth, scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth,
          body: [body.left, body.right],
          figures: imgs.map(i => { const r = i.getBoundingClientRect();
                                   return {left: r.left, right: r.right, width: r.width,
                                           natural: i.naturalWidth, attr: i.width,
                                           top: r.top + window.scrollY, height: r.height}; }),
          // Wide tables scroll inside their own .scroll box; everything else must fit.
          widest: Math.max(...Array.from(document.querySelectorAll('body *'))
                                 .filter(e => !e.parentElement.closest('.scroll'))
                                 .map(e => e.getBoundingClientRect().right)),
          anchors: Object.fromEntries(Array.from(document.querySelectorAll('section[id]'))
                                 .map(s => [s.id, s.getBoundingClientRect().top + window.scrollY]))};
})()"""


def _shots_dir():
    out = os.environ.get("PARADNN_TEST_SCREENSHOT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
    return Path(out) if out else None


def _check_png(png: bytes):
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_report_renders_in_headless_chromium_at_1400px(trust_written):
    """The report at 1400 px: loads without errors, every image decodes, every figure fits the
    page at its full 1x width (no horizontal scroll), and is drawn at 2x (natural = 2 x shown)."""
    path, _ = trust_written
    browser = _Browser(1400)
    try:
        browser.open(path.as_uri())
        state = browser.eval(_LAYOUT)
        shots = {"top": browser.screenshot()}
        for name in ("summary", "warnings", "heatmap:fc", "roofline", "speedup:dtype", "saturation", "unsupported"):
            top = state["anchors"][name]
            shots[name] = browser.screenshot({"x": 0, "y": top, "width": 1400, "height": 1000})
        errors = browser.errors()
    finally:
        browser.close()
    assert errors == []
    assert state["title"] == "paradnn report"
    # The first screen answers "how fast?": the summary of every run starts within it, above
    # the warnings.
    assert state["anchors"]["summary"] < 600 and state["anchors"]["summary"] < state["anchors"]["warnings"]
    assert state["images"] >= len(ALL) and state["broken"] == 0
    assert state["sections"][:2] == ["params_range", "heatmap:fc"]
    # No horizontal scroll, nothing sticks out of the viewport.
    assert state["scrollWidth"] <= state["viewport"], state
    assert state["widest"] <= state["clientWidth"] + 0.5, state
    for f in state["figures"]:
        assert state["body"][0] - 0.5 <= f["left"] and f["right"] <= state["body"][1] + 0.5, f
        # Full page width at 1x (1100 px) and twice as many pixels behind it.
        assert f["width"] == pytest.approx(1100, abs=1), f
        assert f["natural"] == pytest.approx(2 * f["width"], abs=2), f
    out = _shots_dir()
    for name, png in shots.items():
        _check_png(png)
        if out:
            (out / f"report-1400-{name.replace(':', '-')}.png").write_bytes(png)


def test_report_fits_a_narrow_window_without_horizontal_scroll(written):
    """At 800 px the figures shrink to the page (no horizontal scroll); tables scroll inside
    their own box."""
    path, _ = written
    browser = _Browser(800)
    try:
        browser.open(path.as_uri())
        state = browser.eval(_LAYOUT)
    finally:
        browser.close()
    assert state["broken"] == 0
    assert state["scrollWidth"] <= state["viewport"], state
    assert all(f["right"] <= state["body"][1] + 0.5 for f in state["figures"])


# -- the CLI on a real store -------------------------------------------------------------------

@pytest.fixture(scope="module")
def store(gold, tmp_path_factory):
    """A small real store: the FC part of the golden store on one platform (fast to report)."""
    from paradnn.store import Store

    path = tmp_path_factory.mktemp("store") / "golden.db"
    rows = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-b")]
    with Store(path) as s:
        s.add_rows(rows.to_dict("records"))
    return path


def _cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "paradnn", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def test_cli_report_and_plot(store, tmp_path):
    r = _cli("report", store, "-o", tmp_path / "rep")
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "rep" / "index.html").read_text()
    assert re.findall(r'<section id="[^"]+" data-analysis="([^"]+)"', page) == [
        "params_range", "heatmap:fc", "sensitivity:fc", "roofline", "utilization", "saturation"]
    # the missing analyses name this store in their commands, and the sweep files the report
    # wrote beside the page
    written = tmp_path / "rep" / "recipes" / "cnn-grid.yaml"
    assert f"paradnn sweep {written} --store {store}" in page and written.exists()
    r = _cli("plot", "heatmap", store, "-o", tmp_path / "hm.png", "--where", "family=fc",
             "--x", "batch", "--y", "nodes", "--fixed", "layers=16")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "hm.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_errors_are_one_line_exit_2(store, tmp_path):
    r = _cli("report", tmp_path / "missing.db", "-o", tmp_path / "rep")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "missing.db" in r.stderr
    r = _cli("plot", "heatmap", store, "-o", tmp_path / "x.png", "--x", "batch", "--y", "nope")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "'nope'" in r.stderr


def test_cli_plot_help_lists_kinds_with_an_example_and_flags():
    from paradnn.cli.report import PLOT_KINDS

    r = _cli("plot", "--help")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())  # argparse wraps lines
    for kind, (_, example, flags) in PLOT_KINDS.items():
        assert f"{kind}: " in text and f"e.g. paradnn plot {kind} " in text
        assert " ".join(f"flags: {flags}".split()) in text


def test_missing_speedup_gives_the_store_workloads_again(gold, tmp_path):
    """Without a reduced-precision twin, the report lists a sweep file of the store's own
    workloads in bfloat16; it parses to exactly those workloads."""
    from paradnn.grids import load_sweep_file

    one = gold[(gold.device_kind == "synthetic-b") & (gold.family == "fc") & (gold.layers == 4)
               & (gold.nodes.isin([64, 256]))]
    _, missing = report.plan(one, store="b.db")
    m = {u.id: u for u in missing}["speedup:dtype"]
    assert m.command == "paradnn sweep speedup-dtype.yaml --store b.db"
    path = tmp_path / "speedup-dtype.yaml"
    path.write_text(m.sweep_file)
    plan = load_sweep_file(path)
    ok = one[one.status == "ok"]
    assert m.configs == len(plan.workloads) == ok["workload_key"].nunique()
    assert {w.dtype for w in plan.workloads} == {"bfloat16"}
    assert {(w.spec.nodes, w.batch) for w in plan.workloads} == set(zip(ok.nodes, ok.batch))
    platform = {u.id: u for u in missing}["speedup:platform"]
    assert "paradnn merge b.db other.db -o both.db" in platform.command
    assert "other machine's is unknown" in platform.basis


def test_missing_saturation_gives_the_batches_to_add(gold, tmp_path):
    """One model at one batch: the report lists the same model at three more batches (half,
    twice and four times the measured one). The golden rows have NaN in other families'
    columns, as real stores do."""
    from paradnn.grids import load_sweep_file

    one = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-a") & (gold.layers == 4)
               & (gold.nodes == 256) & (gold.dtype == "float32") & (gold.jax_version == "0.10.2")
               & (gold.batch == 256)]
    assert len(one) == 1 and one["block"].isna().all()
    _, missing = report.plan(one)
    m = {u.id: u for u in missing}["saturation"]
    path = tmp_path / "saturation.yaml"
    path.write_text(m.sweep_file)
    plan = load_sweep_file(path)
    assert sorted(w.batch for w in plan.workloads) == [128, 512, 1024]
    assert {(w.spec.layers, w.spec.nodes) for w in plan.workloads} == {(4, 256)}
    assert m.configs == 3 and m.command == "paradnn sweep saturation.yaml --store results.db"


def test_first_section_is_every_runs_throughput_step_time_and_utilization(trust_written, trust):
    from paradnn.report.summary import STEP_TIME, THROUGHPUT, summary_table

    _, page = trust_written
    table = summary_table(trust)
    assert len(table) == len(trust)  # every run, failed ones included
    assert {THROUGHPUT, STEP_TIME, "model_flops_utilization [%]", "status"} <= set(table.columns)
    ok = table[table["status"].str.startswith("ok")]
    assert ok[THROUGHPUT].str.len().min() > 0 and ok[STEP_TIME].str.contains(r"\(.+ to .+\)").all()
    assert (table["status"] == "ok, unstable").sum() == 4
    assert not table[STEP_TIME].str.contains("e[+-]", regex=True).any()
    # On the page: after the header, before the contents and the warnings.
    assert page.index('id="summary"') < page.index("<h2>Contents</h2>") < page.index('id="warnings"')
    assert "How fast: every run" in page


def test_every_run_table_reads_in_the_grids_order_whatever_order_the_runs_were_stored_in():
    """Runs stored in any order (a sweep's planner, retries, several sweeps) read by family, then
    by their sizes as numbers (nodes=64 before nodes=128, not as text), then batch."""
    import random

    from paradnn.report.summary import summary_table

    cpu = {"dtype": "float32", "status": "ok", "step_time_s": 1e-3, "device_platform": "cpu", "device_kind": "cpu"}
    rows = [{"family": "fc", "layers": 2, "nodes": n, "input": 512, "output": 100, "batch": b,
             "examples_per_sec": b / 1e-3, **cpu} for n in (64, 128, 512) for b in (16, 256)]
    rows.append({"family": "cnn", "block": "residual", "blocks": 1, "filters": 8, "image": 32, "output": 10,
                 "batch": 16, "examples_per_sec": 1.6e4, **cpu})
    random.Random(0).shuffle(rows)
    table = summary_table(pd.DataFrame(rows))
    fc = [(w.split()[2], int(b)) for w, b in zip(table["workload"], table["batch"]) if w.startswith("fc")]
    assert table["workload"].iloc[0].startswith("cnn")
    assert fc == [(f"nodes={n}", b) for n in (64, 128, 512) for b in (16, 256)]


def test_remeasure_recipe_lists_exactly_the_unstable_configs_with_the_flag(trust):
    import yaml

    from paradnn.analysis.columns import ok_rows, unstable_mask
    from paradnn.report.recipes import REMEASURE_FILE, remeasure_unstable

    again = remeasure_unstable(trust, "trust.db")
    ok = ok_rows(trust)
    assert again["unstable"] == int(unstable_mask(ok).sum()) == 4
    assert again["command"] == f"paradnn sweep {REMEASURE_FILE} --store trust.db --remeasure-unstable"
    spec = yaml.safe_load(again["sweep_file"])
    listed = sum(len(p["axes"]["batch"]) for p in spec["parts"])
    assert listed == again["configs"] <= 4 and listed >= 1
    assert remeasure_unstable(ok[~unstable_mask(ok)], "trust.db") is None


def test_sensitivity_resting_on_unstable_runs_recommends_measuring_them_again(gold):
    """Enough FC runs for the regression, but all except two unstable: the recipe is the sweep
    of exactly those configs with --remeasure-unstable, not a new grid."""
    import yaml

    df = gold.assign(stable=True)
    fc = df[(df["family"] == "fc") & (df["status"] == "ok")].index
    df.loc[fc[2:], "stable"] = False
    _, missing = report.plan(df, store="g.db")
    m = next(m for m in missing if m.id == "sensitivity:fc")
    assert m.command == "paradnn sweep remeasure-unstable.yaml --store g.db --remeasure-unstable"
    spec = yaml.safe_load(m.sweep_file)
    # The distinct configs of the unstable runs of the store's main platform (repeats and other
    # platforms' runs are not listed, and the text says so).
    assert 0 < sum(len(p["axes"]["batch"]) for p in spec["parts"]) == m.configs < len(fc) - 2
    assert "other platforms" in m.change


def test_the_report_names_the_peak_and_the_measured_ceiling_with_their_sources():
    """Once per platform and dtype: a GPU's vendor peak beside its measured ceiling, a CPU's
    probe that is both, and a row written before ceilings were recorded."""
    from paradnn.report.html import peaks_and_ceilings

    common = {"status": "ok", "device_count": 1, "framework": "jax", "family": "fc"}
    rows = pd.DataFrame([
        {**common, "device_platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3", "dtype": "bfloat16",
         "peak_flops": 989e12, "peak_source": "spec", "peak_method": "vendor table: NVIDIA H100 80GB HBM3",
         "peak_id": "spec:h100 sxm", "ceiling_flops": 7.95e14, "ceiling_id": "1a2b3c4d5e6f",
         "ceiling_method": "measured ..."},
        {**common, "device_platform": "cpu", "device_kind": "cpu", "dtype": "float32", "peak_flops": 1.99e11,
         "peak_source": "measured", "peak_method": "measured ...", "peak_id": "abc", "ceiling_flops": 1.99e11,
         "ceiling_id": "abc", "ceiling_method": "measured ..."},
        {**common, "device_platform": "cpu", "device_kind": "cpu", "dtype": "bfloat16", "peak_flops": 3e11,
         "peak_source": "measured", "peak_method": "measured ...", "peak_id": "old"},
    ])
    text = peaks_and_ceilings(rows)
    assert ("bfloat16: peak 989 TFLOP/s (spec: vendor table: NVIDIA H100 80GB HBM3), ceiling 795 TFLOP/s "
            "(measured, probe 1a2b3c4d5e6f)") in text
    assert "float32: peak 199 GFLOP/s (measured, probe abc), ceiling: the same probe" in text
    assert "bfloat16: peak 300 GFLOP/s (measured, probe old), ceiling not recorded" in text
    assert text.count("ceiling") == 3


def test_a_row_counted_by_an_older_rule_is_listed_and_marks_its_cell(tmp_path, tiny_settings):
    """A real run stored beside the same config's row from an older paradnn whose analytic count
    differed (as the zoo's convolution counts did before padding taps were left out): read
    together, the older row carries the physics code ``flops_count_changed``, the Warnings
    table lists it with its count and revision, and the heat-map cell they share is marked."""
    import dataclasses

    import paradnn
    from paradnn import FC, Workload
    from paradnn.analysis import heatmap
    from paradnn.report.warnings import warnings_table
    from paradnn.runner import run_workload
    from paradnn.store import Store

    new = run_workload(Workload(FC(layers=1, nodes=16, input=8, output=4), batch=4), tiny_settings)
    assert new.status == "ok", new.error
    count = new.metrics["model_flops_per_step"]
    assert new.metrics["flops_count_rule"] == 1  # the FC family's counting rule, recorded
    old = dataclasses.replace(
        new.with_metrics(model_flops_per_step=count * 1.08),
        software={**new.software, "paradnn_revision": "0123456789ab"}, time_utc="2026-01-01T00:00:00+00:00")
    path = tmp_path / "mixed.db"
    with Store(path) as s:
        assert s.add(old) and s.add(new)
    df = paradnn.load(path)
    table = warnings_table(df)
    changed = table[table["code"] == "flops_count_changed"]
    assert len(changed) == 1 and changed["kind"].iloc[0] == "physics"
    assert changed["model_flops_per_step"].iloc[0] == pytest.approx(count * 1.08)
    assert changed["paradnn_revision"].iloc[0] == "0123456789ab"
    cell = heatmap(df, "batch", "nodes", "examples_per_sec")
    assert len(cell) == 1 and cell["n"].iloc[0] == 2 and "flops_count_changed" in cell["warnings"].iloc[0]
    # The rows as stored are unchanged: the code is the reading's, not written back.
    assert "flops_count_changed" not in ",".join(df["warnings"].fillna(""))


def test_the_page_says_how_the_cpu_runs_host_memory_was_backed(tmp_path, tiny_settings):
    """A real run stored beside a copy from before paradnn recorded host_huge_pages: the page's
    header counts each backing (huge pages move a large CPU model's step by 1.2x)."""
    import dataclasses

    import paradnn
    from paradnn import FC, Workload, hostmem
    from paradnn.report.html import render_html
    from paradnn.runner import run_workload
    from paradnn.store import Store

    new = run_workload(Workload(FC(layers=1, nodes=16, input=8, output=4), batch=4), tiny_settings)
    assert new.status == "ok", new.error
    backing = new.metrics["host_huge_pages"]
    assert backing == hostmem.huge_pages() and new.metrics["page_faults_per_step"] >= 0
    old = dataclasses.replace(new.with_metrics(host_huge_pages=None), time_utc="2026-01-01T00:00:00+00:00",
                              workload={**new.workload, "batch": 8})
    path = tmp_path / "mixed.db"
    with Store(path) as s:
        assert s.add(old) and s.add(new)
    page = render_html(paradnn.load(path), [], [])
    assert "Host memory of the CPU runs (host_huge_pages" in page
    assert f"1 {backing}, 1 not recorded." in page
