#!/usr/bin/env python3
"""Markdown tables of inferline-pipelines' summary.json for docs/experiments.md.

   ./summarise.py [summary.json]
"""
import json
import os
import sys

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                          "summary.json")
with open(path) as f:
    summary = json.load(f)
rows = summary["planner_vs_baselines"]


def cell(r):
    if "error" in r:
        return "—"
    return "$%.2f, %.1f%%" % (r["cost_per_hour"], 100 * r["attainment"])


print("| pipeline | qps | CV | SLO ms | InferLine | CG-Mean | CG-Peak | CG-Peak / InferLine |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    ratio = "%.2f×" % r["peak_over_inferline"] if "peak_over_inferline" in r else "—"
    print("| %s | %d | %g | %d | %s | %s | %s | %s |" % (
        r["pipeline"], r["qps"], r["cv"], r["slo_ms"], cell(r["inferline"]),
        cell(r["cg_mean"]), cell(r["cg_peak"]), ratio))

print()
for arm in ("inferline", "cg_mean", "cg_peak"):
    ok = [r[arm] for r in rows if "error" not in r[arm]]
    met = sum(1 for a in ok if a["attainment"] >= 0.99)
    worst = min(a["attainment"] for a in ok)
    print("%s: %d of %d cases at >= 99%% attainment; worst %.2f%%" % (
        arm, met, len(ok), 100 * worst))
both = [r for r in rows if "peak_over_inferline" in r]
good = [r for r in both if r["inferline"]["attainment"] >= 0.99]
ratios = sorted(r["peak_over_inferline"] for r in good)
print("CG-Peak / InferLine where InferLine attains >= 99%%: %d cases, median %.2fx, max %.2fx"
      % (len(ratios), ratios[len(ratios) // 2], ratios[-1]))
for name in sorted({r["pipeline"] for r in good}):
    rs = [r["peak_over_inferline"] for r in good if r["pipeline"] == name]
    print("  %s: max %.2fx" % (name, max(rs)))
cheaper_mean = sum(1 for r in rows if "error" not in r["cg_mean"] and "error" not in r["inferline"]
                   and r["cg_mean"]["cost_per_hour"] < r["inferline"]["cost_per_hour"] - 1e-9)
print("cases where CG-Mean is cheaper than InferLine: %d" % cheaper_mean)

tuner = summary["tuner"]
print()
print("tuner: %s, %g ms; plan %s; CG-Peak %s" % (tuner["pipeline"], tuner["slo_ms"],
                                                  tuner["plan"], tuner["cg_peak"]))
print("| trace | arm | attainment (before / after the change) | P99 ms | cost $ |")
print("|---|---|---|---|---|")
for run in tuner["runs"]:
    for a in run["arms"]:
        print("| %s | %s | %.2f%% (%.2f%% / %.2f%%) | %.1f | %.4f |" % (
            run["trace"], a["arm"], 100 * a["attainment"], 100 * a["attainment_before"],
            100 * a["attainment_after"], a["p99_ms"], a["dollars"]))
