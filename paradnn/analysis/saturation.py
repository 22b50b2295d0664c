"""Batch-size saturation, as studied by the TBD benchmark suite (Training Benchmark for DNNs,
Zhu et al. 2018): the smallest batch that reaches a fraction of the best throughput a model
achieves at any batch."""

from __future__ import annotations

import numpy as np
import pandas as pd

from paradnn.analysis.columns import (
    group_columns, label_columns, ok_rows, platform_label, require_columns, software_label,
    unstable_mask, workload_label,
)
from paradnn.errors import ParadnnError


def saturation(
    df: pd.DataFrame, metric: str = "examples_per_sec", threshold: float = 0.9
) -> pd.DataFrame:
    """Throughput against batch per model, with the saturation batch of each model.

    A *model* is one configuration without its batch (same spec, dtype, optimizer, devices,
    platform and software). Only ok rows count; models measured at fewer than two batch sizes
    are left out. Repeats of a (model, batch) give their median, over the runs that met their
    precision target where there are any; a point resting on unstable runs only (``stable``
    False) is kept and marked ``unstable``.

    Returns one row per (model, batch): ``model`` (a label), ``batch`` (examples),
    ``value`` (``metric``), ``fraction_of_best`` (value / the model's best, 1),
    ``best_batch``, ``best_value``, ``saturation_batch`` (the smallest batch with
    ``value >= threshold * best``) and ``saturation_value``. ``attrs``: ``metric``,
    ``threshold``.
    """
    if not 0 < threshold <= 1:
        raise ParadnnError(f"saturation: threshold={threshold!r}; allowed: a fraction in (0, 1]")
    require_columns(df, (metric, "batch"), "saturation")
    rows = ok_rows(df)
    rows = rows.assign(_v=pd.to_numeric(rows[metric], errors="coerce"), _u=unstable_mask(rows))
    rows = rows[rows["_v"].notna() & rows["batch"].notna()]
    keys = [c for c in group_columns(rows, exclude=("batch",)) if rows[c].notna().any()]
    # The columns read below, not the ~160 of a store row: the per-model frames are copied
    # several times each (98 s of a 10,000-row report, all of it in copies).
    rows = rows[list(dict.fromkeys([*keys, *label_columns(rows), "batch", "_v", "_u",
                                    *(c for c in ("family", "kind") if c in rows.columns)]))]
    # Each model's rows as positions into plain arrays, models in sorted key order and rows in
    # their order: a pandas frame per model cost 10 ms, thousands of models in a big store.
    gid = rows.groupby(keys, dropna=False, sort=True).ngroup().to_numpy() if keys \
        else np.zeros(len(rows), dtype=int)
    order = np.argsort(gid, kind="stable")
    cuts = np.flatnonzero(np.diff(gid[order])) + 1
    batch_all, v_all = rows["batch"].to_numpy(), rows["_v"].to_numpy(float)
    u_all = rows["_u"].to_numpy(bool)
    groups = []
    for idx in np.split(order, cuts) if len(order) else []:
        b, v, u = batch_all[idx], v_all[idx], u_all[idx]
        # Per batch: the stable runs where there are any, else the unstable ones (marked).
        shaky_b = ~np.isin(b, b[~u])
        keep = ~u | shaky_b
        batches = np.unique(b[keep])
        curve = pd.Series([float(np.median(v[keep & (b == x)])) for x in batches], index=batches)
        if len(curve) >= 2:
            groups.append((idx[0], curve, set(b[shaky_b].tolist())))
    names = _unique_names([rows.iloc[first].drop(labels=["batch"]) for first, _, _ in groups], keys)
    tags = [k for k in ("family", "kind") if k in rows.columns]
    out = []
    for (first, curve, shaky), name in zip(groups, names):
        best_batch = curve.idxmax()
        best = curve.max()
        reached = curve[curve >= threshold * best]
        sat_batch = reached.index.min()
        tag = {k: rows[k].iloc[first] for k in tags}
        for batch, v in curve.items():
            out.append({
                "model": name, "batch": batch, "value": v, "fraction_of_best": v / best,
                "best_batch": best_batch, "best_value": best,
                "saturation_batch": sat_batch, "saturation_value": curve[sat_batch],
                "unstable": batch in shaky, **tag,
            })
    result = pd.DataFrame(out, columns=[
        "model", "batch", "value", "fraction_of_best", "best_batch", "best_value",
        "saturation_batch", "saturation_value", "unstable", "family", "kind",
    ])
    result.attrs.update(metric=metric, threshold=threshold)
    return result


def _unique_names(firsts: list[pd.Series], keys: list[str]) -> list[str]:
    # A workload measured on two platforms (or software stacks) is two models here: a name
    # two models share gets the platform, then the software, then the key columns that still
    # tell them apart (a curve never merges two models).
    names = [workload_label(r) for r in firsts]
    for extra in (platform_label, software_label):
        dup = {n for n in names if names.count(n) > 1}
        names = [f"{n} on {extra(r)}" if n in dup else n for n, r in zip(names, firsts)]
    for n in {n for n in names if names.count(n) > 1}:
        same = [i for i, m in enumerate(names) if m == n]
        differ = [c for c in keys if len({str(firsts[i].get(c)) for i in same}) > 1]
        for i in same:
            names[i] = f"{n} ({', '.join(f'{c} {firsts[i].get(c)}' for c in differ)})"
    return names


def saturation_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per model of :func:`saturation`'s output: best and saturation batch and value."""
    cols = ["model", "best_batch", "best_value", "saturation_batch", "saturation_value"]
    out = curves.groupby("model", sort=True)[cols[1:]].first().reset_index()
    out["batches_measured"] = curves.groupby("model", sort=True)["batch"].count().to_numpy()
    out.attrs.update(curves.attrs)
    return out
