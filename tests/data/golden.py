"""The golden results store of the analysis tests: synthetic records with the real Record columns.

The numbers are *synthetic* (a roofline performance model with planted effects, seeded noise),
not measurements: two made-up accelerators (``synthetic-a``, ``synthetic-b``), FC/CNN/RNN grids
around the paper's Table 2, a Transformer grid, two real models, ``oom`` rows where a model exceeds the made-up
device memory, a bfloat16 subset and an older software version, so that every analysis of the
report has data. ``python tests/data/golden.py OUT.db`` writes it as a store (``OUT.csv`` as CSV).
"""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pandas as pd

from paradnn.record import Record
from paradnn import families
from paradnn.families.cnn import CNN
from paradnn.families.fc import FC
from paradnn.families.rnn import RNN
from paradnn.workload import Workload

PLATFORMS = {
    "a": dict(platform={"device_platform": "tpu", "device_kind": "synthetic-a", "device_count": 1,
                        "host": "golden", "cpu_model": "synthetic"},
              peak_flops=1.2e14, peak_bytes_per_sec=9.0e11, peak_source="spec", memory=2.0e9,
              width_scale=1024.0),
    "b": dict(platform={"device_platform": "gpu", "device_kind": "synthetic-b", "device_count": 1,
                        "host": "golden", "cpu_model": "synthetic"},
              peak_flops=6.0e13, peak_bytes_per_sec=1.5e12, peak_source="measured",
              memory=4.0e9, width_scale=256.0),
}
SOFTWARE = {"paradnn_version": "0.1.0", "jax_version": "0.10.2", "jaxlib_version": "0.10.2",
            "flax_version": "0.12.8", "optax_version": "0.2.8", "tf_version": None,
            "python_version": "3.11", "xla_flags": ""}
OLD_SOFTWARE = {**SOFTWARE, "jax_version": "0.9.0", "jaxlib_version": "0.9.0"}
SETTINGS = {"steps_per_call": 10, "warmup_calls": 2, "min_calls": 5, "max_calls": 200,
            "cv_target": 0.02, "time_budget_s": 5.0}
TIME = "2026-01-01T00:00:00+00:00"


def _fc_costs(s: FC, batch: int) -> tuple[float, float, float, float]:
    params = s.input * s.nodes + (s.layers - 1) * s.nodes ** 2 + s.nodes * s.output
    params += s.layers * s.nodes + s.output
    acts = batch * (s.input + s.layers * s.nodes + s.output)
    return params, 6.0 * batch * params, 4.0 * (4 * params + 3 * acts), s.nodes


def _cnn_costs(s: CNN, batch: int) -> tuple[float, float, float, float]:
    per_block = 18 if s.block == "residual" else 17  # x filters^2 per group width factor
    params = sum(per_block * (s.filters * m) ** 2 * s.blocks for m in (1, 2, 4, 8))
    params += 147 * s.filters + 8 * s.filters * s.output
    pixels = (s.image / 4) ** 2
    flops_fwd = sum(per_block * (s.filters * m) ** 2 * s.blocks * pixels / (m * m) for m in (1, 2, 4, 8))
    acts = batch * sum(s.filters * m * s.blocks * pixels / (m * m) for m in (1, 2, 4, 8)) * 6
    return params, 6.0 * batch * flops_fwd, 4.0 * (4 * params + 3 * acts), s.filters * 16


def _rnn_costs(s: RNN, batch: int) -> tuple[float, float, float, float]:
    gates = {"rnn": 1, "gru": 3, "lstm": 4}[s.cell]
    cell = gates * (2 * s.embed ** 2 + s.embed)
    params = s.vocab * s.embed + s.layers * cell + s.embed * s.vocab + s.vocab
    flops = 6.0 * batch * s.length * (s.layers * cell + s.embed * s.vocab)
    acts = batch * s.length * s.embed * (s.layers * gates + 2)
    return params, flops, 4.0 * (4 * params * s.length + 3 * acts), s.embed * 2


def _transformer_costs(s, batch: int) -> tuple[float, float, float, float]:
    fam = families.get("transformer")  # through the registry: built-in families keep their order
    params = fam.param_count(s)
    acts = batch * s.length * (s.layers * (6 * s.d_model + s.d_ff) + s.vocab)
    return params, fam.train_flops_per_example(s) * batch, 4.0 * (4 * params + 3 * acts), s.d_model


def _record(workload: dict, costs, plat: str, dtype_factor: float, software: dict,
            rng: np.random.Generator, kind: str = "generated", slowdown: float = 1.0) -> dict:
    p = PLATFORMS[plat]
    params, flops, bytes_, width = costs
    batch = workload["batch"]
    memory = bytes_ / 2 / dtype_factor
    common = dict(workload=workload, platform=p["platform"], software=software, settings=SETTINGS,
                  tags={"kind": kind}, time_utc=TIME)
    if memory > p["memory"]:
        return Record(status="oom", error=f"predicted peak memory {memory:.3g} B > "
                      f"{p['memory']:.3g} B of the device", **common).to_dict()
    peak = p["peak_flops"] * dtype_factor
    bw = p["peak_bytes_per_sec"]
    intensity = flops / (bytes_ / dtype_factor)
    # Planted effects: efficiency grows with batch and with model width, saturating.
    eff = (batch / (batch + 96.0)) * (width / (width + p["width_scale"]))
    eff *= float(np.exp(rng.normal(0.0, 0.03))) / slowdown
    achieved = min(peak, intensity * bw) * eff
    step = flops / achieved
    metrics = {
        "examples_per_sec": batch / step, "step_time_s": step, "step_time_p10_s": step * 0.98,
        "step_time_p90_s": step * 1.03, "step_time_cv": 0.02, "flops_per_step": flops,
        "model_flops_per_step": flops * 0.99, "bytes_per_step": bytes_ / dtype_factor,
        "flops_per_sec": achieved, "flops_utilization": achieved / peak, "peak_flops": peak,
        "peak_bytes_per_sec": bw, "peak_source": p["peak_source"],
        "arithmetic_intensity": intensity, "params": params,
        "memory_argument_bytes": 8.0 * params, "memory_output_bytes": 8.0 * params,
        "memory_temp_bytes": memory - 8.0 * params, "memory_peak_bytes": memory,
        "compile_s": 0.5, "final_loss": 2.3, "timed_calls": 20,
    }
    return Record(status="ok", metrics=metrics, **common).to_dict()


def _specs():
    for layers, nodes, batch in itertools.product((4, 16), (64, 256, 1024, 4096), (64, 256, 1024, 4096)):
        yield FC(layers=layers, nodes=nodes, input=2000, output=1000), batch, _fc_costs
    for blocks, filters, batch in itertools.product((1, 2), (16, 32, 64), (64, 128, 256)):
        yield CNN(block="residual", blocks=blocks, filters=filters, image=200, output=1000), batch, _cnn_costs
    for layers, embed, length, batch in itertools.product((1, 5), (100, 500), (10, 50), (16, 64, 256)):
        yield RNN(cell="lstm", layers=layers, embed=embed, length=length, vocab=32), batch, _rnn_costs
    for layers, d_model, batch in itertools.product((2, 6), (256, 512, 1024), (4, 16, 64)):
        spec = families.get("transformer").spec(layers, d_model, "auto", 1024, 256, 8192)
        yield spec, batch, _transformer_costs


REAL = {  # model -> (params, FLOPs per example per step, bytes per step at batch 1, width)
    "resnet50": (25_557_032, 3 * 8.2e9, 4.0e8, 2048),
    "transformer": (63_000_000, 6 * 63e6 * 256, 1.5e9, 4096),
}


#: Columns that rows of paradnn before the measurement-trust work (issue 8) lack.
TRUST_COLUMNS = ("stable", "warnings")


def make_frame(seed: int = 0) -> pd.DataFrame:
    """The golden store as ``paradnn.load`` would return it."""
    rng = np.random.default_rng(seed)
    rows = []
    for plat in PLATFORMS:
        for spec, batch, cost in _specs():
            w = Workload(spec, batch=batch)
            rows.append(_record(w.to_dict(), cost(spec, batch), plat, 1.0, SOFTWARE, rng))
            if plat == "a" and spec.family == "fc" and spec.layers == 4:
                wb = Workload(spec, batch=batch, dtype="bfloat16")
                rows.append(_record(wb.to_dict(), cost(spec, batch), plat, 2.0, SOFTWARE, rng))
                rows.append(_record(w.to_dict(), cost(spec, batch), plat, 1.0, OLD_SOFTWARE, rng,
                                    slowdown=1.25))
        for model, (params, fpe, bytes1, width) in REAL.items():
            batch = 256
            wd = {"family": "real", "model": model, "image": 0, "length": 0, "batch": batch,
                  "dtype": "float32", "optimizer": None, "devices": 1}
            costs = (params, fpe * batch, bytes1 * 4 + 4.0 * 4 * params, width)
            rows.append(_record(wd, costs, plat, 1.0, SOFTWARE, rng, kind="real"))
    # Stores written before the measurement-trust fields existed have no such columns. copy():
    # consolidated, one block per NumPy dtype as paradnn.load's frame has (a frame built from
    # dicts keeps a block per column, and pandas warns on every column added to it).
    return pd.DataFrame(rows).drop(columns=list(TRUST_COLUMNS)).copy()


# -- the measurement-trust columns (issue 8), on a copy of the golden store ---------------------

# The physics-check codes and their meanings, as the record contract defines them; used only
# when the running paradnn does not have the registry yet (see ensure_warning_registry).
WARNING_CODES = {
    "utilization_above_1": "achieved FLOP/s above the peak: the peak is wrong or FLOPs overcounted",
    "above_roof": "point above its roofline min(peak, AI x bandwidth)",
    "flops_mismatch": "analytic/XLA FLOP ratio outside [0.8, 1.25], e.g. XLA:CPU depthwise rewrite",
}


def ensure_warning_registry(monkeypatch) -> None:
    """Give ``paradnn.record`` the WARNINGS registry and ``warning_codes`` parser of the record
    contract for one test when it does not have them yet (a fallback for tests only)."""
    from paradnn import record

    if not hasattr(record, "WARNINGS"):
        monkeypatch.setattr(record, "WARNINGS", dict(WARNING_CODES), raising=False)
    if not hasattr(record, "warning_codes"):
        def warning_codes(value) -> list[str]:
            if value is None or (isinstance(value, float) and value != value):
                return []
            return [c.strip() for c in str(value).split(",") if c.strip()]

        monkeypatch.setattr(record, "warning_codes", warning_codes, raising=False)


def _fc_a(df, layers, dtype, software="0.10.2"):
    return ((df.family == "fc") & (df.device_kind == "synthetic-a") & (df.layers == layers)
            & (df.dtype == dtype) & (df.jax_version == software) & (df.status == "ok"))


def make_trust_frame(seed: int = 0) -> pd.DataFrame:
    """The golden store with the columns of measurement trust, planted where tests look:

    - every ok row: ``stable`` True, ``step_time_ci_low_s``/``_high_s`` (+-1%),
      ``steps_per_call_used`` 10, ``warmup_elapsed_s`` 0.5, ``warnings`` "", ``model_flops_utilization``
      (analytic FLOPs / step / peak) and ``peak_method``;
    - UNSTABLE: the FC layers=4 bfloat16 runs on synthetic-a at nodes 64 (4 rows): ``stable``
      False, ``step_time_cv`` 0.3, and examples/s 7x too high (a noisy outlier that would move
      a speedup claim and the colour scale);
    - IMPOSSIBLE: the FC layers=4 bfloat16 run at nodes 4096, batch 4096 on synthetic-a:
      utilization 1.07, above its roof, ``warnings`` "utilization_above_1,above_roof";
    - MISMATCH: CNN runs with filters 16 on synthetic-b: XLA FLOPs 3.4x the analytic count,
      ``warnings`` "flops_mismatch".
    """
    df = make_frame(seed)
    ok = df.status == "ok"
    df["stable"] = pd.Series(ok.map({True: True, False: None}), dtype=object)
    st = pd.to_numeric(df["step_time_s"], errors="coerce")
    df["step_time_ci_low_s"] = (st * 0.99).where(ok)
    df["step_time_ci_high_s"] = (st * 1.01).where(ok)
    df["steps_per_call_used"] = pd.Series(10, index=df.index).where(ok)
    df["warmup_elapsed_s"] = pd.Series(0.5, index=df.index).where(ok)
    df["warnings"] = pd.Series("", index=df.index, dtype=object).where(ok, None)
    df["model_flops_utilization"] = (df["model_flops_per_step"] / st / df["peak_flops"]).where(ok)
    df["peak_method"] = df["peak_source"].map(
        {"spec": "spec: vendor table", "measured": "measured: best of xla-default, numpy-blas"})

    shaky = _fc_a(df, 4, "bfloat16") & (df.nodes == 64)
    df.loc[shaky, "stable"] = False
    df.loc[shaky, "step_time_cv"] = 0.3
    for col in ("examples_per_sec", "flops_per_sec", "flops_utilization", "model_flops_utilization"):
        df.loc[shaky, col] = df.loc[shaky, col] * 7.0
    df.loc[shaky, "step_time_s"] = df.loc[shaky, "step_time_s"] / 7.0

    hot = _fc_a(df, 4, "bfloat16") & (df.nodes == 4096) & (df.batch == 4096)
    for i in df.index[hot]:
        peak, ai, bw = df.at[i, "peak_flops"], df.at[i, "arithmetic_intensity"], df.at[i, "peak_bytes_per_sec"]
        achieved = 1.07 * min(peak, ai * bw) if ai * bw >= peak else 1.07 * peak
        df.at[i, "flops_per_sec"] = achieved
        df.at[i, "flops_utilization"] = achieved / peak
        df.at[i, "model_flops_utilization"] = 0.99 * achieved / peak
        df.at[i, "warnings"] = "utilization_above_1,above_roof"

    mismatch = (df.family == "cnn") & (df.device_kind == "synthetic-b") & (df.filters == 16) & ok
    df.loc[mismatch, "flops_per_step"] = df.loc[mismatch, "model_flops_per_step"] * 3.4
    df.loc[mismatch, "flops_utilization"] = df.loc[mismatch, "model_flops_utilization"] * 3.4
    df.loc[mismatch, "warnings"] = "flops_mismatch"
    return df.copy()  # consolidated, as make_frame


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "golden.csv"
    frame = make_frame()
    if out.endswith(".db"):
        from paradnn.store import Store

        with Store(out) as s:
            s.add_rows(frame.to_dict("records"))
    else:
        frame.to_csv(out, index=False)
    print(f"{len(frame)} rows -> {out}")
