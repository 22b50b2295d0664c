"""False-positive rate of paradnn compare over repeated A/A runs (docs/compare.md).

Every pair of single runs of the same sweep with the same code (aa*.db), and every split of the
first six runs into two groups of three (each side pooling three interleaved runs), compared at
the default threshold. Prints one line per comparison and the totals.

    PYTHONPATH=$PWD python3 benchmarks/compare/aa_rate.py benchmarks/compare/aa?.db
"""

import itertools
import sys
import warnings

import pandas as pd

import paradnn

warnings.simplefilter("ignore")  # the K and pooling notes are not needed here
paths = sys.argv[1:]
frames = {p: paradnn.load(p) for p in paths}


def run(label, base, new):
    r = paradnn.compare(base, new)
    c = r.counts()
    print(f"{label:<44} exit {r.exit_code()}  " + "  ".join(f"{k} {v}" for k, v in c.items()))
    return c, r.exit_code()


for title, pairs in (
    ("single runs, every pair", [([a], [b]) for a, b in itertools.combinations(paths, 2)]),
    ("three runs a side, every split of the first six",
     [(list(g), [p for p in paths[:6] if p not in g]) for g in itertools.combinations(paths[:6], 3)
      if paths[0] in g] if len(paths) >= 6 else []),
):
    if not pairs:
        continue
    print(f"\n{title}:")
    total = {"regression": 0, "improvement": 0, "inconclusive": 0, "unchanged": 0}
    fails = 0
    for base, new in pairs:
        name = "+".join(p.split("/")[-1][:-3] for p in base) + " vs " + "+".join(p.split("/")[-1][:-3] for p in new)
        c, code = run(name, pd.concat([frames[p] for p in base]), pd.concat([frames[p] for p in new]))
        fails += code == 1
        for k in total:
            total[k] += c[k]
    n = sum(total.values())
    print(f"total over {len(pairs)} comparisons, {n} config comparisons: "
          + ", ".join(f"{k} {v} ({v / n:.1%})" for k, v in total.items())
          + f"; comparisons that exit 1: {fails} of {len(pairs)}")
