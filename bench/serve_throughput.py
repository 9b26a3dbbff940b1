#!/usr/bin/env python3
"""Kickoffs per second through `crewai serve`'s API with 1, 2 and 4 `crewai worker` processes.

Starts the shared scripted model server (../shared/bench/mock_llm.py) at a fixed latency, a
project with a three-task crew (one agent, no tools), `crewai serve --workers 0` and W workers (each its own
process), submits N kickoffs at once through POST /kickoff, waits for every GET /status/{id} to
be completed, and prints one JSON line per worker count: kickoffs/s, and the queue overhead per kickoff
(submit to its first model request, read from the mock's request log) at p50/p99 over
--probes kickoffs run one at a time on the idle fleet.

  python3 bench/serve_throughput.py --crewai target/debug/crewai --kickoffs 100 \
      [--database postgres://crewai@127.0.0.1:5432/bench] [--latency-ms 200] [--workers 1,2,4]

Without --database each worker count uses a fresh SQLite queue in the project; with a Postgres
URL the queue and journal tables are emptied between worker counts (the database is the
caller's: use a throwaway one).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "bench"))
TOKEN = "bench-token"
AGENTS = "worker:\n  role: Worker\n  goal: Work on {topic}\n  backstory: Diligent.\n"
TASKS = "".join(
    f"{name}:\n  description: {name} on {{topic}}\n  expected_output: A short text\n  agent: worker\n"
    for name in ("research", "analysis", "writing")
)


def start(command, env, wait_for):
    """Starts `command` and waits for a stderr/stdout line containing `wait_for`; returns the
    process and that line."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"{command[0]} exited before announcing itself")
        if wait_for in line:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, line
    raise SystemExit(f"{command[0]} did not announce itself within 60 s")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def request(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {TOKEN}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def empty_postgres(url):
    sql = "TRUNCATE crewai_kickoff_events, crewai_kickoffs, crewai_run_tasks, crewai_runs"
    subprocess.run(["psql", url, "-q", "-c", sql], check=False, capture_output=True)


def percentile(values, p):
    values = sorted(values)
    if not values:
        return None
    index = min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))
    return values[index]


def run_once(args, workers, project, mock_port, log_path):
    env = dict(os.environ, OPENAI_BASE_URL=f"http://127.0.0.1:{mock_port}/v1", OPENAI_API_KEY="bench",
               CREWAI_SERVE_TOKEN=TOKEN)
    env.pop("CREWAI_DATABASE_URL", None)
    database = args.database or os.path.join(project, ".crewai", f"queue-{workers}.db")
    if args.database:
        empty_postgres(args.database)
    common = ["--project", project, "--database", database]
    serve, line = start([args.crewai, "serve", *common, "--port", "0", "--workers", "0"], env,
                        "Kickoff API listening on")
    base = line.split("http://", 1)[1].split("/", 1)[0]
    procs = [serve]
    try:
        for _ in range(workers):
            proc, _ = start([args.crewai, "worker", *common, "--concurrency", str(args.concurrency)], env,
                            "Worker ")
            procs.append(proc)
        open(log_path, "w").close()
        submitted = {}
        began = time.time()
        threads = []

        def submit(i):
            at = time.time()
            body = request("POST", f"http://{base}/kickoff", {"inputs": {"topic": f"bench-{i}"}})
            submitted[body["kickoff_id"]] = (f"bench-{i}", at)

        for i in range(args.kickoffs):
            thread = threading.Thread(target=submit, args=(i,))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        wait_all(base, set(submitted))
        elapsed = time.time() - began
        # Queue overhead on an idle fleet: kickoffs one at a time, so no wait for a free slot.
        probes = {}
        for i in range(args.probes):
            at = time.time()
            body = request("POST", f"http://{base}/kickoff", {"inputs": {"topic": f"probe-{workers}x{i}"}})
            probes[body["kickoff_id"]] = (f"probe-{workers}x{i}", at)
            wait_all(base, {body["kickoff_id"]})
    finally:
        for proc in reversed(procs):
            stop(proc)
    overheads = queue_overheads(log_path, probes)
    return {
        "workers": workers,
        "concurrency_per_worker": args.concurrency,
        "kickoffs": args.kickoffs,
        "latency_ms": args.latency_ms,
        "database": "postgres" if args.database else "sqlite",
        "seconds": round(elapsed, 2),
        "kickoffs_per_second": round(args.kickoffs / elapsed, 2),
        "probes": len(overheads),
        "queue_overhead_ms_p50": percentile(overheads, 50),
        "queue_overhead_ms_p99": percentile(overheads, 99),
    }


def wait_all(base, pending):
    while pending:
        for kickoff_id in list(pending):
            state = request("GET", f"http://{base}/status/{kickoff_id}")["state"]
            if state not in ("queued", "running"):
                if state != "completed":
                    raise SystemExit(f"kickoff {kickoff_id} ended {state}")
                pending.discard(kickoff_id)
        time.sleep(0.05)


def queue_overheads(log_path, submitted):
    """Milliseconds from each kickoff's submission to the first model request naming its topic."""
    wanted = {topic: at for topic, at in submitted.values()}
    first_request = {}
    with open(log_path) as log:
        for line in log:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if "request" not in entry:
                continue
            # The log's ts is when the mock received the request.
            began_at = entry["ts"]
            for topic in set(re.findall(r"probe-\d+x\d+", json.dumps(entry["request"]))):
                if topic in wanted:
                    first_request[topic] = min(first_request.get(topic, began_at), began_at)
    return [(first_request[t] - at) * 1000 for t, at in wanted.items() if t in first_request]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--crewai", required=True, help="the crewai binary")
    parser.add_argument("--kickoffs", type=int, default=100)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=16, help="kickoffs each worker runs at once")
    parser.add_argument("--probes", type=int, default=20, help="kickoffs run one at a time for the overhead")
    parser.add_argument("--database", help="a Postgres URL (default: a SQLite queue per run)")
    args = parser.parse_args()
    project = tempfile.mkdtemp(prefix="crewai-serve-bench-")
    os.makedirs(os.path.join(project, "config"))
    for name, text in (("agents.yaml", AGENTS), ("tasks.yaml", TASKS)):
        with open(os.path.join(project, "config", name), "w") as out:
            out.write(text)
    log_path = os.path.join(project, "mock.jsonl")
    mock = subprocess.Popen(
        [sys.executable, os.path.join(SHARED, "mock_llm.py"), "--port", "0", "--latency-ms",
         str(args.latency_ms), "--log", log_path, "--log-bodies"],
        stdout=subprocess.PIPE, text=True)
    try:
        port = int(mock.stdout.readline().split()[1])
        for workers in [int(w) for w in args.workers.split(",")]:
            print(json.dumps(run_once(args, workers, project, port, log_path)), flush=True)
    finally:
        mock.kill()
        mock.wait()
        shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
