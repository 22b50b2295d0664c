"""Cross-platform scores with one store's peaks replaced by a probe given on the command line
(docs/prediction.md, "Across platforms: one CPU to two").

PYTHONPATH=$PWD python benchmarks/prediction/study_peaks.py ONE.db TWO.db --flops F --bytes B

The one-CPU stores of the quiet study carry the peak of a probe whose BLAS threads were not kept
to one CPU (found and fixed with that study: ``paradnn.executors.child.pin_process``): 199
GFLOP/s, where one core multiplies at about 105. Within a platform that changes nothing (the
compute efficiency is fitted: a peak only scales it), but a cross-platform estimate applies the
efficiencies learned on one platform to the other's peaks. This scores that estimate both ways
with ONE's rows given the peak FLOP/s F and bandwidth B (B/s) of a probe made with
``taskset -c 0 paradnn probe --refresh``; the stores are not changed. Prints both tables and the
peaks' ratios.
"""
import argparse

from paradnn import predictor
from paradnn.store import load

parser = argparse.ArgumentParser()
parser.add_argument("one")
parser.add_argument("two")
parser.add_argument("--flops", type=float, required=True, help="ONE's peak FLOP/s (float32)")
parser.add_argument("--bytes", type=float, required=True, help="ONE's peak bandwidth, B/s")
args = parser.parse_args()

one, two = load(args.one), load(args.two)
stored = (float(one["peak_flops"].dropna().median()), float(one["peak_bytes_per_sec"].dropna().median()))
one = one.assign(peak_flops=args.flops, peak_bytes_per_sec=args.bytes)
other = (float(two["peak_flops"].dropna().median()), float(two["peak_bytes_per_sec"].dropna().median()))
print(f"{args.one}: stored peaks {stored[0]:.3g} FLOP/s, {stored[1]:.3g} B/s; replaced by "
      f"{args.flops:.3g} FLOP/s, {args.bytes:.3g} B/s")
print(f"{args.two}: peaks {other[0]:.3g} FLOP/s, {other[1]:.3g} B/s; ratios two/one now "
      f"{other[0] / args.flops:.2f} (FLOP/s), {other[1] / args.bytes:.2f} (bandwidth)")
for label, train, target in ((f"{args.one} -> {args.two}", one, two), (f"{args.two} -> {args.one}", two, one)):
    table = predictor.score(target, train=train)
    print(f"\n{label}")
    print(table.to_string(index=False))
