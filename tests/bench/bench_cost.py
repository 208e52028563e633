#!/usr/bin/python3
"""bench_cost.py -- what a request costs shardis in instructions, this
build against a baseline binary: the figure the VM's noise cannot move.

A benchmark, not a test: it prints a table and asserts nothing. Throughput
on this shared VM moves by up to 20% between runs seconds apart (see the
per-round ratios of scripts/bench --baseline), too much to tell a change
of a few percent. Instructions do not move: shardis runs under callgrind
(valgrind), one client sends requests one at a time (-c 1: every loop turn
reads one request and writes one reply, in either build) or 16 at a time
(-P 16), and a row's figure is the instructions of a run of 2N requests
less those of a run of N, over N: start-up and shut-down cancel out.

The builds: the baseline on the default config (no stats_listen: older
binaries have none), this one as scripts/bench runs it (stats_listen
open). What a request costs to record (the latency histograms, the slow
log's copy of its head) is in any build that has it, stats_listen or not:
against a baseline from before #17 (0a15ec6) the ratio is what #17's
measuring costs. Time-driven work is
counted where it falls: under valgrind a run lasts ~50 times longer than
at full speed, so the once-a-second work (the servers' INFO, the ticks)
weighs ~50 times what it weighs at scripts/bench's rates, against this
build. Scrapes of /metrics are left out of the rows and measured alone, on
an idle proxy: instructions per scrape, and what that is in requests.

User-space instructions only: the kernel's work per request (the reads and
writes, most of a proxy's CPU: scripts/bench's CPU us/req) is the same
system calls in both builds. So the last column estimates what the change
costs in CPU: the instructions' ratio, weighted by the share of user time
in this build's CPU (utime and stime from /proc, one run of each row at
scripts/bench's load: -c 50, its request counts, no valgrind).

Run: scripts/bench cost --baseline GIT-REF [--requests N]
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_proxy as bp    # noqa: E402  (its process helpers)

ROWS = [  # (label, redis-benchmark's command, extra args, N per N of the
          #  unpipelined, requests at scripts/bench's load)
    ("SET", ["-t", "set"], [], 1, 100000),
    ("GET", ["-t", "get"], [], 1, 100000),
    ("MSET (10 keys)", ["-t", "mset"], [], 1, 50000),
    ("MGET (10 keys)", ["MGET"] + ["key:__rand_int__"] * 10, [], 1, 50000),
    ("SET -P 16", ["-t", "set"], ["-P", "16"], 4, 400000),
    ("GET -P 16", ["-t", "get"], ["-P", "16"], 4, 400000),
]


def total_ir(path):
    """The total instructions of a callgrind output file."""
    with open(path) as f:
        for line in f:
            m = re.match(r"(?:summary|totals): (\d+)", line)
            if m:
                return int(m.group(1))
    raise RuntimeError("no totals in %s" % path)


class Proxy:
    """One shardis under callgrind, on the servers, with stats_listen or without."""
    seq = 0

    def __init__(self, tmp, binary, servers, stats, callgrind=True):
        Proxy.seq += 1
        self.port = bp.free_port()
        self.stats = bp.free_port() if stats else None
        name = "p%d" % Proxy.seq
        conf = os.path.join(tmp, name + ".yml")
        with open(conf, "w") as f:
            f.write("%s:\n  listen: %s:%d\n  hash: fnv1a_64\n  distribution: ketama\n"
                    "  hash_tag: \"{}\"\n  redis: true\n" % (name, bp.HOST, self.port))
            if stats:
                f.write("  stats_listen: %s:%d\n" % (bp.HOST, self.stats))
            f.write("  servers:\n" + "".join("    - %s:%d:1\n" % (bp.HOST, p)
                                             for p in servers))
        self.out = os.path.join(tmp, name + ".cg")
        argv = [os.path.abspath(binary), "-c", conf, "-v", "4"]
        if callgrind:
            argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + self.out] + argv
        self.proc = bp.start(bp.pinned(1, argv), os.path.join(tmp, name + ".log"))
        bp.wait_port(self.port, self.proc, timeout=60)

    def scrape(self):
        with socket.create_connection((bp.HOST, self.stats), timeout=30) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            while s.recv(65536):
                pass

    def finish(self):
        """Stop it; its instructions from start to exit."""
        self.proc.terminate()
        self.proc.wait(60)
        return total_ir(self.out)


def user_sys(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def run(port, command, extra, n, clients=1):
    argv = bp.pinned(0, ["redis-benchmark", "-h", bp.HOST, "-p", str(port), "-c", str(clients),
                         "-r", "100000", "-d", "64", "-n", str(n), "-q"] + extra + command)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   timeout=600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardis", default="build/shardis")
    ap.add_argument("--baseline", required=True, help="the shardis binary to compare with")
    ap.add_argument("--requests", type=int, default=5000, help="N, of an unpipelined row")
    ap.add_argument("--scrapes", type=int, default=10)
    args = ap.parse_args()
    builds = [("baseline", args.baseline, False), ("this", args.shardis, True)]
    with tempfile.TemporaryDirectory(prefix="shardis-cost-") as tmp:
        servers = []
        for i in range(4):
            port = bp.free_port()
            d = os.path.join(tmp, "r%d" % i)
            os.mkdir(d)
            p = bp.start(bp.pinned(1, ["redis-server", "--port", str(port), "--bind", bp.HOST,
                                       "--save", "", "--appendonly", "no", "--dir", d]),
                         d + "/log")
            bp.wait_port(port, p)
            servers.append(port)
        # Each row once at scripts/bench's load, this build at full speed:
        # its user share of CPU. (The SET row leaves the keys the GETs read.)
        px = Proxy(tmp, args.shardis, servers, True, callgrind=False)
        share = {}
        for label, command, extra, _, load in ROWS:
            u0, s0 = user_sys(px.proc.pid)
            run(px.port, command, extra, load, clients=50)
            u1, s1 = user_sys(px.proc.pid)
            share[label] = (u1 - u0) / max(1, (u1 - u0) + (s1 - s0))
        px.proc.terminate()
        px.proc.wait(10)

        cost = {}
        for label, command, extra, mult, _ in ROWS:
            n = args.requests * mult
            for build, binary, stats in builds:
                ir = []
                for k in (1, 2):
                    px = Proxy(tmp, binary, servers, stats)
                    run(px.port, command, extra, k * n)
                    ir.append(px.finish())
                cost[(label, build)] = (ir[1] - ir[0]) / n
            print("%s done" % label, file=sys.stderr)
        # A scrape of /metrics, on an idle proxy, after one request of each
        # row (so that its commands have series).
        per_scrape = {}
        for k in (0, args.scrapes):
            px = Proxy(tmp, args.shardis, servers, True)
            for _, command, extra, _, _ in ROWS:
                run(px.port, command, extra, 16)
            for _ in range(k):
                px.scrape()
            per_scrape[k] = px.finish()
        scrape = (per_scrape[args.scrapes] - per_scrape[0]) / args.scrapes
        bp.stop_all()

    print("Instructions per request (callgrind, user space), redis-benchmark -c 1 -r 100000 "
          "-d 64, N = %d (x4 pipelined)" % args.requests)
    print()
    print("| test | baseline | this (stats_listen on) | this/baseline | user share of "
          "CPU | CPU this/baseline (estimate) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, *_ in ROWS:
        b, t = cost[(label, "baseline")], cost[(label, "this")]
        print("| %s | %.0f | %.0f | %.3f | %.2f | %.3f |" % (
            label, b, t, t / b, share[label], 1 + (t / b - 1) * share[label]))
    get = cost[("GET", "this")]
    print()
    print("One scrape of /metrics (mean of %d, idle proxy): %.0f instructions, %.0f GETs' worth"
          % (args.scrapes, scrape, scrape / get))


if __name__ == "__main__":
    try:
        main()
    finally:
        bp.stop_all()
