"""Turns the throughput experiment's summary.json into the table in docs/architecture.md.

    /usr/bin/python3 report.py results/summary.json [--docs docs/architecture.md]
        [--svg docs/throughput-cpu.svg]

The raw capacity is read two ways, both scaled to the cores left after the
load generator's share in the same run:
- one core's: the executor's best rows/s on one core, the others idle, over
  the runtimes and batch sizes measured (all well within the objective on
  the zoo), times the cores;
- every core's at once: the same runtime run on every core together, the
  best batch's summed rows/s. Where virtual cores share physical ones, this
  is what the host can compute, and the lower of the two.
"""
import json
import re
import sys


def best_raw(raw):
    flavor, batch, rate = max(((f, b, r) for f, rates in raw.items() for b, r in rates.items()),
                              key=lambda x: x[2])
    return flavor, batch, rate


def table(summary):
    builds = list(summary["served"])
    cores = summary["host_cores"]
    lines = []
    head = ["model", "transport"] + [f"{b} rows/s" for b in builds]
    if len(builds) > 1:
        head.append(f"{builds[-1]} ÷ {builds[0]}")
    head += ["raw best, 1 core", f"raw best, {cores} cores at once",
             f"{builds[-1]}: share of capacity (1 core × {cores} / {cores} at once)",
             f"{builds[-1]}: CPU µs/query (controller / workers / load generator)",
             f"{builds[-1]}: variants"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    targets = list(summary["served"][builds[-1]])
    for model in targets:
        flavor, batch, rate = best_raw(summary["raw"][model.split(":")[0]])
        together = summary.get("raw_all_cores", {}).get(model.split(":")[0])
        if together:
            together_batch, together_rate = max(together["rows_per_s"].items(),
                                                key=lambda kv: kv[1])
        for protocol in summary["setup"]["protocols"]:
            runs = [summary["served"][b].get(model, {}).get(protocol) for b in builds]
            row = [model, protocol]
            row += [str(r["rows_per_s"]) if r else "—" for r in runs]
            if len(builds) > 1:
                row.append(f"{runs[-1]['rows_per_s'] / runs[0]['rows_per_s']:.2f}×"
                           if runs[0] and runs[-1] else "—")
            row.append(f"{rate} ({flavor}, batch {batch})")
            row.append(f"{together_rate} (batch {together_batch})" if together else "—")
            last = runs[-1]
            if last:
                cpu = last["cpu_run"]
                left = cores - cpu["loadgen_cores"]
                share = f"{last['rows_per_s'] / (rate * left):.1%}"
                if together:
                    share += f" / {last['rows_per_s'] / (together_rate * left / cores):.1%}"
                row.append(share)
                us = cpu["us_per_query"]
                workers = sum(v["total_us"] for k, v in us.items() if k != "controller")
                row.append(f"{us['controller']['total_us']:.0f} / {workers:.0f} / "
                           f"{cpu['loadgen_us_per_query']:.0f}")
                total = sum(last["by_variant"].values()) or 1
                row.append(", ".join(f"{v.split(':')[-1]} {n / total:.0%}"
                                     for v, n in sorted(last["by_variant"].items(),
                                                        key=lambda kv: -kv[1])))
            else:
                row += ["—", "—", "—"]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def threads(summary):
    """Per build, model and transport: where the CPU goes, thread by thread."""
    lines = []
    for build, models in summary["served"].items():
        for model, protocols in models.items():
            for protocol, run in protocols.items():
                if not run:
                    continue
                parts = []
                for process, split in run["cpu_run"]["us_per_query"].items():
                    top = ", ".join(f"{name} {us:.0f}"
                                    for name, us in list(split["threads_us"].items())[:4])
                    parts.append(f"{process} {split['total_us']:.0f} ({top}; "
                                 f"{split.get('switches', 0):.1f} switches)")
                batch = run.get("batch_rows_mean")
                lines.append(f"- {build}, {model}, {protocol}: " + "; ".join(parts) +
                             f"; load generator {run['cpu_run']['loadgen_us_per_query']:.0f}" +
                             (f"; a query's batch {batch:.1f} rows (mean)" if batch else ""))
    return "\n".join(lines)


def svg(summary):
    """A stacked bar per run of the last build: CPU µs per query, by process and thread."""
    build = list(summary["served"])[-1]
    bars = []
    for target, protocols in summary["served"][build].items():
        for protocol, run in protocols.items():
            if not run:
                continue
            parts = []
            for process, split in run["cpu_run"]["us_per_query"].items():
                kind = "controller" if process == "controller" else "worker"
                named = sum(split["threads_us"].values()) or 1
                for thread, us in split["threads_us"].items():
                    # Scaled so the threads add up to the process (dead threads included).
                    parts.append((kind, f"{kind} {thread}", us * split["total_us"] / named))
            parts.append(("loadgen", "load generator", run["cpu_run"]["loadgen_us_per_query"]))
            bars.append((f"{target} {protocol}", parts))
    colours = {"controller": ["#1f77b4", "#6baed6", "#9ecae1", "#c6dbef"],
               "worker": ["#d62728", "#fb6a4a", "#fc9272", "#fcbba1"],
               "loadgen": ["#7f7f7f"]}
    scale = 1.6  # pixels per µs
    width = 260 + int(scale * max(sum(p[2] for p in parts) for _, parts in bars)) + 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{40 + 34 * len(bars)}" font-family="sans-serif" font-size="11">',
           f'<text x="4" y="16">CPU per query (µs), {build}: controller (blue), workers (red), '
           'load generator (grey); segments are threads, largest first</text>']
    for i, (label, parts) in enumerate(bars):
        y = 30 + 34 * i
        out.append(f'<text x="4" y="{y + 15}">{label}</text>')
        x = 250.0
        used = {"controller": 0, "worker": 0, "loadgen": 0}
        for kind, name, us in parts:
            if us < 0.5:
                continue
            colour = colours[kind][min(used[kind], len(colours[kind]) - 1)]
            used[kind] += 1
            w = us * scale
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="20" fill="{colour}">'
                       f'<title>{name}: {us:.0f} µs</title></rect>')
            if w > 34:
                out.append(f'<text x="{x + 2:.1f}" y="{y + 14}" fill="white">{us:.0f}</text>')
            x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 15}">{x / scale - 250 / scale:.0f}</text>')
    out.append("</svg>")
    return "\n".join(out)


def main():
    summary = json.load(open(sys.argv[1]))
    text = table(summary) + "\n\nCPU per query, µs, by process (its busiest threads):\n\n" + \
        threads(summary)
    print(text)
    if "--svg" in sys.argv:
        open(sys.argv[sys.argv.index("--svg") + 1], "w").write(svg(summary))
    if "--docs" in sys.argv:
        path = sys.argv[sys.argv.index("--docs") + 1]
        doc = open(path).read()
        begin, end = "<!-- throughput:begin -->", "<!-- throughput:end -->"
        if begin in doc:
            doc = re.sub(re.escape(begin) + ".*?" + re.escape(end),
                         lambda _: f"{begin}\n{text}\n{end}", doc, flags=re.S)
            open(path, "w").write(doc)


if __name__ == "__main__":
    main()
