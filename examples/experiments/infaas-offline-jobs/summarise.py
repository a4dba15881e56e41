#!/usr/bin/env python3
"""Summarises infaas-offline-jobs: online figures with and without the job,
the job's pause intervals against the worker's utilisation, and a plot.

Usage: summarise.py RESULTS_DIR SUMMARY_JSON PLOT_SVG
"""
import csv
import json
import sys

THRESHOLD = 0.40  # the throttle's pause_above (INFaaS)


def bench(results, name):
    b = json.load(open(f"{results}/{name}-bench.json"))
    ok = b["requests"]["ok"]
    slo = b.get("slo") or {}
    return {"requests": b["requests"]["started"], "ok": ok, "failed": b["requests"]["failed"],
            "throughput_qps": round(b["throughput_qps"], 3),
            "slo_violations": slo.get("violations"),
            "slo_violation_ratio": slo.get("violation_ratio"),
            "latency_p50_ms": round(b["latency_ms"]["p50"], 2),
            "latency_p99_ms": round(b["latency_ms"]["p99"], 2)}


def samples(results, name):
    rows = list(csv.DictReader(open(f"{results}/{name}-samples.csv")))
    return [{"t": float(r["t_s"]), "u": float(r["utilisation"]), "state": r["job_state"],
             "done": int(r["job_done"] or 0)} for r in rows]


def pauses(rows):
    """Intervals [start, end) in which the job was paused."""
    out, start = [], None
    for r in rows:
        if r["state"] == "paused" and start is None:
            start = r["t"]
        elif r["state"] != "paused" and start is not None:
            out.append([start, r["t"]])
            start = None
    if start is not None:
        out.append([start, rows[-1]["t"]])
    return out


LEGEND = ("worker CPU utilisation: with the job (blue), online only (grey); 40% pause "
          "threshold (red, dashed); job paused (shaded)")


def plot(rows, quiet, paused, path, legend=LEGEND):
    w, h, left, top, bottom = 760, 300, 50, 20, 40
    span = max(r["t"] for r in rows) or 1
    x = lambda t: left + (w - left - 10) * t / span
    y = lambda u: top + (h - top - bottom) * (1 - min(u, 1.2) / 1.2)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="11">',
             f'<rect width="{w}" height="{h}" fill="white"/>']
    for a, b in paused:
        parts.append(f'<rect x="{x(a):.1f}" y="{top}" width="{max(1, x(b) - x(a)):.1f}" '
                     f'height="{h - top - bottom}" fill="#f4c7c3"/>')
    for u in (0, 0.2, 0.4, 0.6, 0.8, 1.0):
        parts.append(f'<text x="{left - 6}" y="{y(u) + 4:.1f}" text-anchor="end">{int(u * 100)}%</text>')
    parts.append(f'<line x1="{left}" x2="{w - 10}" y1="{y(THRESHOLD):.1f}" y2="{y(THRESHOLD):.1f}" '
                 'stroke="#d62728" stroke-dasharray="6,4"/>')
    for series, colour in ((quiet, "#999999"), (rows, "#1f77b4")):
        pts = " ".join(f"{x(r['t']):.1f},{y(r['u']):.1f}" for r in series if r["t"] <= span)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    for t in range(0, int(span) + 1, 30):
        parts.append(f'<text x="{x(t):.1f}" y="{h - bottom + 16}" text-anchor="middle">{t} s</text>')
    parts.append(f'<text x="{left}" y="{h - 6}">{legend}</text>')
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts) + "\n")


def main():
    results, summary_path, plot_path = sys.argv[1:4]
    quiet, busy = samples(results, "online-only"), samples(results, "with-job")
    paused = pauses(busy)
    # Utilisation while paused and while running (the job's own share is in
    # the latter).
    def mean_u(pred):
        us = [r["u"] for r in busy if pred(r)]
        return round(sum(us) / len(us), 3) if us else None
    finished = [r["t"] for r in busy if r["state"] == "succeeded"]
    summary = {
        "online_only": bench(results, "online-only"),
        "online_with_job": bench(results, "with-job"),
        "job": {
            "pauses": [[round(a, 1), round(b, 1)] for a, b in paused],
            "paused_s": round(sum(b - a for a, b in paused), 1),
            "rows_done_at_end": busy[-1]["done"] if busy else 0,
            "succeeded_at_s": round(finished[0], 1) if finished else None,
            "mean_utilisation_while_paused": mean_u(lambda r: r["state"] == "paused"),
            "mean_utilisation_while_running": mean_u(lambda r: r["state"] == "running"),
        },
        "threshold": THRESHOLD,
    }
    json.dump(summary, open(summary_path, "w"), indent=2)
    open(summary_path, "a").write("\n")
    plot(busy, quiet, paused, plot_path)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
