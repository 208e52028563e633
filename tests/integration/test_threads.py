#!/usr/bin/python3
"""test_threads.py -- with --threads 2 (SHARDIS_THREADS=2) shardis is still
one Redis to every client: INFO, SLOWLOG, HOTKEYS, LATENCY and /metrics
answer for the whole process, not for the loop of the client that asks;
CLIENT LIST lists, and CLIENT KILL, PAUSE, UNPAUSE and UNBLOCK reach, the
clients of every loop; MONITOR sees, and PUBLISH reaches, every loop's
clients; CLIENT ID is unique; a reload changes every loop at once;
client_connections counts every loop; a stop drains every loop; keys
written and read from both loops land on their servers, none lost or
misrouted; what several loops do not do yet is refused with its reason.

Loop 0 hands each new connection to the loop with the fewest clients, so
clients opened one after another and kept open land on both loops. Each
check makes requests from four such clients and asks from another
connection: a figure of one loop alone (the asker's) would miss about
half of them, and the check fails. And the servers' own figures (loop 0
alone polls them, and mails them to the other loops) are as fresh on
every loop.

Run: /usr/bin/python3 tests/integration/test_threads.py --shardis build/shardis
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import redis

import harness
from harness import (Fail, Raw, RedisServer, Shardis, check, enc, expect, expect_eq,
                     expect_refused, parse)

CLIENTS = 4
THREADS = {"SHARDIS_THREADS": "2"}


def clients(px):
    """CLIENTS connections, opened in turn and held (a PING each): spread
    over the loops."""
    out = []
    for _ in range(CLIENTS):
        c = redis.Redis(harness.HOST, px.port, socket_timeout=10,
                        single_connection_client=True)
        c.ping()
        out.append(c)
    return out


def info(px, section):
    out = {}
    text = harness.Raw(px.port).cmd("INFO", section).decode()
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def calls(info_line):
    return int(re.search(r"calls=(\d+)", info_line).group(1)) if info_line else 0


def t_info(px):
    """3 clients' 100 SETs each: INFO counts all 300, wherever asked."""
    cs = clients(px)[:3]
    before = info(px, "everything")
    for i, c in enumerate(cs):
        pipe = c.pipeline(transaction=False)
        for k in range(100):
            pipe.set("t%d-%d" % (i, k), "v")
        pipe.execute()
    after = info(px, "everything")
    grew = int(after["total_commands_processed"]) - int(before["total_commands_processed"])
    expect(grew >= 300, "total_commands_processed grew by %d, want >= 300" % grew)
    expect_eq(calls(after.get("cmdstat_set")) - calls(before.get("cmdstat_set")), 300,
              "cmdstat_set calls")
    expect(int(after["connected_clients"]) >= 4, "connected_clients %s" %
           after["connected_clients"])
    expect(int(after["total_connections_received"]) >= 4, "total_connections_received")
    expect("latency_percentiles_usec_set" in after, "latencystats has SET")
    pool = after["pool_0"]
    expect(int(re.search(r"clients=(\d+)", pool).group(1)) >= 3, "pool_0 clients: " + pool)
    # LATENCY HISTOGRAM's count is the same histograms'.
    h = px.client.execute_command("LATENCY", "HISTOGRAM", "set")
    h = dict(zip(h[::2], h[1::2]))[b"set"]
    expect_eq(dict(zip(h[::2], h[1::2]))[b"calls"], 300, "LATENCY HISTOGRAM set calls")
    for c in cs:
        c.close()
    return "300 SETs from 3 clients; total_commands_processed +%d" % grew


def t_info_servers(px):
    """Loop 0 alone asks the servers' INFO and tells the other loops: from
    a connection on either loop, every server's figures are a poll old
    (INFO_REFRESH_MS), not as old as the start."""
    raws = []
    for _ in range(CLIENTS):
        r = harness.Raw(px.port)
        r.cmd("PING")
        raws.append(r)
    time.sleep(2.5)
    ages = []
    for r in raws:
        text = r.cmd("INFO", "memory", "shardis").decode()  # (keyspace would ask anew)
        ages += [int(a) for a in re.findall(r"info_age_ms=(-?\d+)", text)]
        expect("used_memory:" in text, "the servers' figures")
    expect(len(ages) == 2 * CLIENTS and all(0 <= a < 2000 for a in ages),
           "info_age_ms from every loop: %r" % ages)
    for r in raws:
        r.sock.close()
    return "ages %r" % ages


def t_slowlog(px):
    """Every request is slow (slowlog_log_slower_than 0): each client's
    GET is in SLOWLOG GET, ids unique and newest first; LEN counts them
    all; RESET empties every loop's log."""
    cs = clients(px)
    px.client.slowlog_reset()
    for i, c in enumerate(cs):
        c.get("slow-%d" % i)
    got = px.client.execute_command("SLOWLOG", "GET", -1)
    args = [e[3] for e in got]
    for i in range(CLIENTS):
        expect([b"GET", b"slow-%d" % i] in args, "slow-%d's GET in SLOWLOG: %r" % (i, args))
    ids = [e[0] for e in got]
    expect(ids == sorted(set(ids), reverse=True), "ids unique, newest first: %r" % ids)
    n = px.client.slowlog_len()
    expect(n >= CLIENTS + 1, "SLOWLOG LEN %d" % n)  # (the RESET itself too)
    cs[1].execute_command("SLOWLOG", "RESET")
    left = [e[3] for e in px.client.execute_command("SLOWLOG", "GET", -1)]
    expect(not any(a[:1] == [b"GET"] for a in left),
           "after RESET: %d left: %r" % (len(left), left[:5]))
    for c in cs:
        c.close()
    return "%d entries, ids %r" % (n, ids[:6])


def t_hotkeys(px):
    """HOTKEYS START tracks on every loop; GET counts each client's key;
    STOP stops every loop; RESET forgets every loop's session."""
    cs = clients(px)
    expect_eq(cs[0].execute_command("HOTKEYS", "START", "METRICS", "2", "CPU", "NET",
                                    "COUNT", "10"), b"OK", "START")
    for i, c in enumerate(cs):
        pipe = c.pipeline(transaction=False)
        for _ in range(20 + 10 * i):
            pipe.get("hk-%d" % i)
        pipe.execute()
    got = px.client.execute_command("HOTKEYS", "GET")
    expect(got is not None, "GET from another client: no session")
    d = dict(zip(got[::2], got[1::2]))
    by_net = dict(zip(d[b"by-net-bytes"][::2], d[b"by-net-bytes"][1::2]))
    for i in range(CLIENTS):
        expect(b"hk-%d" % i in by_net, "hk-%d ranked: %r" % (i, by_net))
    # A GET of hk-i is 29 bytes out and 5 back: exact counts, not estimates.
    want = {b"hk-%d" % i: (20 + 10 * i) * (len(b"*2\r\n$3\r\nGET\r\n$4\r\nhk-0\r\n") + 5)
            for i in range(CLIENTS)}
    expect_eq({k: by_net[k] for k in want}, want, "bytes by key")
    expect_eq(cs[1].execute_command("HOTKEYS", "STOP"), b"OK", "STOP")
    for c in cs:
        c.get("hk-late")
    after = dict(zip(*[iter(px.client.execute_command("HOTKEYS", "GET"))] * 2))
    expect_eq(after[b"tracking-active"], 0, "stopped everywhere")
    expect(b"hk-late" not in after[b"by-net-bytes"], "nothing counted after STOP: %r"
           % after[b"by-net-bytes"])
    expect_eq(cs[2].execute_command("HOTKEYS", "RESET"), b"OK", "RESET")
    for c in cs + [px.client]:
        expect_eq(c.execute_command("HOTKEYS", "GET"), None, "reset on every loop")
    for c in cs:
        c.close()
    return "4 keys from 4 clients: %r" % sorted(by_net.items())[:4]


def scrape(port):
    with urllib.request.urlopen("http://%s:%d/metrics" % (harness.HOST, port), timeout=5) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


def t_metrics(px, mport):
    """/metrics (served by loop 0) counts the GETs of clients on every loop."""
    cs = clients(px)
    name = 'shardis_command_duration_seconds_count{pool="alpha",cmd="get"}'
    before = scrape(mport)
    for c in cs:
        pipe = c.pipeline(transaction=False)
        for k in range(50):
            pipe.get("m%d" % k)
        pipe.execute()
    after = scrape(mport)
    expect_eq(after.get(name, 0) - before.get(name, 0), 50.0 * CLIENTS, name)
    expect_eq(after.get('shardis_commands_total{pool="alpha",cmd="get"}', 0) -
              before.get('shardis_commands_total{pool="alpha",cmd="get"}', 0),
              50.0 * CLIENTS, "shardis_commands_total get")
    servers = sum(after.get('shardis_server_request_duration_seconds_count{pool="alpha",'
                            'server="redis%d"}' % s, 0) -
                  before.get('shardis_server_request_duration_seconds_count{pool="alpha",'
                             'server="redis%d"}' % s, 0) for s in (1, 2))
    expect(servers >= 50 * CLIENTS, "the servers' histograms counted %d" % servers)
    expect(after['shardis_clients{pool="alpha"}'] >= CLIENTS, "shardis_clients")
    for c in cs:
        c.close()
    return "%d GETs counted" % (after[name] - before.get(name, 0))


# ---- the clients' side: CLIENT, MONITOR, pub/sub, reload, stop, data --------------------

def loop_clients(asker):
    """[clients on loop 0, on loop 1] from INFO shardis's loop_N lines,
    asked on the connection asker, once two readings 50 ms apart agree (a
    connection closed just before is counted out)."""
    def read():
        text = parse(asker.cmd("INFO", "shardis")).decode()
        expect("\r\nloops:2\r\n" in text, "INFO shardis loops:2")
        return [int(re.search(r"loop_%d:clients=(\d+)" % l, text).group(1)) for l in (0, 1)]
    last = read()
    for _ in range(40):
        time.sleep(0.05)
        now = read()
        if now == last:
            return now
        last = now
    raise Fail("the loops' client counts never settled: %r" % last)


def spread(px, n):
    """n raw clients, named c0 .. c<n-1>, held open, alternating between the
    loops (c0, c2 ... on one, c1, c3 ... on the other), each one's loop seen
    in INFO as it came; those that landed out of turn are held open too."""
    asker = Raw(px.port)
    want = [[], []]             # the clients on each loop, in order
    kept = []
    for _ in range(4 * n):
        if len(want[0]) + len(want[1]) == n:
            break
        before = loop_clients(asker)
        c = Raw(px.port)
        c.cmd("PING")
        grew = [a - b for a, b in zip(loop_clients(asker), before)]
        expect(sorted(grew) == [0, 1], "one new client on one loop: %r" % grew)
        loop = grew.index(1)
        if len(want[loop]) < (n + 1 - loop) // 2 and (not want[0] or loop == 1 or
                                                     len(want[0]) <= len(want[1])):
            want[loop].append(c)
        else:
            kept.append(c)
    expect(len(want[0]) + len(want[1]) == n, "%d clients over both loops: %r" % (
        n, [len(w) for w in want]))
    cs = [want[i % 2][i // 2] for i in range(n)]
    for i, c in enumerate(cs):
        expect_eq(c.cmd("CLIENT", "SETNAME", "c%d" % i), b"+OK\r\n", "SETNAME")
    px.spare = getattr(px, "spare", []) + kept + [asker]
    return cs


def closed(c, what):
    try:
        got = c.cmd("PING")
    except (EOFError, ConnectionError, OSError):
        return
    raise Fail("%s still open: %r" % (what, got))


def t_client_list_kill(servers):
    """CLIENT LIST shows, and CLIENT KILL reaches, the clients of both loops;
    CLIENT ID is unique over them."""
    px = Shardis("cl", servers, env=THREADS, admin_commands="true")
    cs = spread(px, 6)
    ids = [parse(c.cmd("CLIENT", "ID")) for c in cs]
    expect_eq(len(set(ids)), 6, "CLIENT ID unique over loops: %r" % ids)
    names = sorted(re.findall(rb" name=(c\d+) ", parse(cs[0].cmd("CLIENT", "LIST"))))
    expect_eq(names, [b"c%d" % i for i in range(6)], "CLIENT LIST's names")
    listed = parse(cs[1].cmd("CLIENT", "LIST", "ID", *[str(i) for i in ids]))
    expect_eq(listed.count(b"\n"), 6, "CLIENT LIST ID of all six, from another loop")
    for i, c in enumerate(cs):
        expect(b" name=c%d " % i in parse(c.cmd("CLIENT", "INFO")), "CLIENT INFO of c%d" % i)
    killed = sum(parse(cs[0].cmd("CLIENT", "KILL", "ID", str(ids[i]))) for i in range(1, 6))
    expect_eq(killed, 5, "CLIENT KILL ID of clients on both loops")
    for i, c in enumerate(cs[1:]):
        closed(c, "c%d after CLIENT KILL" % (i + 1))
    names = sorted(re.findall(rb" name=(c\d+) ", parse(cs[0].cmd("CLIENT", "LIST"))))
    expect_eq(names, [b"c0"], "CLIENT LIST after the kills")
    more = spread(px, 4)
    for c in more:
        c.cmd("CLIENT", "SETNAME", "x")
    others = parse(cs[0].cmd("CLIENT", "LIST")).count(b"\n") - 1
    expect(others >= 4, "CLIENT LIST: %d others" % others)
    expect_eq(parse(cs[0].cmd("CLIENT", "KILL", "USER", "default", "SKIPME", "yes")), others,
              "KILL USER default: every other client")
    for c in more:
        closed(c, "a client after CLIENT KILL USER")
    harness.t_exit_clean(px)
    return "ids %s" % ids


def t_pause(servers):
    """CLIENT PAUSE WRITE from one loop holds the writes of both; UNPAUSE
    lets them all go; reads go on meanwhile."""
    px = Shardis("pause", servers, env=THREADS, admin_commands="true")
    cs = spread(px, 5)
    expect_eq(cs[0].cmd("CLIENT", "PAUSE", "10000", "WRITE"), b"+OK\r\n", "PAUSE")
    for i, c in enumerate(cs[1:]):
        expect_eq(c.cmd("GET", "pk%d" % i), b"$-1\r\n", "a read while paused (c%d)" % (i + 1))
        c.send(enc("SET", "pk%d" % i, "v"))
    time.sleep(0.3)
    for i, c in enumerate(cs[1:]):
        c.sock.settimeout(0.05)
        try:
            got = c.sock.recv(64)
        except OSError:
            got = b""
        c.sock.settimeout(5)
        expect_eq(got, b"", "c%d's SET answered during PAUSE WRITE" % (i + 1))
    expect_eq(cs[0].cmd("CLIENT", "UNPAUSE"), b"+OK\r\n", "UNPAUSE")
    for i, c in enumerate(cs[1:]):
        expect_eq(c.reply(), b"+OK\r\n", "c%d's SET after UNPAUSE" % (i + 1))
        expect_eq(c.cmd("GET", "pk%d" % i), b"$1\r\nv\r\n", "c%d's write landed" % (i + 1))
    harness.t_exit_clean(px)


def t_monitor_pubsub(servers):
    """MONITOR sees the commands of both loops' clients; PUBLISH from either
    loop reaches subscribers on both."""
    px = Shardis("mon", servers, env=THREADS, admin_commands="true")
    cs = spread(px, 4)          # c0 and c2 on one loop, c1 and c3 on the other
    expect_eq(cs[0].cmd("MONITOR"), b"+OK\r\n", "MONITOR")
    for c in (cs[1], cs[3]):
        expect_eq(parse(c.cmd("SUBSCRIBE", "news")), [b"subscribe", b"news", 1], "SUBSCRIBE")
    expect_eq(parse(cs[2].cmd("PUBLISH", "news", "from-c2")), 2, "PUBLISH from c2")
    for c in (cs[1], cs[3]):
        expect_eq(parse(c.reply()), [b"message", b"news", b"from-c2"], "the message")
    late = Raw(px.port)         # on either loop
    expect_eq(parse(late.cmd("PUBLISH", "news", "from-late")), 2, "PUBLISH from another")
    for c in (cs[1], cs[3]):
        expect_eq(parse(c.reply()), [b"message", b"news", b"from-late"], "the second message")
    for i, c in ((1, cs[1]), (3, cs[3])):
        c.send(enc("UNSUBSCRIBE"))
        c.reply()
        expect_eq(c.cmd("SET", "mon-%d" % i, "x"), b"+OK\r\n", "SET from c%d" % i)
    want = [b'"PUBLISH" "news" "from-c2"', b'"PUBLISH" "news" "from-late"',
            b'"SET" "mon-1" "x"', b'"SET" "mon-3" "x"']
    lines = b""
    deadline = time.monotonic() + 5
    while not all(w in lines for w in want) and time.monotonic() < deadline:
        cs[0]._fill()
        lines = bytes(cs[0].buf[cs[0].pos:])
    for w in want:
        expect(w in lines, "MONITOR shows %r: %r" % (w, lines[:300]))
    harness.t_exit_clean(px)


def t_unblock(servers):
    """CLIENT UNBLOCK reaches a client blocked on the other loop, and that
    client's connection takes commands again."""
    px = Shardis("unblock", servers, env=THREADS, admin_commands="true")
    cs = spread(px, 2)          # one on each loop
    bid = parse(cs[0].cmd("CLIENT", "ID"))
    cs[0].send(enc("BLPOP", "never-pushed", "0"))
    until_blocked = time.monotonic() + 5
    while b" flags=b " not in parse(cs[1].cmd("CLIENT", "LIST", "ID", str(bid))) and \
            time.monotonic() < until_blocked:
        time.sleep(0.02)
    expect_eq(parse(cs[1].cmd("CLIENT", "UNBLOCK", str(bid))), 1, "UNBLOCK from the other loop")
    expect_eq(cs[0].reply(), b"*-1\r\n", "the BLPOP's nil")
    expect_eq(cs[0].cmd("SET", "after-unblock", "1"), b"+OK\r\n", "the client goes on")
    expect_eq(parse(cs[1].cmd("CLIENT", "UNBLOCK", str(bid))), 0, "UNBLOCK of one not blocked")
    harness.t_exit_clean(px)


def t_reload_and_limits(servers):
    """A reload that removes a user closes its connections on both loops;
    client_connections counts both loops; a reload to eject_mode rehash is
    applied (t_eject: every loop ejects as one)."""
    users = '["default on nopass allkeys allchannels +@all", "app on >apppw ~* +@all"]'
    px = Shardis("rl", servers, env=THREADS, admin_commands="true", users=users,
                 client_connections=12)
    cs = spread(px, 4)
    for c in cs:
        expect_eq(c.cmd("AUTH", "app", "apppw"), b"+OK\r\n", "AUTH app")
    held = sum(loop_clients(px.spare[-1]))
    expect(held <= 10, "%d clients held" % held)
    extra = [Raw(px.port) for _ in range(12 - held)]
    for c in extra:
        expect_eq(c.cmd("PING"), b"+PONG\r\n", "a client up to client_connections")
    for i in range(2):          # (each on another loop than the one before)
        expect_eq(Raw(px.port).cmd("PING"), b"-ERR max number of clients reached\r\n",
                  "a client over client_connections (%d)" % i)
    for c in extra:
        c.sock.close()
    text = open(px.conf).read()
    with open(px.conf, "w") as f:
        f.write(text.replace(users, '["default on nopass allkeys allchannels +@all"]'))
    px.client.execute_command("SHARD.RELOAD")
    for i, c in enumerate(cs):
        closed(c, "c%d (user app) after its user was removed" % i)
    # eject_mode rehash: every loop ejects as one (t_eject): applied.
    text = open(px.conf).read()
    with open(px.conf, "w") as f:
        f.write(text.replace("  servers:\n", "  auto_eject_hosts: true\n  eject_mode: rehash\n"
                             "  servers:\n"))
    px.client.execute_command("SHARD.RELOAD")
    harness.t_exit_clean(px)


def t_threads_option(servers):
    """A bad --threads is a usage error; threads: auto is a loop per core."""
    conf = os.path.join(harness.TMP, "bad-threads.yml")
    with open(conf, "w") as f:
        f.write("alpha:\n  listen: %s:%d\n  servers:\n    - %s:%d:1 redis1\n" % (
            harness.HOST, harness.free_port(), harness.HOST, servers[0].port))
    for bad in ("x", "-1", "65", ""):
        out = subprocess.run([harness.ARGS.shardis, "-c", conf, "--threads", bad],
                             capture_output=True, text=True, timeout=20)
        expect(out.returncode == 2 and "--threads" in out.stderr, "--threads %r: %d %r"
               % (bad, out.returncode, out.stderr))
    cores = len(os.sched_getaffinity(0))
    px = Shardis("auto", servers, env={"SHARDIS_THREADS": "auto"})
    if cores > 1:
        harness.until("auto: %d loops logged" % cores,
                      lambda: "%d event loops" % cores in open(px.log).read())
    expect_eq(info(px, "shardis").get("loops"), str(min(cores, 64)), "INFO loops with auto")
    harness.t_exit_clean(px)
    return "auto: %d loops" % cores


def t_stop_drains(servers):
    """SIGTERM, and a second one 100 ms later: a request in flight on loop 1
    (none on loop 0) is answered, and the process exits 0 (loop 0 keeps its
    signal handlers until the other loops have drained), though SIGTERMs
    keep coming until it has gone."""
    px = Shardis("drain", servers, env=THREADS)
    cs = spread(px, 2)          # c1 is on loop 1
    spin = ("local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] repeat "
            "t = redis.call('TIME') until t[1] * 1e6 + t[2] - s > 400000 return 1")
    cs[1].send(enc("EVAL", spin, "1", "drain-1"))
    time.sleep(0.1)
    px.proc.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    px.proc.send_signal(signal.SIGTERM)
    expect_eq(cs[1].reply(), b":1\r\n", "loop 1's request in flight answered")
    harness.t_exit_clean(px, repeat=True)


def t_slowlog_max_len(servers):
    """SLOWLOG keeps slowlog_max_len entries in all, not that many per loop."""
    px = Shardis("slowcap", servers, env=THREADS, admin_commands="true",
                 slowlog_log_slower_than=0, slowlog_max_len=3)
    cs = spread(px, 4)
    for i, c in enumerate(cs):
        for k in range(3):
            c.cmd("GET", "cap-%d-%d" % (i, k))
    expect_eq(parse(cs[0].cmd("SLOWLOG", "LEN")), 3, "SLOWLOG LEN")
    got = parse(cs[1].cmd("SLOWLOG", "GET", "-1"))
    expect_eq(len(got), 3, "SLOWLOG GET -1: entries")
    ids = [e[0] for e in got]
    expect_eq(ids, sorted(ids, reverse=True), "newest first")
    harness.t_exit_clean(px)


def t_memory(servers):
    """test_proxy's 1,000 idle clients, with two loops: RSS per client, and
    back near idle once they left (each loop gives its thread's caches
    back when its clients have gone, though none asks it anything more)."""
    import test_proxy
    px = Shardis("mem", servers, env=THREADS)
    # Each loop's thread has made its allocator's caches before the
    # baseline (as one loop has by its start): a first client on each.
    for c in spread(px, 2):
        c.cmd("GET", "warm")
        c.close()
    for c in px.spare:
        c.close()
    detail, _ = test_proxy.t_memory(px)
    harness.t_exit_clean(px)
    return detail


def t_data(servers):
    """8 clients (both loops) writing and reading 2,000 keys at once: every
    key on the server the ring names, every value read back, none lost."""
    px = Shardis("data", servers, env=THREADS)
    errors = []

    def work(w):
        c = redis.Redis(harness.HOST, px.port, socket_timeout=10, single_connection_client=True)
        try:
            pipe = c.pipeline(transaction=False)
            for k in range(250):
                pipe.set("d%d:%d" % (w, k), "v%d:%d" % (w, k))
            pipe.execute()
            got = c.mget(["d%d:%d" % (w, k) for k in range(250)])
            bad = [k for k in range(250) if got[k] != b"v%d:%d" % (w, k)]
            if bad:
                errors.append("client %d: %d keys wrong, first d%d:%d=%r" % (
                    w, len(bad), w, bad[0], got[bad[0]]))
        except Exception as e:
            errors.append("client %d: %r" % (w, e))
        finally:
            c.close()
    ths = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(30)
    expect(not errors, "; ".join(errors[:3]))
    keys = ["d%d:%d" % (w, k) for w in range(8) for k in range(250)]
    where = px.whereis(keys)
    on = [sum(1 for k in keys if where[k] == s) for s in range(len(servers))]
    expect(min(on) > 0, "keys on every server: %r" % on)
    for k in keys[::37]:
        expect_eq(servers[where[k]].client.get(k), ("v" + k[1:]).encode(),
                  "%s on its server" % k)
    harness.t_exit_clean(px)
    return "keys per server %r" % on


def t_eject(_servers):
    """eject_mode rehash: a server that fails on loop 1's connections leaves
    the ring of every loop at once (loop 0's client, which saw no failure,
    has its key served by another server at its first try; one ejection
    counted), and comes back on every loop once loop 0's retry is due."""
    servers = [RedisServer("ej%d" % i) for i in range(3)]
    mport = harness.free_port()
    px = Shardis("eject", servers, env=THREADS, timeout=500, auto_eject_hosts="true",
                 eject_mode="rehash", server_failure_limit=2, server_retry_timeout=1500,
                 stats_listen="%s:%d" % (harness.HOST, mport))
    cs = spread(px, 2)          # c0 on loop 0, c1 on loop 1
    victim = servers[1]
    keys = px.keys_on("ej:", 1, 8)
    for c in cs:
        expect_eq(c.cmd("SET", keys[0], "before"), b"+OK\r\n", "a first SET")
    victim.kill()

    def state(c):
        return {e[1]: e[11] for e in parse(c.cmd("SHARD.NODES"))}[b"redis2"]
    errors = 0
    for _ in range(10):         # loop 1's failures until it ejects
        if cs[1].cmd("SET", keys[1], "x") == b"+OK\r\n":
            break
        errors += 1
        time.sleep(0.05)
    expect(errors >= 1, "no request failed on loop 1 before the ejection")
    expect_eq(state(cs[0]), b"ejected", "redis2 on loop 0's SHARD.NODES")
    expect_eq(cs[0].cmd("SET", keys[2], "during"), b"+OK\r\n",
              "loop 0's first SET of a key of the ejected server")
    expect(any(s.client.get(keys[2]) == b"during" for s in (servers[0], servers[2])),
           "stored on another server")
    m = scrape(mport)
    expect_eq(m.get('shardis_server_ejections_total{pool="alpha",server="redis2"}'), 1.0,
              "ejections counted")
    victim.launch()
    harness.until("redis2 back in loop 1's ring", lambda: state(cs[1]) != b"ejected", timeout=4.0)
    harness.until("loop 1 writes to redis2 again", lambda: cs[1].cmd("SET", keys[3], "after") ==
          b"+OK\r\n" and victim.client.get(keys[3]) == b"after")
    harness.t_exit_clean(px)
    for s in servers:
        harness.stop(s.proc)
    return "ejected after %d failed requests on loop 1" % errors


def t_eject_once(_servers):
    """A server that dies under both loops' connections at once (each loop
    connected to it, server_failure_limit 1: both loops fail together)
    is ejected once: one count, one log line (8 tries)."""
    got = []
    for trial in range(8):
        servers = [RedisServer("eo%d-%d" % (trial, i)) for i in range(3)]
        mport = harness.free_port()
        px = Shardis("ejonce%d" % trial, servers, env=THREADS, timeout=500,
                     auto_eject_hosts="true", eject_mode="rehash", server_failure_limit=1,
                     server_retry_timeout=30000, preconnect="true",
                     stats_listen="%s:%d" % (harness.HOST, mport))
        cs = spread(px, 2)
        key = px.keys_on("eo:", 1)[0]
        for c in cs:
            expect_eq(c.cmd("SET", key, "x"), b"+OK\r\n", "a first SET")
        servers[1].kill()
        harness.until("redis2 ejected", lambda: {e[1]: e[11] for e in parse(
            cs[0].cmd("SHARD.NODES"))}[b"redis2"] == b"ejected")
        time.sleep(0.2)
        n = scrape(mport).get('shardis_server_ejections_total{pool="alpha",server="redis2"}')
        lines = sum(1 for line in open(px.log, errors="replace") if "ejecting redis2" in line)
        got.append((n, lines))
        harness.t_exit_clean(px)
        for srv in servers:
            harness.stop(srv.proc)
    expect(all(g == (1.0, 1) for g in got), "ejections counted and logged per try: %r" % got)
    return "%r" % got


def t_reshard(servers):
    """A live reshard (a fourth server) under load from 4 clients, 2 on each
    loop: every loop switches to the new ring; SHARD.MIGRATION PAUSE, STATUS
    and RESUME on loop 1 steer and show loop 0's migration; once it is over
    every key is on its owner alone, none lost, each client's last
    acknowledged write in place (a write told TRYAGAIN is not checked until
    acknowledged again)."""
    import test_reshard as tr
    px = Shardis("reshard", servers[:3], env=THREADS, admin_commands="true",
                 migration_rate=500)
    tr.preload(px.client, 6000, ttl_every=1000000)
    cs = spread(px, 6)          # c0, c2, c4 on loop 0; c1, c3, c5 on loop 1
    asker = cs.pop()            # (c5: the load's four are busy)
    stop = threading.Event()
    acked, odd, failed, sent = {}, [], [], [0] * 4

    def load(i, c):
        j = 0
        try:
            while not stop.is_set():
                k = "s:%d" % ((i + 4 * j) % 6000)   # (client i's keys: i modulo 4)
                v = b"c%d-%d" % (i, j)
                got = c.cmd("SET", k, v)
                if got == b"+OK\r\n":
                    acked[k] = v
                else:
                    acked.pop(k, None)
                    if not got.startswith(b"-TRYAGAIN"):
                        odd.append(got)
                j += 1
                sent[i] = j
        except Exception as e:
            failed.append("client %d: %r" % (i, e))

    threads = [threading.Thread(target=load, args=(i, c), daemon=True)
               for i, c in enumerate(cs[:4])]
    for t in threads:
        t.start()
    time.sleep(0.3)
    tr.write_servers(px, servers)
    tr.reload(px, 1)
    # Loop 1's SHARD.MIGRATION steers and shows loop 0's migration (the
    # mover's: its sources), while the load goes on.
    expect_eq(asker.cmd("SHARD.MIGRATION", "PAUSE"), b"+OK\r\n", "PAUSE from loop 1")
    text = parse(asker.cmd("SHARD.MIGRATION", "STATUS")).decode()
    st = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
    expect(st["state"] == "paused" and st["epoch"] == "1" and int(st["sources"]) > 0,
           "loop 1's SHARD.MIGRATION STATUS: %r" % st)
    time.sleep(0.3)
    expect_eq(asker.cmd("SHARD.MIGRATION", "RESUME"), b"+OK\r\n", "RESUME from loop 1")
    tr.wait_stable(px, timeout=60, servers=servers)
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(10)
    expect(not failed, "; ".join(failed))
    expect(not odd, "errors other than TRYAGAIN: %r" % odd[:3])
    found = tr.check_placement(px, servers, [b"s:%d" % i for i in range(6000)])
    byname = {s.name: s for s in servers}
    wrong = [k for k, v in acked.items() if byname[found[k.encode()]].client.get(k) != v]
    expect(not wrong, "%d acknowledged writes not in place, e.g. %r" % (len(wrong), wrong[:3]))
    expect(any(s.client.dbsize() > 0 for s in servers[3:]), "keys on the new server")
    harness.t_exit_clean(px)
    return "%d writes from both loops, %d keys checked" % (sum(sent), len(acked))


def body():
    servers = [RedisServer("r%d" % i) for i in range(2)]
    mport = harness.free_port()
    # (HOTKEYS, SLOWLOG, LATENCY: admin commands)
    px = Shardis("threads", servers, env={"SHARDIS_THREADS": "2"}, admin_commands="true",
                 slowlog_log_slower_than=0, slowlog_max_len=1000,
                 stats_listen="%s:%d" % (harness.HOST, mport))
    check("info_sums_loops", t_info, px)
    check("info_servers_every_loop", t_info_servers, px)
    check("slowlog_merges_loops", t_slowlog, px)
    check("hotkeys_merges_loops", t_hotkeys, px)
    check("metrics_sum_loops", t_metrics, px, mport)
    check("exit_clean", harness.t_exit_clean, px)
    check("client_list_kill_loops", t_client_list_kill, servers)
    check("pause_unpause_loops", t_pause, servers)
    check("monitor_pubsub_loops", t_monitor_pubsub, servers)
    check("unblock_other_loop", t_unblock, servers)
    check("reload_users_limits_loops", t_reload_and_limits, servers)
    check("threads_option", t_threads_option, servers)
    check("stop_drains_loops", t_stop_drains, servers)
    check("data_over_loops", t_data, servers)
    check("memory_back_near_idle_loops", t_memory, servers)
    check("slowlog_max_len_over_loops", t_slowlog_max_len, servers)
    check("eject_every_loop_at_once", t_eject, servers)
    check("eject_once_when_loops_fail_together", t_eject_once, servers)
    harness.run_with_servers("reshard_under_load_loops", t_reshard, 4)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-threads-"))
