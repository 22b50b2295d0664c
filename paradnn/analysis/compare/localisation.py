"""Where the change lives: a depth-2 regression tree of the log ratios on the roofline class, the
family and the hyperparameters, told in one or two sentences (:func:`localise`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paradnn.analysis.columns import WORKLOAD_FIELDS, fmt
from paradnn.analysis.compare.stats import LEVEL, t_quantile
from paradnn.analysis.compare.verdicts import DEFAULT_ALPHA, DEFAULT_THRESHOLD

#: A split of the localisation tree must explain at least this share of the log ratios' total
#: sum of squares, else the node stays a leaf.
MIN_SPLIT_GAIN = 0.10
#: Depth of the localisation tree: at most 4 regions, each named by at most 2 conditions.
TREE_DEPTH = 2


@dataclass
class Localisation:
    """Where the change lives: ``sentence`` (one or two sentences for the user) and
    ``regions``: one row per leaf of the tree (``region`` text, ``configs``, ``ratio`` (x,
    geometric mean) with ``ci_low``/``ci_high`` (x, 95% interval of the region's mean, a t
    interval over its configs' log ratios; a single config's own interval), ``changed`` (bool),
    ``regressions``, ``significant`` (configs with q < alpha in the region's direction)
    (counts), ``bound`` (composition text))."""

    sentence: str
    regions: pd.DataFrame


@dataclass(frozen=True)
class _Feature:
    name: str
    values: np.ndarray  # float; binary features hold 0/1
    binary: bool
    text_true: str = ""   # binary: how a region with the feature reads
    text_false: str = ""


def _features(table: pd.DataFrame) -> list[_Feature]:
    """The tree's features: the roofline class, the family and dtype (one-hot, when several),
    then every numeric hyperparameter that every compared config has."""
    out: list[_Feature] = []
    bound = table["bound"] if "bound" in table.columns else pd.Series(None, index=table.index)
    if bound.notna().all() and bound.nunique() > 1:
        out.append(_Feature("bound", (bound == "memory").to_numpy(dtype=float), True,
                            "memory-bound", "compute-bound"))
    for col in ("family", "dtype", "framework", "optimizer"):
        if col in table.columns and table[col].notna().all() and table[col].nunique() > 1:
            for v in sorted(table[col].astype(str).unique()):
                out.append(_Feature(f"{col}={v}", (table[col].astype(str) == v).to_numpy(dtype=float),
                                    True, f"{col} {v}" if col != "family" else f"{v}",
                                    f"{col} not {v}" if col != "family" else f"not {v}"))
    skip = {"family", "dtype", "framework", "optimizer", "devices"}
    for col in [c for c in WORKLOAD_FIELDS if c in table.columns and c not in skip]:
        v = pd.to_numeric(table[col], errors="coerce")
        if v.notna().all() and v.nunique() > 1:
            out.append(_Feature(col, v.to_numpy(dtype=float), False))
    return out


def _best_split(y: np.ndarray, idx: np.ndarray, feats: list[_Feature], min_leaf: int,
                min_gain: float) -> tuple[int, float, float] | None:
    """(feature index, threshold, gain) of the split of ``idx`` that most reduces the sum of
    squares of ``y``, or None when none gains ``min_gain``. Ties keep the earlier feature (the
    roofline class and family before hyperparameters)."""
    base = float(((y[idx] - y[idx].mean()) ** 2).sum())
    best: tuple[int, float, float] | None = None
    for fi, f in enumerate(feats):
        x = f.values[idx]
        levels = np.unique(x)
        for lo, hi in zip(levels[:-1], levels[1:]):
            cut = (lo + hi) / 2
            left, right = idx[x <= cut], idx[x > cut]
            if len(left) < min_leaf or len(right) < min_leaf:
                continue
            sse = float(((y[left] - y[left].mean()) ** 2).sum() + ((y[right] - y[right].mean()) ** 2).sum())
            gain = base - sse
            if gain >= min_gain and (best is None or gain > best[2] + 1e-12):
                best = (fi, float(cut), gain)
    return best


def _describe(conds: list[tuple[_Feature, bool]], feats_idx: np.ndarray) -> str:
    """A region as words, from the conditions on its path and the values its configs hold."""
    parts: list[str] = []
    named_binary: dict[str, str] = {}
    numeric: dict[str, _Feature] = {}
    for f, side in conds:
        if f.binary:
            named_binary[f.name] = f.text_true if side else f.text_false
        else:
            numeric[f.name] = f
    for name, f in numeric.items():
        v = f.values[feats_idx]
        lo, hi = v.min(), v.max()
        full = f.values
        if lo == hi:
            parts.append(f"{name} = {fmt(float(lo))}")
        elif lo > full.min() and hi < full.max():
            parts.append(f"{fmt(float(lo))} <= {name} <= {fmt(float(hi))}")
        elif lo > full.min():
            parts.append(f"{name} >= {fmt(float(lo))}")
        else:
            parts.append(f"{name} <= {fmt(float(hi))}")
    words = list(named_binary.values())
    head = " ".join(w for w in words if w.endswith("-bound"))
    rest = [w for w in words if not w.endswith("-bound")]
    noun = " ".join([*rest, "configs"]) if rest else "configs"
    text = f"{head} {noun}".strip()
    return text + (" with " + " and ".join(parts) if parts else "")


def _mean_halfwidth(logs: np.ndarray) -> float:
    if len(logs) < 2:
        return math.nan
    return float(t_quantile(LEVEL, len(logs) - 1) * np.std(logs, ddof=1) / math.sqrt(len(logs)))


#: From this factor on, a change reads as a factor (2.1x) rather than a percentage.
_AS_FACTOR = 1.5


def _change(ratio: float, low: float, high: float) -> str:
    """A region's change as the sentence says it: the change of the step time in percent of
    BASE's, ``9% +/- 2%`` (the +/- is half the 95% interval of the region's mean, in
    percentage points), or from :data:`_AS_FACTOR` on as a factor, ``2.05x +/- 0.10x`` (a
    speedup as BASE/NEW)."""
    known = np.isfinite(low) and np.isfinite(high)
    if ratio >= _AS_FACTOR or ratio <= 1 / _AS_FACTOR:
        f, lo, hi = (ratio, low, high) if ratio > 1 else (1 / ratio, 1 / high, 1 / low)
        return f"{f:.2f}x" + (f" +/- {(hi - lo) / 2:.2f}x" if known else "")
    return f"{abs(ratio - 1) * 100:.0f}%" + (f" +/- {(high - low) * 50:.0f}%" if known else "")


def localise(table: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD,
             alpha: float = DEFAULT_ALPHA, depth: int = TREE_DEPTH,
             min_gain: float = MIN_SPLIT_GAIN) -> Localisation:
    """Where in the hyperparameter space the change lives: a regression tree of depth
    ``depth`` of the log ratio on the roofline class, the family (and dtype) and the
    hyperparameters of the configs of ``table`` (:attr:`CompareResult.table`). A split must
    explain ``min_gain`` of the total sum of squares and leave at least 2 configs (and a tenth
    of them) on each side. A region is *changed* when most of its configs changed significantly
    (``q < alpha``) in the direction of its mean. The sentence names the changed regions with
    their geometric-mean change and its 95% half-width, their roofline class, and "no change
    elsewhere"."""
    cols = ["region", "configs", "ratio", "ci_low", "ci_high", "changed", "regressions",
            "significant", "bound"]
    if table.empty:
        return Localisation("No config was compared.", pd.DataFrame(columns=cols))
    y = np.log(table["ratio"].to_numpy(dtype=float))
    ok = np.isfinite(y)
    sig = (table["q"].to_numpy(dtype=float) < alpha) & ok
    feats = _features(table)
    n = int(ok.sum())
    leaves: list[tuple[np.ndarray, list[tuple[_Feature, bool]]]] = []
    total = float(((y[ok] - y[ok].mean()) ** 2).sum()) if n else 0.0
    min_leaf = max(2, int(math.ceil(n / 10)))

    def grow(idx: np.ndarray, conds: list[tuple[_Feature, bool]], level: int) -> None:
        split = None
        if level < depth and total > 0 and sig.any():
            split = _best_split(y, idx, feats, min_leaf, min_gain * total)
        if split is None:
            leaves.append((idx, conds))
            return
        fi, cut, _ = split
        f = feats[fi]
        x = f.values[idx]
        # For a binary feature "> cut" means the feature holds (1).
        grow(idx[x > cut], conds + [(f, True)], level + 1)
        grow(idx[x <= cut], conds + [(f, False)], level + 1)

    grow(np.flatnonzero(ok), [], 0)
    rows = []
    for idx, conds in leaves:
        logs = y[idx]
        mean = float(logs.mean())
        hw = _mean_halfwidth(logs)
        if len(idx) == 1:
            r = table.iloc[idx[0]]
            hw = float((math.log(r.ci_high) - math.log(r.ci_low)) / 2) if r.ci_high > 0 and r.ci_low > 0 else math.nan
        direction = np.sign(logs) == np.sign(mean)
        moved = int((sig[idx] & direction).sum())
        bounds = table["bound"].iloc[idx] if "bound" in table.columns else pd.Series(dtype=object)
        rows.append({
            "region": _describe(conds, idx) if conds else "all configs",
            "configs": len(idx), "ratio": math.exp(mean),
            "ci_low": math.exp(mean - hw) if np.isfinite(hw) else math.nan,
            "ci_high": math.exp(mean + hw) if np.isfinite(hw) else math.nan,
            "changed": bool(moved * 2 > len(idx)),
            "regressions": int((table["verdict"].iloc[idx] == "regression").sum()) if "verdict" in table else 0,
            "significant": moved, "bound": _bound_text(bounds),
        })
    regions = pd.DataFrame(rows, columns=cols)
    regions = regions.reindex(regions["ratio"].map(lambda r: -abs(math.log(r))).sort_values(kind="mergesort").index)
    regions = regions.reset_index(drop=True)
    return Localisation(_sentence(regions, n, int(sig.sum()), threshold), regions)


def _bound_text(bounds: pd.Series) -> str:
    known = bounds.dropna()
    if known.empty:
        return "roofline class unknown"
    parts = []
    for b in ("memory", "compute"):
        k = int((known == b).sum())
        if k == len(bounds):
            return f"all {b}-bound"
        if k:
            parts.append(f"{k} of {len(bounds)} {b}-bound")
    return ", ".join(parts)


def _sentence(regions: pd.DataFrame, n: int, n_sig: int, threshold: float) -> str:
    if n == 0:
        return "No config has a finite ratio."
    if n_sig == 0:
        all_r = regions["ratio"].to_numpy(dtype=float)
        w = regions["configs"].to_numpy(dtype=float)
        gm = math.exp(float(np.average(np.log(all_r), weights=w)))
        return (f"No significant change in any of the {n} configs (geometric mean "
                f"{gm:.3f}x NEW/BASE step time).")
    changed = regions[regions["changed"]]
    if changed.empty:
        return (f"{n_sig} of {n} configs changed significantly, scattered: no region of the "
                "hyperparameters (or roofline class) holds most of them.")
    parts = []
    for r in changed.itertuples():
        word = "Slower" if r.ratio > 1 else "Faster"
        where = "across all configs" if r.region == "all configs" else f"in {r.region}"
        beyond = "" if abs(math.log(r.ratio)) >= math.log(threshold) else \
            f", within the {threshold:g}x threshold"
        parts.append(f"{word if not parts else word.lower()} by {_change(r.ratio, r.ci_low, r.ci_high)} "
                     f"{where} ({r.configs} configs, {r.bound}{beyond})")
    text = "; ".join(parts)
    rest = regions[~regions["changed"]]
    if len(rest):
        k = int(rest["configs"].sum())
        text += f"; no significant change elsewhere ({k} configs)"
    return text + "."
