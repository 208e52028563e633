#!/usr/bin/python3
"""test_compat.py -- commands Redis's own suite drives that name no key, or
whose meaning spans servers, against real redis-servers and one direct
redis-server for reference:

- a script that declares no key (EVAL/EVALSHA/FCALL ... 0) computes what
  it computes on one redis-server, but whatever it writes is refused by
  redis-server (it runs as EVAL_RO/EVALSHA_RO/FCALL_RO): no server gets
  the key, which would otherwise land on a server that may not own it;
  in a transaction it runs on the transaction's server;
- DEBUG needs admin_commands; DEBUG DIGEST over three servers equals a
  direct server's digest of the same keys (and all zeros when empty);
  DEBUG OBJECT/DIGEST-VALUE go to their key's server; CHANGE-REPL-ID
  reaches every server; POPULATE is refused and creates nothing; DEBUG
  PROTOCOL answers in the client's protocol, as the direct server does.

Run: /usr/bin/python3 tests/integration/test_compat.py --shardis build/shardis
"""
import sys

import redis

import harness
from harness import Raw, RedisServer, Shardis, check, expect, expect_eq, parse

DEBUG = ["--enable-debug-command", "yes"]


def servers_dbsize(servers):
    return [s.client.dbsize() for s in servers]


# ---- scripts that declare no key --------------------------------------------------

def t_keyless_scripts(servers, direct):
    px = Shardis("keyless", servers, admin_commands="true")
    c = Raw(px.port)
    d = Raw(direct.port)
    for script in (b"return {1, 'two', 3.99, false}", b"return redis.call('ping')",
                   b"return redis.status_reply('fine')", b"return #ARGV"):
        for proto in (b"2", b"3"):
            c.cmd("HELLO", proto)
            d.cmd("HELLO", proto)
            expect_eq(c.cmd("EVAL", script, "0", "a", "b"), d.cmd("EVAL", script, "0", "a", "b"),
                      "EVAL %r 0 in RESP%s" % (script, proto.decode()))
    c.cmd("HELLO", "2")
    for w in (b"return redis.call('set', 'x', 'y')", b"return redis.call('incr', 'n')"):
        got = parse(c.cmd("EVAL", w, "0"))
        expect(isinstance(got, harness.Err) and b"not allowed from read-only scripts" in got,
               "a keyless EVAL that writes: %r" % got)
    sha = parse(c.cmd("SCRIPT", "LOAD", "redis.call('set', 'y', 1) return 7"))
    got = parse(c.cmd("EVALSHA", sha, "0"))
    expect(isinstance(got, harness.Err) and b"read-only" in got, "EVALSHA ... 0: %r" % got)
    expect_eq(servers_dbsize(servers), [0, 0, 0], "keys on the servers after keyless writes")
    # Functions: one flagged no-writes runs; one that may write is refused.
    lib = (b"#!lua name=lib\n"
           b"redis.register_function{function_name='ro', callback=function(k, a) "
           b"return 'ro' end, flags={'no-writes'}}\n"
           b"redis.register_function('rw', function(k, a) "
           b"return redis.call('set', 'z', 1) end)")
    expect_eq(parse(c.cmd("FUNCTION", "LOAD", lib)), b"lib", "FUNCTION LOAD")
    expect_eq(parse(c.cmd("FCALL", "ro", "0")), b"ro", "FCALL ro 0")
    got = parse(c.cmd("FCALL", "rw", "0"))
    expect(isinstance(got, harness.Err) and b"write flag" in got, "FCALL rw 0: %r" % got)
    expect_eq(servers_dbsize(servers), [0, 0, 0], "keys on the servers after FCALL rw 0")
    # In a transaction, on the transaction's server: it reads the key there.
    for i, s in enumerate(servers):
        key = px.keys_on("tx", i)[0]
        c.cmd("SET", key, "v%d" % i)
        out = [c.cmd(*a) for a in (["MULTI"], ["GET", key],
                                   ["EVAL", b"return redis.call('get', ARGV[1])", "0", key],
                                   ["EXEC"])]
        expect_eq(parse(out[-1]), [b"v%d" % i, b"v%d" % i], "keyless EVAL in MULTI on server %d" % i)
    c.close()
    d.close()
    harness.t_exit_clean(px)


# ---- DEBUG ---------------------------------------------------------------------------

def digest(port):
    return parse(Raw(port).cmd("DEBUG", "DIGEST"))


def t_debug(servers, direct):
    plain = Shardis("debug-plain", servers)
    got = parse(Raw(plain.port).cmd("DEBUG", "DIGEST"))
    expect(isinstance(got, harness.Err) and b"admin command" in got, "without admin: %r" % got)
    harness.t_exit_clean(plain)

    px = Shardis("debug", servers, admin_commands="true")
    c = Raw(px.port)
    d = Raw(direct.port)
    d.cmd("FLUSHALL")
    expect_eq(parse(c.cmd("DEBUG", "DIGEST")), b"0" * 40, "DIGEST of nothing")
    # 1, 2, then 3 servers with keys: odd and even counts of digests merged.
    for n in (1, 2, 3, 5, 40):
        for i in range(n):
            for cl in (c, d):
                cl.cmd("SET", "dk:%d" % i, "v%d" % i)
                cl.cmd("HSET", "dh:%d" % i, "f", i)
        c.cmd("PEXPIRE", "dk:0", "100000000")
        d.cmd("PEXPIRE", "dk:0", "100000000")
        have = sum(1 for s in servers if s.client.dbsize() > 0)
        expect_eq(parse(c.cmd("DEBUG", "DIGEST")), parse(d.cmd("DEBUG", "DIGEST")),
                  "DIGEST with %d keys on %d servers" % (2 * n, have))
    expect(all(s.client.dbsize() > 0 for s in servers), "keys on every server")
    for i, s in enumerate(servers):
        key = px.keys_on("dobj", i)[0]
        c.cmd("SET", key, "12345")
        d.cmd("SET", key, "12345")
        expect(b"encoding:int" in c.cmd("DEBUG", "OBJECT", key),
               "DEBUG OBJECT of a key on server %d" % i)
        expect_eq(c.cmd("DEBUG", "DIGEST-VALUE", key), d.cmd("DEBUG", "DIGEST-VALUE", key),
                  "DIGEST-VALUE of a key on server %d" % i)
    two = [px.keys_on("dx", 0)[0], px.keys_on("dx", 1)[0]]
    expect(parse(c.cmd("DEBUG", "DIGEST-VALUE", *two)).startswith(b"CROSSSLOT"),
           "DIGEST-VALUE of keys on two servers")
    before = [s.client.info("replication")["master_replid"] for s in servers]
    expect_eq(c.cmd("DEBUG", "CHANGE-REPL-ID"), b"+OK\r\n", "CHANGE-REPL-ID")
    after = [s.client.info("replication")["master_replid"] for s in servers]
    expect(all(a != b for a, b in zip(after, before)), "every server's replid changed")
    sizes = servers_dbsize(servers)
    got = parse(c.cmd("DEBUG", "POPULATE", "100"))
    expect(isinstance(got, harness.Err) and b"POPULATE" in got, "POPULATE: %r" % got)
    expect_eq(servers_dbsize(servers), sizes, "keys after a refused POPULATE")
    expect_eq(c.cmd("DEBUG", "RELOAD"), b"+OK\r\n", "RELOAD")
    expect_eq(parse(c.cmd("DEBUG", "DIGEST")), parse(d.cmd("DEBUG", "DIGEST")), "after RELOAD")
    for proto in (b"2", b"3"):
        c.cmd("HELLO", proto)
        d.cmd("HELLO", proto)
        for t in (b"double", b"map", b"set", b"null", b"true", b"bignum", b"verbatim"):
            expect_eq(c.cmd("DEBUG", "PROTOCOL", t), d.cmd("DEBUG", "PROTOCOL", t),
                      "DEBUG PROTOCOL %s in RESP%s" % (t.decode(), proto.decode()))
    expect_eq(parse(c.cmd("DEBUG", "NOSUCH")), parse(d.cmd("DEBUG", "NOSUCH")), "DEBUG NOSUCH")
    c.close()
    d.close()
    harness.t_exit_clean(px)


def body():
    direct = RedisServer("direct", extra=DEBUG)
    servers = [RedisServer("b%d" % i, extra=DEBUG) for i in (1, 2, 3)]
    check("keyless scripts compute, run read-only and write nowhere; in MULTI on its server",
          t_keyless_scripts, servers, direct)
    for s in servers:
        s.client.flushall()
        s.client.function_flush()
    check("DEBUG by subcommand: DIGEST merged as one server's, keys to their server, "
          "every server, POPULATE refused, PROTOCOL in both protocols", t_debug, servers, direct)


if __name__ == "__main__":
    sys.exit(harness.main(body))
