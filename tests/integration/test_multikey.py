#!/usr/bin/python3
"""test_multikey.py -- commands that span backends, against real redis-servers.

Every check runs the same commands on shardis (three backends) and on one
direct redis-server holding the same data, and compares the replies:
- whole-keyspace commands: DBSIZE (summed), KEYS (concatenated, admin
  only), RANDOMKEY, SCAN with one cursor over every backend (every key
  exactly once, MATCH/COUNT/TYPE passed through, bad cursors refused);
- commands for every server, merged by Redis's response policy: SCRIPT
  LOAD (the same SHA1), SCRIPT EXISTS (1 only where every server has it),
  SCRIPT FLUSH/KILL, FLUSHDB, CONFIG SET/GET, FUNCTION LOAD/LIST/DELETE;
- admin_commands: without it the admin ones are refused and change
  nothing; a backend that is down turns the merged reply into its error;
- transactions: MULTI/EXEC/DISCARD/WATCH replies byte for byte as a direct
  server's, keys on two servers give -CROSSSLOT then -EXECABORT and write
  nothing, a WATCHed key changed by another client aborts EXEC;
- blocking commands (BLPOP, BZPOPMIN, BLMOVE, BLMPOP, XREAD BLOCK) answer
  as a direct server's; 100 clients blocked in BLPOP do not stall 100
  others' GET/SET; a client that leaves mid-transaction or mid-BLPOP
  leaves no state, no connection, and takes no element pushed later;
- pub/sub: subscriber mode answers byte for byte as a direct server's;
  3,000 messages (up to 100 KB, RESP lookalikes inside) to channels on
  every server reach redis-py subscribers exactly once, whole and in
  order, as message and as pmessage; redis-cli subscribes too; a
  subscriber that leaves closes its connections, and one whose server
  fails is closed so that it subscribes again;
- WAIT, with a replica behind every server: counts the replicas that have
  every write made before it (they are there when it answers), the
  smallest count over the servers, as on one redis-server; others'
  commands go on while it waits.

Run: /usr/bin/python3 tests/integration/test_multikey.py --shardis build/shardis
"""
import os
import random
import sys
import time

import redis

import harness
from harness import Fail, RedisServer, Shardis, check, expect, expect_eq, until

LIB = "#!lua name=shardislib\nredis.register_function('hello', function() return 'hi' end)"


def fill(clients, n=600):
    """The same keys of several types in every client (shardis and direct)."""
    for c in clients:
        pipe = c.pipeline(transaction=False)
        for i in range(n):
            pipe.set("s:%d" % i, i)
            if i % 10 == 0:
                pipe.hset("h:%d" % i, "f", i)
                pipe.rpush("l:%d" % i, i)
        pipe.execute()


def reply(c, *args):
    """A reply, or the error's text: both sides answer the same way."""
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return "error: %s" % e


def t_dbsize_keys_randomkey(px, admin, direct):
    expect_eq(px.client.dbsize(), direct.client.dbsize(), "DBSIZE")
    expect_eq(sorted(admin.client.keys("*")), sorted(direct.client.keys("*")), "KEYS *")
    expect_eq(sorted(admin.client.keys("h:*")), sorted(direct.client.keys("h:*")), "KEYS h:*")
    keys = set(direct.client.keys("*"))
    for _ in range(20):
        k = px.client.randomkey()
        expect(k in keys, "RANDOMKEY gave %r, not a key" % k)
    return "DBSIZE %d, KEYS %d" % (px.client.dbsize(), len(keys))


def scan_all(c, **kw):
    seen, cursor, calls = [], 0, 0
    while True:
        cursor, keys = c.scan(cursor, **kw)
        seen += keys
        calls += 1
        expect(calls < 10000, "SCAN never ended")
        if cursor == 0:
            return seen, calls


def t_scan(px, direct):
    for kw in ({}, {"count": 7}, {"match": "h:*"}, {"match": "s:1*", "count": 1000},
               {"_type": "list"}):
        got, calls = scan_all(px.client, **kw)
        want, _ = scan_all(direct.client, **kw)
        expect_eq(len(got), len(set(got)), "a key returned twice by SCAN %s" % kw)
        expect_eq(sorted(got), sorted(set(want)), "SCAN %s" % kw)
    for bad in ("abc", "18446744073709551616", " 1", "1x"):
        # refused as the server refuses it; one the server takes (" 1" from
        # Redis 7.2 on) is a made-up cursor to shardis: a reply
        want, got = reply(direct.client, "SCAN", bad), reply(px.client, "SCAN", bad)
        if isinstance(want, str) and want.startswith("error"):
            expect_eq(got, want, "SCAN %r" % bad)
        else:
            expect(isinstance(got, (list, tuple)), "SCAN %r: %r, the server takes it" % (bad, got))
    for odd in ("-1", "", "123456789"):     # made-up cursors: a reply, or "invalid"
        got = reply(px.client, "SCAN", odd)
        expect(isinstance(got, (list, tuple)) or got == "error: invalid cursor", "SCAN %r: %r" % (odd, got))
    return "every key once, with and without MATCH/COUNT/TYPE; last walk %d calls" % calls


def t_scripts(px, admin, direct, backends):
    sha = reply(px.client, "SCRIPT", "LOAD", "return 'x'")
    expect_eq(sha, reply(direct.client, "SCRIPT", "LOAD", "return 'x'"), "SCRIPT LOAD")
    for b in backends:
        expect_eq(b.client.script_exists(sha), [True], "loaded on %s" % b.name)
    expect_eq(reply(px.client, "SCRIPT", "EXISTS", sha, "0" * 40), [1, 0], "SCRIPT EXISTS")
    backends[2].client.script_flush()
    expect_eq(reply(px.client, "SCRIPT", "EXISTS", sha), [0], "EXISTS with one server missing it")
    expect_eq(reply(px.client, "SCRIPT", "FLUSH"), "error: 'script|flush' is an admin "
              "command: shardis runs it on every server only with admin_commands: true in "
              "pool 'alpha'", "SCRIPT FLUSH without admin_commands")
    expect_eq(reply(admin.client, "SCRIPT", "KILL"), reply(direct.client, "SCRIPT", "KILL"),
              "SCRIPT KILL with nothing running")
    expect_eq(reply(admin.client, "SCRIPT", "FLUSH"), b"OK", "SCRIPT FLUSH")
    for b in backends:
        expect_eq(b.client.script_exists(sha), [False], "flushed on %s" % b.name)
    return "LOAD/EXISTS/FLUSH/KILL merged as Redis's response policies say"


def t_config_functions(admin, px, direct, backends):
    expect(reply(px.client, "CONFIG", "GET", "maxmemory-policy").startswith(
        "error: 'config|get' is an admin command"), "CONFIG GET without admin_commands")
    expect_eq(reply(admin.client, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru"), b"OK",
              "CONFIG SET")
    for b in backends:
        expect_eq(b.client.config_get("maxmemory-policy")["maxmemory-policy"], "allkeys-lru",
                  "CONFIG SET reached %s" % b.name)
    expect_eq(reply(admin.client, "CONFIG", "GET", "maxmemory-policy"),
              [b"maxmemory-policy", b"allkeys-lru"], "CONFIG GET")
    expect_eq(reply(admin.client, "CONFIG", "SET", "no-such-thing", "1"),
              reply(direct.client, "CONFIG", "SET", "no-such-thing", "1"),
              "CONFIG SET of an unknown option")
    expect_eq(reply(admin.client, "FUNCTION", "LOAD", LIB), b"shardislib", "FUNCTION LOAD")
    for b in backends:
        expect_eq(b.client.fcall("hello", 0), b"hi", "function on %s" % b.name)
    lib = reply(admin.client, "FUNCTION", "LIST")
    expect(isinstance(lib, list) and len(lib) == 1 and lib[0][1] == b"shardislib",
           "FUNCTION LIST: %r" % lib)
    expect_eq(reply(admin.client, "FUNCTION", "LOAD", LIB)[:6], "error:", "FUNCTION LOAD again")
    expect_eq(reply(admin.client, "FUNCTION", "DELETE", "shardislib"), b"OK", "FUNCTION DELETE")
    expect_eq(reply(admin.client, "FUNCTION", "LIST"), [], "FUNCTION LIST after DELETE")
    reply(admin.client, "FUNCTION", "LOAD", LIB)
    expect_eq(reply(admin.client, "FUNCTION", "FLUSH"), b"OK", "FUNCTION FLUSH")
    for b in backends:
        expect_eq(b.client.execute_command("FUNCTION", "LIST"), [], "flushed on %s" % b.name)
    for b in backends:
        b.client.get("x")           # a command counted in INFO commandstats
    expect_eq(reply(admin.client, "CONFIG", "RESETSTAT"), b"OK", "CONFIG RESETSTAT")
    for b in backends:
        expect("cmdstat_get" not in b.client.info("commandstats"),
               "stats reset on %s" % b.name)
    return "CONFIG SET/GET/RESETSTAT and FUNCTION LOAD/LIST/DELETE/FLUSH on every server"


def t_flush(px, admin, direct):
    before = px.client.dbsize()
    expect(reply(px.client, "FLUSHDB").startswith("error: 'flushdb' is an admin command"),
           "FLUSHDB without admin_commands")
    expect_eq(reply(px.client, "KEYS", "*")[:20], "error: 'keys' is an ", "KEYS without admin")
    expect_eq(px.client.dbsize(), before, "keys after a refused FLUSHDB")
    expect_eq(reply(admin.client, "FLUSHDB", "bogus"), reply(direct.client, "FLUSHDB", "bogus"),
              "FLUSHDB bogus")
    expect_eq(reply(admin.client, "FLUSHDB"), True, "FLUSHDB")     # redis-py's +OK
    expect_eq(px.client.dbsize(), 0, "DBSIZE after FLUSHDB")
    px.client.mset({"f%d" % i: i for i in range(30)})
    expect_eq(reply(admin.client, "FLUSHALL"), True, "FLUSHALL")
    expect_eq(px.client.dbsize(), 0, "DBSIZE after FLUSHALL")
    expect_eq(px.client.randomkey(), None, "RANDOMKEY of an empty keyspace")
    expect_eq(scan_all(px.client)[0], [], "SCAN of an empty keyspace")
    return "refused without admin_commands (%d keys kept), then flushed" % before


def t_backend_down(px, backends):
    px.client.set("x", 1)
    spread = [px.keys_on("down:", i)[0] for i in range(len(backends))]
    backends[1].kill()
    try:
        # A split command over every server, one of them down: the whole
        # reply is that server's error (doc/commands.md), never a partial answer.
        for cmd in (["MGET"] + spread, ["MSET"] + [x for k in spread for x in (k, "v")],
                    ["DEL"] + spread, ["EXISTS"] + spread):
            got = reply(px.client, *cmd)
            expect(isinstance(got, str) and "backend redis2 unavailable" in got,
                   "%s with redis2 down: %r" % (cmd[0], got))
        got = reply(px.client, "DBSIZE")
        expect(isinstance(got, str) and "backend redis2 unavailable" in got,
               "DBSIZE with a server down: %r" % got)
        got = reply(px.client, "SCRIPT", "EXISTS", "0" * 40)
        expect(isinstance(got, str) and "backend redis2 unavailable" in got,
               "SCRIPT EXISTS with a server down: %r" % got)
    finally:
        backends[1].launch()
    return got


# ---- commands whose keys must share a server ------------------------------------------

def families(k):
    """One command of each family whose keys must live together; k(name)
    gives the key to use (all {tagged} together, or spread over servers)."""
    return [
        ("RENAME", k("s1"), k("s2")), ("RENAMENX", k("s2"), k("s3")),
        ("SMOVE", k("set1"), k("set2"), "a"), ("LMOVE", k("l1"), k("l2"), "LEFT", "RIGHT"),
        ("RPOPLPUSH", k("l2"), k("l1")), ("SINTER", k("set1"), k("set2")),
        ("SUNIONSTORE", k("set3"), k("set1"), k("set2")), ("SDIFF", k("set1"), k("set2")),
        ("SINTERCARD", "2", k("set1"), k("set2")),
        ("ZUNIONSTORE", k("z3"), "2", k("z1"), k("z2")), ("ZINTER", "2", k("z1"), k("z2")),
        ("ZDIFF", "2", k("z1"), k("z2"), "WITHSCORES"), ("ZRANGESTORE", k("z4"), k("z1"), "0", "-1"),
        ("PFMERGE", k("hll3"), k("hll1"), k("hll2")), ("PFCOUNT", k("hll1"), k("hll2")),
        ("BITOP", "OR", k("b3"), k("b1"), k("b2")), ("COPY", k("s3"), k("s4")),
        ("MSETNX", k("n1"), "1", k("n2"), "2"), ("EXISTS", k("s4"), k("s4"), k("nope")),
        ("SORT", k("l1"), "ALPHA", "STORE", k("sorted")),
        ("GEORADIUS", k("geo"), "15", "37", "200", "km", "STORE", k("geo2")),
        ("XREAD", "COUNT", "2", "STREAMS", k("x1"), k("x2"), "0", "0"),
        ("EVAL", "return {KEYS[1], redis.call('GET', KEYS[2])}", "2", k("s4"), k("s4")),
        ("OBJECT", "ENCODING", k("set1")),
    ]


def seed(c, k):
    c.set(k("s1"), "v")
    c.sadd(k("set1"), "a", "b", "c")
    c.sadd(k("set2"), "b", "c", "d")
    c.rpush(k("l1"), "x", "y")
    c.zadd(k("z1"), {"a": 1, "b": 2})
    c.zadd(k("z2"), {"b": 3, "c": 4})
    c.pfadd(k("hll1"), "a", "b")
    c.pfadd(k("hll2"), "b", "c")
    c.set(k("b1"), "ab")
    c.set(k("b2"), "cd")
    c.geoadd(k("geo"), (13.361389, 38.115556, "Palermo"))
    c.xadd(k("x1"), {"f": "1"}, id="1-1")
    c.xadd(k("x2"), {"f": "2"}, id="1-1")


def t_same_server_families(px, direct, backends):
    tag = lambda name: "{fam}" + name
    seed(px.client, tag)
    seed(direct.client, tag)
    cmds = families(tag)
    got, want = raw_session(px.port, *cmds), raw_session(direct.port, *cmds)
    for i, cmd in enumerate(cmds):
        if cmd[0] in ("SINTER", "SDIFF"):   # a set's order is each server's own
            got[i], want[i] = sorted(harness.parse(got[i])), sorted(harness.parse(want[i]))
    expect_eq(got, want, "tagged families")
    # Spread over servers: -CROSSSLOT, and no server is touched.
    spread = {}
    for i, name in enumerate(["s1", "s2", "s3", "s4", "set1", "set2", "set3", "l1", "l2",
                              "z1", "z2", "z3", "z4", "hll1", "hll2", "hll3", "b1", "b2",
                              "b3", "n1", "n2", "sorted", "geo", "geo2", "x1", "x2", "nope"]):
        spread[name] = px.keys_on("sp%s:" % name, i % len(backends))[0].decode()
    seed(px.client, lambda n: spread[n])
    before = [sorted(b.client.keys("sp*")) for b in backends]
    cross = b"-CROSSSLOT Keys in request don't hash to the same node\r\n"
    where = px.whereis([k.encode() for k in spread.values()])
    spread_cmds = [cmd for cmd in families(lambda n: spread[n])    # EXISTS is split, summed
                   if cmd[0] != "EXISTS" and
                   len({where[a.encode()] for a in cmd if a in spread.values()}) > 1]
    expect(len(spread_cmds) >= 20, "only %d commands got keys on several servers" %
           len(spread_cmds))
    for cmd, got in zip(spread_cmds, raw_session(px.port, *spread_cmds)):
        expect_eq(got, cross, "%s over several servers" % cmd[0])
    expect_eq([sorted(b.client.keys("sp*")) for b in backends], before, "keys after refusals")
    return "%d families as redis-server when tagged; %d spread over servers, -CROSSSLOT " \
           "and nothing touched" % (len(cmds), len(spread_cmds))


NUMKEYS_ERRORS = [("ZINTERCARD", "0", "a{t}"), ("ZINTERCARD", "2", "a{t}"),
                  ("SINTERCARD", "0", "a{t}"), ("SINTERCARD", "2", "a{t}"),
                  ("LMPOP", "2", "a{t}", "left"), ("ZMPOP", "2", "a{t}", "min"),
                  ("LMPOP", "3", "a{t}", "left"), ("LMPOP", "0", "a{t}", "left"),
                  ("BLMPOP", "0.1", "2", "a{t}", "left"), ("ZUNION", "0", "a{t}"),
                  ("EVAL", "return 1", "x"), ("EVAL", "return 1", "-1"),
                  ("EVAL", "return 1", "3", "a{t}"), ("FCALL", "tf", "bad_arg"),
                  ("FCALL", "tf", "-1"), ("FCALL_RO", "tf", "x"), ("FCALL", "tf", "5", "a{t}"),
                  ("XREAD", "STREAMS", "a{t}", "b{t}", "c"),
                  ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a{t}", "b{t}", "c")]


def t_numkeys_errors(admin, direct):
    lib = "#!lua name=tlib\nredis.register_function('tf', function() return 1 end)"
    for c in (admin.client, direct.client):
        c.execute_command("FUNCTION", "LOAD", "REPLACE", lib)
    try:
        expect_eq(raw_session(admin.port, *NUMKEYS_ERRORS), raw_session(direct.port, *NUMKEYS_ERRORS),
                  "numkeys and key-list errors")
    finally:
        for c in (admin.client, direct.client):
            c.execute_command("FUNCTION", "DELETE", "tlib")
    return "%d malformed key lists answered with redis-server's texts" % len(NUMKEYS_ERRORS)


def t_kill_busy_script(admin, backends):
    """SCRIPT KILL and FUNCTION KILL reach a server whose shared connection
    waits behind the running script, and stop it."""
    admin.client.config_set("busy-reply-threshold", 100)
    k = admin.keys_on("busy:", 2)[0]
    lib = "#!lua name=spinlib\nredis.register_function('spin', function() while true do end end)"
    admin.client.execute_command("FUNCTION", "LOAD", "REPLACE", lib)
    try:
        for run, kill in ((("EVAL", "while true do end", "1", k), ("SCRIPT", "KILL")),
                          (("FCALL", "spin", "1", k), ("FUNCTION", "KILL"))):
            spinner = harness.Raw(admin.port, timeout=10)
            spinner.send(harness.enc(*run))
            time.sleep(0.4)
            t0 = time.monotonic()
            got = raw_session(admin.port, kill)[0]
            took = time.monotonic() - t0
            expect_eq(got, b"+OK\r\n", "%s of a busy server" % " ".join(kill))
            stopped = spinner.reply()
            spinner.close()
            expect(stopped.startswith(b"-ERR Script killed by user") or
                   stopped.startswith(b"-ERR Script killed"), "the script's client got %r" % stopped)
            expect(took < 1.0, "%s took %.2f s" % (" ".join(kill), took))
            expect_eq(admin.client.set(k, "after"), True, "the server answers again")
    finally:
        admin.client.execute_command("FUNCTION", "DELETE", "spinlib")
        admin.client.config_set("busy-reply-threshold", 5000)
    return "EVAL and FCALL spinning on redis3: killed in %.3f s, the server usable again" % took


# ---- transactions --------------------------------------------------------------------

def raw_session(port, *cmds):
    """Send cmds on one connection; their replies as exact bytes."""
    c = harness.Raw(port)
    try:
        c.send(b"".join(harness.enc(*cmd) for cmd in cmds))
        return [c.reply() for _ in cmds]
    finally:
        c.close()


TX_SAME = [("MULTI",), ("SET", "{t}a", "1"), ("INCR", "{t}b"), ("PING",), ("ECHO", "hi"),
           ("LPUSH", "{t}l", "x", "y"), ("MGET", "{t}a", "{t}b"), ("INCR", "{t}a"), ("EXEC",),
           ("GET", "{t}a")]
TX_ERRORS = [("EXEC",), ("DISCARD",), ("MULTI",), ("MULTI",), ("EXEC",), ("MULTI",),
             ("GET",), ("SET", "{t}x", "1"), ("EXEC",), ("GET", "{t}x"), ("MULTI",),
             ("SET", "{t}y", "1"), ("DISCARD",), ("GET", "{t}y"), ("MULTI",),
             ("WATCH", "{t}a"), ("DISCARD",), ("UNWATCH",)]


def t_multi_exec(px, direct):
    for name, cmds in (("same server", TX_SAME), ("errors", TX_ERRORS)):
        direct.client.flushall()
        want = raw_session(direct.port, *cmds)
        for k in ("{t}a", "{t}b", "{t}l", "{t}x", "{t}y"):
            px.client.delete(k)
        expect_eq(raw_session(px.port, *cmds), want, name)
    # redis-py's transactional pipeline, as applications use it
    pipe = px.client.pipeline(transaction=True)
    pipe.set("{u}n", 1).incr("{u}n").get("{u}n")
    expect_eq(pipe.execute(), [True, 2, b"2"], "redis-py transaction")
    return "replies byte for byte as a direct redis-server's"


def t_multi_crossslot(px, backends):
    a, b = px.keys_on("txa:", 0)[0], px.keys_on("txb:", 1)[0]
    got = raw_session(px.port, ("MULTI",), ("SET", a, "1"), ("SET", b, "2"), ("EXEC",),
                      ("MULTI",), ("MGET", a, b), ("EXEC",), ("MULTI",), ("PING",), ("EXEC",),
                      ("MULTI",), ("SHARD.GENKEY",), ("EXEC",), ("MULTI",), ("SET", a, "3"),
                      ("EXEC",))
    cross = b"-CROSSSLOT Keys in request don't hash to the same node\r\n"
    abort = b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    expect_eq(got[:4], [b"+OK\r\n", b"+QUEUED\r\n", cross, abort], "SET on two servers")
    expect_eq(got[4:7], [b"+OK\r\n", cross, abort], "MGET over two servers")
    expect_eq(got[8:10], [b"+QUEUED\r\n", b"*1\r\n+PONG\r\n"], "PING alone in MULTI")
    expect(got[11].startswith(b"-ERR command 'shard.*' inside MULTI") and got[12] == abort,
           "SHARD.GENKEY in MULTI: %r" % got[11:13])
    expect_eq(got[13:], [b"+OK\r\n", b"+QUEUED\r\n", b"*1\r\n+OK\r\n"],
              "a transaction right after aborted ones")
    px.client.delete(a)
    expect(not any(s.client.exists(a) or s.client.exists(b) for s in backends),
           "an aborted transaction wrote")
    return "-CROSSSLOT then -EXECABORT, nothing written"


def t_watch(px, direct):
    for target in (px, direct):
        w = redis.Redis(harness.HOST, target.port)
        w.set("{w}k", "0")
        pipe = w.pipeline(transaction=True)
        pipe.watch("{w}k")
        target.client.set("{w}k", "changed")    # another client, in between
        pipe.multi()
        pipe.set("{w}k", "mine")
        try:
            pipe.execute()
            raise Fail("EXEC ran although a watched key changed (%s)" % target.name)
        except redis.WatchError:
            pass
        expect_eq(w.get("{w}k"), b"changed", "value after the aborted EXEC")
        pipe = w.pipeline(transaction=True)
        pipe.watch("{w}k")
        pipe.multi()
        pipe.set("{w}k", "mine")
        expect_eq(pipe.execute(), [True], "EXEC with nothing changed")
        w.close()
    a, b = px.keys_on("wa:", 0)[0], px.keys_on("wb:", 1)[0]
    c = harness.Raw(px.port)        # one at a time: see doc/commands.md (one dedicated connection)
    got = [c.cmd(*cmd) for cmd in (("WATCH", a, b), ("WATCH", a), ("WATCH", b), ("UNWATCH",),
                                   ("WATCH", b), ("UNWATCH",))]
    c.close()
    cross = b"-CROSSSLOT Keys in request don't hash to the same node\r\n"
    expect_eq(got, [cross, b"+OK\r\n", cross, b"+OK\r\n", b"+OK\r\n", b"+OK\r\n"],
              "WATCH on two servers")
    return "a change by another client aborts EXEC, as on one redis-server"


def backend_clients(backends):
    return sum(s.client.info("clients")["connected_clients"] for s in backends)


def t_client_gone(px, backends):
    """A client that leaves mid-transaction, mid-WATCH or mid-BLPOP leaves
    nothing behind: no queued write is run, no connection stays, and a
    later push is not taken by the BLPOP that waited."""
    base = backend_clients(backends)
    k = px.keys_on("gone:", 2)[0]
    c = harness.Raw(px.port)
    c.send(harness.enc("MULTI") + harness.enc("SET", k, "x") + harness.enc("WATCH", k))
    c.reply(), c.reply(), c.reply()
    c.close()
    w = harness.Raw(px.port)
    w.cmd("WATCH", k)
    w.close()
    blocked = []
    for i in range(5):
        b = harness.Raw(px.port)
        b.send(harness.enc("BLPOP", "{gone}list", "0"))
        blocked.append(b)
    time.sleep(0.3)
    for b in blocked:
        b.close()
    time.sleep(0.3)
    px.client.rpush("{gone}list", "kept")
    expect_eq(px.client.lrange("{gone}list", 0, -1), [b"kept"],
              "the pushed element (a gone client's BLPOP must not take it)")
    expect(not backends[2].client.exists(k), "a gone client's transaction ran")
    until("dedicated connections closed", lambda: backend_clients(backends) <= base + 1)
    return "%d backend connections before, %d after" % (base, backend_clients(backends))


# ---- blocking commands -------------------------------------------------------------------

def t_blocking_replies(px, direct):
    for target in (px, direct):
        target.client.delete("{b}l", "{b}z", "{b}s", "{b}dst")
    cmds = [("RPUSH", "{b}l", "a", "b"), ("BLPOP", "{b}l", "1"), ("BRPOP", "{b}l", "1"),
            ("BLPOP", "{b}l", "0.1"), ("ZADD", "{b}z", "1", "m"), ("BZPOPMIN", "{b}z", "1"),
            ("RPUSH", "{b}l", "c"), ("BLMOVE", "{b}l", "{b}dst", "LEFT", "RIGHT", "1"),
            ("BLMPOP", "0.1", "2", "{b}l", "{b}dst", "LEFT"), ("XADD", "{b}s", "1-1", "f", "v"),
            ("XREAD", "BLOCK", "100", "STREAMS", "{b}s", "0"),
            ("XREAD", "BLOCK", "100", "STREAMS", "{b}s", "$"), ("XREAD", "STREAMS", "{b}s"),
            ("GET", "{b}x")]
    expect_eq(raw_session(px.port, *cmds), raw_session(direct.port, *cmds), "blocking family")
    return "%d commands answered as by a direct redis-server" % len(cmds)


def t_blocked_do_not_stall(px, n_blocked=100, n_busy=100):
    """100 clients blocked in BLPOP (no timeout) while 100 others pipeline
    GET/SET: every GET/SET is answered at once, then every BLPOP gets its
    own element."""
    blocked = []
    for i in range(n_blocked):
        b = harness.Raw(px.port, timeout=10)
        b.send(harness.enc("BLPOP", "{q%d}" % i, "0"))
        blocked.append(b)
    until("INFO counts the blocked clients", lambda: px.client.info("clients")
          .get("blocked_clients") == n_blocked)
    lat = []
    busy = [harness.Raw(px.port, timeout=10) for _ in range(n_busy)]
    for rnd in range(5):
        t0 = time.monotonic()
        for j, c in enumerate(busy):
            c.send(harness.enc("SET", "busy:%d" % j, rnd) + harness.enc("GET", "busy:%d" % j))
        for j, c in enumerate(busy):
            expect_eq((c.reply(), c.reply()), (b"+OK\r\n", b"$1\r\n%d\r\n" % rnd), "busy %d" % j)
        lat.append(time.monotonic() - t0)
    for c in busy:
        c.close()
    for i in range(n_blocked):
        px.client.rpush("{q%d}" % i, "item%d" % i)
    until("no blocked clients left", lambda: px.client.info("clients")
          .get("blocked_clients") == 0)
    for i, b in enumerate(blocked):
        got = b.reply()
        want = b"*2\r\n$%d\r\n{q%d}\r\n$%d\r\nitem%d\r\n" % (
            len(b"{q%d}" % i), i, len(b"item%d" % i), i)
        expect_eq(got, want, "BLPOP of client %d" % i)
        b.close()
    return "with %d clients blocked, rounds of %d SET+GET took %s ms" % (
        n_blocked, n_busy, "/".join("%.0f" % (x * 1000) for x in lat))


# ---- pub/sub ---------------------------------------------------------------------------

PUBSUB_SEQ = [("SUBSCRIBE", "x", "y", "x"), ("GET", "x"), ("PING",), ("PING", "hi"),
              ("PSUBSCRIBE", "p*"), ("SSUBSCRIBE", "sh"), ("UNSUBSCRIBE", "nope"),
              ("UNSUBSCRIBE", "x", "y"), ("PUNSUBSCRIBE",), ("SUNSUBSCRIBE",), ("UNSUBSCRIBE",),
              ("PING",), ("SHARD.WHEREIS", "x")]


def t_pubsub_like_redis(px, direct):
    got = raw_session(px.port, *PUBSUB_SEQ)
    want = raw_session(direct.port, *PUBSUB_SEQ[:-1])
    expect_eq(got[:-1], want, "subscriber mode")
    return "%d commands in and out of subscriber mode, byte for byte" % len(want)


def t_pubsub_across_servers(px, direct, backends):
    """Channels on every server and a pattern matching them all, through
    redis-py subscribers; 3,000 messages of up to 100 KB from publishers on
    other connections arrive exactly once, whole and in order per channel,
    and PUBLISH counts receivers as a direct server does."""
    chans = [px.keys_on("chan:", i)[0].decode() for i in range(len(backends))]
    subs = []
    for target in (px, direct):
        ps = redis.Redis(harness.HOST, target.port).pubsub()
        ps.subscribe(*chans)
        ps.psubscribe("chan:*")
        for _ in range(len(chans) + 1):
            expect(ps.get_message(timeout=5) is not None, "subscribe confirmation")
        subs.append(ps)
    rnd = random.Random(7)
    sent = []
    for i in range(3000):
        ch = rnd.choice(chans)
        data = (b"%d:" % i) + bytes(rnd.getrandbits(8) for _ in range(rnd.choice([0, 5, 300])))
        if i % 500 == 0:
            data += b"\r\n*3\r\n$7\r\nmessage\r\n" * 4000       # ~100 KB of RESP lookalike
        sent.append((ch, data))
    pub_px, pub_direct = px.client, direct.client
    for ch, data in sent:
        expect_eq(pub_px.publish(ch, data), pub_direct.publish(ch, data), "PUBLISH %s count" % ch)
    for target, ps in zip(("shardis", "direct"), subs):
        got = {"message": [], "pmessage": []}
        deadline = time.monotonic() + 20
        while sum(map(len, got.values())) < 2 * len(sent):
            m = ps.get_message(timeout=1)
            expect(time.monotonic() < deadline, "%s: %d of %d messages" % (
                target, sum(map(len, got.values())), 2 * len(sent)))
            if m is not None:
                got[m["type"]].append((m["channel"].decode(), m["data"]))
        for kind in got:
            for ch in chans:
                want = [d for c, d in sent if c == ch]
                have = [d for c, d in got[kind] if c == ch]
                expect(have == want, "%s %s on %s: %d of %d, in order: %s" % (
                    target, kind, ch, len(have), len(want), have == want[:len(have)]))
        ps.close()
    return "%d messages over %d servers, each once as message and once as pmessage" % (
        len(sent), len(chans))


def t_pubsub_redis_cli(px, backends):
    chans = [px.keys_on("cli:", i)[0].decode() for i in range(len(backends))]
    out_path = os.path.join(harness.TMP, "cli-sub.out")
    p = harness.start([harness.ARGS.redis_cli, "-h", harness.HOST, "-p", str(px.port),
                       "SUBSCRIBE"] + chans, out_path)
    try:
        until("redis-cli subscribed on every server", lambda: sum(
            s.client.execute_command("PUBSUB", "NUMSUB", ch)[1]
            for s in backends for ch in chans) == len(chans) * len(backends))
        for ch in chans:
            px.client.publish(ch, "hi " + ch)
        until("redis-cli printed the messages",
              lambda: open(out_path).read().count("hi ") == len(chans))
    finally:
        harness.stop(p)
    text = open(out_path).read().split()
    for ch in chans:
        expect(text.count(ch) >= 2, "redis-cli output: %r" % text)
    return "redis-cli got a message from each of %d servers" % len(chans)


def t_shard_channels(px, backends):
    """SSUBSCRIBE and SPUBLISH route by channel like keys: a shard channel on
    each server gets its messages; channels of one SSUBSCRIBE must share a
    server. (Raw RESP: Debian's redis-py 4.3 has no sharded pub/sub.)"""
    chans = [px.keys_on("shch:", i)[0] for i in range(len(backends))]
    sub = harness.Raw(px.port)
    for i, ch in enumerate(chans):
        expect_eq(sub.cmd("SSUBSCRIBE", ch), harness.array(
            [harness.bulk(b"ssubscribe"), harness.bulk(ch), b":%d\r\n" % (i + 1)]), "SSUBSCRIBE")
    for i, ch in enumerate(chans):
        expect_eq(px.client.execute_command("SPUBLISH", ch, "m%d" % i), 1, "SPUBLISH %s" % ch)
    got = sorted(sub.reply() for _ in chans)
    want = sorted(harness.array([harness.bulk(b"smessage"), harness.bulk(ch),
                                 harness.bulk(b"m%d" % i)]) for i, ch in enumerate(chans))
    expect_eq(got, want, "smessages")
    sub.close()
    bad = raw_session(px.port, ("SSUBSCRIBE", chans[0], chans[1]))
    expect_eq(bad, [b"-CROSSSLOT Keys in request don't hash to the same node\r\n"],
              "SSUBSCRIBE over two servers")
    return "a shard channel on each of %d servers, each message once" % len(chans)


def t_subscriber_gone(px, backends):
    def held():             # subscriptions the backends hold for shardis's clients
        return sum(s.client.execute_command("PUBSUB", "NUMSUB", "g1", "g2")[1::2].count(1) +
                   s.client.execute_command("PUBSUB", "NUMPAT") for s in backends)
    base = backend_clients(backends)
    c = harness.Raw(px.port)
    c.send(harness.enc("SUBSCRIBE", "g1", "g2") + harness.enc("PSUBSCRIBE", "g*"))
    for _ in range(3):
        c.reply()
    expect_eq(held(), 3 * len(backends), "subscriptions on the backends (the 2 channels "
              "and the pattern on each)")
    c.close()
    until("subscriptions gone with their client", lambda: held() == 0)
    until("its connections closed", lambda: backend_clients(backends) <= base)
    c = harness.Raw(px.port)
    c.cmd("SUBSCRIBE", px.keys_on("dead:", 1)[0])
    backends[1].kill()
    try:
        out, eof = c.rest_until_eof(5)
        expect(eof, "the subscriber was not told its server went away")
    finally:
        c.close()
        backends[1].launch()
    return "connections closed with their subscriber; a failed server closes its subscribers"


# ---- WAIT --------------------------------------------------------------------------------

def t_wait(W, replicas, direct_pair):
    """WAIT through shardis counts the replicas that have every earlier write
    of the client, on every server (the smallest count), as WAIT on one
    redis-server does; it never holds up other clients."""
    px = Shardis("wait", W, timeout=500)
    for rep in replicas + [direct_pair[1]]:
        until("replica %s in sync" % rep.name, lambda: rep.client.info("replication")
              .get("master_link_status") == "up", timeout=15)
    keys = [px.keys_on("wk:", i)[0] for i in range(len(W))]
    cmds = [("SET", k, "v") for k in keys] + [("WAIT", "1", "5000")]
    got = raw_session(px.port, *cmds)
    expect_eq(got[-1], b":1\r\n", "WAIT 1 after a write on every server")
    for k, rep in zip(keys, replicas):      # the barrier: every write before WAIT is there
        expect_eq(rep.client.get(k), b"v", "replica of %s right after WAIT" % rep.name)
    # One replica each: WAIT 2 answers 1 once its timeout is over, as a
    # direct redis-server with one replica does, and others go on meanwhile.
    direct = direct_pair[0]
    want = raw_session(direct.port, ("SET", "dk", "v"), ("WAIT", "2", "1500"))[1]
    other = harness.Raw(px.port)
    t0 = time.monotonic()
    c = harness.Raw(px.port, timeout=10)
    c.send(harness.enc("WAIT", "2", "1500"))
    time.sleep(0.05)
    expect_eq(other.cmd("GET", keys[0]), b"$1\r\nv\r\n", "GET while a WAIT waits")
    fast = time.monotonic() - t0
    expect_eq((c.reply(), want), (b":1\r\n", b":1\r\n"), "WAIT 2 1500 (shardis, direct)")
    waited = time.monotonic() - t0
    # WAIT 0 0 only asks: it may count fewer replicas than one redis-server
    # (those that already have shardis's marker), never more.
    expect(c.cmd("WAIT", "0", "0") in (b":0\r\n", b":1\r\n"), "WAIT 0 0")
    c.close()
    other.close()
    expect(fast < 1.0 and waited > 1.4, "GET after %.2f s, WAIT after %.2f s" % (fast, waited))
    expect(raw_session(px.port, ("MULTI",), ("WAIT", "0", "0"), ("EXEC",))[2].startswith(
        b"-EXECABORT"), "WAIT inside MULTI")
    harness.t_exit_clean(px)
    return "WAIT 1 -> 1 with every write on the replicas; WAIT 2 1500 -> 1 after %.2f s " \
           "while a GET took %.3f s" % (waited, fast)


def body():
    R = [RedisServer("redis%d" % (i + 1)) for i in range(3)]
    direct = RedisServer("direct")
    px = Shardis("plain", R, timeout=2000)
    admin = Shardis("admin", R, timeout=2000, admin_commands="true")
    fill([px.client, direct.client])
    check("dbsize_keys_randomkey", t_dbsize_keys_randomkey, px, admin, direct)
    check("scan_one_cursor_every_backend", t_scan, px, direct)
    check("script_load_exists_flush_kill", t_scripts, px, admin, direct, R)
    check("config_and_functions_admin", t_config_functions, admin, px, direct, R)
    check("flushdb_admin_only", t_flush, px, admin, direct)
    check("same_server_families", t_same_server_families, px, direct, R)
    check("numkeys_errors_like_redis", t_numkeys_errors, admin, direct)
    check("kill_busy_script", t_kill_busy_script, admin, R)
    check("multi_exec_like_redis", t_multi_exec, px, direct)
    check("multi_crossslot_aborts", t_multi_crossslot, px, R)
    check("watch_like_redis", t_watch, px, direct)
    check("client_gone_leaves_nothing", t_client_gone, px, R)
    check("blocking_commands_like_redis", t_blocking_replies, px, direct)
    check("blocked_clients_do_not_stall_others", t_blocked_do_not_stall, px)
    check("pubsub_like_redis", t_pubsub_like_redis, px, direct)
    check("pubsub_across_servers", t_pubsub_across_servers, px, direct, R)
    check("pubsub_redis_cli", t_pubsub_redis_cli, px, R)
    check("pubsub_shard_channels", t_shard_channels, px, R)
    check("pubsub_subscriber_gone", t_subscriber_gone, px, R)
    check("fanout_backend_down", t_backend_down, px, R)
    for p in (px, admin):
        check("exit_clean_" + p.name, harness.t_exit_clean, p)
    # WAIT needs replicas: three masters with one each, and a direct pair.
    fast_sync = ["--repl-diskless-sync-delay", "0"]
    W = [RedisServer("wmaster%d" % (i + 1), extra=fast_sync) for i in range(3)]
    reps = [RedisServer("wreplica%d" % (i + 1), extra=["--replicaof", harness.HOST, str(m.port)])
            for i, m in enumerate(W)]
    dm = RedisServer("wdirect", extra=fast_sync)
    dr = RedisServer("wdirect-replica", extra=["--replicaof", harness.HOST, str(dm.port)])
    check("wait_counts_replicas_of_every_write", t_wait, W, reps, (dm, dr))


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-multikey-"))
