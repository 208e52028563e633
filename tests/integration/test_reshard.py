#!/usr/bin/python3
"""test_reshard.py -- reload and live resharding, against real redis-servers.

- reload refusals: a file that does not parse, a changed listen address,
  server_connections or hash, and SHARD.RELOAD without admin_commands are
  refused with the reason (file:line:col for a parse error), by
  SHARD.RELOAD and by SIGHUP alike, and change nothing; a pool option a
  reload changes (client_connections) applies to new clients;
- a reload keeps client connections (the same socket answers before and
  after) and the connections to servers that stay (the same backend
  client id), and closes those to a removed server once its keys moved;
- adding a server: the summary says what changed and what share of keys
  moves; every key reads back its value at once; MGET, MSET and DEL split
  over moving keys, and LMOVE between same-tag moving keys, give what a
  server would; progress is logged; when the migration is over every key
  lives only on its new owner, with its TTL;
- a transaction begun before a reload gets -TRYAGAIN at EXEC and writes
  nothing; one begun after works; a BLPOP waiting when keys start to move
  goes on waiting on the key's new owner (unblocked there, sent again here)
  and gets the next push, and one with a timeout keeps what was left of it;
  a subscriber to a channel whose owner changed still gets its messages;
- kill -9 mid-migration: the restarted proxy routes by the record on the
  backends and finishes; restarted on a file that does not name the
  server keys move to, it starts by that file and says the record is not
  followed; restarted on the old file, it takes that as a reload and moves
  the keys back; clients cannot touch __shardis: keys;
- keys over bigkey_bytes (MEMORY USAGE) move last, one at a time, whole;
- SHARD.MIGRATION PAUSE stops the mover (keys still move on touch), a
  second reload while keys move is accepted and a third refused, RESUME
  finishes it with every key in place;
- two proxies: a reload of one waits (and moves nothing) until the other
  has the same servers; files that disagree are reported and nothing
  moves; a third proxy with other servers refuses to start; one that dies
  leaves the group and the other goes on;
- the scenario: two proxies, writers, counters, readers (each through the
  other proxy than the writes) and GENKEY callers on both, while a server
  is added (SIGHUP on one, SHARD.RELOAD on the other a moment later) and,
  while those keys move, one of the original servers is removed and
  another added, after a bad file was refused under the same load; one
  proxy is killed (-9) and restarted mid-migration. Then,
  on the backends directly: every key lives exactly on its final owner
  with its latest acknowledged value (or a later unacknowledged one) and
  a sane TTL, no stray copy is left anywhere, the removed server is
  empty, counters are within their acknowledged bounds, readers never saw
  an older value after a newer one was acknowledged, and no id repeats;
- the destination stalls (SIGSTOP 2 s) while keys move to it: requests
  for those keys wait or get -TRYAGAIN, none is lost, and the migration
  finishes once it is back; a transaction whose moving key cannot move
  then is discarded whole at EXEC, not half committed.

Run: /usr/bin/python3 tests/integration/test_reshard.py --shardis build/shardis
"""
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import redis

import harness
from harness import Fail, RedisServer, Shardis, check, expect, expect_eq, until

HOST = "127.0.0.1"


def write_servers(px, servers, extra=""):
    """Rewrite px's config with this server list (names follow the server)."""
    text = open(px.conf).read()
    head = text[:text.index("  servers:")]
    lines = ["  servers:"] + ["    - %s:%d:1 %s" % (HOST, s.port, s.name) for s in servers]
    with open(px.conf, "w") as f:
        f.write(head + extra + "\n".join(lines) + "\n")


def status(px):
    text = px.client.execute_command("SHARD.MIGRATION", "STATUS").decode()
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


def wait_stable(px, timeout=30.0, servers=()):
    """Until STATUS says stable and the record is gone from servers."""
    until("the migration finished", lambda: status(px)["state"] == "stable", timeout)
    until("the migration record deleted",
          lambda: not any(s.client.exists("__shardis:ctl:alpha") for s in servers))


def owners(px, keys):
    """key -> server name, by SHARD.WHEREIS on the proxy's current ring."""
    pipe = px.client.pipeline(transaction=False)
    for k in keys:
        pipe.execute_command("SHARD.WHEREIS", k)
    return {k: n.decode() for k, n in zip(keys, pipe.execute())}


def routed(px, cmd):
    """Wait until a client of px has had cmd routed (CLIENT LIST's cmd=):
    what it sent before is routed too, so a reload comes after it, not,
    as the loop may read the two connections in either order, before."""
    until("the client's %s routed" % cmd, lambda: any(
        x.get("cmd") == cmd for x in px.client.client_list()))


def reload(px, epoch):
    """SHARD.RELOAD, and wait until px has switched (epoch reached): the
    proxies in front of the servers agree first, which takes a round or two."""
    summary = px.client.execute_command("SHARD.RELOAD").decode()
    until("the reload switched (epoch %d)" % epoch, lambda: int(status(px)["epoch"]) >= epoch)
    return summary


def reload_soon(px):
    """SHARD.RELOAD, again while the proxies are still switching to the last one."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return px.client.execute_command("SHARD.RELOAD").decode()
        except redis.ResponseError as e:
            if "switching" not in str(e) or time.monotonic() > deadline:
                raise Fail("%s: %s; status %r" % (px.name, e, status(px)))
            time.sleep(0.05)


def all_keys(server):
    return set(server.client.scan_iter(count=1000))


def check_placement(px, servers, expect_keys=None):
    """Every key on any server lives only on its owner; expect_keys all exist."""
    found = {}
    for s in servers:
        for k in all_keys(s):
            expect(k not in found, "%r is on both %s and %s" % (k, found.get(k), s.name))
            found[k] = s.name
    own = owners(px, list(found))
    stray = [(k, found[k], own[k]) for k in found if found[k] != own[k]]
    expect(not stray, "%d keys not on their owner, e.g. %r" % (len(stray), stray[:3]))
    if expect_keys is not None:
        missing = [k for k in expect_keys if k not in found]
        expect(not missing, "%d keys lost, e.g. %r" % (len(missing), missing[:3]))
    return found


def preload(c, n, ttl_every=10):
    pipe = c.pipeline(transaction=False)
    for i in range(n):
        pipe.set("s:%d" % i, "v%d" % i)
        if i % ttl_every == 0:
            pipe.pexpire("s:%d" % i, 600000)
        if i % 20 == 0:
            pipe.hset("h:%d" % i, mapping={"a": i, "b": "x"})
            pipe.rpush("l:%d" % i, i, i + 1)
            pipe.sadd("t:%d" % i, i)
            pipe.zadd("z:%d" % i, {"m": i})
        if i % 2000 == 0:
            pipe.execute()
    pipe.execute()


def t_refusals(rs):
    px = Shardis("refuse", rs[:2], admin_commands="true")
    good = open(px.conf).read()
    nodes = px.client.execute_command("SHARD.NODES")

    def refused(text, want):
        with open(px.conf, "w") as f:
            f.write(text)
        try:
            px.client.execute_command("SHARD.RELOAD")
        except redis.ResponseError as e:
            expect(re.search(want, str(e)), "error %r lacks %r" % (str(e), want))
        else:
            raise Fail("a reload of a file that should be refused (%s) was applied" % want)
        expect_eq(px.client.execute_command("SHARD.NODES"), nodes, "servers after refusal")

    refused(good.replace("  servers:", "  servers: [\n"), r"refuse\.yml:\d+:\d+: ")
    refused(good.replace("listen: %s:%d" % (HOST, px.port), "listen: %s:%d" %
                         (HOST, harness.free_port())), "listen address changed")
    refused(good.replace("  servers:", "  server_connections: 2\n  servers:"),
            "server_connections changed")
    refused(good.replace("  servers:", "  hash: md5\n  servers:"), "hash")
    # SIGHUP with a bad file: logged, nothing changes, it goes on serving.
    with open(px.conf, "w") as f:
        f.write(good.replace("  servers:", "  servers: [\n"))
    os.kill(px.pid, signal.SIGHUP)
    until("the refusal is logged",
          lambda: "reload refused" in open(px.log, errors="replace").read())
    expect_eq(px.client.set("after", "1"), True, "SET after a refused SIGHUP")
    with open(px.conf, "w") as f:
        f.write(good)
    summary = px.client.execute_command("SHARD.RELOAD").decode()
    expect("keys_moving_pct:0.00" in summary, "unchanged file summary: %r" % summary)
    # Pool options apply to what comes next: a client limit to new clients.
    with open(px.conf, "w") as f:
        f.write(good.replace("  servers:", "  client_connections: 1\n  servers:"))
    px.client.execute_command("SHARD.RELOAD")
    expect_eq(harness.one_reply(px.port, harness.enc("PING")),
              b"-ERR max number of clients reached\r\n", "a new client over the new limit")
    expect_eq(px.client.ping(), True, "the client that was there")
    with open(px.conf, "w") as f:
        f.write(good)
    px.client.execute_command("SHARD.RELOAD")
    expect_eq(harness.one_reply(px.port, harness.enc("PING")), b"+PONG\r\n",
              "a new client once the limit is gone")

    plain = Shardis("plain", rs[:2])
    try:
        plain.client.execute_command("SHARD.RELOAD")
        raise Fail("SHARD.RELOAD without admin_commands was applied")
    except redis.ResponseError as e:
        expect("admin command" in str(e), "error %r" % str(e))
    harness.t_exit_clean(px)
    harness.t_exit_clean(plain)


def backend_ids(server):
    """The ids of the connections other than ours (shardis's) on server."""
    me = server.client.client_id()
    return sorted(c["id"] for c in server.client.client_list() if int(c["id"]) != me)


def t_add_server(rs):
    px = Shardis("add", rs[:2], admin_commands="true", preconnect="true")
    c = px.client
    preload(c, 20000)
    keys = [k for s in rs[:2] for k in all_keys(s)]
    raw = harness.Raw(px.port)
    expect_eq(raw.cmd("PING"), b"+PONG\r\n", "raw PING before")
    before = backend_ids(rs[0])
    tags = ["{t%d}" % i for i in range(60)]
    for t in tags:                          # same-tag keys for a multi-key command
        c.rpush(t + "src", "a", "b")
    write_servers(px, rs[:3])
    summary = reload(px, 1)
    for want in ("servers:3", "servers_added:1", "servers_removed:0", "servers_reweighted:0"):
        expect(want in summary, "summary %r lacks %s" % (summary, want))
    pct = float(re.search(r"keys_moving_pct:([\d.]+)", summary).group(1))
    expect(20 < pct < 45, "share moving %.2f%% for a third server" % pct)
    # Every value at once, moving or not.
    pipe = c.pipeline(transaction=False)
    for i in range(0, 20000, 3):
        pipe.get("s:%d" % i)
    got = pipe.execute()
    bad = [i * 3 for i, v in enumerate(got) if v != b"v%d" % (i * 3)]
    expect(not bad, "%d values wrong right after the reload, e.g. s:%r" % (len(bad), bad[:3]))
    # Split commands over moving keys: each fragment's keys move first.
    names = ["s:%d" % i for i in range(1, 20000, 37)]
    expect_eq(c.mget(names), [b"v%d" % int(n[2:]) for n in names], "MGET over moving keys")
    expect_eq(c.mset({n: "w" + n for n in names}), True, "MSET over moving keys")
    expect_eq(c.mget(names), [("w" + n).encode() for n in names], "MGET after MSET")
    expect_eq(c.delete(*names[:100]), 100, "DEL over moving keys")
    # Same-tag multi-key commands: every key moves with one MIGRATE ... KEYS.
    for t in tags:
        expect_eq(c.lmove(t + "src", t + "dst", "LEFT", "RIGHT"), b"a", "LMOVE " + t)
    until("progress in the log", lambda: "pool 'alpha': migration moving:" in
          open(px.log, errors="replace").read())
    expect_eq(raw.cmd("PING"), b"+PONG\r\n", "raw PING on the same socket after")
    wait_stable(px, servers=rs)
    # (With several loops, each loop other than 0 has made its own
    # connection for its clients' MIGRATEs on touch: one more each.)
    loops = int(px.client.info("shardis").get("loops", 1))
    until("shardis keeps its connections to a server that stays (the mover's is closed "
          "once it is done): %r" % before, lambda: set(before) <= set(backend_ids(rs[0])) and
          len(backend_ids(rs[0])) <= len(before) + loops - 1)
    deleted = {n.encode() for n in names[:100]}
    keys = [k for k in keys if k not in deleted]
    check_placement(px, rs[:3], keys)
    for t in tags:
        own = owners(px, [t + "src"])[t + "src"]
        direct = next(s for s in rs if s.name == own).client
        expect_eq((direct.lrange(t + "src", 0, -1), direct.lrange(t + "dst", 0, -1)),
                  ([b"b"], [b"a"]), "%s's lists on their owner" % t)
    rewritten = {n.encode() for n in names}     # (MSET dropped their TTLs)
    moved = [k for k in all_keys(rs[2]) if k.startswith(b"s:") and int(k[2:]) % 10 == 0 and
             k not in rewritten]
    expect(moved, "no TTL key moved to the new server")
    for k in moved[:50]:
        ttl = rs[2].client.pttl(k)
        expect(0 < ttl <= 600000, "PTTL of moved %r is %r" % (k, ttl))
    expect(rs[2].client.hgetall("h:0") == {b"a": b"0", b"b": b"x"} or
           rs[0].client.exists("h:0") or rs[1].client.exists("h:0"), "h:0 lost")
    # Remove the first server (SIGHUP this time): its keys move, then its
    # connections close.
    write_servers(px, rs[1:3])
    os.kill(px.pid, signal.SIGHUP)
    until("the reload is applied", lambda: status(px)["epoch"] == "2")
    wait_stable(px, servers=rs)
    check_placement(px, rs[:3], keys)
    expect_eq(rs[0].client.dbsize(), 0, "keys left on the removed server")
    until("shardis closed its connections to the removed server",
          lambda: backend_ids(rs[0]) == [])
    raw.close()
    harness.t_exit_clean(px)


def t_transaction(rs):
    px = Shardis("tx", rs[:2], admin_commands="true")
    c = px.client
    tx = c.pipeline(transaction=True)
    conn = px.client.connection_pool.get_connection("MULTI")
    conn.send_command("MULTI")
    expect_eq(conn.read_response(), b"OK", "MULTI")
    conn.send_command("SET", "{t}a", "1")
    expect_eq(conn.read_response(), b"QUEUED", "SET queued")
    write_servers(px, rs[:3])
    reload(px, 1)
    conn.send_command("EXEC")
    try:
        conn.read_response()
        raise Fail("EXEC of a transaction begun before a reload was not refused")
    except redis.ResponseError as e:
        expect(str(e).startswith("TRYAGAIN"), "EXEC error %r" % str(e))
    expect_eq(c.get("{t}a"), None, "the refused transaction's write")
    px.client.connection_pool.release(conn)
    tx.set("{t}a", "2")
    tx.incr("{t}b")
    expect_eq(tx.execute(), [True, 1], "a transaction after the reload")
    expect_eq(c.get("{t}a"), b"2", "its write")
    wait_stable(px, servers=rs)
    harness.t_exit_clean(px)


def locate(conf, keys):
    """key -> owner name on the ring of a config file (shardis locate)."""
    out = subprocess.run([harness.ARGS.shardis, "locate", "-c", conf],
                         input="\n".join(keys) + "\n", capture_output=True, text=True,
                         check=True).stdout
    return dict(line.split("\t") for line in out.splitlines())


def t_blocked(rs):
    """A BLPOP waiting for a key that moves goes on waiting on its new owner
    (CLIENT UNBLOCK there, sent again here) for the next push, and one with
    a timeout keeps what was left of it."""
    px = Shardis("blocked", rs[:3], admin_commands="true")
    keys = ["q:%d" % i for i in range(200)]
    before = owners(px, keys)
    write_servers(px, rs[:4])
    after = locate(px.conf, keys)
    moving = [k for k in keys if before[k] != after[k]][:2]
    waiter = redis.Redis(HOST, px.port, socket_timeout=10)
    timed = redis.Redis(HOST, px.port, socket_timeout=10)
    listener = harness.Raw(px.port)     # a subscriber to a channel whose owner changes
    expect_eq(listener.cmd("SUBSCRIBE", moving[0]), harness.array(
        [harness.bulk(b"subscribe"), harness.bulk(moving[0].encode()), b":1\r\n"]),
        "SUBSCRIBE")
    got = {}
    t = threading.Thread(target=lambda: got.update(r=reply_of(waiter.blpop, moving[0], 0)))
    t0 = time.monotonic()
    t2 = threading.Thread(target=lambda: got.update(
        t=(reply_of(timed.blpop, moving[1], 2), time.monotonic() - t0)))
    t.start()
    t2.start()
    until("both BLPOPs wait", lambda: px.client.info("clients")["blocked_clients"] == 2)
    reload(px, 1)
    time.sleep(0.5)
    expect(t.is_alive(), "the BLPOP did not go on waiting: %r" % got.get("r"))
    expect_eq(sum(s.client.info("clients")["blocked_clients"] for s in rs[:4]), 2,
              "clients blocked on the servers after the reload")
    px.client.rpush(moving[0], "x")
    t.join(5)
    expect_eq(got.get("r"), (moving[0].encode(), b"x"), "the BLPOP, after a push")
    t2.join(5)
    expect(got.get("t") is not None and got["t"][0] is None and 1.7 < got["t"][1] < 2.8,
           "BLPOP with a 2 s timeout across the reload: %r" % (got.get("t"),))
    expect_eq(px.client.publish(moving[0], "hello"), 1, "PUBLISH to the moved channel")
    expect_eq(listener.reply(), harness.array([harness.bulk(b"message"), harness.bulk(
        moving[0].encode()), harness.bulk(b"hello")]), "the subscriber's message after the reload")
    listener.close()
    wait_stable(px, servers=rs)
    check_placement(px, rs[:4])
    harness.t_exit_clean(px)


def reply_of(fn, *args):
    try:
        return fn(*args)
    except redis.ResponseError as e:
        return str(e)


def t_bigkeys(rs):
    """Keys over bigkey_bytes (MEMORY USAGE) move last, one at a time, whole."""
    px = Shardis("big", rs[:3], admin_commands="true", bigkey_bytes=200000)
    c = px.client
    preload(c, 3000, ttl_every=1000000)
    bigs = ["big:%d" % i for i in range(12)]
    for k in bigs:
        pipe = c.pipeline(transaction=False)
        for j in range(0, 20000, 2000):
            pipe.hset(k, mapping={"f%d" % f: "v" * 20 for f in range(j, j + 2000)})
        pipe.execute()
    keys = [k for s in rs[:3] for k in all_keys(s)]
    before = owners(px, bigs)
    write_servers(px, rs[:4])
    reload(px, 1)
    wait_stable(px, servers=rs)
    after = owners(px, bigs)
    moved = [k for k in bigs if before[k] != after[k]]
    expect(moved, "no big key had to move")
    until("the big keys moved last are logged",
          lambda: "big key" in open(px.log, errors="replace").read())
    check_placement(px, rs[:4], keys)
    direct = {s.name: s.client for s in rs}
    for k in moved:
        expect_eq(direct[after[k]].hlen(k), 20000, "%s on its new owner" % k)
    harness.t_exit_clean(px)
    return "%d big keys moved" % len(moved)


def t_pause_and_pending(rs):
    px = Shardis("pause", rs[:3], admin_commands="true", migration_rate=500)
    c = px.client
    preload(c, 6000, ttl_every=1000000)
    keys = [k for s in rs[:3] for k in all_keys(s)]
    write_servers(px, rs[:4])
    reload(px, 1)
    c.execute_command("SHARD.MIGRATION", "PAUSE")
    st = status(px)
    expect_eq(st["state"], "paused", "state after PAUSE")
    expect("eta_s" in st and re.search(r"walked=[01]\.\d\d,eta_s=", st["source_0"]),
           "progress and ETA in STATUS: %r" % st)
    time.sleep(0.3)
    moved = status(px)["keys_moved"]
    time.sleep(0.5)
    expect_eq(status(px)["keys_moved"], moved, "keys moved by a paused mover")
    # On touch they still move: read every key.
    pipe = c.pipeline(transaction=False)
    for i in range(0, 6000, 5):
        pipe.get("s:%d" % i)
    expect(all(v == b"v%d" % (i * 5) for i, v in enumerate(pipe.execute())),
           "values while paused")
    write_servers(px, rs[1:5])
    summary = reload(px, 2)
    expect("servers_removed:1" in summary, "second reload's summary %r" % summary)
    expect_eq(status(px)["pending_rings"], "2", "rings pending")
    write_servers(px, rs[2:5])
    try:
        c.execute_command("SHARD.RELOAD")
        raise Fail("a third reload while two rings are pending was applied")
    except redis.ResponseError as e:
        expect("2 pending rings" in str(e), "error %r" % str(e))
    write_servers(px, rs[1:5])
    c.execute_command("SHARD.MIGRATION", "RESUME")
    wait_stable(px, timeout=40, servers=rs)
    check_placement(px, rs[:5], keys)
    expect_eq(rs[0].client.dbsize(), 0, "keys left on the removed server")
    harness.t_exit_clean(px)


def t_restart(rs):
    """kill -9 mid-migration: the restarted proxy routes by the record on the
    backends and finishes; a restart on the old file moves the keys back."""
    px = Shardis("restart", rs[:3], admin_commands="true", migration_rate=300)
    c = px.client
    preload(c, 6000, ttl_every=1000000)
    keys = [k for s in rs[:3] for k in all_keys(s)]
    old = open(px.conf).read()
    write_servers(px, rs[:4])
    c.execute_command("SHARD.RELOAD")
    until("some keys moved", lambda: int(status(px).get("keys_moved", 0)) > 100)
    rec = rs[0].client.get("__shardis:ctl:alpha")
    expect(rec is not None and rec.startswith(b"shardis-migration 1\nepoch 1\n"),
           "the record on a backend: %r" % (rec or b"")[:60])
    for cmd in (("GET", "__shardis:ctl:alpha"), ("DEL", "__shardis:ctl:alpha"),
                ("MGET", "a", "__shardis:x")):
        try:
            c.execute_command(*cmd)
            raise Fail("%s of a __shardis: key was not refused" % cmd[0])
        except redis.ResponseError as e:
            expect("shardis's own" in str(e), "error %r" % str(e))
    px.restart(kill=True)
    st = status(px)
    expect(st["state"] in ("moving", "draining") and st["epoch"] == "1",
           "after kill -9 and restart: %r" % st)
    pipe = px.client.pipeline(transaction=False)
    for i in range(6000):
        pipe.get("s:%d" % i)
    expect(all(v == b"v%d" % i for i, v in enumerate(pipe.execute())),
           "values right after the restart")
    # The rate is raised by the file; the servers stay as recorded.
    text = open(px.conf).read().replace("migration_rate: 300", "migration_rate: 0")
    with open(px.conf, "w") as f:
        f.write(text)
    px.client.execute_command("SHARD.RELOAD")
    wait_stable(px, servers=rs)
    check_placement(px, rs[:4], keys)
    for s in rs[:4]:
        expect_eq(s.client.get("__shardis:ctl:alpha"), None, "record left on " + s.name)
    # Again, and this time restart on the old file, which does not name the
    # server keys are moving to: the record is not followed that far (it
    # could have been planted), nor does it stop the start: shardis serves
    # by the old file, moves nothing, and says why in the log and in INFO.
    # Restarted on the file the record names, it goes on, and the old file
    # is then a reload request that moves the keys back.
    write_servers(px, rs[:3] + [rs[4]])
    text = open(px.conf).read().replace("migration_rate: 0", "migration_rate: 300")
    with open(px.conf, "w") as f:
        f.write(text)
    px.client.execute_command("SHARD.RELOAD")
    until("some keys moved", lambda: int(status(px).get("keys_moved", 0)) > 100)
    recorded = open(px.conf).read()
    with open(px.conf, "w") as f:
        f.write(old)
    px.restart(kill=True)
    want = ("moves keys to %s:%d that neither the config file nor the record's earlier "
            "configs name" % (HOST, rs[4].port))
    info = px.client.info("shardis")
    expect(all(want in info.get("migration_record_ignored_0_%d" % i, {}).get("reason", "")
               for i in range(3)) and info["pool_0"]["servers"] == 3,
           "INFO after a start on the old file: %r" % info)
    st = status(px)
    expect(st["state"] == "stable" and st["epoch"] == "0", "STATUS on the old file: %r" % st)
    expect(any(" W " in l and want in l for l in open(px.log)), "no warning: %s" % want)
    with open(px.conf, "w") as f:
        f.write(recorded)
    px.restart(kill=True)
    with open(px.conf, "w") as f:
        f.write(old)
    px.client.execute_command("SHARD.RELOAD")
    until("the file is taken as a reload: rings pending (recorded, then the file)",
          lambda: status(px).get("pending_rings") == "2")
    pipe = px.client.pipeline(transaction=False)
    for i in range(6000):
        pipe.get("s:%d" % i)
    expect(all(v == b"v%d" % i for i, v in enumerate(pipe.execute())),
           "values after a restart on the old file")
    with open(px.conf, "w") as f:
        f.write(old.replace("migration_rate: 300", "migration_rate: 0"))
    px.client.execute_command("SHARD.RELOAD")       # the rate only: taken mid-migration
    wait_stable(px, servers=rs)
    check_placement(px, rs, keys)
    expect_eq(rs[3].client.dbsize() + rs[4].client.dbsize(), 0,
              "keys on the servers the old file does not list")
    harness.t_exit_clean(px)


# ---- the scenario ---------------------------------------------------------------------

class Model:
    """What the clients were told: per key, acknowledged and unacknowledged values."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}         # key -> seq of the last acknowledged SET
        self.maybe = {}         # key -> seqs sent but not acknowledged, after acked
        self.count = {}         # counter -> (acked increments, unacknowledged ones)
        self.ids = []
        self.errors = []
        self.tryagain = 0


def writer(px, m, wid, keys, stop):
    c = redis.Redis(HOST, px.port, socket_timeout=10)
    seq = 0
    while not stop.is_set():
        k = random.choice(keys)
        seq += 1
        val = "w%d:%d" % (wid, seq)
        try:
            c.set(k, val)
        except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError) as e:
            with m.lock:
                m.maybe.setdefault(k, set()).add(val)
                if str(e).startswith("TRYAGAIN"):
                    m.tryagain += 1
                elif isinstance(e, redis.ResponseError):
                    m.errors.append("SET %s: %s" % (k, e))
            if not isinstance(e, redis.ResponseError):
                time.sleep(0.05)        # its proxy restarts
            continue
        with m.lock:
            m.acked[k] = val
            m.maybe.pop(k, None)


def counter(px, m, keys, stop):
    c = redis.Redis(HOST, px.port, socket_timeout=10)
    while not stop.is_set():
        k = random.choice(keys)
        try:
            c.incr(k)
            ok = True
        except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError) as e:
            ok = False
            if isinstance(e, redis.ResponseError) and not str(e).startswith("TRYAGAIN"):
                m.errors.append("INCR %s: %s" % (k, e))
            if not isinstance(e, redis.ResponseError):
                time.sleep(0.05)
        with m.lock:
            a, u = m.count.get(k, (0, 0))
            m.count[k] = (a + 1, u) if ok else (a, u + 1)


def reader(px, m, keys, stop):
    """A read never returns an older value than one acknowledged before it began."""
    c = redis.Redis(HOST, px.port, socket_timeout=10)
    while not stop.is_set():
        k = random.choice(keys)
        with m.lock:
            floor = m.acked.get(k)
        try:
            v = c.get(k)
        except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError) as e:
            if isinstance(e, redis.ResponseError) and not str(e).startswith("TRYAGAIN"):
                m.errors.append("GET %s: %s" % (k, e))
            if not isinstance(e, redis.ResponseError):
                time.sleep(0.05)
            continue
        if floor is None:
            continue
        if v is None:
            m.errors.append("GET %s: nil after %s was acknowledged" % (k, floor))
            continue
        fw, fs = floor.split(":")
        vw, vs = v.decode().split(":")
        if vw != fw or int(vs) < int(fs):
            m.errors.append("GET %s: %s after %s was acknowledged" % (k, v, floor))


def minter(px, m, stop):
    """Ids of one logical shard ({LL}) come in ascending order (time, then
    sequence: TTTTTTT{LL}SSSYY), across the reshard, the moves of its
    $equence{LL} and a proxy's restart."""
    c = redis.Redis(HOST, px.port, socket_timeout=10)
    last = {}
    while not stop.is_set():
        try:
            got = c.execute_command("SHARD.GENKEY", "COUNT", random.randint(1, 20))
        except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError) as e:
            if isinstance(e, redis.ResponseError) and not str(e).startswith("TRYAGAIN"):
                m.errors.append("GENKEY: %s" % e)
            if not isinstance(e, redis.ResponseError):
                time.sleep(0.05)
            continue
        for i in got:
            shard, order = i[7:11], i[:7] + i[11:14]
            if shard in last and order <= last[shard]:
                m.errors.append("GENKEY: %r after %r%r" % (i, last[shard], shard))
            last[shard] = order
        with m.lock:
            m.ids.extend(got)


def t_scenario(rs):
    a, b, c_, d, e = rs
    opts = dict(admin_commands="true", migration_rate=20000, idgen="{types: {user: 1}}")
    p1 = Shardis("scene1", [a, b, c_], **opts)
    p2 = Shardis("scene2", [a, b, c_], **opts)
    c = p1.client
    preload(c, 42000)          # with the hashes, lists, sets and zsets: 50,400 keys
    for i in range(3):      # a few large hashes
        pipe = c.pipeline(transaction=False)
        for j in range(0, 20000, 1000):
            pipe.hset("big:%d" % i, mapping={"f%d" % f: f for f in range(j, j + 1000)})
        pipe.execute()
    preloaded = [k for s in (a, b, c_) for k in all_keys(s)]
    m = Model()
    stop = threading.Event()
    wkeys = [["s:%d" % i for i in range(w, 42000, 4)][:2000] for w in range(4)]
    for w in range(4):          # the writers own their keys: values start from theirs
        pipe = c.pipeline(transaction=False)
        for k in wkeys[w]:
            pipe.set(k, "w%d:0" % w)
        pipe.execute()
        for k in wkeys[w]:
            m.acked[k] = "w%d:0" % w
    ckeys = ["n:%d" % i for i in range(50)]
    # Writers on both proxies; each reader reads through the other proxy
    # than the one its keys are written through.
    px_of = [p1, p1, p2, p2]
    threads = [threading.Thread(target=writer, args=(px_of[w], m, w, wkeys[w], stop))
               for w in range(4)]
    threads += [threading.Thread(target=counter, args=(px, m, ckeys, stop)) for px in (p1, p2)]
    threads += [threading.Thread(target=reader, args=(p2, m, wkeys[0], stop)),
                threading.Thread(target=reader, args=(p1, m, wkeys[2], stop))]
    threads += [threading.Thread(target=minter, args=(px, m, stop)) for px in (p1, p2)]
    for t in threads:
        t.start()
    try:
        until("each proxy sees both", lambda: all(
            status(px).get("group_proxies") == "2" for px in (p1, p2)))
        time.sleep(0.3)
        good = open(p1.conf).read()
        with open(p1.conf, "w") as f:
            f.write(good + "  - nonsense\n")
        os.kill(p1.pid, signal.SIGHUP)          # a bad file under load: refused
        until("the refusal is logged",
              lambda: "reload refused" in open(p1.log, errors="replace").read())
        for px in (p1, p2):
            write_servers(px, [a, b, c_, d])
        os.kill(p1.pid, signal.SIGHUP)          # p1 first: it waits for p2
        until("p1 prepared", lambda: status(p1).get("group_phase") == "prepared")
        time.sleep(0.5)
        expect_eq(status(p1)["epoch"], "0", "p1's epoch while p2 has not reloaded")
        expect_eq(d.client.dbsize(), 0, "keys on the new server before every proxy reloaded")
        p2.client.execute_command("SHARD.RELOAD")
        until("both switched", lambda: all(status(px)["epoch"] == "1" for px in (p1, p2)))
        until("keys are moving", lambda: sum(int(status(px).get("keys_moved", 0))
                                             for px in (p1, p2)) > 2000, 20)
        for px in (p1, p2):                     # b leaves, e joins, while keys move
            write_servers(px, [a, c_, d, e])
        summary = reload_soon(p1)
        expect("servers_removed:1" in summary and "servers_added:1" in summary,
               "second reload's summary %r" % summary)
        reload_soon(p2)
        until("both switched again", lambda: all(
            status(px)["epoch"] == "2" and status(px)["group_phase"] == "steady"
            for px in (p1, p2)), 20)
        # (The group says steady in a reply's callback; keys move from the
        # migration's next tick, 10 ms on.)
        until("p2 moving before it is killed", lambda: status(p2)["state"] == "moving", 2)
        p2.restart(kill=True)                   # kill -9 one mid-migration: it goes on
        expect_eq(status(p2)["epoch"], "2", "p2's epoch after its restart")
        # It took the record p1 wrote, but listens (and says it does) where
        # its own file says, so reloads of its file are not refused.
        info = str(p2.client.info("shardis"))
        expect("%s:%d" % (HOST, p2.port) in info and "%s:%d" % (HOST, p1.port) not in info,
               "p2's listen in INFO: %s" % info)
        for px in (p1, p2):
            wait_stable(px, timeout=40, servers=rs)
        time.sleep(0.5)
        try:
            p2.client.execute_command("SHARD.RELOAD")
        except redis.ResponseError as e:
            raise Fail("p2's reload after its restart refused: %s" % e)
    finally:
        stop.set()
        for t in threads:
            t.join()
    expect(not m.errors, "%d client errors, e.g. %s" % (len(m.errors), m.errors[:3]))
    found = check_placement(p1, rs, preloaded + [k.encode() for k in m.acked])
    expect_eq(b.client.dbsize(), 0, "keys left on the removed server")
    # Latest acknowledged value, or one sent after it whose reply was an error.
    direct = {s.name: s.client for s in rs}
    wrong = []
    for k, v in m.acked.items():
        got = direct[found[k.encode()]].get(k).decode()
        if got != v and got not in m.maybe.get(k, ()):
            wrong.append((k, v, got))
    expect(not wrong, "%d keys lost their acknowledged value, e.g. %r" % (len(wrong), wrong[:3]))
    for k, (acked, unacked) in m.count.items():
        got = int(direct[found[k.encode()]].get(k))
        expect(acked <= got <= acked + unacked, "counter %s: %d, acked %d (+%d)" %
               (k, got, acked, unacked))
    ttl = [k for k in preloaded if k.startswith(b"s:") and int(k[2:]) % 10 == 0 and
           k.decode() not in m.acked]
    for k in ttl[:200]:
        t = direct[found[k]].pttl(k)
        expect(0 < t <= 600000, "PTTL of %r is %r" % (k, t))
    for i in range(3):
        expect_eq(direct[found[b"big:%d" % i]].hlen("big:%d" % i), 20000, "big:%d" % i)
    expect_eq(len(set(m.ids)), len(m.ids), "distinct ids")
    expect(len(m.ids) > 100, "ids minted: %d" % len(m.ids))
    print("    scenario: %d writes acked, %d TRYAGAIN, %d ids" %
          (len(m.acked), m.tryagain, len(m.ids)))
    harness.t_exit_clean(p1)
    harness.t_exit_clean(p2)


def t_group(rs):
    """Two proxies: a reload switches only when both have the same servers;
    a proxy with other servers cannot start; one that dies leaves."""
    p1 = Shardis("group1", rs[:3], admin_commands="true")
    p2 = Shardis("group2", rs[:3], admin_commands="true")
    preload(p1.client, 3000, ttl_every=1000000)
    keys = [k for s in rs[:3] for k in all_keys(s)]
    until("each proxy sees both", lambda: all(
        status(px).get("group_proxies") == "2" for px in (p1, p2)))
    write_servers(p1, rs[:4])
    p1.client.execute_command("SHARD.RELOAD")
    time.sleep(0.5)
    st = status(p1)
    expect(st["epoch"] == "0" and st["group_phase"] == "prepared" and
           "not reloaded" in st.get("group_waiting_for", ""), "p1 alone reloaded: %r" % st)
    expect_eq(rs[3].client.dbsize(), 0, "keys moved before p2 reloaded")
    # p2 with other servers (a weight differs): both wait, nothing moves.
    text = open(p1.conf).read()
    with open(p2.conf, "w") as f:
        f.write(text.replace("redis4", "redis4").replace(":1 redis4", ":2 redis4")
                .replace("listen: %s:%d" % (HOST, p1.port), "listen: %s:%d" % (HOST, p2.port)))
    p2.client.execute_command("SHARD.RELOAD")
    time.sleep(0.5)
    for px in (p1, p2):
        st = status(px)
        expect(st["epoch"] == "0" and "other servers" in st.get("group_waiting_for", ""),
               "files disagree: %r" % st)
    until("the disagreement is logged", lambda: "(reloaded with other servers)" in
          open(p1.log, errors="replace").read())
    expect_eq(rs[3].client.dbsize(), 0, "keys moved while the files disagree")
    # A third proxy on the old servers may not start now.
    p3 = Shardis.__new__(Shardis)
    p3conf = os.path.join(harness.TMP, "group3.yml")
    with open(p3conf, "w") as f:
        f.write(open(p1.conf).read().replace(":1 redis4", ":2 redis4").replace(
            "listen: %s:%d" % (HOST, p1.port), "listen: %s:%d" % (HOST, harness.free_port())))
    out = subprocess.run([harness.ARGS.shardis, "-c", p3conf], capture_output=True, text=True,
                         timeout=10)
    expect(out.returncode != 0 and "routes this pool by other servers" in out.stderr,
           "a proxy with other servers started: %r" % out.stderr)
    # p2 gets p1's servers: both switch, keys move.
    with open(p2.conf, "w") as f:
        f.write(text.replace("listen: %s:%d" % (HOST, p1.port), "listen: %s:%d" %
                             (HOST, p2.port)))
    p2.client.execute_command("SHARD.RELOAD")
    until("both switched", lambda: all(status(px)["epoch"] == "1" for px in (p1, p2)))
    for px in (p1, p2):
        wait_stable(px, servers=rs)
    check_placement(p1, rs[:4], keys)
    # p1 alone reloads again; p2 dies: p1 goes on without it.
    write_servers(p1, rs[1:4])
    p1.client.execute_command("SHARD.RELOAD")
    time.sleep(0.5)
    expect_eq(status(p1)["epoch"], "1", "p1's epoch while p2 is in the group")
    p2.proc.kill()
    p2.proc.wait()
    harness.PROCS.remove(p2.proc)
    until("p1 switched once p2 left", lambda: status(p1)["epoch"] == "2")
    wait_stable(p1, servers=rs)
    check_placement(p1, rs[:4], keys)
    expect_eq(rs[0].client.dbsize(), 0, "keys left on the removed server")
    harness.t_exit_clean(p1)


def t_tx_migrate_fails(rs):
    """MULTI; SET a moving key; SET a key that stays; EXEC, pipelined, while
    the destination does not answer: the moving key cannot be moved, so the
    transaction is discarded whole (nothing is written)."""
    px = Shardis("txfail", rs[:3], admin_commands="true", migrate_timeout=200,
                 migrate_retries=0)
    preload(px.client, 20000, ttl_every=1000000)
    keys = ["x:%d" % i for i in range(400)]
    before = owners(px, keys)
    write_servers(px, rs[:4])
    after = locate(px.conf, keys)
    k1 = next(k for k in keys if before[k] != after[k] and after[k] == "redis4")
    # the pipeline's second key: on redis4 too, and no moving key (a fresh one)
    k2 = next(k for k in ["y:%d" % i for i in range(2000)]
              if locate(px.conf, [k])[k] == "redis4")
    px.client.set(k1, "old")
    reload(px, 1)
    px.client.execute_command("SHARD.MIGRATION", "PAUSE")   # k1 waits for a touch
    expect(rs[0].client.exists(k1) + rs[1].client.exists(k1) + rs[2].client.exists(k1) == 1,
           "%s still on its old owner" % k1)
    os.kill(rs[3].pid, signal.SIGSTOP)
    try:
        raw = harness.Raw(px.port, timeout=10)
        raw.send(harness.enc("MULTI") + harness.enc("SET", k1, "new") +
                 harness.enc("SET", k2, "new") + harness.enc("EXEC"))
        replies = [raw.reply() for _ in range(4)]
    finally:
        os.kill(rs[3].pid, signal.SIGCONT)
    expect_eq(replies[0], b"+OK\r\n", "MULTI")
    expect(replies[1].startswith(b"-TRYAGAIN"), "SET of the moving key: %r" % replies[1])
    expect(replies[3].startswith(b"-EXECABORT") or replies[3].startswith(b"-TRYAGAIN"),
           "EXEC: %r" % replies[3])
    expect_eq(px.client.get(k2), None, "the other key of the discarded transaction")
    px.client.execute_command("SHARD.MIGRATION", "RESUME")
    expect_eq(px.client.get(k1), b"old", "the moving key")
    wait_stable(px, servers=rs)
    raw.close()
    harness.t_exit_clean(px)


def t_stalled_destination(rs):
    a, b, c_, d = rs[:4]
    px = Shardis("stall", [a, b, c_], admin_commands="true", migrate_timeout=300,
                 migrate_retries=2, migration_rate=5000)
    c = px.client
    preload(c, 10000, ttl_every=1000000)
    keys = [k for s in (a, b, c_) for k in all_keys(s)]
    write_servers(px, [a, b, c_, d])
    c.execute_command("SHARD.RELOAD")
    os.kill(d.pid, signal.SIGSTOP)
    tryagain = ok = 0
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.0:
            i = random.randrange(10000)
            try:
                v = c.get("s:%d" % i)
                expect_eq(v, b"v%d" % i, "s:%d while the destination is stopped" % i)
                ok += 1
            except redis.ResponseError as e:
                expect(str(e).startswith("TRYAGAIN"), "error %r" % str(e))
                tryagain += 1
    finally:
        os.kill(d.pid, signal.SIGCONT)
    expect(tryagain > 0, "no request was told TRYAGAIN while the destination was stopped")
    wait_stable(px, timeout=40, servers=rs)
    check_placement(px, rs[:4], keys)
    pipe = c.pipeline(transaction=False)
    for i in range(10000):
        pipe.get("s:%d" % i)
    expect(all(v == b"v%d" % i for i, v in enumerate(pipe.execute())), "values after")
    print("    stalled: %d reads served, %d TRYAGAIN" % (ok, tryagain))
    harness.t_exit_clean(px)


def t_reset_after_broken_tx(rs):
    """A transaction broken by a reload (a command that waited across it got
    -TRYAGAIN), then RESET: the next transaction runs (RESET left the broken
    mark behind, and EXEC answered -EXECABORT)."""
    px = Shardis("txreset", rs[:2], admin_commands="true")
    k = px.keys_on("tr", 0)[0]
    c = harness.Raw(px.port, timeout=10)
    # WAIT holds the client's later requests: the SET waits across the reload.
    c.send(harness.enc("WAIT", "1", "2500") + harness.enc("MULTI") + harness.enc("SET", k, "1"))
    routed(px, "set")
    write_servers(px, rs[:3])
    reload(px, 1)
    expect_eq([c.reply() for _ in range(3)],
              [b":0\r\n", b"+OK\r\n", b"-TRYAGAIN resharding, retry\r\n"],
              "WAIT, MULTI, and the SET that waited across the reload")
    wait_stable(px, servers=rs[:3])
    c.send(b"".join(harness.enc(*a) for a in
                    [("RESET",), ("MULTI",), ("SET", k, "2"), ("EXEC",), ("GET", k)]))
    expect_eq([c.reply() for _ in range(5)],
              [b"+RESET\r\n", b"+OK\r\n", b"+QUEUED\r\n", b"*1\r\n+OK\r\n", b"$1\r\n2\r\n"],
              "RESET, then a transaction")
    c.close()
    harness.t_exit_clean(px)


def t_discard_across_reload(rs):
    """A DISCARD that waited across a reload still reaches its pin (no key
    chose that server): told -TRYAGAIN instead, it left the transaction open
    on a connection that went back to the spares."""
    px = Shardis("txdiscard", rs[:2], admin_commands="true")
    k = px.keys_on("td", 0)[0]
    c = harness.Raw(px.port, timeout=10)
    c.send(b"".join(harness.enc(*a) for a in
                    [("WAIT", "1", "2500"), ("MULTI",), ("SET", k, "1"), ("DISCARD",)]))
    routed(px, "discard")
    write_servers(px, rs[:3])
    reload(px, 1)
    expect_eq([c.reply() for _ in range(4)],
              [b":0\r\n", b"+OK\r\n", b"-TRYAGAIN resharding, retry\r\n", b"+OK\r\n"],
              "WAIT, MULTI, SET and DISCARD across the reload")
    wait_stable(px, servers=rs[:3])
    for s in rs[:3]:
        until("%s's connections out of MULTI" % s.name,
              lambda: all(x.get("multi") == "-1" for x in s.client.client_list()))
    c.close()
    harness.t_exit_clean(px)


class SlowForward(threading.Thread):
    """A loopback TCP forwarder to port that holds every reply for delay s:
    a server that answers slowly (its own thread; daemon, gone with the test)."""

    def __init__(self, port, delay):
        super().__init__(daemon=True)
        self.to, self.delay = port, delay
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def pipe(self, src, dst, delay):
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    break
                time.sleep(delay)
                dst.sendall(d)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def run(self):
        while True:
            c, _ = self.sock.accept()
            u = socket.create_connection((HOST, self.to))
            threading.Thread(target=self.pipe, args=(c, u, 0), daemon=True).start()
            threading.Thread(target=self.pipe, args=(u, c, self.delay), daemon=True).start()


def t_hup_during_start(rs):
    """A SIGHUP while the start reads the migration record from a slow
    server: the record is still read and taken up, and the SIGHUP is a
    reload once the loop runs (a handler that cut the read short skipped
    the record; no handler at all ended the process)."""
    slow = SlowForward(rs[0].port, 0.6)
    slow.start()
    slow.name = "redis1"
    px = Shardis("hup", [slow, rs[1]])
    text = open(px.conf, "rb").read()
    px.proc.terminate()
    px.proc.wait()
    harness.PROCS.remove(px.proc)
    rec = b"shardis-migration 1\nepoch 5\nconf %d\n%s\nprior %d\n%s\n" % (
        len(text), text, len(text), text)
    rs[0].client.set("__shardis:ctl:alpha", rec)
    px.proc = harness.start([harness.ARGS.shardis, "-c", px.conf, "-v", "6", "-o", px.log],
                            px.out)
    harness.wait_port(px.port, px.proc, "shardis hup", [px.out, px.log])
    time.sleep(0.2)                 # inside the record's read (0.6 s for its answer)
    os.kill(px.proc.pid, signal.SIGHUP)
    px.client = redis.Redis(HOST, px.port, socket_timeout=10)
    until("the record taken up", lambda: "a migration was under way" in open(px.log).read())
    until("the SIGHUP's reload", lambda: "reload applied" in open(px.log).read()
          or "reload refused" in open(px.log).read())
    expect_eq(px.proc.poll(), None, "shardis exited")
    rs[0].client.delete("__shardis:ctl:alpha")
    harness.t_exit_clean(px)


def t_databases(rs):
    """A reshard moves redis_db's keys only: a reload that changes the ring
    is refused while a server holds keys in another database; while keys
    move, requests for keys of another database (and SWAPDB) are told to
    retry, and run once the migration is over."""
    px = Shardis("dbmove", rs[:3], admin_commands="true", migration_rate=50)
    c0 = px.client
    c3 = redis.Redis.from_url("redis://%s:%d/3" % (HOST, px.port))
    keys = [k for i in range(3) for k in px.keys_on("dm:", i, 2)]
    for k in keys:
        c3.set(k, b"three")
    write_servers(px, rs[:4])
    # At once: the servers' last INFO was asked before the writes (unless
    # the background poll came in between, and saw them).
    err = harness.expect_refused(lambda: c0.execute_command("SHARD.RELOAD"), "cannot reshard",
                                 "a reload right after writes in database 3")
    expect("try again in a second" in err or "holds keys in database 3" in err, err)
    expect("db3" in c0.info("keyspace"), "INFO keyspace shows database 3")
    harness.expect_refused(lambda: c0.execute_command("SHARD.RELOAD"),
                           "holds keys in database 3", "a reload while database 3 holds keys")
    expect_eq(status(px)["state"], "stable", "no migration")
    expect_eq(c3.mget(keys), [b"three"] * len(keys), "database 3 as it was")
    c3.flushdb()
    expect("db3" not in c0.info("keyspace"), "INFO keyspace shows no database 3")
    preload(c0, 1500, ttl_every=1000000)
    reload(px, 1)
    c0.execute_command("SHARD.MIGRATION", "PAUSE")
    for what, fn in (("SET in database 3", lambda: c3.set(keys[0], b"x")),
                     ("SWAPDB", lambda: c0.swapdb(0, 3))):
        harness.expect_refused(fn, "TRYAGAIN resharding moves the keys of database 0 only",
                               what + " while keys move")
    expect_eq(c3.dbsize(), 0, "DBSIZE in database 3 answers")
    c0.execute_command("SHARD.MIGRATION", "RESUME")
    wait_stable(px, timeout=60, servers=rs)
    expect_eq(c3.set(keys[0], b"after"), True, "SET in database 3 once it is over")
    expect_eq(c3.get(keys[0]), b"after", "read back")
    c3.close()
    harness.t_exit_clean(px)


def t_databases_other(rs):
    """Keys in a database the pool's clients cannot SELECT (databases: 4,
    a key in database 5) are another pool's or application's: a reshard
    goes on."""
    redis.Redis(HOST, rs[0].port, db=5).set("theirs", "x")
    px = Shardis("dbone", rs[:3], admin_commands="true", databases="4")
    preload(px.client, 300, ttl_every=1000000)
    expect(px.client.info("keyspace").get("db0"), "INFO keyspace: the preloaded keys")
    write_servers(px, rs[:4])
    reload(px, 1)
    wait_stable(px, timeout=30, servers=rs)
    expect_eq(redis.Redis(HOST, rs[0].port, db=5).get("theirs"), b"x", "their key, left")
    harness.t_exit_clean(px)


def body():
    run = harness.run_with_servers

    run("reload refusals: bad file, listen, server_connections, hash, no admin",
        t_refusals, 2)
    run("reload keeps connections; add then remove a server: every key in place",
        t_add_server, 3)
    run("a transaction across a reload gets TRYAGAIN at EXEC", t_transaction, 3)
    run("RESET after a transaction a reload broke: the next one runs", t_reset_after_broken_tx,
        3)
    run("a DISCARD waiting across a reload ends its transaction on the server",
        t_discard_across_reload, 3)
    run("a BLPOP waiting for a key that moves goes on waiting on the new owner, its timeout "
        "kept; a SUBSCRIBE to its channel still gets messages", t_blocked, 4)
    run("big keys (MEMORY USAGE over bigkey_bytes) move last, whole", t_bigkeys, 4)
    run("PAUSE/RESUME; a second reload while keys move, a third refused",
        t_pause_and_pending, 5)
    run("kill -9 mid-migration: the record on the backends decides; restart on the old file",
        t_restart, 5)
    run("two proxies: a reload switches only when both have the same servers", t_group, 4)
    run("scenario: two proxies, writers, counters, readers, GENKEY through two reloads",
        t_scenario, 5)
    run("a destination stopped for 2 s: TRYAGAIN, nothing lost", t_stalled_destination, 4)
    run("a transaction whose moving key cannot move is discarded whole", t_tx_migrate_fails, 4)
    run("a SIGHUP while the start reads the record: read, then a reload", t_hup_during_start,
        2)
    run("databases: no reshard while another database holds keys, or right after writes "
        "there; its requests retry while keys move", t_databases, 4)
    run("databases: keys in a database the pool does not serve do not stop a reshard",
        t_databases_other, 4)


if __name__ == "__main__":
    sys.exit(harness.main(body))
