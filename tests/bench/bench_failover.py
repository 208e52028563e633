#!/usr/bin/python3
"""bench_failover.py -- how long a shard's keys are unwritable when its
master dies under Redis Sentinel, and what the other shards feel.

A benchmark, not a test: it prints a table and asserts nothing. Each round
starts 3 masters with a replica each, 3 Sentinels (redis-server --sentinel,
down-after-milliseconds --down-after) and shardis following them, runs a
writer per shard (SET in a loop, one connection each), kills the master
of shard 0 with SIGKILL and measures, from the kill: when a Sentinel
saw it down (+sdown: Sentinel's own detection), when the Sentinels
announced the switch (+switch-master), and when shard 0's first write
through shardis succeeded; and the other shards' writes per second from
the kill to that first write, against the second before the kill (the
writers share one Python process: while shard 0's sleeps on its errors,
the others get more of it, so above 1 means "not slowed"). Reported:
median and max over the rounds.

Run: scripts/bench failover [--rounds N] [--down-after MS]
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_proxy as bp    # noqa: E402  (its process helpers)

bp.pinned = lambda core, argv: argv
HOST = bp.HOST


def server(d, name, extra=()):
    port = bp.free_port()
    path = os.path.join(d, name)
    os.mkdir(path)
    p = bp.start(["redis-server", "--port", str(port), "--bind", HOST, "--save", "",
                  "--appendonly", "no", "--dir", path] + list(extra), path + "/log")
    bp.wait_port(port, p)
    return port, p


def one_round(tmp, r, args):
    d = os.path.join(tmp, "round%d" % r)
    os.mkdir(d)
    masters = [server(d, "m%d" % i) for i in range(3)]
    replicas = [server(d, "r%d" % i, ["--replicaof", HOST, str(m[0])])
                for i, m in enumerate(masters)]
    for port, _ in replicas:
        c = redis.Redis(HOST, port)
        while c.info("replication").get("master_link_status") != "up":
            time.sleep(0.05)
    sentinels = []
    for i in range(3):
        port = bp.free_port()
        conf = os.path.join(d, "s%d.conf" % i)
        with open(conf, "w") as f:
            f.write("port %d\nbind %s\ndir %s\n" % (port, HOST, d))
            for k, (mport, _) in enumerate(masters):
                f.write("sentinel monitor shard%d %s %d 2\n" % (k, HOST, mport))
                f.write("sentinel down-after-milliseconds shard%d %d\n" % (k, args.down_after))
                f.write("sentinel failover-timeout shard%d 5000\n" % k)
        p = bp.start(["redis-server", conf, "--sentinel"], conf + ".log")
        bp.wait_port(port, p)
        sentinels.append(port)
    # Every Sentinel must know the others before the kill, or no quorum.
    for port in sentinels:
        c = redis.Redis(HOST, port, decode_responses=True)
        while any(dict(zip(*[iter(c.execute_command("SENTINEL", "MASTER", "shard%d" % k))] * 2))
                  ["num-other-sentinels"] != "2" for k in range(3)):
            time.sleep(0.1)
    px_port = bp.free_port()
    conf = os.path.join(d, "shardis.yml")
    with open(conf, "w") as f:
        f.write("alpha:\n  listen: %s:%d\n  hash_tag: \"{}\"\n  timeout: 2000\n"
                "  sentinels: [%s]\n  servers:\n%s" % (
                    HOST, px_port, ", ".join("%s:%d" % (HOST, s) for s in sentinels),
                    "".join("    - %s:%d:1 shard%d\n" % (HOST, m[0], k)
                            for k, m in enumerate(masters))))
    px = bp.start([os.path.abspath(args.shardis), "-c", conf, "-v", "4"], conf + ".log")
    bp.wait_port(px_port, px)
    c = redis.Redis(HOST, px_port, decode_responses=True)
    keys = {}
    for i in range(1000):
        keys.setdefault(c.execute_command("SHARD.WHEREIS", "k%d" % i), "k%d" % i)
    events, seen = {}, []
    ps = redis.Redis(HOST, sentinels[0], decode_responses=True).pubsub()
    ps.subscribe("+sdown", "+switch-master")

    def watch():
        for m in ps.listen():
            seen.append(m)
            if m["type"] != "message":
                continue
            if m["channel"] == "+sdown" and m["data"].startswith("master shard0 "):
                events.setdefault("sdown", time.monotonic())
            if m["channel"] == "+switch-master" and m["data"].startswith("shard0 "):
                events["switch"] = time.monotonic()
                return
    threading.Thread(target=watch, daemon=True).start()
    stop = False
    done = {k: [] for k in range(3)}        # monotonic times of successful writes
    failed = {k: [] for k in range(3)}      # ... and of errors

    def writer(shard):
        w = redis.Redis(HOST, px_port, socket_timeout=5)
        key = keys["shard%d" % shard]
        while not stop:
            try:
                w.set(key, "v")
                done[shard].append(time.monotonic())
            except redis.RedisError:
                failed[shard].append(time.monotonic())
                time.sleep(0.002)
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    t_kill = time.monotonic()
    masters[0][1].kill()
    deadline = t_kill + 30
    # Done once shard 0 failed and then took a write again.
    while time.monotonic() < deadline and not (
            failed[0] and done[0] and done[0][-1] > failed[0][0] > t_kill):
        time.sleep(0.01)
    time.sleep(0.5)
    stop = True
    for t in threads:
        t.join()
    ps.close()
    bp.stop_all()
    if not failed[0] or "switch" not in events:
        print("round %d: no outage seen; events %r" % (r, seen[-5:]), file=sys.stderr)
    first = next(t for t in done[0] if failed[0] and t > failed[0][0])
    before = lambda k: sum(1 for t in done[k] if t_kill - 1.0 <= t < t_kill) / 1.0
    during = lambda k: sum(1 for t in done[k] if t_kill <= t < first) / (first - t_kill)
    return {"sdown": events.get("sdown", float("nan")) - t_kill,
            "switch": events.get("switch", float("nan")) - t_kill,
            "first": first - t_kill,
            "others": statistics.mean(during(k) / before(k) for k in (1, 2))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardis", default="build/shardis")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--down-after", type=int, default=1000,
                    help="the Sentinels' down-after-milliseconds")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="shardis-bench-") as tmp:
        try:
            for r in range(args.rounds):
                x = one_round(tmp, r, args)
                rows.append(x)
                print("round %d: %s" % (r + 1, {k: round(v, 3) for k, v in x.items()}),
                      file=sys.stderr)
        finally:
            bp.stop_all()
    med = lambda k: statistics.median(x[k] for x in rows)
    mx = lambda k: max(x[k] for x in rows)
    print("kill -9 of a master under 3 Sentinels (down-after-milliseconds %d), %d rounds"
          % (args.down_after, args.rounds))
    print()
    print("| from the kill | median | max |")
    print("|---|---:|---:|")
    print("| a Sentinel sees it down (+sdown) | %.3f s | %.3f s |" % (med("sdown"), mx("sdown")))
    print("| the Sentinels switch (+switch-master) | %.3f s | %.3f s |" % (
        med("switch"), mx("switch")))
    print("| shard 0's first write through shardis | %.3f s | %.3f s |" % (
        med("first"), mx("first")))
    gap = [x["first"] - x["switch"] for x in rows]
    print("| ... after +switch-master | %.3f s | %.3f s |" % (statistics.median(gap), max(gap)))
    print("| other shards' writes/s until then, vs the second before | %.2f | min %.2f |" % (
        med("others"), min(x["others"] for x in rows)))


if __name__ == "__main__":
    main()
