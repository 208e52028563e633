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
  nothing; a backend that is down turns the merged reply into its error.

Run: /usr/bin/python3 tests/integration/test_multikey.py --shardis build/shardis
"""
import sys

import redis

import harness
from harness import RedisServer, Shardis, check, expect, expect_eq

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
        expect_eq(reply(px.client, "SCAN", bad), reply(direct.client, "SCAN", bad),
                  "SCAN %r" % bad)
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
    return "CONFIG SET/GET and FUNCTION LOAD/LIST/DELETE on every server"


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
    expect_eq(px.client.randomkey(), None, "RANDOMKEY of an empty keyspace")
    expect_eq(scan_all(px.client)[0], [], "SCAN of an empty keyspace")
    return "refused without admin_commands (%d keys kept), then flushed" % before


def t_backend_down(px, backends):
    px.client.set("x", 1)
    backends[1].kill()
    try:
        got = reply(px.client, "DBSIZE")
        expect(isinstance(got, str) and "backend redis2 unavailable" in got,
               "DBSIZE with a server down: %r" % got)
        got = reply(px.client, "SCRIPT", "EXISTS", "0" * 40)
        expect(isinstance(got, str) and "backend redis2 unavailable" in got,
               "SCRIPT EXISTS with a server down: %r" % got)
    finally:
        backends[1].launch()
    return got


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
    check("fanout_backend_down", t_backend_down, px, R)
    for p in (px, admin):
        check("exit_clean_" + p.name, harness.t_exit_clean, p)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-multikey-"))
