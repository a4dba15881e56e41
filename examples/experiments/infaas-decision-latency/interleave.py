#!/usr/bin/python3
"""Model-less and pinned requests interleaved one by one on one connection.

Usage: interleave.py URL APP MODEL:VARIANT LATENCY_MS REQUEST_JSON PAIRS OUT_JSON

Each pair sends one model-less request (POST /v2/apps/APP/infer with
parameters.latency_ms) and one pinned request (POST
/v2/models/MODEL:VARIANT/infer), alternating which goes first, on the same
keep-alive HTTP connection, and times each from send to the last byte read.
Drift in the host's load then hits both kinds alike; the median of the
per-pair differences is the cost of the model-less choice. Standard library
only.
"""
import http.client
import json
import random
import statistics
import sys
import time
import urllib.parse


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def main():
    url, app, variant, latency, request_json, pairs, out = sys.argv[1:8]
    pairs = int(pairs)
    base = json.load(open(request_json))
    model_less = dict(base, parameters=dict(base.get("parameters", {}),
                                            latency_ms=float(latency)))
    bodies = {
        "model_less": (f"/v2/apps/{urllib.parse.quote(app)}/infer",
                       json.dumps(model_less).encode()),
        "pinned": (f"/v2/models/{urllib.parse.quote(variant, safe=':')}/infer",
                   json.dumps(base).encode()),
    }
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    headers = {"Content-Type": "application/json"}
    served = {"model_less": {}, "pinned": {}}

    def once(kind):
        path, body = bodies[kind]
        t0 = time.perf_counter_ns()
        conn.request("POST", path, body, headers)
        r = conn.getresponse()
        data = r.read()
        t1 = time.perf_counter_ns()
        if r.status != 200:
            raise SystemExit(f"{kind}: HTTP {r.status}: {data[:300]!r}")
        d = json.loads(data)
        key = f'{d["model_name"]}:{d["model_version"]}'
        served[kind][key] = served[kind].get(key, 0) + 1
        return (t1 - t0) / 1000.0  # µs

    for _ in range(200):  # warm-up
        once("model_less"), once("pinned")
    times = {"model_less": [], "pinned": []}
    diffs = []
    for i in range(pairs):
        order = ("model_less", "pinned") if i % 2 == 0 else ("pinned", "model_less")
        t = {k: once(k) for k in order}
        for k in t:
            times[k].append(t[k])
        diffs.append(t["model_less"] - t["pinned"])
    conn.close()
    # A 95% interval for the median paired difference: 200 bootstrap resamples.
    rng = random.Random(1)
    boot = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(200))
    result = {
        "pairs": pairs,
        "client": "Python http.client, one keep-alive connection, JSON bodies",
        **{k: {"p50_us": round(statistics.median(v), 1), "p99_us": round(percentile(v, 0.99), 1),
               "served": served[k]} for k, v in times.items()},
        "paired_difference_us": {
            "p50": round(statistics.median(diffs), 2),
            "p25": round(percentile(diffs, 0.25), 2),
            "p75": round(percentile(diffs, 0.75), 2),
            "p50_ci95": [round(boot[4], 2), round(boot[195], 2)],
            "model_less_slower_fraction": round(sum(d > 0 for d in diffs) / len(diffs), 4),
        },
        "difference_of_p50_us": round(statistics.median(times["model_less"])
                                      - statistics.median(times["pinned"]), 2),
        "difference_of_p99_us": round(percentile(times["model_less"], 0.99)
                                      - percentile(times["pinned"], 0.99), 2),
    }
    json.dump(result, open(out, "w"), indent=2)


if __name__ == "__main__":
    main()
