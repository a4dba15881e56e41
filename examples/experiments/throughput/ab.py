"""Two builds of maitre, measured in alternation: A, B, A, B, ... against two servers kept
running side by side, so that a host whose speed drifts over minutes (a shared VM) slows
both alike. `run` measures one build after the other; use this when the difference
sought is smaller than that drift.

    /usr/bin/python3 ab.py '{"builds": {"before": PATH, "after": PATH}, "loadgen": PATH,
        "zoo": DIR, "out": DIR, "targets": ["fmnist-cnn:torch-opt"],
        "protocols": ["http-binary", "grpc"], "concurrency": 32, "rounds": 8,
        "duration": 4, "latency_ms": 20}'

Both servers run on their embedded defaults (two one-core workers each here, so four
workers share the cores; a server that is not being measured is idle). Per target,
protocol and round, each build gets one closed-loop run at the same concurrency, in an
order that alternates from round to round, with its controller's and workers' CPU read
around it. Writes OUT/ab.json: every round's figures (with the variants that answered and
each worker's CPU per query), and per build the medians of rows/s, p99 and CPU per query,
and the median of the rounds' rows/s ratios (last build over first); and each server's log
as OUT/serve-NAME.log.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drive  # noqa: E402


def main():
    args = json.loads(sys.argv[1])
    log = lambda text: print(text, file=sys.stderr, flush=True)
    os.makedirs(args["out"], exist_ok=True)
    models = sorted({t.split(":")[0] for t in args["targets"]})
    servers, dirs = {}, {}
    try:
        for name, maitre in args["builds"].items():
            dirs[name] = tempfile.mkdtemp(prefix=f"maitre-ab-{name}-")
            servers[name] = drive.Server(maitre, dirs[name], ["--profile-sweeps", "1"])
            for model in models:
                drive.register(maitre, servers[name], args["zoo"], "ab", model)
            subprocess.run([maitre, "apps", "--server", servers[name].url, "--app", "ab",
                            "--latency-ms", str(args["latency_ms"])], check=True,
                           stdout=subprocess.DEVNULL)
        log("waiting for the profiles ...")
        while not all(drive.profiled(s, "ab") for s in servers.values()):
            for s in servers.values():
                s.check()
            time.sleep(3)
        names = list(servers)
        result = {"setup": {k: args[k] for k in ("builds", "loadgen", "targets", "protocols",
                                                 "concurrency", "rounds", "duration",
                                                 "latency_ms")},
                  "runs": {}}
        for target in args["targets"]:
            for protocol in args["protocols"]:
                rounds = []
                for name in names:  # warm: what the target needs is loaded on each
                    drive.bench(args["loadgen"], servers[name], args["zoo"], target, protocol,
                                4, 3, args["latency_ms"], 1)
                for i in range(args["rounds"]):
                    order = names if i % 2 == 0 else names[::-1]
                    row = {}
                    for name in order:
                        before = drive.cpu_snapshot(servers[name])
                        report, loadgen_cpu = drive.bench(
                            args["loadgen"], servers[name], args["zoo"], target, protocol,
                            args["concurrency"], args["duration"], args["latency_ms"], 1)
                        after = drive.cpu_snapshot(servers[name])
                        answered = max(report["requests"]["ok"], 1)
                        split = drive.cpu_split(before, after, answered)
                        row[name] = {
                            "rows_per_s": round(report["throughput_qps"]),
                            "p99_ms": round(report["latency_ms"]["p99"], 2),
                            "late": report["slo"]["violations"],
                            "batch_rows_mean": report["server"].get("batch_rows_mean"),
                            "controller_us": split["controller"]["total_us"],
                            "workers_us": round(sum(v["total_us"] for k, v in split.items()
                                                    if k != "controller"), 1),
                            "loadgen_us": round(loadgen_cpu / answered * 1e6, 1),
                            # Where the answers came from: the variants, and each
                            # worker's CPU per query (an idle worker shows ~0).
                            "variants": {v["variant"]: v["answers"] for v in report["served"]},
                            "per_worker_us": {k: v["total_us"] for k, v in split.items()
                                              if k != "controller"}}
                    log(f"{target} {protocol} round {i + 1}: " + ", ".join(
                        f"{n} {row[n]['rows_per_s']} rows/s (p99 {row[n]['p99_ms']} ms, "
                        f"{row[n]['controller_us']:.0f}+{row[n]['workers_us']:.0f} µs)"
                        for n in names))
                    rounds.append(row)
                median = lambda key, n: statistics.median(r[n][key] for r in rounds)
                result["runs"][f"{target} {protocol}"] = {
                    "rounds": rounds,
                    "medians": {n: {k: median(k, n) for k in ("rows_per_s", "p99_ms",
                                                              "controller_us", "workers_us",
                                                              "loadgen_us")}
                                for n in names},
                    "ratio_median": round(statistics.median(
                        r[names[-1]]["rows_per_s"] / max(r[names[0]]["rows_per_s"], 1)
                        for r in rounds), 3),
                    "rounds_last_ahead": sum(r[names[-1]]["rows_per_s"] >
                                             r[names[0]]["rows_per_s"] for r in rounds)}
                json.dump(result, open(os.path.join(args["out"], "ab.json"), "w"), indent=1)
        for key, run in result["runs"].items():
            log(f"{key}: {names[-1]} ÷ {names[0]} rows/s, median of rounds "
                f"{run['ratio_median']}; ahead in {run['rounds_last_ahead']} of "
                f"{len(run['rounds'])}; medians " + json.dumps(run["medians"]))
    finally:
        for name, s in servers.items():
            s.stop()
            # The server's log says which instances changed state and what the
            # autoscaler did while it was measured.
            log_path = os.path.join(dirs[name], "serve.log")
            if os.path.exists(log_path):
                subprocess.run(["cp", log_path, os.path.join(args["out"], f"serve-{name}.log")])
            subprocess.run(["rm", "-rf", dirs[name]])


if __name__ == "__main__":
    main()
