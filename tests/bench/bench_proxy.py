#!/usr/bin/python3
"""bench_proxy.py -- shardis against twemproxy and a direct redis-server.

A benchmark, not a test: it prints a table and asserts nothing. It starts
4 redis-servers, shardis and nutcracker on the same ketama config (nutcracker
at -v 4, its quietest level), and one more redis-server as the direct
baseline, then runs redis-benchmark (-c 50 -r 100000 -d 64) for SET, GET,
MSET and MGET (10 keys, spread over every backend) and SET/GET with -P 16
against each target, alternating targets, ROUNDS rounds, and reports
medians; then SET and GET over TLS (redis-benchmark --tls) against a
shardis with TLS to clients only, one with TLS on both sides, and the
direct server's tls-port (certificates made with the openssl CLI); then
SHARD.GENKEY (COUNT 1 and COUNT 100) against shardis alone, HSET and
HGETALL of 5-field hashes through a shardis with idgen.minify (on keys of
the minified type and of another) beside the plain shardis and the direct
server,
next to its GET, and MULTI/EXEC transactions (bench_tx.c) against shardis
and the direct server (twemproxy has no MULTI), and client-side caching's
rows: RESP3 GETs from 50 connections with CLIENT TRACKING ON on each or not
(bench_track.c), against shardis and the direct server, unpipelined and
-P 16. On a machine with 2+ cores the
client is pinned to core 0 and every server to core 1 (taskset), which keeps
the spread between runs near 5%; compare the ratios, not absolute numbers.

Also measured: the proxy's CPU time per request (utime+stime from
/proc/PID/stat over each run), and the direct redis-server's: what the
kernel charges one process for reading the same requests and writing the
same replies, a floor no proxy goes below by much; and shardis's RSS idle,
with 1,000 idle clients, after each of them sent one GET, and after the
benchmark.

Both proxies run with their stats on and are scraped once a second
throughout (shardis's GET /metrics on stats_listen, twemproxy's JSON stats
port): figures are what a monitored proxy does.

With --baseline PATH (scripts/bench --baseline GIT-REF builds one), another
shardis, that binary without stats_listen and not scraped, joins the rows of
the first table as "baseline", in turn with the others in every round; a
last table gives each row's shardis/baseline ratios, the median over rounds
of each round's ratio (the two ran seconds apart, on one machine state).

Several loops (--threads, default 1,2): for each N but 1, another
shardis with --threads N joins the first table's rows ("shardis N
threads"), pinned as the others (to core 1, with the servers): what a
second loop costs where it has no core of its own. Then the proxy-bound
rows: many clients pipelining GETs of small values (-P 32, -d 8, -c 100)
against a shardis of each thread count given every core (not pinned), the
servers still on core 1 and the client on core 0: what a second loop gives
where the proxy is the limit.

Run: scripts/bench [--rounds N] [--quick] [--baseline GIT-REF] [--threads 1,2]
"""
import argparse
import csv
import io
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HOST = "127.0.0.1"
SETTLE = 2.0        # seconds before reading RSS: the allocators' purge delay
PROCS = []
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def pinned(core, argv):
    if os.cpu_count() >= 2 and shutil.which("taskset"):
        return ["taskset", "-c", str(core)] + argv
    return argv


def start(argv, log):
    out = open(log, "ab")
    p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    p.log = log
    PROCS.append(p)
    return p


def wait_port(port, proc, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            with open(proc.log, errors="replace") as f:
                raise RuntimeError("process %s exited: %s" % (proc.args, f.read()[-600:]))
        try:
            socket.create_connection((HOST, port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d never opened" % port)


def stop_all():
    for p in PROCS:
        if p.poll() is None:
            p.terminate()
    for p in PROCS:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


TESTS = [  # (label, redis-benchmark -t, extra args, requests)
    ("SET", "set", [], 100000),
    ("GET", "get", [], 100000),
    ("MSET (10 keys)", "mset", [], 50000),
    ("MGET (10 keys)", ["MGET"] + ["key:__rand_int__"] * 10, [], 50000),
    ("SET -P 16", "set", ["-P", "16"], 400000),
    ("GET -P 16", "get", ["-P", "16"], 400000),
]


# RESP3 (redis-benchmark -3: HELLO 3 on every connection), against shardis
# and the direct server (twemproxy refuses HELLO): the same rows as RESP2's.
RESP3_TESTS = [  # (label, its RESP2 row, -t, extra args, requests)
    ("SET RESP3", "SET", "set", ["-3"], 100000),
    ("GET RESP3", "GET", "get", ["-3"], 100000),
    ("SET -P 16 RESP3", "SET -P 16", "set", ["-3", "-P", "16"], 400000),
    ("GET -P 16 RESP3", "GET -P 16", "get", ["-3", "-P", "16"], 400000),
]


# TLS (redis-benchmark --tls): shardis with TLS to its clients and plain
# servers, shardis with TLS on both sides, and the direct server's
# tls-port (twemproxy has no TLS): (label, its plain row, -t, extra, requests)
TLS_TESTS = [
    ("SET TLS", "SET", "set", [], 100000),
    ("GET TLS", "GET", "get", [], 100000),
    ("SET -P 16 TLS", "SET -P 16", "set", ["-P", "16"], 400000),
    ("GET -P 16 TLS", "GET -P 16", "get", ["-P", "16"], 400000),
]
TLS_TARGETS = ("shardis TLS", "shardis TLS both sides", "direct TLS")


def make_certs(d):
    """A CA and a certificate for 127.0.0.1 it signs: (ca, crt, key)."""
    ca, cakey, crt, key, csr, ext = (os.path.join(d, n) for n in (
        "ca.crt", "ca.key", "s.crt", "s.key", "s.csr", "s.ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    for argv in (["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", cakey, "-out", ca,
                  "-days", "1", "-subj", "/CN=bench CA"],
                 ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                  "-subj", "/CN=bench"],
                 ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey, "-CAcreateserial",
                  "-out", crt, "-days", "1", "-extfile", ext]):
        subprocess.run(["openssl"] + argv, check=True, capture_output=True)
    return ca, crt, key


# shardis's own commands, against shardis alone: (label, command, ids per call, requests)
GENKEY_TESTS = [
    ("GENKEY", ["SHARD.GENKEY"], 1, 100000),
    ("GENKEY COUNT 100", ["SHARD.GENKEY", "COUNT", "100"], 100, 30000),
]


# idgen.minify: HSET and HGETALL of a 5-field hash on generated keys
# ("0000001{0a}000YY-<n>", type YY: all on one server, for every target
# alike), against (label, port of, key type): the plain shardis (no
# dictionary), a shardis whose dictionary minifies type 01, on a key of
# type 02 (not mapped) and of type 01 (mapped), and the direct server.
MINIFY_IDGEN = ("  idgen: {types: {user: 1, post: 2}, subkeys: {firstName: f, lastName: l, "
                "emailAddress: e, city: c, createdAt: t}, minify: [user]}\n")
MINIFY_FIELDS = ["firstName", "Ann", "lastName", "Lee", "emailAddress", "ann@example.org",
                 "city", "Oslo", "createdAt", "1700000000"]
MINIFY_TESTS = [
    ("HSET 5 fields", lambda k: ["HSET", k] + MINIFY_FIELDS, 100000),
    ("HGETALL 5 fields", lambda k: ["HGETALL", k], 100000),
]
# Client-side caching (bench_track.c: redis-benchmark cannot turn tracking
# on): RESP3 GETs from 50 connections, -r 100000's keys, with CLIENT
# TRACKING ON on every connection or not, against shardis and the direct
# server. (label, pipeline)
TRACK_TESTS = [("GET RESP3", 1), ("GET -P 16 RESP3", 16)]
MINIFY_TARGETS = [("shardis", "sh", "01"), ("shardis dictionary, other type", "mf", "02"),
                  ("shardis dictionary, minified", "mf", "01"), ("direct", "direct", "01")]


def bench(port, test, extra, n):
    """redis-benchmark -t test, or (test a list) that command line."""
    what = ["-t", test] if isinstance(test, str) else test
    argv = pinned(0, ["redis-benchmark", "-h", HOST, "-p", str(port), "-c", "50",
                      "-r", "100000", "-d", "64", "-n", str(n), "--csv"] + extra + what)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300).stdout
    rows = list(csv.reader(io.StringIO(out)))
    head, row = rows[0], rows[-1]
    get = lambda k: float(row[head.index(k)])
    return get("rps"), get("p50_latency_ms"), get("p99_latency_ms")


def clients_rss(pid, port, n=1000):
    socks = []
    try:
        for _ in range(n):
            socks.append(socket.create_connection((HOST, port)))
        time.sleep(SETTLE)
        idle = rss_kb(pid)
        for s in socks:
            s.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n")
        for s in socks:
            s.recv(64)
        time.sleep(SETTLE)
        active = rss_kb(pid)
    finally:
        for s in socks:
            s.close()
    return idle, active


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardis", default="build/shardis")
    ap.add_argument("--bench-tx", default="build/tests/bench_tx")
    ap.add_argument("--bench-track", default="build/tests/bench_track")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1 round, fewer requests")
    ap.add_argument("--baseline", help="another shardis binary, run without stats_listen")
    ap.add_argument("--threads", default="1,2",
                    help="the thread counts to run shardis with, comma-separated")
    args = ap.parse_args()
    threads = [int(x) for x in args.threads.split(",")]
    more = [n for n in threads if n != 1]
    if args.quick:
        args.rounds = 1
        global TESTS
        TESTS = [(l, t, e, n // 10) for l, t, e, n in TESTS]
        global GENKEY_TESTS
        GENKEY_TESTS = [(l, c, k, n // 10) for l, c, k, n in GENKEY_TESTS]
        global RESP3_TESTS
        RESP3_TESTS = [(l, b, t, e, n // 10) for l, b, t, e, n in RESP3_TESTS]
        global TLS_TESTS
        TLS_TESTS = [(l, b, t, e, n // 10) for l, b, t, e, n in TLS_TESTS]
        global MINIFY_TESTS
        MINIFY_TESTS = [(l, c, n // 10) for l, c, n in MINIFY_TESTS]
    nutcracker = shutil.which("nutcracker") or "/usr/sbin/nutcracker"

    with tempfile.TemporaryDirectory(prefix="shardis-bench-") as tmp:
        ca, crt, key = make_certs(tmp)
        tls_files = ["--tls-cert-file", crt, "--tls-key-file", key, "--tls-ca-cert-file", ca,
                     "--tls-auth-clients", "no"]
        ports = [free_port() for _ in range(5)]
        tls_ports = [free_port() for _ in range(5)]
        for i, port in enumerate(ports):
            d = os.path.join(tmp, "r%d" % i)
            os.mkdir(d)
            p = start(pinned(1, ["redis-server", "--port", str(port), "--bind", HOST,
                                 "--tls-port", str(tls_ports[i])] + tls_files +
                             ["--save", "", "--appendonly", "no", "--dir", d]), d + "/log")
            wait_port(port, p)
        direct, direct_proc = ports[4], p     # the last one started
        servers = "".join("    - %s:%d:1\n" % (HOST, p) for p in ports[:4])
        sh_port, nc_port, sh_stats, nc_stats = free_port(), free_port(), free_port(), free_port()
        conf = "alpha:\n  listen: %s:%%d\n  hash: fnv1a_64\n  distribution: ketama\n" \
               "  hash_tag: \"{}\"\n  redis: true\n  servers:\n%s" % (HOST, servers)
        for name, port in (("shardis", sh_port), ("nutcracker", nc_port)):
            with open(os.path.join(tmp, name + ".yml"), "w") as f:
                f.write(conf % port)
                if name == "shardis":
                    f.write("  stats_listen: %s:%d\n" % (HOST, sh_stats))
        sh = start(pinned(1, [os.path.abspath(args.shardis), "-c", tmp + "/shardis.yml",
                              "-v", "4"]), tmp + "/shardis.log")
        nc = start(pinned(1, [nutcracker, "-c", tmp + "/nutcracker.yml", "-v", "4",
                              "-s", str(nc_stats), "-a", HOST]), tmp + "/nc.log")
        wait_port(sh_port, sh)
        wait_port(nc_port, nc)
        scraping = threading.Event()

        def scrape():
            while not scraping.wait(1.0):
                for port, req in ((sh_stats, b"GET /metrics HTTP/1.0\r\n\r\n"), (nc_stats, b"")):
                    try:
                        with socket.create_connection((HOST, port), timeout=2) as s:
                            s.sendall(req)
                            while s.recv(65536):
                                pass
                    except OSError:
                        pass
        threading.Thread(target=scrape, daemon=True).start()
        # The TLS shardises: to plain servers, and to the servers' tls-ports.
        tls_conf = ("  tls_listen: %s:%%d\n  tls_cert_file: %s\n  tls_key_file: %s\n"
                    % (HOST, crt, key))
        tls_servers = "".join("    - %s:%d:1\n" % (HOST, p) for p in tls_ports[:4])
        tls_targets = []
        # (Another pool name for the second: the same servers at other
        # addresses would be another server list to the group, group.c.)
        for name, extra, srv in (("shardis TLS", "", servers),
                                 ("shardis TLS both sides", "  backend_tls: true\n"
                                  "  backend_tls_ca_cert_file: %s\n" % ca, tls_servers)):
            port, tport = free_port(), free_port()
            path = os.path.join(tmp, name.replace(" ", "-") + ".yml")
            with open(path, "w") as f:
                f.write(conf.replace("  servers:\n" + servers, "").replace(
                    "alpha:", name.replace(" ", "_") + ":") % port +
                        tls_conf % tport + extra + "  servers:\n" + srv)
            proc = start(pinned(1, [os.path.abspath(args.shardis), "-c", path, "-v", "4"]),
                         path + ".log")
            wait_port(tport, proc)
            tls_targets.append((name, tport, proc))
        tls_targets.append(("direct TLS", tls_ports[4], direct_proc))
        # The shardis with a dictionary (another pool name: group.c).
        mf_port = free_port()
        with open(os.path.join(tmp, "minify.yml"), "w") as f:
            f.write(conf.replace("alpha:", "minify:").replace("  servers:\n",
                                                              MINIFY_IDGEN + "  servers:\n")
                    % mf_port)
        mf = start(pinned(1, [os.path.abspath(args.shardis), "-c", tmp + "/minify.yml",
                              "-v", "4"]), tmp + "/minify.log")
        wait_port(mf_port, mf)
        mf_of = {"sh": (sh_port, sh), "mf": (mf_port, mf), "direct": (direct, direct_proc)}
        # The baseline shardis: the same servers, another pool name (group.c),
        # no stats_listen (older binaries have none).
        base = None
        if args.baseline:
            base_port = free_port()
            with open(os.path.join(tmp, "baseline.yml"), "w") as f:
                f.write(conf.replace("alpha:", "baseline:") % base_port)
            base = start(pinned(1, [os.path.abspath(args.baseline), "-c",
                                    tmp + "/baseline.yml", "-v", "4"]), tmp + "/baseline.log")
            wait_port(base_port, base)

        # shardis with N loops: pinned as the others (the first table), and
        # given every core (the proxy-bound rows); each its own pool name.
        threaded, unpinned = [], []
        for n in more + ([1] if more else []):
            for pin in ((True, False) if n != 1 else (False,)):
                port = free_port()
                tag = "t%d%s" % (n, "p" if pin else "u")
                with open(os.path.join(tmp, tag + ".yml"), "w") as f:
                    f.write(conf.replace("alpha:", "threads_" + tag + ":") % port)
                argv = [os.path.abspath(args.shardis), "-c", tmp + "/" + tag + ".yml", "-v", "4",
                        "--threads", str(n)]
                proc = start(pinned(1, argv) if pin else argv, tmp + "/" + tag + ".log")
                wait_port(port, proc)
                if pin:
                    threaded.append(("shardis %d threads" % n, port, proc))
                else:
                    unpinned.append((n, port, proc))

        time.sleep(SETTLE)
        mem = {"idle": rss_kb(sh.pid)}
        mem["1000 idle clients"], mem["after one GET each"] = clients_rss(sh.pid, sh_port)
        nc_mem = {"idle": rss_kb(nc.pid)}
        nc_mem["1000 idle clients"], nc_mem["after one GET each"] = clients_rss(nc.pid, nc_port)

        targets = [("shardis", sh_port, sh), ("twemproxy", nc_port, nc), ("direct", direct, direct_proc)]
        targets += threaded
        if base:
            targets.append(("baseline", base_port, base))
        bound = {n: [] for n, _, _ in unpinned}
        bound_cpu = {n: [] for n, _, _ in unpinned}
        results = {(t, lbl): [] for t, _, _ in targets for lbl, *_ in TESTS}
        cpu = {(t, lbl): [] for t, _, _ in targets for lbl, *_ in TESTS}
        for lbl, *_ in GENKEY_TESTS:
            results[("shardis", lbl)], cpu[("shardis", lbl)] = [], []
        for lbl, *_ in RESP3_TESTS:
            for name in ("shardis", "direct"):
                results[(name, lbl)], cpu[(name, lbl)] = [], []
        for lbl, *_ in TLS_TESTS:
            for name, _, _ in tls_targets:
                results[(name, lbl)], cpu[(name, lbl)] = [], []
        for lbl, *_ in MINIFY_TESTS:
            for name, *_ in MINIFY_TARGETS:
                results[(name, "minify " + lbl)], cpu[(name, "minify " + lbl)] = [], []
        tx = {"shardis": [], "direct": []}
        tx_seconds = 1 if args.quick else 3
        track = {(name, lbl, mode): [] for name in ("shardis", "direct")
                 for lbl, _ in TRACK_TESTS for mode in ("plain", "track")}
        track_cpu = {k: [] for k in track}
        for rnd in range(args.rounds):
            # The baseline runs last in even rounds, first in odd ones: a
            # row's first run is not always the same proxy's.
            order = targets[-1:] + targets[:-1] if base and rnd % 2 else targets
            for lbl, test, extra, n in TESTS:
                for name, port, proc in order:
                    before = cpu_seconds(proc.pid) if proc else 0
                    results[(name, lbl)].append(bench(port, test, extra, n))
                    if proc:
                        cpu[(name, lbl)].append((cpu_seconds(proc.pid) - before) / n * 1e6)
            for lbl, _, test, extra, n in RESP3_TESTS:
                for name, port, proc in targets:
                    if name not in ("shardis", "direct"):
                        continue
                    before = cpu_seconds(proc.pid)
                    results[(name, lbl)].append(bench(port, test, extra, n))
                    cpu[(name, lbl)].append((cpu_seconds(proc.pid) - before) / n * 1e6)
            for lbl, _, test, extra, n in TLS_TESTS:
                for name, port, proc in tls_targets:
                    before = cpu_seconds(proc.pid)
                    results[(name, lbl)].append(bench(port, test, extra + ["--tls", "--cacert",
                                                                           ca], n))
                    cpu[(name, lbl)].append((cpu_seconds(proc.pid) - before) / n * 1e6)
            for lbl, command, _, n in GENKEY_TESTS:
                before = cpu_seconds(sh.pid)
                results[("shardis", lbl)].append(bench(sh_port, command, [], n))
                cpu[("shardis", lbl)].append((cpu_seconds(sh.pid) - before) / n * 1e6)
            for lbl, command, n in MINIFY_TESTS:
                for name, which, ytype in MINIFY_TARGETS:
                    port, proc = mf_of[which]
                    before = cpu_seconds(proc.pid)
                    key = "0000001{0a}000%s-__rand_int__" % ytype
                    results[(name, "minify " + lbl)].append(
                        bench(port, command(key), ["-r", "10000"], n))
                    cpu[(name, "minify " + lbl)].append((cpu_seconds(proc.pid) - before) / n * 1e6)
            for n, port, proc in unpinned:
                before = cpu_seconds(proc.pid)
                nreq = 80000 if args.quick else 800000
                bound[n].append(bench(port, "get", ["-P", "32", "-d", "8", "-c", "100"], nreq))
                bound_cpu[n].append((cpu_seconds(proc.pid) - before) / nreq * 1e6)
            for name, port in (("shardis", sh_port), ("direct", direct)):
                out = subprocess.run(pinned(0, [args.bench_tx, HOST, str(port), "50",
                                                str(tx_seconds)]),
                                     capture_output=True, text=True, timeout=120).stdout
                tx[name].append([float(x) for x in out.split()])
            # Plain and tracking in turn, the order swapped every round.
            for lbl, pipeline in TRACK_TESTS:
                modes = ("plain", "track") if rnd % 2 == 0 else ("track", "plain")
                for name, port, proc in (("shardis", sh_port, sh), ("direct", direct,
                                                                    direct_proc)):
                    for mode in modes:
                        before = cpu_seconds(proc.pid)
                        t0 = time.monotonic()
                        out = subprocess.run(pinned(0, [args.bench_track, HOST, str(port), "50",
                                                        str(tx_seconds), str(pipeline), mode,
                                                        "100000"]),
                                             capture_output=True, text=True,
                                             timeout=120).stdout.split()
                        rps = float(out[0])
                        track[(name, lbl, mode)].append(rps)
                        track_cpu[(name, lbl, mode)].append(
                            (cpu_seconds(proc.pid) - before) /
                            (rps * (time.monotonic() - t0)) * 1e6)
            print("round %d/%d done" % (rnd + 1, args.rounds), file=sys.stderr)
        time.sleep(SETTLE)
        mem["after the benchmark"] = rss_kb(sh.pid)
        nc_mem["after the benchmark"] = rss_kb(nc.pid)

    med = lambda xs: statistics.median(xs)
    print("redis-benchmark -c 50 -r 100000 -d 64, %d round(s), medians; client on core 0, "
          "servers on core 1" % args.rounds)
    print()
    print("| test | target | req/s | p50 ms | p99 ms | CPU us/req (proxy; direct: redis) |")
    print("|---|---|---:|---:|---:|---:|")
    for lbl, *_ in TESTS:
        for name, _, proc in targets:
            rs = results[(name, lbl)]
            c = "%.2f" % med(cpu[(name, lbl)]) if proc else ""
            print("| %s | %s | %.0f | %.3f | %.3f | %s |" % (
                lbl, name, med([r[0] for r in rs]), med([r[1] for r in rs]),
                med([r[2] for r in rs]), c))
    print()
    print("| test | shardis/twemproxy | shardis/direct | CPU shardis/twemproxy | "
          "CPU shardis/direct redis |")
    print("|---|---:|---:|---:|---:|")
    for lbl, *_ in TESTS:
        s = med([r[0] for r in results[("shardis", lbl)]])
        t = med([r[0] for r in results[("twemproxy", lbl)]])
        d = med([r[0] for r in results[("direct", lbl)]])
        cs, ct = med(cpu[("shardis", lbl)]), med(cpu[("twemproxy", lbl)])
        cd = med(cpu[("direct", lbl)])
        print("| %s | %.2f | %.2f | %.2f | %.2f |" % (lbl, s / t, s / d, cs / ct if ct else 0,
                                                     cs / cd if cd else 0))
    if threaded:
        print()
        print("| test | threads | req/s vs 1 thread | CPU us/req | CPU vs 1 thread |")
        print("|---|---:|---:|---:|---:|")
        for lbl, *_ in TESTS:
            one = med([r[0] for r in results[("shardis", lbl)]])
            c1 = med(cpu[("shardis", lbl)])
            for name, _, _ in threaded:
                rs = med([r[0] for r in results[(name, lbl)]])
                c = med(cpu[(name, lbl)])
                print("| %s | %s | %.3f | %.2f | %.3f |" % (lbl, name.split()[1], rs / one, c,
                                                           c / c1 if c1 else 0))
        print()
        print("Proxy-bound: GET -P 32 -d 8 -c 100, shardis on every core (servers on core 1, "
              "client on core 0)")
        print()
        print("| threads | req/s | p50 ms | p99 ms | CPU us/req | req/s vs 1 thread |")
        print("|---:|---:|---:|---:|---:|---:|")
        one = med([r[0] for r in bound[1]])
        for n, _, _ in unpinned:
            rs = bound[n]
            print("| %d | %.0f | %.3f | %.3f | %.2f | %.2f |" % (
                n, med([r[0] for r in rs]), med([r[1] for r in rs]), med([r[2] for r in rs]),
                med(bound_cpu[n]), med([r[0] for r in rs]) / one))
    if args.baseline:
        print()
        print("| test | req/s shardis/baseline | CPU shardis/baseline | per round (req/s) |")
        print("|---|---:|---:|---|")
        for lbl, *_ in TESTS:
            ss, bs = results[("shardis", lbl)], results[("baseline", lbl)]
            r = [a[0] / b[0] for a, b in zip(ss, bs)]
            c = [a / b for a, b in zip(cpu[("shardis", lbl)], cpu[("baseline", lbl)]) if b]
            print("| %s | %.3f | %.3f | %s |" % (lbl, med(r), med(c) if c else 0,
                                                 " ".join("%.2f" % x for x in r)))
    print()
    print("| RESP3 (redis-benchmark -3) | shardis req/s | direct req/s | shardis/direct | "
          "shardis RESP3/RESP2 | CPU us/req shardis | CPU RESP3/RESP2 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for lbl, base, *_ in RESP3_TESTS:
        s = med([r[0] for r in results[("shardis", lbl)]])
        d = med([r[0] for r in results[("direct", lbl)]])
        s2 = med([r[0] for r in results[("shardis", base)]])
        cs, cs2 = med(cpu[("shardis", lbl)]), med(cpu[("shardis", base)])
        print("| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |" % (
            lbl, s, d, s / d, s / s2, cs, cs / cs2 if cs2 else 0))
    print()
    print("Client-side caching (bench_track: RESP3 GETs, -c 50, -r 100000, CLIENT TRACKING ON "
          "on every connection or not; %d s a run)" % tx_seconds)
    print()
    print("| test | target | req/s plain | req/s tracking | tracking/plain | "
          "CPU us/req plain | CPU us/req tracking | per round (tracking/plain) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for lbl, _ in TRACK_TESTS:
        for name in ("shardis", "direct"):
            p, t = track[(name, lbl, "plain")], track[(name, lbl, "track")]
            print("| %s | %s | %.0f | %.0f | %.2f | %.2f | %.2f | %s |" % (
                lbl, name, med(p), med(t), med([b / a for a, b in zip(p, t)]),
                med(track_cpu[(name, lbl, "plain")]), med(track_cpu[(name, lbl, "track")]),
                " ".join("%.2f" % (b / a) for a, b in zip(p, t))))
    print()
    print("| TLS (redis-benchmark --tls) | target | req/s | p50 ms | p99 ms | CPU us/req | "
          "vs direct TLS | vs the same plain |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for lbl, base, *_ in TLS_TESTS:
        d = med([r[0] for r in results[("direct TLS", lbl)]])
        for name in TLS_TARGETS:
            rs = results[(name, lbl)]
            rps = med([r[0] for r in rs])
            plain = med([r[0] for r in results[(name.split(" TLS")[0], base)]])
            print("| %s | %s | %.0f | %.3f | %.3f | %.2f | %.2f | %.2f |" % (
                lbl, name, rps, med([r[1] for r in rs]), med([r[2] for r in rs]),
                med(cpu[(name, lbl)]), rps / d, rps / plain))
    print()
    print("| shardis only | calls/s | ids/s | p50 ms | p99 ms | proxy CPU us/call | calls/s vs GET |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    get = med([r[0] for r in results[("shardis", "GET")]])
    for lbl, _, ids, _ in GENKEY_TESTS:
        rs = results[("shardis", lbl)]
        rps = med([r[0] for r in rs])
        print("| %s | %.0f | %.0f | %.3f | %.3f | %.2f | %.2f |" % (
            lbl, rps, rps * ids, med([r[1] for r in rs]), med([r[2] for r in rs]),
            med(cpu[("shardis", lbl)]), rps / get))
    print()
    print("| idgen.minify, -r 10000 | target | req/s | p50 ms | p99 ms | CPU us/req | "
          "vs plain shardis | CPU vs plain shardis |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for lbl, *_ in MINIFY_TESTS:
        base = results[("shardis", "minify " + lbl)]
        b_rps, b_cpu = med([r[0] for r in base]), med(cpu[("shardis", "minify " + lbl)])
        for name, *_ in MINIFY_TARGETS:
            rs = results[(name, "minify " + lbl)]
            rps, c = med([r[0] for r in rs]), med(cpu[(name, "minify " + lbl)])
            print("| %s | %s | %.0f | %.3f | %.3f | %.2f | %.2f | %.2f |" % (
                lbl, name, rps, med([r[1] for r in rs]), med([r[2] for r in rs]), c,
                rps / b_rps, c / b_cpu if b_cpu else 0))
    print()
    print("| MULTI, SET, INCR, EXEC (50 clients, tests/bench/bench_tx.c) | tx/s | p50 ms | "
          "p99 ms |")
    print("|---|---:|---:|---:|")
    for name in ("shardis", "direct"):
        print("| %s | %.0f | %.3f | %.3f |" % (name, med([t[0] for t in tx[name]]),
                                               med([t[1] for t in tx[name]]),
                                               med([t[2] for t in tx[name]])))
    print("| shardis/direct | %.2f | | |" % (med([t[0] for t in tx["shardis"]]) /
                                              med([t[0] for t in tx["direct"]])))
    print()
    print("| RSS (KiB) | shardis | twemproxy |")
    print("|---|---:|---:|")
    for k in mem:
        print("| %s | %d | %d |" % (k, mem[k], nc_mem[k]))
    per = lambda m, k: (m[k] - m["idle"]) * 1024 / 1000
    print()
    print("per client: shardis %.0f B idle, %.0f B after a GET; twemproxy %.0f B, %.0f B" % (
        per(mem, "1000 idle clients"), per(mem, "after one GET each"),
        per(nc_mem, "1000 idle clients"), per(nc_mem, "after one GET each")))


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_all()
