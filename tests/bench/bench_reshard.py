#!/usr/bin/python3
"""bench_reshard.py -- how fast keys move after a reload, and what the
clients feel meanwhile.

A benchmark, not a test: it prints a table and asserts nothing. Each round
starts 5 fresh redis-servers and shardis on 3 of them (default throttle:
migration_rate 3000 keys/s, or --rate), fills them through shardis with small keys
(redis-benchmark SET -r, pipelined), measures GET through shardis in steady
state (redis-benchmark -c 20, p50/p99), then adds the 4th server with
SHARD.RELOAD and runs the same GET benchmark while the keys move, sized to
last about half the migration of the first round. Reported (medians over
the rounds): keys moved per second (the mover's and on-touch moves over
the time from the reload to STATUS stable), and the foreground's
throughput and p50/p99 during the migration against steady state. Then a
5th server is added with migration_rate 0 and no clients: how fast keys
can move at all. There is
nothing to compare with in twemproxy, which cannot move keys; the direct
redis-server row is the same GET against one server, for scale.

Run: scripts/bench reshard [--rounds N] [--keys N]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_proxy as bp    # noqa: E402  (its process helpers)

# Unlike bench_proxy, nothing is pinned: MIGRATE makes the source wait for
# the destination's reply, and with every server on one core that wait
# becomes a scheduler time slice behind the other servers (p99 3-4x worse
# for the same work), which says more about the pinning than about shardis.
bp.pinned = lambda core, argv: argv

HOST = bp.HOST


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-h", HOST, "-p", str(port)] + list(args),
                          capture_output=True, text=True, timeout=60).stdout


class Status:
    """SHARD.MIGRATION STATUS over one connection: polling must not cost the
    machine a process per poll while the benchmark runs."""

    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port))
        self.buf = b""

    def __call__(self):
        self.sock.sendall(b"*2\r\n$15\r\nSHARD.MIGRATION\r\n$6\r\nSTATUS\r\n")
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        head, rest = self.buf.split(b"\r\n", 1)
        n = int(head[1:])
        while len(rest) < n + 2:
            rest += self.sock.recv(65536)
        self.buf = rest[n + 2:]
        text = rest[:n].decode()
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def get_bench(port, n, keys):
    argv = bp.pinned(0, ["redis-benchmark", "-h", HOST, "-p", str(port), "-c", "20",
                         "-r", str(keys), "-n", str(n), "--csv", "-t", "get"])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300).stdout
    rows = [r.split(",") for r in out.strip().splitlines()]
    head = [h.strip('"') for h in rows[0]]
    row = [v.strip('"') for v in rows[-1]]
    get = lambda k: float(row[head.index(k)])
    return get("rps"), get("p50_latency_ms"), get("p99_latency_ms")


def one_round(tmp, r, args, during_n):
    servers = []
    for i in range(5):
        port = bp.free_port()
        d = os.path.join(tmp, "r%d-%d" % (r, i))
        os.mkdir(d)
        p = bp.start(bp.pinned(1, ["redis-server", "--port", str(port), "--bind", HOST,
                                   "--save", "", "--appendonly", "no", "--dir", d]),
                     os.path.join(d, "log"))
        bp.wait_port(port, p)
        servers.append((port, p))
    sport = bp.free_port()
    conf = os.path.join(tmp, "shardis-%d.yml" % r)

    def write(n, rate):
        with open(conf, "w") as f:
            f.write("alpha:\n  listen: %s:%d\n  admin_commands: true\n" % (HOST, sport))
            if rate is not None:
                f.write("  migration_rate: %d\n" % rate)
            f.write("  servers:\n")
            for i, (port, _) in enumerate(servers[:n]):
                f.write("    - %s:%d:1 redis%d\n" % (HOST, port, i + 1))

    def migrate(n, rate):
        """Reload onto n servers; the seconds until STATUS says stable."""
        write(n, rate)
        t0 = time.monotonic()
        redis_cli(sport, "SHARD.RELOAD")
        while status().get("state") != "stable":
            time.sleep(0.01)
        return time.monotonic() - t0

    write(3, args.rate)
    sh = bp.start(bp.pinned(1, [args.shardis, "-c", conf, "-v", "5"]),
                  os.path.join(tmp, "shardis-%d.log" % r))
    bp.wait_port(sport, sh)
    status = Status(sport)
    subprocess.run(bp.pinned(0, ["redis-benchmark", "-h", HOST, "-p", str(sport), "-c", "10",
                                 "-P", "64", "-t", "set", "-d", "16", "-r", str(args.keys),
                                 "-n", str(args.keys * 2), "-q"]),
                   capture_output=True, timeout=300)
    total = sum(int(redis_cli(p, "DBSIZE")) for p, _ in servers[:3])
    steady = get_bench(sport, args.requests, args.keys)
    # 3 -> 4 servers at the default throttle (or --rate), with GETs meanwhile.
    result = {}
    th = threading.Thread(target=lambda: result.update(during=get_bench(sport, during_n,
                                                                        args.keys)))
    write(4, args.rate)
    t0 = time.monotonic()
    redis_cli(sport, "SHARD.RELOAD")
    th.start()
    while status().get("state") != "stable":
        time.sleep(0.01)
    secs = time.monotonic() - t0
    th.join()
    moved = int(redis_cli(servers[3][0], "DBSIZE"))
    # 4 -> 5 servers, unthrottled and alone: how fast keys can move.
    fast_secs = migrate(5, 0)
    fast_moved = int(redis_cli(servers[4][0], "DBSIZE"))
    for _, p in servers + [(sport, sh)]:
        p.terminate()
        p.wait(10)
        bp.PROCS.remove(p)
    return dict(total=total, moved=moved, secs=secs, steady=steady, during=result["during"],
                fast=fast_moved / fast_secs, fast_moved=fast_moved)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardis", default="build/shardis")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", type=int, default=600000, help="-r of the fill (key space)")
    ap.add_argument("--requests", type=int, default=200000, help="steady-state GETs")
    ap.add_argument("--rate", type=int, help="migration_rate (default: shardis's default)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="shardis-bench-") as tmp:
        try:
            during_n = 20000
            for r in range(args.rounds):
                x = one_round(tmp, r, args, during_n)
                rows.append(x)
                if r == 0:      # later rounds: GETs for about 80% of the migration
                    during_n = max(5000, int(x["steady"][0] * x["secs"] * 0.8))
                print("round %d: %s" % (r + 1, x), file=sys.stderr)
        finally:
            bp.stop_all()
    med = lambda f: statistics.median(f(x) for x in rows)
    print("| shardis reshard (%d rounds, medians) | figure |" % args.rounds)
    print("|---|---|")
    print("| keys / moved to a 4th server, at %s | %d / %d |" % (
        "migration_rate %d" % args.rate if args.rate is not None else "the default throttle",
        med(lambda x: x["total"]), med(lambda x: x["moved"])))
    print("| its migration time (reload to STATUS stable) | %.2f s (%.0f keys/s) |" % (
        med(lambda x: x["secs"]), med(lambda x: x["moved"] / x["secs"])))
    print("| GET rps during / steady | %.2f |" % med(lambda x: x["during"][0] / x["steady"][0]))
    print("| GET p50 during / steady | %.2f (%.3f / %.3f ms) |" % (
        med(lambda x: x["during"][1] / x["steady"][1]), med(lambda x: x["during"][1]),
        med(lambda x: x["steady"][1])))
    print("| GET p99 during / steady | %.2f (%.3f / %.3f ms) |" % (
        med(lambda x: x["during"][2] / x["steady"][2]), med(lambda x: x["during"][2]),
        med(lambda x: x["steady"][2])))
    print("| unthrottled (migration_rate 0), no clients: keys moved to a 5th server | "
          "%d, %.0f keys/s |" % (med(lambda x: x["fast_moved"]), med(lambda x: x["fast"])))


if __name__ == "__main__":
    main()
