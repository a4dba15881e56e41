#!/usr/bin/env python3
"""Summarises the proteus-accuracy-scaling runs: summary.json (per system:
effective accuracy, maximum accuracy drop, SLO violation ratio, throughput
against demand, plans made) and plot.svg (the time series, as the paper's
Fig. 4: demand and throughput, effective accuracy, SLO violations), and
prints the table.

  summarise.py RESULTS_DIR OUT_DIR SYSTEM...
"""
import csv
import json
import os
import sys

BIN_S = 10  # time-series bins for the plot and the maximum accuracy drop
# The first seconds are left out of the figures: the cluster starts empty
# and the first plan's loads take a few seconds (the paper starts warm).
WARM_UP_S = 30
COLOURS = ["#1f77b4", "#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def totals(path):
    """Sums over the run after the warm-up."""
    t = {"demand": 0, "served": 0, "on_time": 0, "violations": 0, "acc_sum": 0.0, "completed": 0,
         "seconds": 0}
    for r in csv.DictReader(open(path)):
        if int(r["second"]) < WARM_UP_S or int(r["demand"]) == 0:
            continue
        t["seconds"] += 1
        t["demand"] += int(r["demand"])
        t["served"] += int(r["served"])
        t["on_time"] += int(r["on_time"])
        t["violations"] += int(r["violations"])
        done = int(r["on_time"]) + int(r["late"])
        if r["accuracy"]:
            t["acc_sum"] += float(r["accuracy"]) * done
            t["completed"] += done
    return t


def read_series(path):
    rows = list(csv.DictReader(open(path)))
    bins = {}
    for r in rows:
        b = int(r["second"]) // BIN_S
        acc = bins.setdefault(b, {"demand": 0, "served": 0, "violations": 0, "acc_sum": 0.0,
                                  "completed": 0})
        acc["demand"] += int(r["demand"])
        acc["served"] += int(r["served"])
        acc["violations"] += int(r["violations"])
        done = int(r["on_time"]) + int(r["late"])
        if r["accuracy"]:
            acc["acc_sum"] += float(r["accuracy"]) * done
            acc["completed"] += done
    return [bins[b] for b in sorted(bins)]


def count_plans(path):
    plans, solve_ms = 0, []
    if not os.path.exists(path):
        return 0, None
    for line in open(path):
        fields = line.split()
        if len(fields) > 1 and fields[1] == "plan":
            plans += 1
            if "solved in " in line:
                solve_ms.append(float(line.split("solved in ")[1].split(" ms")[0]))
    solve_ms.sort()
    return plans, (solve_ms[len(solve_ms) // 2] if solve_ms else None)


def polyline(xs, ys, x0, y0, w, h, xmax, ymax, colour, dash=""):
    pts = []
    for x, y in zip(xs, ys):
        if y is None:
            continue
        pts.append(f"{x0 + w * x / xmax:.1f},{y0 + h - h * min(y, ymax) / ymax:.1f}")
    style = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<polyline fill="none" stroke="{colour}" stroke-width="1.5"{style} '
            f'points="{" ".join(pts)}"/>')


def plot(series, systems, path):
    w, h, left, top, gap = 900, 170, 70, 40, 60
    panels = [("Demand (black) and throughput, qps", "throughput"),
              ("Effective accuracy of served queries (normalised)", "accuracy"),
              ("SLO violation ratio", "violations")]
    height = top + len(panels) * (h + gap) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + w + 180}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="20" font-size="14">proteus-accuracy-scaling (simulated, synthetic '
           'profiles)</text>']
    n = max(len(s) for s in series.values())
    xmax = n * BIN_S
    demand = [b["demand"] / BIN_S for b in next(iter(series.values()))]
    ymax_t = max(demand) * 1.1
    for i, (title, kind) in enumerate(panels):
        y0 = top + i * (h + gap)
        out.append(f'<text x="{left}" y="{y0 - 8}">{title}</text>')
        out.append(f'<rect x="{left}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
        if kind == "throughput":
            ymin, ymax = 0, ymax_t
        elif kind == "accuracy":
            ymin, ymax = 0.8, 1.0
        else:
            ymin, ymax = 0, 1.0
        for frac in (0, 0.5, 1):
            v = ymin + (ymax - ymin) * frac
            out.append(f'<text x="{left - 6}" y="{y0 + h - h * frac + 4:.1f}" text-anchor="end">'
                       f'{v:.3g}</text>')
        xs = [(k + 0.5) * BIN_S for k in range(n)]
        if kind == "throughput":
            out.append(polyline(xs, demand, left, y0, w, h, xmax, ymax, "#000", "4 3"))
        for j, system in enumerate(systems):
            bins = series[system]
            if kind == "throughput":
                ys = [b["served"] / BIN_S for b in bins]
            elif kind == "accuracy":
                ys = [(b["acc_sum"] / b["completed"] - ymin) if b["completed"] else None
                      for b in bins]
            else:
                ys = [b["violations"] / b["demand"] if b["demand"] else None for b in bins]
            out.append(polyline(xs, ys, left, y0, w, h, xmax,
                                ymax - ymin, COLOURS[j % len(COLOURS)]))
        out.append(f'<text x="{left + w / 2}" y="{y0 + h + 16}" text-anchor="middle">'
                   'simulated seconds</text>')
    for j, system in enumerate(systems):
        y = top + 20 * j
        out.append(f'<line x1="{left + w + 15}" y1="{y}" x2="{left + w + 35}" y2="{y}" '
                   f'stroke="{COLOURS[j % len(COLOURS)]}" stroke-width="2"/>')
        out.append(f'<text x="{left + w + 40}" y="{y + 4}">{system}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    results, out_dir, systems = sys.argv[1], sys.argv[2], sys.argv[3:]
    summary, series = {}, {}
    for system in systems:
        bins = read_series(f"{results}/{system}/timeseries.csv")
        series[system] = bins
        t = totals(f"{results}/{system}/timeseries.csv")
        accuracies = [b["acc_sum"] / b["completed"] for k, b in enumerate(bins)
                      if k * BIN_S >= WARM_UP_S and b["completed"] >= 100]
        plans, solve_ms = count_plans(f"{results}/{system}/control.log")
        summary[system] = {
            "effective_accuracy": round(t["acc_sum"] / t["completed"], 4),
            "max_accuracy_drop": round(1 - min(accuracies), 4) if accuracies else None,
            "slo_violation_ratio": round(t["violations"] / t["demand"], 4),
            "demand_qps": round(t["demand"] / t["seconds"], 1),
            "throughput_qps": round(t["served"] / t["seconds"], 1),
            "goodput_qps": round(t["on_time"] / t["seconds"], 1),
            "throughput_over_demand": round(t["served"] / t["demand"], 4),
            "plans": plans,
            "median_solve_ms": solve_ms,
        }
    json.dump(summary, open(f"{out_dir}/summary.json", "w"), indent=2, sort_keys=True)
    open(f"{out_dir}/summary.json", "a").write("\n")
    plot(series, systems, f"{out_dir}/plot.svg")
    print("| system | effective accuracy | max accuracy drop | SLO violations | throughput / demand | plans |")
    print("|---|---|---|---|---|---|")
    for system in systems:
        r = summary[system]
        print(f"| {system} | {r['effective_accuracy']:.4f} | {r['max_accuracy_drop']} | "
              f"{r['slo_violation_ratio']:.4f} | {r['throughput_over_demand']:.3f} | {r['plans']} |")


if __name__ == "__main__":
    main()
