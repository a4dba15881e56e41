"""inferline-pipelines on the real server (see `run` beside this file).

`maitre serve` on one cpu-1 worker (cluster scaling may add one more), the
zoo's fmnist-logreg and fmnist-cnn-wide registered and profiled, and the
cascade of examples/pipelines/cascade registered over them. Then:

  overhead  the serving path around a stage's batch, from the server's own
            pipeline answers: per query, its total time less its stages' queue
            and compute times, over the stages it ran (the median of
            OVERHEAD_QUERIES queries after a few to warm up);
  plan      the branch probability fast->slow measured offline (the share of
            the valset rows bench sends whose logreg softmax is below 0.8),
            the server's profiles exported (one variant per model: the one the
            server loads for a stage, its first ready one on cpu-1), a Poisson
            sample trace at RATE_QPS, and `maitre plan --apply` for SLO_MS on
            cpu-1 with that overhead (--stage-overhead-ms);
  rounds    ROUNDS times: the plan applied again (so the tuner starts over),
            then `maitre bench --pipeline` replaying the sample trace (the
            planned rate), then Poisson at RAISED_QPS for SECONDS. Per phase:
            the measured P99 and attainment (share of queries answered within
            SLO_MS), and the tuner's decisions and the loads and workers it
            asked for, from the server's log.

The estimator's P99 for the plan on the sample trace is the planner's
`estimated_p99_ms`; the first phase of each round replays that trace, so its
measured P99 is the same trace's. Writes the summary and prints it.
"""
import datetime
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "throughput"))
import drive  # noqa: E402  (the throughput experiment's server helpers)

APP = "cascade"
PIPELINE = "fmnist-cascade"
MODELS = ("fmnist-logreg", "fmnist-cnn-wide")
LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] \[\w+\] "
                      r"allocator: (pipeline-\S+) (.*)$")
ROWS = 1024
OVERHEAD_QUERIES = 40
WARM_UP = 5


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def branch_probability(zoo, rows_path):
    """The share of the rows bench sends that the fast stage sends on."""
    import numpy as np
    import torch
    data = np.load(f"{zoo}/valset.npz")
    inputs, labels = data["inputs"][:ROWS], data["labels"][:ROWS]
    np.savez(rows_path, inputs=inputs, labels=labels)
    model = torch.jit.load(f"{zoo}/fmnist-logreg.pt")
    with torch.no_grad():
        p = torch.softmax(model(torch.from_numpy(inputs)), dim=1).max(dim=1).values
    return float((p < 0.8).float().mean())


def stage_overhead_ms(args, server):
    """The median over pipeline queries of the serving path per stage: the
    query's total time less its stages' queue and compute times, over the
    stages it ran (the pipeline answer's own timings)."""
    per_stage = []
    for i in range(WARM_UP + OVERHEAD_QUERIES):
        answer = json.loads(run([args["maitre"], "infer", "--server", server.url, "--pipeline",
                                 PIPELINE, "--input", f"{args['zoo']}/samples/batch8.npz",
                                 "--json"]))["parameters"]
        stages = answer["stages"]
        spent = sum(s["queue_us"] + s["compute_us"] for s in stages)
        if i >= WARM_UP:
            per_stage.append((answer["total_us"] - spent) / len(stages) / 1000)
    return statistics.median(per_stage)


def profiles_csv(maitre, server, path):
    """The server's profiles on cpu-1, one variant per model: the first
    ready one, as the control plane loads for a stage."""
    lines = run([maitre, "profiles", "export", "--server", server.url, "--app", APP]).splitlines()
    header, rows = lines[0], [line.split(",") for line in lines[1:] if line and line[0] != "#"]
    cols = header.split(",")
    model_at, variant_at, type_at = cols.index("model"), cols.index("variant"), cols.index(
        "worker_type")
    chosen = {}
    for m in server.get(f"/v2/apps/{APP}")["models"]:
        ready = [v["variant"] for v in m["variants"]
                 if v["state"] == "ready" and "cpu-1" in (v.get("profiles") or {})]
        chosen[m["name"]] = ready[0]
    keep = [r for r in rows
            if r[type_at] == "cpu-1" and chosen.get(r[model_at]) == r[variant_at]]
    with open(path, "w") as f:
        f.write(header + "\n" + "".join(",".join(r) + "\n" for r in keep))
    return chosen


def poisson_trace(path, rate, seconds, seed):
    rng = random.Random(seed)
    t, times = 0.0, []
    while True:
        t += rng.expovariate(rate)
        if t >= seconds:
            break
        times.append(t)
    with open(path, "w") as f:
        f.write("arrival_ms\n" + "".join(f"{x * 1000:.3f}\n" for x in times))


def bench(args, server, rows, arrivals, rate):
    """Open loop; a trace replays as it is (bench then only needs a rate)."""
    cmd = [args["maitre"], "bench", "--server", server.url, "--pipeline", PIPELINE,
           "--latency-ms", str(args["slo_ms"]), "--input", rows, "--timeout", "10", "--json",
           "--duration", str(args["seconds"]), "--arrivals", arrivals, "--rate", str(rate)]
    report = json.loads(run(cmd))
    started = report["requests"]["started"]
    late = report["slo"]["violations"] if report.get("slo") else started
    return {"started": started, "ok": report["requests"]["ok"],
            "answered_qps": report["throughput_qps"], "p50_ms": report["latency_ms"]["p50"],
            "p99_ms": report["latency_ms"]["p99"],
            "attainment": (started - late) / started if started else 0}


def actions(log_path, start, end):
    """The pipeline part's decisions in the log between two datetimes."""
    with open(log_path) as f:
        matches = [LOG_LINE.match(line.rstrip("\n")) for line in f]
    stamped = [(datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f"), m)
               for m in matches if m]
    return [{"at_s": round((at - start).total_seconds(), 1), "kind": m.group(2),
             "what": m.group(3)} for at, m in stamped if start <= at <= end]


def replicas_added(events):
    """Replicas the pipeline part loaded (the tuner's additions carried out)."""
    added = 0
    for e in events:
        if e["kind"] == "pipeline-load":
            m = re.search(r" x(\d+):", e["what"])
            added += int(m.group(1)) if m else 0
    return added


def phase(args, server, data, rows, arrivals, rate):
    start = datetime.datetime.now()
    result = bench(args, server, rows, arrivals, rate)
    time.sleep(1)  # the round after the last query, so its decision is logged
    events = actions(os.path.join(data, "serve.log"), start, datetime.datetime.now())
    result["tuner_up"] = [e["what"] for e in events if e["kind"] == "pipeline-up"]
    result["replicas_loaded"] = replicas_added(events)
    result["workers_asked"] = sum(e["kind"] == "pipeline-add-worker" for e in events)
    return result


def main():
    args = json.loads(sys.argv[1])
    out = args["out"]
    os.makedirs(out, exist_ok=True)
    data = tempfile.mkdtemp(prefix="maitre-pipelive-")
    log = lambda text: print(text, flush=True)
    server = drive.Server(args["maitre"], data, ["--profile-sweeps", "1", "--workers", "cpu-1:1"])
    summary = {"setup": {k: args[k] for k in ("rate_qps", "raised_qps", "slo_ms", "seconds",
                                               "rounds")}}
    try:
        for model in MODELS:
            drive.register(args["maitre"], server, args["zoo"], APP, model)
        while not drive.profiled(server, APP):
            server.check()
            time.sleep(2)
        spec = os.path.join(args["repo"], "examples/pipelines/cascade/spec.json")
        run([args["maitre"], "pipelines", "put", "--server", server.url, APP, PIPELINE, spec])
        overhead = stage_overhead_ms(args, server)
        summary["stage_overhead_ms"] = overhead
        rows = os.path.join(out, "rows.npz")
        p = branch_probability(args["zoo"], rows)
        profiles = os.path.join(out, "profiles.csv")
        summary["variants"] = profiles_csv(args["maitre"], server, profiles)
        trace = os.path.join(out, "sample-trace.csv")
        poisson_trace(trace, args["rate_qps"], args["seconds"], seed=1)
        models = os.path.join(args["repo"], "examples/pipelines/cascade/models.json")
        plan_cmd = [args["maitre"], "plan", "--pipeline", spec, "--models", models,
                    "--profiles", profiles, "--trace", trace, "--slo-ms", str(args["slo_ms"]),
                    "--worker-types", "cpu-1:1:4096:0.0425", "--branch", f"fast->slow={p:.4f}",
                    "--stage-overhead-ms", f"{overhead:.3f}",
                    "--json", "--apply", server.url, "--app", APP]
        plan = json.loads(run(plan_cmd))
        with open(os.path.join(out, "plan.json"), "w") as f:
            json.dump(plan, f, indent=1)
        summary["branch_probability"] = p
        summary["plan"] = {"stages": plan["plan"]["stages"],
                           "estimated_p99_ms": plan["plan"]["estimated_p99_ms"]}
        log(f"branch {p:.3f}; plan {json.dumps(summary['plan'])}")
        rounds = []
        for r in range(args["rounds"]):
            run(plan_cmd)  # applied again: the tuner starts over from the plan
            planned = phase(args, server, data, rows, f"trace:{trace}", args["rate_qps"])
            raised = phase(args, server, data, rows, "poisson", args["raised_qps"])
            rounds.append({"planned": planned, "raised": raised})
            log(f"round {r + 1}: {json.dumps(rounds[-1])}")
        summary["rounds"] = rounds
        # Which variant each stage ran, to compare with the profiles planned on.
        answer = json.loads(run([args["maitre"], "infer", "--server", server.url, "--pipeline",
                                 PIPELINE, "--input", f"{args['zoo']}/samples/batch8.npz",
                                 "--json"]))
        summary["served_variants"] = {s["vertex"]: f"{s['model']}:{s['variant']}"
                                      for s in answer["parameters"]["stages"]}
        median = lambda phase_name, key: statistics.median(x[phase_name][key] for x in rounds)
        summary["median"] = {
            name: {key: median(name, key) for key in
                   ("answered_qps", "p50_ms", "p99_ms", "attainment", "replicas_loaded",
                    "workers_asked")} for name in ("planned", "raised")}
        est, meas = summary["plan"]["estimated_p99_ms"], summary["median"]["planned"]["p99_ms"]
        summary["estimator_error"] = {"estimated_p99_ms": est, "measured_p99_ms": meas,
                                      "relative": (est - meas) / meas if meas else None}
    finally:
        server.stop()
        shutil.move(os.path.join(data, "serve.log"), os.path.join(out, "serve.log"))
    text = json.dumps(summary, indent=1)
    with open(args["summary"], "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
