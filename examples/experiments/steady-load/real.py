"""steady-load on the real server: `maitre serve` on its embedded defaults, the
zoo's CNN registered and profiled, queried by model name (Maitre picks the
variant) at the app's 20 ms objective over HTTP binary. Three phases, one run:

  capacity  the highest open-loop Poisson rate with 99% of queries answered
            within the objective (rates 1.2x apart; three misses in a row
            end the search, since a shared host misses a rate now and then),
            C, or CAPACITY_QPS when set. Open loop, because the phases
            below are: a closed loop's best throughput is higher, since its
            clients wait instead of bursting, and 70% of it overloads an
            open loop on this host. The search is pinned to one variant
            (CAPACITY_VARIANT, torch-opt: the one whose profile carries
            most), so that C is that variant's and runs compare: searched
            model-less, C was whatever variant the model-less path happened
            to use (1,728 to 4,301 q/s on one binary). Empty: model-less;
  step      (skipped when STEP_LOW_S or STEP_HIGH_S is 0) the server
            restarted on the same registry (so nothing is loaded and the
            profiles are kept), then open-loop Poisson at 10% of C for
            STEP_LOW_S and 90% of C for STEP_HIGH_S: which variants answer at
            the low rate, and at the end of the high part;
  steady    (skipped when STEADY_S is 0) open-loop Poisson at 70% of C for
            STEADY_S (900 s): how often a
            variant is given up (unloaded) and loaded back, from the server's
            log, how many answers are 500 or lost, and every 30 s each
            instance's served rate and the rate the controller sent
            queries to workers over the 30 s (from /metrics).

Writes the summary (summary-real.json) and prints it. See `real` beside this file.
"""
import contextlib
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "throughput"))
import drive  # noqa: E402  (the throughput experiment's server helpers)

LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] \[\w+\] (.*)$")
LOADED = re.compile(r"^(\S+):(\S+) loaded on (\S+) in")
UNLOADED = re.compile(r"^(\S+):(\S+) unloaded from (\S+)$")


SERVED = re.compile(r'^maitre_instance_served_requests_per_second\{(.*)\} (\S+)$')


def served_by_instance(server):
    """Each instance's served rate over its last report ("worker variant" ->
    q/s), and the count of queries the controller has sent to workers, from
    the server's metrics."""
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=5) as r:
        text = r.read().decode()
    rates, sent = {}, 0.0
    for line in text.splitlines():
        if (m := SERVED.match(line)):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            rates[f"{labels.get('worker')} {labels.get('variant')}"] = float(m.group(2))
        elif line.startswith("maitre_worker_call_queries_sum "):
            sent = float(line.split()[-1])
    return rates, sent


def open_loop(args, server, rate, seconds, series=None, model=None, samples=None):
    """One `maitre bench` run's report; with `samples` (a list), the served
    rate of every instance is appended to it every 30 s meanwhile."""
    cmd = [args["maitre"], "bench", "--server", server.url, "--protocol", "http-binary",
           "--model", model or args["model"], "--latency-ms", str(args["latency_ms"]), "--input",
           f"{args['zoo']}/samples/batch8.npz", "--timeout", "10", "--json",
           "--rate", str(rate), "--duration", str(seconds)]
    if series:
        cmd += ["--series", series]
    bench = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        started = time.monotonic()
        # The controller's own count of queries sent to workers, beside the
        # reports: the two disagreed in run 3 (docs/experiments.md).
        last = None
        while samples is not None and bench.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                bench.wait(timeout=30)
            if bench.poll() is None:
                with contextlib.suppress(OSError, ValueError):
                    rates, sent = served_by_instance(server)
                    now = time.monotonic()
                    sample = {"at_s": round(now - started), "served_qps": rates}
                    if last is not None:
                        sample["sent_to_workers_qps"] = (sent - last[1]) / (now - last[0])
                    last = (now, sent)
                    samples.append(sample)
        out, _ = bench.communicate()
    finally:
        if bench.poll() is None:  # stopped early: the load generator goes too
            bench.kill()
            bench.wait()
    if bench.returncode != 0:
        raise subprocess.CalledProcessError(bench.returncode, cmd)
    return json.loads(out)


def search_capacity(args, server, log, seconds=10):
    """The highest rate tried that kept 99% of its queries within the
    objective, and the answers by variant at that rate (model-less, the
    path chooses what serves during the search, so the figure is that
    choice's)."""
    model = args["model"]
    if args["capacity_variant"]:
        model = f"{model}:{args['capacity_variant']}"
    rate, best, served, misses = 1000, None, {}, 0
    while misses < 3:
        report = open_loop(args, server, rate, seconds, model=model)
        started = report["requests"]["started"]
        ok = started > 0 and report["slo"]["violations"] <= 0.01 * started
        by_variant = {v["variant"]: v["answers"] for v in report["served"]}
        log(f"  {rate} q/s: {report['throughput_qps']:.0f} answered, "
            f"{report['slo']['violations']} of {started} late or failed"
            f"{'' if ok else ' (misses the objective)'}; served by {by_variant}")
        if ok:
            best, served, misses = rate, by_variant, 0
        else:
            misses += 1
        rate = round(rate * 1.2)
    if best is None:
        sys.exit("no rate met the objective")
    return best, served


def instance_events(log_path, start, end):
    """Loads and unloads in the serve log between two datetimes, in order."""
    events = []
    with open(log_path) as f:
        for line in f:
            m = LOG_LINE.match(line.rstrip("\n"))
            if not m:
                continue
            at = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f")
            if not start <= at <= end:
                continue
            text = m.group(2)
            if (e := LOADED.match(text)):
                events.append((at, "load", e.group(1), e.group(2), e.group(3)))
            elif (e := UNLOADED.match(text)):
                events.append((at, "unload", e.group(1), e.group(2), e.group(3)))
    return events


def cycles(events):
    """Give-up/reload cycles: an unload of a model's variant from a worker that a
    later load of the same variant on the same worker undoes."""
    gone = set()
    count = 0
    for _, kind, model, variant, worker in events:
        key = (model, variant, worker)
        if kind == "unload":
            gone.add(key)
        elif key in gone:
            gone.discard(key)
            count += 1
    return count


def summarise(report):
    return {"rate_qps": report["load"]["rate_qps"], "answered_qps": report["throughput_qps"],
            "requests": report["requests"], "errors": report["errors"],
            "p99_ms": report["latency_ms"]["p99"],
            "late": report["slo"]["violations"] if report["slo"] else None,
            "served": {v["variant"]: v["answers"] for v in report["served"]}}


def last_seconds_by_variant(series_path, seconds):
    """Answers by variant over the last `seconds` rows of a --series CSV."""
    with open(series_path) as f:
        header = f.readline().strip().split(",")
        rows = [line.strip().split(",") for line in f if line.strip()]
    fixed = header.index("effective_accuracy") + 1  # the variants' columns follow
    totals = {name: 0 for name in header[fixed:]}
    for row in rows[-seconds:]:
        for i, name in enumerate(header[fixed:], fixed):
            totals[name] += int(row[i] or 0)
    return totals


def main():
    # A SIGTERM unwinds like an error, so that the server and the load
    # generator are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = json.loads(sys.argv[1])
    out = args["out"]
    os.makedirs(out, exist_ok=True)
    log = lambda text: print(text, flush=True)
    data = tempfile.mkdtemp(prefix="maitre-steady-")
    server = drive.Server(args["maitre"], data, ["--profile-sweeps", "1"])
    summary = {"setup": {k: args[k] for k in ("model", "latency_ms", "step_low_s", "step_high_s",
                                               "steady_s", "capacity_qps", "capacity_variant")}}
    try:
        drive.register(args["maitre"], server, args["zoo"], "steady", args["model"])
        subprocess.run([args["maitre"], "apps", "--server", server.url, "--app", "steady",
                        "--latency-ms", str(args["latency_ms"])], check=True,
                       stdout=subprocess.DEVNULL)
        while not drive.profiled(server, "steady"):
            server.check()
            time.sleep(2)
        log("profiled; searching the open loop's capacity")
        if args["capacity_qps"]:
            capacity = args["capacity_qps"]
        else:
            capacity, summary["capacity_served"] = search_capacity(args, server, log)
        summary["capacity_qps"] = capacity
        log(f"capacity {capacity} q/s")

        if args["step_low_s"] > 0 and args["step_high_s"] > 0:
            server = step(args, server, data, out, capacity, summary, log)
        if args["steady_s"] > 0:
            steady(args, server, data, out, capacity, summary, log)
    finally:
        server.stop()
        os.replace(os.path.join(data, "serve.log"), os.path.join(out, "serve.log"))
    with open(args["summary"], "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))


def step(args, server, data, out, capacity, summary, log):
    """The load step, on a server restarted so that nothing is loaded (the
    search loaded what high load needs). Returns the restarted server."""
    server.stop()
    os.replace(os.path.join(data, "serve.log"), os.path.join(out, "serve-capacity.log"))
    with contextlib.suppress(FileNotFoundError):  # the new server writes its own
        os.remove(os.path.join(data, "endpoints.json"))
    server = drive.Server(args["maitre"], data, ["--profile-sweeps", "1"])
    series = os.path.join(out, "step-series.csv")
    low = open_loop(args, server, round(0.1 * capacity), args["step_low_s"])
    high = open_loop(args, server, round(0.9 * capacity), args["step_high_s"], series)
    summary["step"] = {"low": summarise(low), "high": summarise(high),
                       "last_30s_served": last_seconds_by_variant(series, 30)}
    log(f"step: {json.dumps(summary['step'])}")
    return server


def steady(args, server, data, out, capacity, summary, log):
    """The steady phase: loads, unloads and give-up/reload cycles from the log,
    and the per-second series beside the 30 s samples of the metrics."""
    start = datetime.datetime.now()
    samples = []
    report = open_loop(args, server, round(0.7 * capacity), args["steady_s"],
                       os.path.join(out, "steady-series.csv"), samples=samples)
    end = datetime.datetime.now()
    events = instance_events(os.path.join(data, "serve.log"), start, end)
    result = summarise(report)
    result["loads"] = sum(1 for e in events if e[1] == "load")
    result["unloads"] = sum(1 for e in events if e[1] == "unload")
    result["cycles"] = cycles(events)
    result["events"] = [f"{e[0]:%H:%M:%S.%f} {e[1]} {e[2]}:{e[3]} on {e[4]}" for e in events]
    # Whether selection spreads the load over the workers or packs it on one.
    result["served_by_instance_every_30s"] = samples
    summary["steady"] = result
    log(f"steady: {json.dumps(result)}")


if __name__ == "__main__":
    main()
