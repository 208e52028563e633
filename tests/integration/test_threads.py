#!/usr/bin/python3
"""test_threads.py -- with --threads 2 (SHARDIS_THREADS=2) INFO, SLOWLOG,
HOTKEYS, LATENCY and /metrics answer for the whole process, not for the
loop of the client that asks.

Loop 0 hands each new connection to the loop with the fewest clients, so
clients opened one after another and kept open land on both loops. Each
check makes requests from four such clients and asks from another
connection: a figure of one loop alone (the asker's) would miss about
half of them, and the check fails. And the servers' own figures (loop 0
alone polls them, and mails them to the other loops) are as fresh on
every loop.

Run: /usr/bin/python3 tests/integration/test_threads.py --shardis build/shardis
"""
import re
import sys
import time
import urllib.request

import redis

import harness
from harness import RedisServer, Shardis, check, expect, expect_eq

CLIENTS = 4


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


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-threads-"))
