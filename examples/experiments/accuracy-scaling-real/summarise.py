#!/usr/bin/python3
"""Summarises the accuracy-scaling-real runs: summary.json and plot.svg.

    summarise.py RESULTS_DIR OUT_DIR SYSTEM...

Reads each system's `maitre bench` reports (APP-bench.json) and per-second
series (APP-series.csv), and setup.json. Per system and app, and over both
apps:
  effective_accuracy    the mean accuracy of the answers, normalised by the
                        app's most accurate variant (1 = always the best)
  accuracy_at_peak      the same over the seconds the app's load is at its
                        peak
  max_accuracy_drop     1 − the worst 5-s bin's normalised accuracy
  slo_violation_ratio   late, failed or unanswered queries over all sent
  served_fraction       answered queries over sent ones
"""

import csv
import json
import sys

BIN_S = 5
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def read_series(path):
    with open(path) as f:
        return [{k: (float(v) if v not in ("", None) else None) for k, v in row.items()}
                for row in csv.DictReader(f)]


def weighted_accuracy(rows):
    total = weight = 0.0
    for r in rows:
        if r["effective_accuracy"] is not None and r["ok"]:
            total += r["effective_accuracy"] * r["ok"]
            weight += r["ok"]
    return total / weight if weight else None


def app_summary(rows, report, best, peak):
    acc = weighted_accuracy(rows)
    at_peak = weighted_accuracy([r for r in rows if peak[0] <= r["second"] < peak[1]])
    worst = None
    for b in range(0, len(rows), BIN_S):
        a = weighted_accuracy(rows[b:b + BIN_S])
        if a is not None:
            worst = a if worst is None else min(worst, a)
    started = report["requests"]["started"]
    return {
        "queries": started,
        "effective_accuracy": round(acc / best, 4) if acc is not None else None,
        "accuracy_at_peak": round(at_peak / best, 4) if at_peak is not None else None,
        "max_accuracy_drop": round(1 - worst / best, 4) if worst is not None else None,
        "slo_violation_ratio": round(report["slo"]["violation_ratio"], 4),
        "served_fraction": round(report["requests"]["ok"] / started, 4) if started else 0,
        "latency_p99_ms": round(report["latency_ms"]["p99"], 2),
        "served_by": {s["variant"]: s["answers"] for s in report["served"]},
        "_ok": report["requests"]["ok"], "_violations": report["slo"]["violations"],
        "_acc": acc / best if acc is not None else None,
    }


def polyline(xs, ys, left, y0, w, h, xmax, ymin, ymax, colour):
    points, paths = [], []
    for x, y in zip(xs, ys):
        if y is None:
            if len(points) > 1:
                paths.append(points)
            points = []
            continue
        y = min(max(y, ymin), ymax)
        points.append("%.1f,%.1f" % (left + w * x / xmax, y0 + h - h * (y - ymin) / (ymax - ymin)))
    if len(points) > 1:
        paths.append(points)
    return "\n".join('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                     % (colour, " ".join(p)) for p in paths)


def binned(rows, key):
    out = []
    for b in range(0, len(rows), BIN_S):
        chunk = rows[b:b + BIN_S]
        if key == "accuracy":
            out.append(weighted_accuracy(chunk))
        elif key == "violations":
            started = sum(r["started"] for r in chunk)
            out.append(sum(r["slo_violations"] for r in chunk) / started if started else None)
        else:
            out.append(sum(r[key] for r in chunk) / len(chunk))
    return out


def plot(series, best, apps, systems, path):
    w, h, left, top, gap = 760, 140, 70, 50, 55
    panels = [("Queries sent per second (the same load for every system)", None, "started")]
    for app in apps:
        panels.append(("%s: effective accuracy (normalised), 5-s bins" % app, app, "accuracy"))
    panels.append(("SLO violation ratio, both apps, 5-s bins", None, "violations"))
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">'
           % (left + w + 170, top + len(panels) * (h + gap) + 20),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="22" font-size="14">accuracy-scaling-real: two apps on two local '
           'one-core workers (real models, maitre bench)</text>']
    first = series[systems[0]]
    n = max(len(first[a]) for a in apps)
    xmax = n
    for i, (title, app, kind) in enumerate(panels):
        y0 = top + i * (h + gap)
        out.append('<text x="%d" y="%d">%s</text>' % (left, y0 - 8, title))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>'
                   % (left, y0, w, h))
        if kind == "started":
            lines = [(binned(first[a], "started"), "#000" if k == 0 else "#777")
                     for k, a in enumerate(apps)]
            ymin, ymax = 0, max(max(v for v in l if v is not None) for l, _ in lines) * 1.1
        elif kind == "accuracy":
            lines = [([None if v is None else v / best[app] for v in binned(series[s][app],
                                                                           "accuracy")],
                      COLOURS[j % len(COLOURS)]) for j, s in enumerate(systems)]
            ymin, ymax = 0.9, 1.0
        else:
            lines = []
            for j, s in enumerate(systems):
                merged = [{"started": sum(series[s][a][k]["started"] for a in apps
                                          if k < len(series[s][a])),
                           "slo_violations": sum(series[s][a][k]["slo_violations"] for a in apps
                                                 if k < len(series[s][a]))}
                          for k in range(n)]
                lines.append((binned(merged, "violations"), COLOURS[j % len(COLOURS)]))
            ymin, ymax = 0, 1
        for frac in (0, 0.5, 1):
            out.append('<text x="%d" y="%.1f" text-anchor="end">%.3g</text>'
                       % (left - 6, y0 + h - h * frac + 4, ymin + (ymax - ymin) * frac))
        xs = [b + BIN_S / 2 for b in range(0, n, BIN_S)]
        for ys, colour in lines:
            out.append(polyline(xs, ys, left, y0, w, h, xmax, ymin, ymax, colour))
        out.append('<text x="%d" y="%d" text-anchor="middle">seconds</text>'
                   % (left + w / 2, y0 + h + 16))
    legend = [(s, COLOURS[j % len(COLOURS)]) for j, s in enumerate(systems)]
    legend += [("load: " + a, "#000" if k == 0 else "#777") for k, a in enumerate(apps)]
    for j, (name, colour) in enumerate(legend):
        y = top + 20 * j
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>'
                   % (left + w + 15, y, left + w + 35, y, colour))
        out.append('<text x="%d" y="%d">%s</text>' % (left + w + 40, y + 4, name))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    results, out_dir, systems = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(results + "/setup.json") as f:
        setup = json.load(f)
    apps = list(setup["shapes"])
    best = setup["best_accuracy"]
    summary = {"setup": setup, "systems": {}}
    series = {}
    for system in systems:
        series[system] = {}
        per_app = {}
        for app in apps:
            rows = read_series("%s/%s/%s-series.csv" % (results, system, app))
            with open("%s/%s/%s-bench.json" % (results, system, app)) as f:
                report = json.load(f)
            shape = setup["shapes"][app]
            peak = (shape["rise"][1], shape["rise"][1] + shape["hold"])
            series[system][app] = rows
            per_app[app] = app_summary(rows, report, best[app], peak)
        queries = sum(a["queries"] for a in per_app.values())
        ok = sum(a["_ok"] for a in per_app.values())
        acc = sum(a["_acc"] * a["_ok"] for a in per_app.values() if a["_acc"] is not None)
        both = {
            "effective_accuracy": round(acc / ok, 4) if ok else None,
            "max_accuracy_drop": max((a["max_accuracy_drop"] or 0) for a in per_app.values()),
            "slo_violation_ratio":
                round(sum(a["_violations"] for a in per_app.values()) / queries, 4),
            "served_fraction": round(ok / queries, 4) if queries else 0,
        }
        for a in per_app.values():
            for k in ("_ok", "_violations", "_acc"):
                del a[k]
        summary["systems"][system] = {"both": both, "apps": per_app}
    with open(out_dir + "/summary.json", "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    plot(series, best, apps, systems, out_dir + "/plot.svg")
    print("| system | effective accuracy | at the peaks (%s) | max accuracy drop | "
          "SLO violations | served |" % " / ".join(apps))
    print("|---|---|---|---|---|---|")
    for system in systems:
        s = summary["systems"][system]
        b = s["both"]
        peaks = " / ".join("%.4f" % s["apps"][a]["accuracy_at_peak"]
                           if s["apps"][a]["accuracy_at_peak"] is not None else "-" for a in apps)
        print("| %s | %.4f | %s | %.2f%% | %.4f | %.4f |"
              % (system, b["effective_accuracy"] or 0, peaks, 100 * b["max_accuracy_drop"],
                 b["slo_violation_ratio"], b["served_fraction"]))


if __name__ == "__main__":
    main()
