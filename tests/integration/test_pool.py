#!/usr/bin/python3
"""test_pool.py -- the pool's servers over time: SCAN across reloads,
ejection, dedicated connections, configs a reload replaces, the listener.

- SCAN begun before a reload that adds a server returns every key (the
  cursor's server slot survives the pool growing); one begun before a
  reload that removes a server, whose keys move behind the walk to a server
  walked already, returns every key too; made-up cursors are refused;
  one continued while the keys of such a reload move (migration_rate 1,
  the mover paused or running, keys moved on touch ahead of and behind
  the walk) ends, long before the migration does, with every key;
- auto_eject_hosts (eject_mode: rehash) with every server stopped: each is
  retried after server_retry_timeout, so the one that comes back first
  takes the keys of the one still down, and that one gets its keys back
  once it is up;
- a MIGRATE that keeps failing (its destination stopped, migrate_retries
  14) is retried with a backoff capped at a second: the request is told
  -TRYAGAIN within seconds, not after the minutes an uncapped doubling
  takes;
- a dedicated connection released dirty (its client left mid-transaction)
  does not hide a spare behind it: another client's transaction in the
  same loop turn reuses the spare, no new connection is made;
- reloads that change servers, back and forth, keep one config (INFO
  configs_held), however many come;
- reuseport: true with a listen address that fails: the socket shardis
  made is closed (seen with strace).

Run: /usr/bin/python3 tests/integration/test_pool.py --shardis build/shardis
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import redis

import harness
from harness import Fail, RedisServer, Shardis, check, expect, expect_eq, until
from test_reshard import locate, status, write_servers
from test_reshard import reload as reload_switch

HOST = "127.0.0.1"


def reload(px, epoch):
    """SHARD.RELOAD, then wait until the keys it moves have moved."""
    reload_switch(px, epoch)
    until("the migration finished", lambda: status(px)["state"] == "stable", 30)


def fill(c, keys):
    pipe = c.pipeline(transaction=False)
    for k in keys:
        pipe.set(k, k)
    pipe.execute()


# ---- SCAN ------------------------------------------------------------------------------

def scan_rest(c, cursor, seen, count=100):
    calls = 0
    while True:
        cursor, keys = c.scan(cursor, count=count)
        seen.extend(keys)
        calls += 1
        expect(calls < 20000, "SCAN never ended")
        if cursor == 0:
            return calls


def t_scan_pool_grows(rs):
    a, b, new = rs[:3]
    px = Shardis("scangrow", [a, b], admin_commands="true")
    keys = ["g:%d" % i for i in range(2000)]
    fill(px.client, keys)
    seen = []
    cursor, got = px.client.scan(0, count=100)
    seen.extend(got)
    for _ in range(3):
        cursor, got = px.client.scan(cursor, count=100)
        seen.extend(got)
    expect(cursor != 0, "the walk ended before the reload")
    write_servers(px, [a, b, new])
    reload(px, 1)
    scan_rest(px.client, cursor, seen)
    missing = set(k.encode() for k in keys) - set(seen)
    expect(not missing, "%d of %d keys never returned by a SCAN begun before the reload, "
           "e.g. %r" % (len(missing), len(keys), sorted(missing)[:3]))
    # A walk with no reload returns each key once.
    after = []
    scan_rest(px.client, 0, after)
    expect_eq(sorted(after), sorted(k.encode() for k in keys), "a walk after the reload")
    for bad in ("1023", "18446744073709551615"):    # a server slot the pool has not
        try:
            px.client.scan(int(bad))
            raise Fail("SCAN %s was answered" % bad)
        except redis.ResponseError as e:
            expect_eq(str(e), "invalid cursor", "SCAN %s" % bad)
    harness.t_exit_clean(px)
    return "%d keys" % len(keys)


def t_scan_spans_migration(rs):
    """The walk has done the first server when the third is removed: its
    keys move, some to the first server, behind the walk."""
    a, b, c = rs[:3]
    px = Shardis("scanmig", [a, b, c], admin_commands="true")
    keys = ["m:%d" % i for i in range(3000)]
    fill(px.client, keys)
    on_a = a.client.dbsize()
    seen, cursor = [], 0
    while len(seen) < on_a + 50:            # past the first server
        cursor, got = px.client.scan(cursor, count=100)
        seen.extend(got)
        expect(cursor != 0, "the walk ended early")
    write_servers(px, [a, b])
    reload(px, 1)
    moved_to_a = [k for k, o in locate(px.conf, keys).items()
                  if o == "redis1" and k.encode() not in seen]
    calls = scan_rest(px.client, cursor, seen)
    missing = set(k.encode() for k in keys) - set(seen)
    expect(not missing, "%d of %d keys never returned by a SCAN spanning the migration "
           "(%d moved to the server walked first), e.g. %r"
           % (len(missing), len(keys), len(moved_to_a), sorted(missing)[:3]))
    harness.t_exit_clean(px)
    return "%d keys, %d calls after the reload" % (len(keys), calls)


def scan_during_migration(rs, name, paused, remove=False):
    """A SCAN begun before a reload, continued while the keys it moves move
    (migration_rate 1: the migration lasts far longer than the walk), the
    mover paused or running, with COUNT 10 and keys moved on touch (GET)
    after each step: the walk ends within a bound on calls, before the
    migration does, having returned every key (each present throughout) at
    least once. The reload adds a third server (keys move to the slot
    walked last), or, with remove, removes the third, once the walk is
    past the first: keys touched first are those moving to the first
    server, behind the walk, before the walk reaches the third."""
    a, b, third = rs[:3]
    px = Shardis(name, [a, b, third] if remove else [a, b], admin_commands="true",
                 migration_rate=1)
    c = px.client
    keys = ["p:%d" % i for i in range(2000)]
    fill(c, keys)
    held = [s.client.dbsize() for s in rs[:3]]
    expect(min(held[:3 if remove else 2]) > 400, "keys on every server: %r" % held)
    old = locate(px.conf, keys)
    seen, cursor = [], 0
    while len(seen) < (held[0] + 50 if remove else 200):   # past the first server?
        cursor, got = c.scan(cursor, count=10)
        seen.extend(got)
        expect(cursor != 0, "the walk ended before the reload")
    write_servers(px, [a, b] if remove else [a, b, third])
    reload_switch(px, 1)
    if paused:
        c.execute_command("SHARD.MIGRATION", "PAUSE")
    where = locate(px.conf, keys)
    moving = sorted((k for k in keys if where[k] != old[k]), key=lambda k: where[k] != "redis1")
    expect(len(moving) > 300, "%d keys move" % len(moving))
    behind = [k for k in moving if where[k] == "redis1" and k.encode() not in seen]
    expect(not remove or len(behind) > 100, "%d keys move behind the walk" % len(behind))
    calls, touch, trail = 0, iter(moving), []
    while True:
        cursor, got = c.scan(cursor, count=10)
        seen.extend(got)
        calls += 1
        if cursor == 0:
            break
        trail = trail[-4:] + [(cursor & 1023, cursor >> 28, len(got))]
        expect(calls < 3000, "SCAN never ended: %d calls; the last cursors (server slot, "
               "inner cursor, keys returned): %r" % (calls, trail))
        for k in [next(touch, None) for _ in range(5)]:     # moved on touch
            if k is not None:
                expect_eq(c.get(k), k.encode(), "GET %s" % k)
    st = status(px)["state"]
    expect(st == "paused" if paused else st in ("draining", "moving"),
           "the migration's state at the walk's end: %s" % st)
    gained = sum(max(0, s.client.dbsize() - h) for s, h in zip(rs[:3], held))
    expect(gained > 300, "%d keys moved during the walk" % gained)
    missing = set(k.encode() for k in keys) - set(seen)
    expect(not missing, "%d of %d keys never returned by a SCAN across a %s migration "
           "(%d moved behind the walk), e.g. %r"
           % (len(missing), len(keys), "paused" if paused else "running", len(behind),
              sorted(missing)[:3]))
    stray = set(seen) - set(k.encode() for k in keys)
    expect(not stray, "keys returned that were never written: %r" % sorted(stray)[:3])
    # The migration's record is on the servers now, and counted nowhere.
    expect(any(s.client.exists("__shardis:ctl:alpha") for s in rs[:3]), "the record")
    expect_eq((c.dbsize(), sorted(c.keys("*")), c.info("keyspace")["db0"]["keys"]),
              (len(keys), sorted(k.encode() for k in keys), len(keys)),
              "DBSIZE, KEYS and INFO keyspace while the record is there")
    expect(all(c.randomkey() != b"__shardis:ctl:alpha" for _ in range(30)), "RANDOMKEY")
    harness.t_exit_clean(px)
    return "%d calls after the reload, %d keys moved during the walk, %d returned twice" % (
        calls, gained, len(seen) - len(set(seen)))


def t_scan_migration_paused(rs):
    return scan_during_migration(rs, "scanpaused", True)


def t_scan_migration_running(rs):
    return scan_during_migration(rs, "scanrunning", False)


def t_scan_migration_behind(rs):
    return scan_during_migration(rs, "scanbehind", True, remove=True)


# ---- ejection --------------------------------------------------------------------------

def t_eject_all(rs):
    a, b = rs[:2]
    px = Shardis("eject", [a, b], auto_eject_hosts="true", eject_mode="rehash",
                 server_failure_limit=1, server_retry_timeout=300, timeout=500)
    ka, kb = px.keys_on("ka", 0)[0], px.keys_on("kb", 1)[0]
    a.kill()
    b.kill()

    def tries(k, v):
        try:
            return px.client.set(k, v)
        except redis.RedisError:
            return False

    def log():
        return open(px.log, errors="replace").read()

    until("both servers ejected", lambda: [tries(ka, "1"), tries(kb, "1")] and
          "ejecting redis1" in log() and "ejecting redis2" in log())
    a.launch()                              # the first comes back; the second stays down
    until("the key of the server still down is served by the one back",
          lambda: tries(kb, "on-a"), 8)
    expect_eq(a.client.get(kb), b"on-a", "%s on the server that came back" % kb)
    expect_eq(px.client.get(ka), None, "%s (its server restarted empty)" % ka)
    b.launch()
    until("the second server has its keys again",
          lambda: tries(kb, "on-b") and b.client.get(kb) == b"on-b", 8)
    harness.t_exit_clean(px)


# ---- MIGRATE retries -------------------------------------------------------------------

def t_migrate_backoff(rs):
    a, b, dest = rs[:3]
    px = Shardis("backoff", [a, b], admin_commands="true", migrate_timeout=200,
                 migrate_retries=14, migration_rate=50)
    keys = ["s:%d" % i for i in range(5000)]
    fill(px.client, keys)
    write_servers(px, [a, b, dest])
    px.client.execute_command("SHARD.RELOAD")
    until("the keys move", lambda: status(px)["state"] == "moving", 10)
    px.client.execute_command("SHARD.MIGRATION", "PAUSE")
    after = locate(px.conf, keys)
    k = next(k for k in keys if after[k] == "redis3" and
             (a.client.exists(k) or b.client.exists(k)))
    dest.kill()
    raw = harness.Raw(px.port, timeout=30)
    t0 = time.monotonic()
    got = raw.cmd("GET", k)
    took = time.monotonic() - t0
    expect(got.startswith(b"-TRYAGAIN"), "GET of a key that cannot move: %r" % got)
    # 14 retries: 0.01+0.02+...+0.64 s, then 1 s each: about 7.3 s (uncapped: 82 s).
    expect(took < 20, "-TRYAGAIN after %.1f s" % took)
    raw.close()
    harness.t_exit_clean(px)
    return "-TRYAGAIN after %.1f s" % took


# ---- dedicated connections -------------------------------------------------------------

def t_spare_behind_dirty(rs):
    srv = rs[0]
    px = Shardis("spare", [srv])

    def made():
        return srv.client.info("stats")["total_connections_received"]

    y = harness.Raw(px.port)
    other = harness.Raw(px.port)
    expect_eq(y.cmd("PING"), b"+PONG\r\n", "PING")
    # shardis closes its spares after PROXY_IDLE_MS (500 ms) without a
    # command. other's PING keeps it busy up to the stop; a turn whose
    # stop lasted long enough for that trim (a loaded machine) proves
    # nothing and is run again.
    news, voided, i = [], 0, 0
    while len(news) < 5:
        i += 1
        x = harness.Raw(px.port)
        expect_eq(x.cmd("MULTI"), b"+OK\r\n", "MULTI")
        expect_eq(x.cmd("SET", "x", i), b"+QUEUED\r\n", "SET queued")    # x holds one
        for req, want in (("MULTI", b"+OK\r\n"), (("SET", "o", i), b"+QUEUED\r\n"),
                          ("EXEC", b"*1\r\n+OK\r\n")):
            req = req if isinstance(req, tuple) else (req,)
            expect_eq(other.cmd(*req), want, " ".join(map(str, req)))    # a spare now
        before = made()
        expect_eq(other.cmd("PING"), b"+PONG\r\n", "PING")
        busy = time.monotonic()
        # One loop turn: x leaves mid-transaction (its connection is closed),
        # then y's transaction wants a connection.
        os.kill(px.pid, signal.SIGSTOP)
        try:
            x.close()
            y.send(harness.enc("MULTI") + harness.enc("SET", "y", i) + harness.enc("EXEC"))
            time.sleep(0.05)
        finally:
            os.kill(px.pid, signal.SIGCONT)
        idle = time.monotonic() - busy
        expect_eq([y.reply() for _ in range(3)], [b"+OK\r\n", b"+QUEUED\r\n", b"*1\r\n+OK\r\n"],
                  "y's transaction")
        if idle < 0.3:
            news.append(made() - before)
        else:
            voided += 1
            expect(voided < 20, "20 turns too slow to tell (the last stopped %.2f s)" % idle)
    expect_eq(news, [0] * 5, "connections made to the server for y's transactions "
              "while a spare was there")
    y.close()
    other.close()
    harness.t_exit_clean(px)


# ---- configs ---------------------------------------------------------------------------

def t_configs_freed(rs):
    a, b, c = rs[:3]
    px = Shardis("confs", [a, b], admin_commands="true")
    # A big comment makes each config 256 KiB, so that kept ones would show.
    pad = "".join("  # %s\n" % ("x" * 1020) for _ in range(256))

    def held():
        return px.client.info("shardis").get("configs_held")

    for i in range(30):
        write_servers(px, [a, b, c] if i % 2 == 0 else [a, b], pad)
        reload(px, i + 1)
        until("the old config freed after reload %d (configs_held %r)" % (i + 1, held()),
              lambda: held() == 1)
    harness.t_exit_clean(px)
    return "configs_held 1 after each of 30 reloads"


# ---- the listener ----------------------------------------------------------------------

def t_reuseport_failed_listen(rs):
    strace = shutil.which("strace")
    expect(strace, "strace is needed to see shardis's system calls")
    hold = socket.socket()                  # no SO_REUSEPORT: shardis's bind fails
    hold.bind((HOST, 0))
    hold.listen()
    conf = os.path.join(harness.TMP, "reuse.yml")
    with open(conf, "w") as f:
        f.write("alpha:\n  listen: %s:%d\n  reuseport: true\n  servers:\n    - %s:%d:1\n"
                % (HOST, hold.getsockname()[1], HOST, rs[0].port))
    trace = os.path.join(harness.TMP, "reuse.strace")
    p = subprocess.run([strace, "-f", "-o", trace, "-e", "trace=socket,setsockopt,close",
                        harness.ARGS.shardis, "-c", conf], capture_output=True, text=True,
                       timeout=60)
    hold.close()
    expect(p.returncode != 0 and "cannot listen" in p.stderr,
           "shardis on a taken port: exit %d, %r" % (p.returncode, p.stderr[-300:]))
    text = open(trace).read()
    m = re.search(r"setsockopt\((\d+), SOL_SOCKET, SO_REUSEPORT", text)
    expect(m, "no SO_REUSEPORT socket in the trace: %r" % text[-500:])
    fd = m.group(1)
    expect(re.search(r"\bclose\(%s\)" % fd, text[m.end():]),
           "socket %s (SO_REUSEPORT) never closed after the failed listen" % fd)
    return "socket %s closed" % fd


def body():
    run = harness.run_with_servers

    run("SCAN begun before a reload that adds a server returns every key", t_scan_pool_grows, 3)
    run("SCAN spanning a migration that moves keys behind it returns every key",
        t_scan_spans_migration, 3)
    run("SCAN across a paused migration (migration_rate 1) ends with every key",
        t_scan_migration_paused, 3)
    run("SCAN across a running migration (migration_rate 1) ends with every key",
        t_scan_migration_running, 3)
    run("SCAN across a paused migration moving keys behind it ends with every key",
        t_scan_migration_behind, 3)
    run("auto_eject_hosts with every server ejected: retried, keys rehash, then return",
        t_eject_all, 2)
    run("a failing MIGRATE's retries back off at most 1 s: -TRYAGAIN in seconds",
        t_migrate_backoff, 3)
    # (spares are each loop's: with several, the two clients may be on two)
    run("a spare dedicated connection is reused behind one released dirty",
        harness.one_loop(t_spare_behind_dirty), 1)
    run("reloads that change servers free the configs they replace",
        t_configs_freed, 3)
    run("reuseport: a listen that fails closes the socket", t_reuseport_failed_listen, 1)


if __name__ == "__main__":
    sys.exit(harness.main(body))
