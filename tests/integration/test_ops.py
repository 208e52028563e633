#!/usr/bin/python3
"""test_ops.py -- operating shardis with the tools an operator already runs,
all real processes on loopback ports:

- INFO in redis-server's sections and fields: keyspace and memory are the
  sums of the servers' own INFO; the sections a client library reads at
  connect (arch_bits, role, loading, cluster_enabled) are there;
- redis-cli --stat, --latency and --bigkeys through shardis answer as
  against one redis-server holding all the keys;
- Debian's prometheus-redis-exporter scraping shardis: redis_up,
  redis_db_keys, redis_memory_used_bytes, redis_commands_total ... agree
  with the servers and the requests made;
- /metrics (stats_listen) passes promtool check metrics, and a command's
  and a server's latency histogram count exactly the requests made;
- SLOWLOG catches a request made slow on purpose (a script that spins on
  one server), with its arguments, client, name and server; LATENCY
  HISTOGRAM and INFO latencystats count the calls;
- CLIENT LIST and CLIENT KILL (by id, addr, user, type, maxage; the old
  form) on the proxy's own clients, in redis-server's format; redis-py
  parses the list;
- MONITOR shows every client's commands in redis-server's format, AUTH's
  password redacted, and only with admin_commands (as SLOWLOG, LATENCY,
  CLIENT LIST/KILL/PAUSE and HOTKEYS: test_secure);
- HOTKEYS ranks keys of every server at once by time and bytes.

Run: /usr/bin/python3 tests/integration/test_ops.py --shardis build/shardis
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import redis

import harness
from harness import Fail, RedisServer, Shardis, check, expect, expect_eq, expect_refused, until


def info_of(client, section):
    return harness.Raw(client.connection_pool.connection_kwargs["port"]).cmd(
        "INFO", section).decode()


def fields(text):
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def servers_sum(servers, section, name):
    return sum(float(fields(info_of(s.client, section)).get(name, 0)) for s in servers)


def fresh_info(px):
    """Wait until shardis's copy of every server's INFO is newer than now
    (asked after it: its age below the time since)."""
    t = time.monotonic()

    def fresh():
        shardis = fields(info_of(px.client, "shardis"))
        ages = [int(m.group(1)) for k, v in shardis.items() if k.startswith("backend_")
                for m in [re.search(r"info_age_ms=(-?\d+)", v)] if m]
        return ages and all(0 <= a < (time.monotonic() - t) * 1000 - 5 for a in ages)
    until("every server's INFO fetched since", fresh, timeout=5)


def t_info(px, servers):
    """Keyspace summed; memory summed; the fields clients read."""
    pipe = px.client.pipeline(transaction=False)
    for i in range(300):
        pipe.set("k%d" % i, "v" * (i % 50))
        if i % 3 == 0:
            pipe.expire("k%d" % i, 1000)
    pipe.execute()
    fresh_info(px)
    ks = fields(info_of(px.client, "keyspace"))
    keys = sum(int(re.search(r"keys=(\d+)", fields(info_of(s.client, "keyspace"))["db0"])
                   .group(1)) for s in servers)
    expires = sum(int(re.search(r"expires=(\d+)", fields(info_of(s.client, "keyspace"))["db0"])
                      .group(1)) for s in servers)
    expect_eq((keys, expires), (300, 100), "the servers' keys")
    expect(ks["db0"].startswith("keys=300,expires=100,avg_ttl="), "INFO keyspace: %r" % ks)
    # (The servers' memory moves with every connection: the test's own to
    # them are made first, then shardis polls, then both are read.)
    servers_sum(servers, "memory", "used_memory")
    fresh_info(px)
    mem = fields(info_of(px.client, "memory"))
    used = servers_sum(servers, "memory", "used_memory")
    expect(abs(int(mem["used_memory"]) - used) < 0.05 * used,
           "used_memory %s against the servers' %d" % (mem["used_memory"], used))
    expect(int(mem["shardis_used_memory_rss"]) > 0, "shardis's own RSS")
    every = fields(info_of(px.client, "everything"))
    for k, want in (("arch_bits", "64"), ("role", "master"), ("loading", "0"),
                    ("cluster_enabled", "0"), ("connected_slaves", "0")):
        expect_eq(every.get(k), want, k)
    for k in ("redis_version", "run_id", "uptime_in_seconds", "process_id", "tcp_port",
              "used_memory_human", "maxmemory_policy", "keyspace_hits",
              "instantaneous_ops_per_sec", "rdb_last_bgsave_status", "total_net_input_bytes",
              "cmdstat_set", "latency_percentiles_usec_set", "used_cpu_sys"):
        expect(k in every, "INFO everything has %s" % k)
    default = fields(info_of(px.client, "default"))
    expect("cmdstat_set" not in default and "arch_bits" in default, "INFO default")
    expect_eq(info_of(px.client, "nosuchsection"), "$0\r\n\r\n", "an unknown section")
    # redis-py parses it as it parses redis-server's.
    parsed = px.client.info()
    expect_eq((parsed["arch_bits"], parsed["db0"]["keys"]), (64, 300), "redis-py's INFO")
    return "300 keys, used_memory %s (servers %d)" % (mem["used_memory"], used)


def t_redis_cli(px, servers):
    """--stat's keys and mem, --latency's samples, --bigkeys over every server."""
    px.client.set("big{x}", "b" * 5000)
    fresh_info(px)
    out = subprocess.run(["timeout", "2.5", "stdbuf", "-oL", harness.ARGS.redis_cli, "-h",
                          harness.HOST, "-p", str(px.port), "--stat", "-i", "1"],
                         capture_output=True, text=True).stdout
    rows = [l.split() for l in out.splitlines() if re.match(r"^\d+\s", l)]
    keys = sum(int(re.search(r"keys=(\d+)", fields(info_of(s.client, "keyspace"))["db0"])
                   .group(1)) for s in servers)
    expect(rows and int(rows[0][0]) == keys, "--stat keys: %r, servers %d" % (out, keys))
    expect(rows[0][1].endswith(("K", "M")), "--stat mem: %r" % rows[0][1])
    lat = subprocess.run(["timeout", "-s", "INT", "1.5", harness.ARGS.redis_cli, "-h",
                          harness.HOST, "-p", str(px.port), "--latency"],
                         capture_output=True, text=True).stdout.split()
    expect(len(lat) >= 4 and int(lat[3]) > 10, "--latency: %r" % lat)
    big = subprocess.run([harness.ARGS.redis_cli, "-h", harness.HOST, "-p", str(px.port),
                          "--bigkeys"], capture_output=True, text=True).stdout
    expect("Biggest string found '\"big{x}\"' has 5000 bytes" in big and
           "%d strings" % keys in big, "--bigkeys: %s" % big[-400:])
    return "--stat keys %s mem %s; --latency %s samples" % (rows[0][0], rows[0][1], lat[3])


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode(), r.headers.get("Content-Type")


def samples(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def t_exporter(px, servers):
    """prometheus-redis-exporter reads shardis as it reads a redis-server."""
    exe = shutil.which("prometheus-redis-exporter")
    if exe is None:
        raise Fail("prometheus-redis-exporter is not installed (scripts/deps installs it)")
    port = harness.free_port()
    log = harness.TMP + "/exporter.log"
    proc = harness.start([exe, "-redis.addr", "redis://%s:%d" % (harness.HOST, px.port),
                          "-web.listen-address", "%s:%d" % (harness.HOST, port)], log)
    harness.wait_port(port, proc, "redis_exporter", [log])
    fresh_info(px)
    before = int(fields(info_of(px.client, "commandstats"))["cmdstat_get"]
                 .split("calls=")[1].split(",")[0]) if "cmdstat_get" in info_of(
                     px.client, "commandstats") else 0
    for i in range(25):
        px.client.get("k%d" % i)
    got = samples(scrape("http://%s:%d/metrics" % (harness.HOST, port))[0])
    harness.stop(proc)
    keys = sum(int(re.search(r"keys=(\d+)", fields(info_of(s.client, "keyspace"))["db0"])
                   .group(1)) for s in servers)
    used = servers_sum(servers, "memory", "used_memory")
    expect_eq(got.get("redis_up"), 1.0, "redis_up")
    expect_eq(got.get('redis_db_keys{db="db0"}'), float(keys), "redis_db_keys")
    expect(abs(got.get("redis_memory_used_bytes", 0) - used) < 0.05 * used,
           "redis_memory_used_bytes %r against %d" % (got.get("redis_memory_used_bytes"), used))
    expect_eq(got.get('redis_commands_total{cmd="get"}'), float(before + 25),
              "redis_commands_total get")
    expect(got.get('redis_commands_duration_seconds_total{cmd="get"}', 0) > 0,
           "redis_commands_duration_seconds_total")
    expect(got.get("redis_connected_clients", 0) >= 1, "redis_connected_clients")
    for k in ('redis_instance_info', "redis_uptime_in_seconds", "redis_keyspace_hits_total",
              "redis_cpu_sys_seconds_total", "redis_slowlog_length"):
        expect(any(n.startswith(k) for n in got), "the exporter shows %s" % k)
    errors = [l for l in open(log) if "level=error" in l]
    expect(not errors, "the exporter's errors: %r" % errors[:3])
    return "%d series; db0 %d keys" % (len(got), keys)


def t_metrics(servers):
    """/metrics: promtool's check passes; histograms count every request."""
    mport = harness.free_port()
    px = Shardis("metrics", servers, stats_listen="%s:%d" % (harness.HOST, mport),
                 admin_commands="true")     # (HOTKEYS)
    for i in range(137):
        px.client.get("m%d" % i)
    text, ctype = scrape("http://%s:%d/metrics" % (harness.HOST, mport))
    where = px.whereis(["m%d" % i for i in range(137)])
    expect(ctype.startswith("text/plain; version=0.0.4"), "Content-Type %r" % ctype)
    promtool = shutil.which("promtool")
    if promtool is None:
        raise Fail("promtool is not installed (scripts/deps installs prometheus)")
    chk = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                         text=True)
    expect(chk.returncode == 0, "promtool check metrics: %s%s" % (chk.stdout, chk.stderr))
    got = samples(text)
    name = 'shardis_command_duration_seconds_count{pool="alpha",cmd="get"}'
    expect_eq(got.get(name), 137.0, name)
    expect_eq(got.get('shardis_command_duration_seconds_bucket{pool="alpha",cmd="get",'
                      'le="+Inf"}'), 137.0, "the +Inf bucket")
    for i, srv in enumerate(("redis1", "redis2")):
        n = sum(1 for s in where.values() if s == i)
        expect_eq(got.get('shardis_server_request_duration_seconds_count{pool="alpha",'
                          'server="%s"}' % srv), float(n), "server %s's count" % srv)
        expect_eq(got.get('shardis_server_up{pool="alpha",server="%s"}' % srv), 1.0, "up")
    expect_eq(got.get('shardis_requests_total{pool="alpha"}'), 137.0, "requests")
    # Buckets are cumulative and end at the count.
    le = sorted((float(m.group(1)), v) for k, v in got.items()
                for m in [re.match(r'shardis_command_duration_seconds_bucket\{pool="alpha",'
                                   r'cmd="get",le="([0-9.e+-]+)"\}', k)] if m)
    expect(all(a[1] <= b[1] for a, b in zip(le, le[1:])) and le[-1][1] == 137,
           "cumulative buckets: %r" % le)
    body, _ = scrape("http://%s:%d/" % (harness.HOST, mport))
    expect("/metrics" in body, "the index page")
    try:
        scrape("http://%s:%d/nothing" % (harness.HOST, mport))
    except urllib.error.HTTPError as e:
        expect_eq(e.code, 404, "an unknown path")
    else:
        raise Fail("an unknown path answered 200")
    # HOTKEYS's keys are in /metrics too, and the text still passes promtool.
    px.client.execute_command("HOTKEYS", "START", "METRICS", 2, "CPU", "NET")
    for _ in range(20):
        px.client.get("hk\x01\"")
    text, _ = scrape("http://%s:%d/metrics" % (harness.HOST, mport))
    hot = samples(text)
    for name in ("shardis_hotkey_seconds", "shardis_hotkey_bytes"):
        expect(hot.get('%s{pool="alpha",key="hk\\\\x01\\""}' % name, 0) > 0,
               "%s of the hot key: %r" % (name, [k for k in hot if "hotkey" in k][:3]))
    chk = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                         text=True)
    expect(chk.returncode == 0, "promtool with hot keys: %s" % chk.stderr[:300])
    harness.t_exit_clean(px)
    return "%d samples, promtool ok" % len(got)


def want_args(sent, keep):
    """What SLOWLOG shows of arguments sent when it keeps keep bytes."""
    raw = b"*%d\r\n" % len(sent)
    out = []
    for x in sent:
        head = b"$%d\r\n" % len(x)
        if len(raw) + len(head) > keep:
            break
        raw += head
        have = min(len(x), keep - len(raw))
        out.append(x[:have] + (b"... (%d more bytes)" % (len(x) - have) if have < len(x)
                               else b""))
        raw += x + b"\r\n"
        if have < len(x):
            break
    if len(out) < len(sent):
        out.append(b"... (%d more arguments)" % (len(sent) - len(out)))
    return out


SPIN = ("local t = redis.call('TIME') "
        "while true do local u = redis.call('TIME') "
        "if (u[1] - t[1]) * 1000000 + (u[2] - t[2]) > tonumber(ARGV[1]) then break end "
        "end return 1")


def t_slowlog(px):
    """A script spinning 30 ms on one server is logged, a GET is not."""
    c = redis.Redis(harness.HOST, px.port, socket_timeout=5)
    c.client_setname("slowpoke")
    px.client.slowlog_reset()
    c.get("fast")
    key = px.keys_on("slow", 1)[0]
    c.eval(SPIN, 1, key, 30000)
    expect_eq(px.client.slowlog_len(), 1, "SLOWLOG LEN")
    raw = px.client.execute_command("SLOWLOG", "GET")
    e = raw[0]
    expect_eq(len(e), 7, "an entry's fields")
    expect(e[2] >= 30000, "its time: %d us" % e[2])
    # The arguments in the request's first 55 bytes, the one cut counted.
    sent = [b"EVAL", SPIN.encode(), b"1", key, b"30000"]
    raw = b"*%d\r\n" % len(sent) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in sent)
    expect_eq(e[3], want_args(sent, 55), "its arguments")
    local = c.connection_pool.get_connection("x")
    expect_eq(e[4], ("%s:%d" % local._sock.getsockname()).encode(), "its client")
    c.connection_pool.release(local)
    expect_eq((e[5], e[6]), (b"slowpoke", b"redis2"), "its client's name, its server")
    # Its head spread over two input chunks (14312 bytes each; a new
    # client's first starts at its first byte): after a SET of 14292 bytes
    # in the same write, the EVAL starts 20 bytes before the first's end.
    px.client.slowlog_reset()
    pad = lambda n: b"*3\r\n$3\r\nSET\r\n$3\r\npad\r\n$%d\r\n%s\r\n" % (n, b"p" * n)
    spread = harness.Raw(px.port)
    spread.send(pad(14292 - len(pad(10000)) + 10000) + raw)
    expect_eq(spread.reply(), b"+OK\r\n", "the SET before")
    spread.reply()
    e = px.client.execute_command("SLOWLOG", "GET")[0]
    expect_eq((e[3], e[4]), (want_args(sent, 55), ("%s:%d" % spread.sock.getsockname()).encode()),
              "the arguments of a head over two chunks")
    px.client.slowlog_reset()
    expect_eq(px.client.slowlog_len(), 0, "after RESET")
    h = px.client.execute_command("LATENCY", "HISTOGRAM", "eval")
    ev = dict(zip(h[1][::2], h[1][1::2])) if h and h[0] == b"eval" else {}
    expect_eq(ev.get(b"calls"), 2, "LATENCY HISTOGRAM eval: %r" % h)
    buckets = dict(zip(ev[b"histogram_usec"][::2], ev[b"histogram_usec"][1::2]))
    expect(min(k for k, v in buckets.items() if v) >= 30000, "its bucket: %r" % buckets)
    # Names in any case; unknown ones and ones not called are left out.
    h = px.client.execute_command("LATENCY", "HISTOGRAM", "GET", "nosuch", "EvaL", "hset")
    expect_eq(h[::2], [b"eval", b"get"], "LATENCY HISTOGRAM of four names")
    lat = fields(info_of(px.client, "latencystats"))
    p50 = float(lat["latency_percentiles_usec_eval"].split(",")[0].split("=")[1])
    expect(30000 <= p50 <= 40000, "INFO latencystats eval p50: %r" % lat)
    return "%d us logged" % e[2]


def t_clients(px):
    """CLIENT LIST and CLIENT KILL."""
    a = redis.Redis(harness.HOST, px.port, socket_timeout=5)
    a.client_setname("alpha-app")
    a.get("x")
    b = harness.Raw(px.port)
    b.cmd("PING")
    listed = px.client.client_list()
    mine = [x for x in listed if x["name"] == "alpha-app"]
    expect_eq(len(mine), 1, "the named client: %r" % listed)
    m = mine[0]
    for k in ("id", "addr", "laddr", "fd", "age", "idle", "flags", "db", "sub", "psub",
              "multi", "omem", "tot-mem", "events", "cmd", "user", "resp"):
        expect(k in m, "CLIENT LIST has %s: %r" % (k, m))
    expect_eq((m["cmd"], m["user"], m["flags"], m["db"], m["laddr"]),
              ("get", "default", "N", "0", "%s:%d" % (harness.HOST, px.port)), "its fields")
    expect_eq(m["id"], str(a.client_id()), "its id")
    # The buffer fields: a request half read is in qbuf, in the input chunks.
    h = harness.Raw(px.port)
    h.sock.sendall(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$100\r\n" + b"v" * 40)
    h_addr = "%s:%d" % h.sock.getsockname()
    half = {}
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and half.get("qbuf", "0") == "0":
        half = next((x for x in px.client.client_list() if x["addr"] == h_addr), {})
    expect_eq((half["qbuf"], half["rbs"]), (str(29 + 40), "14336"), "a half request: %r" % half)
    expect(int(half["tot-mem"]) > 14336, "tot-mem counts the chunk: %r" % half)
    h.sock.sendall(b"v" * 60 + b"\r\n")
    expect_eq(h.reply(), b"+OK\r\n", "the request completed")
    whole = [x for x in px.client.client_list() if x["id"] == half["id"]][0]
    expect_eq(whole["qbuf"], "0", "qbuf once framed")
    info = px.client.client_info()
    expect_eq(info["cmd"], "client|info", "CLIENT INFO's cmd")
    only = px.client.execute_command("CLIENT", "LIST", "ID", m["id"]).decode()
    expect(only.count("\n") == 1 and "name=alpha-app" in only, "CLIENT LIST ID: %r" % only)
    expect_eq(px.client.execute_command("CLIENT", "LIST", "TYPE", "pubsub"), b"",
              "no subscriber")
    # KILL by id: a's connection is gone (redis-py reconnects on the next).
    expect_eq(px.client.client_kill_filter(_id=m["id"]), 1, "KILL ID")
    expect(not any(x["name"] == "alpha-app" for x in px.client.client_list()), "killed")
    # The old form, by address.
    addr = "%s:%d" % b.sock.getsockname()
    expect_eq(px.client.client_kill(addr), True, "KILL addr")
    try:
        b.cmd("PING")
    except (EOFError, ConnectionError, OSError):
        pass
    else:
        raise Fail("the killed raw client still answered")
    expect_refused(lambda: px.client.client_kill("127.0.0.1:1"), "No such client",
                   "KILL of nobody")
    # SKIPME yes (the default) spares the caller; USER default kills the others.
    others = [redis.Redis(harness.HOST, px.port) for _ in range(3)]
    for o in others:
        o.ping()
    n = px.client.client_kill_filter(user="default")
    expect(n >= 3, "KILL USER default killed %d" % n)
    expect_eq(px.client.ping(), True, "the caller lives (SKIPME yes)")
    # TYPE pubsub takes the subscriber only; a user name longer than any
    # kept matches none; LADDR (every client came to it) and MAXAGE.
    sub = harness.Raw(px.port)
    sub.cmd("SUBSCRIBE", "ch")
    plain = harness.Raw(px.port)
    plain.cmd("PING")
    expect_eq(px.client.execute_command("CLIENT", "KILL", "TYPE", "pubsub"), 1, "KILL TYPE")
    expect_eq(px.client.execute_command("CLIENT", "KILL", "USER", "u" * 300), 0,
              "KILL USER of 300 bytes")
    expect_eq(px.client.execute_command("CLIENT", "KILL", "MAXAGE", 3600), 0, "KILL MAXAGE")
    expect_eq(px.client.execute_command("CLIENT", "KILL", "LADDR",
                                        "%s:%d" % (harness.HOST, px.port)), 1, "KILL LADDR")
    for gone in (sub, plain):
        expect_eq(gone.rest_until_eof(2)[1], True, "a killed client's connection closed")
    # CLIENT PAUSE WRITE: writes wait, reads go; UNPAUSE lets them through.
    w = redis.Redis(harness.HOST, px.port, socket_timeout=5)
    w.ping()
    expect_eq(px.client.execute_command("CLIENT", "PAUSE", 400, "WRITE"), b"OK", "PAUSE")
    t = time.monotonic()
    expect_eq(w.get("paused-r"), None, "a read while paused")
    fast = time.monotonic() - t
    w.set("paused-w", "1")
    slow = time.monotonic() - t
    expect(fast < 0.2 and slow >= 0.3, "read %.3f s, write %.3f s into a 400 ms pause"
           % (fast, slow))
    # The may-replicate commands wait too, as on redis-server.
    for args in (("PUBLISH", "paused-ch", "m"), ("PFCOUNT", "paused-hll")):
        px.client.execute_command("CLIENT", "PAUSE", 300, "WRITE")
        t = time.monotonic()
        w.execute_command(*args)
        took = time.monotonic() - t
        expect(took >= 0.2, "%s took %.3f s into a 300 ms WRITE pause" % (args[0], took))
    px.client.execute_command("CLIENT", "PAUSE", 5000, "ALL")
    done = []
    th = threading.Thread(target=lambda: done.append(w.get("paused-w")))
    th.start()
    time.sleep(0.2)
    expect_eq(done, [], "a read while paused (ALL)")
    expect_eq(px.client.execute_command("CLIENT", "UNPAUSE"), b"OK", "UNPAUSE")
    th.join(2)
    expect_eq(done, [b"1"], "the read after UNPAUSE")
    return "%d fields per line; a write waited %.0f ms" % (len(m), slow * 1000)


def t_monitor(servers):
    """MONITOR: every command, redis-server's format, AUTH redacted."""
    px = Shardis("mon", servers, admin_commands="true")
    mon = harness.Raw(px.port)
    expect_eq(mon.cmd("MONITOR"), b"+OK\r\n", "MONITOR")
    c = redis.Redis(harness.HOST, px.port, socket_timeout=5)
    c.set("mk", 'a "b"\n')
    try:
        c.execute_command("AUTH", "secret")
    except redis.ResponseError:
        pass
    c.get("mk")
    lines = []
    deadline = time.monotonic() + 5
    while len(lines) < 3 and time.monotonic() < deadline:
        mon._fill()
        lines = bytes(mon.buf[mon.pos:]).decode().split("\r\n")[:-1]
    port = c.connection_pool.get_connection("x")._sock.getsockname()[1]
    want = ['"SET" "mk" "a \\"b\\"\\n"', '"AUTH" "(redacted)"', '"GET" "mk"']
    for line, w in zip(lines, want):
        expect(re.fullmatch(r"\+\d+\.\d{6} \[0 %s:%d\] %s" % (re.escape(harness.HOST), port,
                                                              re.escape(w)), line),
               "a MONITOR line: %r, want ...%s" % (line, w))
    expect_eq(len(lines), 3, "lines: %r" % lines)
    harness.t_exit_clean(px)
    plain = Shardis("nomon", servers)
    expect_refused(lambda: plain.client.execute_command("MONITOR"), "admin_commands",
                   "MONITOR without admin_commands")
    harness.t_exit_clean(plain)
    return lines[0]


def t_hotkeys(px):
    """The keys hottest over both servers, by time and by bytes."""
    c = px.client
    expect_eq(c.execute_command("HOTKEYS", "GET"), None, "no session yet")
    expect_eq(c.execute_command("HOTKEYS", "START", "METRICS", 2, "CPU", "NET", "COUNT", 3),
              b"OK", "START")
    hot = [px.keys_on("hot", i)[0] for i in range(2)]
    pipe = c.pipeline(transaction=False)
    # (The hotter after the other, four times as many: a request later in
    # a pipeline waits longer, so hot[0]'s time is surely the larger; with
    # twice as many, a loaded machine once gave hot[1] more.)
    for _ in range(100):
        pipe.get(hot[1])
    for _ in range(400):
        pipe.get(hot[0])
    for i in range(50):
        pipe.get("cold%d" % i)
    pipe.execute()
    c.set(b"big", b"x" * 100000)
    got = c.execute_command("HOTKEYS", "GET")
    d = dict(zip(got[::2], got[1::2]))
    expect_eq(d[b"tracking-active"], 1, "active")
    cpu = d[b"by-cpu-time-us"][::2]
    net = d[b"by-net-bytes"][::2]
    expect_eq(cpu[:2], hot, "by time: %r" % d[b"by-cpu-time-us"])
    expect_eq((net[0], net[1:3]), (b"big", hot), "by bytes: %r" % d[b"by-net-bytes"])
    expect(len(cpu) == 3, "COUNT 3")
    expect_refused(lambda: c.execute_command("HOTKEYS", "RESET"), "STOP", "RESET while active")
    expect_eq(c.execute_command("HOTKEYS", "STOP"), b"OK", "STOP")
    c.get(hot[1])
    after = dict(zip(*[iter(c.execute_command("HOTKEYS", "GET"))] * 2))
    expect_eq(after[b"tracking-active"], 0, "stopped")
    expect_eq(after[b"by-cpu-time-us"], d[b"by-cpu-time-us"], "nothing counted after STOP")
    expect_eq(c.execute_command("HOTKEYS", "RESET"), b"OK", "RESET")
    expect_eq(c.execute_command("HOTKEYS", "GET"), None, "reset")
    return "top by time %r" % cpu


def t_review_mends():
    """A server that refuses INFO is asked once a second, not every tick;
    a 600-byte pool name does not overflow /metrics' labels; 70 idle
    connections do not lock a scraper out; under a flood of slow requests
    at most slowlog_max_len a second are logged."""
    srv = RedisServer("noinfo", extra=["--rename-command", "INFO", "INFO2"])
    name = "p" * 600
    port, mport = harness.free_port(), harness.free_port()
    conf = os.path.join(harness.TMP, "long.yml")
    with open(conf, "w") as f:
        f.write("%s:\n  listen: %s:%d\n  stats_listen: %s:%d\n  slowlog_log_slower_than: 0\n"
                "  slowlog_max_len: 10\n  admin_commands: true\n  servers:\n"
                "    - %s:%d:1 redis1\n"
                % (name, harness.HOST, port, harness.HOST, mport, harness.HOST, srv.port))
    log = os.path.join(harness.TMP, "long.log")
    proc = harness.start([harness.ARGS.shardis, "-c", conf, "-o", log], log + ".out")
    harness.wait_port(port, proc, "shardis long", [log])
    c = redis.Redis(harness.HOST, port, socket_timeout=5)
    c.set("k", "v")
    time.sleep(3.0)
    errs = fields(harness.Raw(srv.port).cmd("INFO2", "errorstats").decode())
    n = int(errs.get("errorstat_ERR", "count=0").split("=")[1])
    expect(1 <= n <= 8, "INFO refused %d times in 3 s" % n)
    idle = [socket.create_connection((harness.HOST, mport)) for _ in range(70)]
    text, _ = scrape("http://%s:%d/metrics" % (harness.HOST, mport))
    for s in idle:
        s.close()
    chk = subprocess.run([shutil.which("promtool") or "promtool", "check", "metrics"],
                         input=text, capture_output=True, text=True)
    expect(chk.returncode == 0 and ('pool="%s"' % name) in text,
           "promtool with a 600-byte pool name: %s" % chk.stderr[:300])
    pipe = c.pipeline(transaction=False)
    for i in range(200):
        pipe.get("f%d" % i)
    t = time.monotonic()
    pipe.execute()
    took = time.monotonic() - t
    line = [v for k, v in fields(info_of(c, "shardis")).items() if k == "pool_0"][0]
    skipped = int(re.search(r"slowlog_skipped=(\d+)", line).group(1))
    expect(took < 1.0 and skipped >= 200 - 2 * 10 - 1, "skipped %d of 201 slow requests "
           "(%.2f s)" % (skipped, took))
    # (helper-25) AUTH's password is not kept; HOTKEYS alone is refused.
    time.sleep(1.1)                     # (a new second: the log writes again)
    try:
        c.execute_command("AUTH", "someone", "s3cret")
    except redis.ResponseError:
        pass
    logged = c.execute_command("SLOWLOG", "GET", -1)
    auth = [x[3] for x in logged if x[3][0].upper() == b"AUTH"]
    expect(auth and auth[0] == [b"AUTH", b"(redacted)", b"(redacted)"] and
           b"s3cret" not in repr(logged).encode(), "AUTH in SLOWLOG: %r" % auth)
    expect_refused(lambda: c.execute_command("HOTKEYS"), "wrong number of arguments",
                   "HOTKEYS alone")
    harness.stop(proc)
    return "INFO refused %d times in 3 s; %d slow requests not logged" % (n, skipped)


def body():
    servers = [RedisServer("r%d" % i) for i in range(2)]
    # SLOWLOG, LATENCY, CLIENT LIST/KILL/PAUSE, HOTKEYS and the exporter's
    # SLOWLOG and LATENCY show every client: admin commands (test_secure).
    px = Shardis("ops", servers, admin_commands="true")
    check("info_sections_sum_servers", t_info, px, servers)
    check("redis_cli_stat_latency_bigkeys", t_redis_cli, px, servers)
    check("redis_exporter_reads_shardis", t_exporter, px, servers)
    check("slowlog_catches_slow_script", t_slowlog, px)
    check("client_list_kill", t_clients, px)
    check("monitor_every_command", t_monitor, servers)
    check("hotkeys_over_every_server", t_hotkeys, px)
    check("metrics_promtool_histograms_count", t_metrics, servers)
    check("review_mends_info_labels_conns_slowlog", t_review_mends)
    check("exit_clean", harness.t_exit_clean, px)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-ops-"))
