#!/usr/bin/python3
"""test_resp3.py -- RESP3 through shardis: HELLO as redis-server answers it,
every command family's replies byte for byte as a direct redis-server sends
them in RESP2 and in RESP3 (keys on every backend), RESP2 and RESP3 clients
interleaved on the same servers, pub/sub with pushes, and redis-cli -3.

Run: test_resp3.py --shardis build/shardis [--redis-server PATH]
"""
import re
import subprocess
import sys

import harness as h
from harness import Raw, check, enc, expect, expect_eq

# A command family's sequence; {T} is a hash tag placing its keys on one
# server. Only commands whose replies are deterministic (no random members,
# no ids or times), so that a direct redis-server must answer the same bytes.
FAMILIES = {
    "string": [
        ("SET", "{T}s", "v"), ("GET", "{T}s"), ("GET", "{T}none"), ("APPEND", "{T}s", "w"),
        ("STRLEN", "{T}s"), ("INCRBYFLOAT", "{T}f", "1.5"), ("GETRANGE", "{T}s", "0", "0"),
        ("SETRANGE", "{T}s", "1", "x"), ("MGET", "{T}s", "{T}none", "{T}f"),
        ("SET", "{T}s2", "a", "NX", "GET"), ("GETDEL", "{T}s2"), ("GETEX", "{T}s", "PERSIST"),
        ("INCR", "{T}n"), ("DECRBY", "{T}n", "5"), ("MSETNX", "{T}m1", "a", "{T}m2", "b"),
        ("LCS", "{T}m1", "{T}m2"), ("STRALGO", "x"),
    ],
    "hash": [
        ("HSET", "{T}h", "f1", "v1", "f2", "v2", "n", "3"), ("HGETALL", "{T}h"),
        ("HGETALL", "{T}none"), ("HGET", "{T}h", "nof"), ("HMGET", "{T}h", "f1", "nof"),
        ("HKEYS", "{T}h"), ("HVALS", "{T}h"), ("HINCRBYFLOAT", "{T}h", "n", "0.25"),
        ("HEXISTS", "{T}h", "f1"), ("HSTRLEN", "{T}h", "f1"), ("HSCAN", "{T}h", "0"),
        ("HDEL", "{T}h", "f2", "nof"), ("HLEN", "{T}h"),
    ],
    "set": [
        # Integers: an intset's order is its values', where a hash table's
        # depends on each server's random seed.
        ("SADD", "{T}a", "3", "1", "2"), ("SADD", "{T}b", "2", "4"), ("SMEMBERS", "{T}a"),
        ("SMEMBERS", "{T}none"), ("SISMEMBER", "{T}a", "1"), ("SMISMEMBER", "{T}a", "1", "q"),
        ("SINTER", "{T}a", "{T}b"), ("SUNION", "{T}a", "{T}b"), ("SDIFF", "{T}a", "{T}b"),
        ("SINTERCARD", "2", "{T}a", "{T}b"), ("SSCAN", "{T}a", "0"), ("SCARD", "{T}a"),
        ("SMOVE", "{T}a", "{T}b", "1"), ("SADD", "{T}c", "x"), ("SMEMBERS", "{T}c"),
    ],
    "zset": [
        ("ZADD", "{T}z", "1", "a", "2.5", "b", "-3", "c"), ("ZSCORE", "{T}z", "b"),
        ("ZSCORE", "{T}z", "nom"), ("ZRANGE", "{T}z", "0", "-1", "WITHSCORES"),
        ("ZRANGE", "{T}z", "0", "-1"), ("ZINCRBY", "{T}z", "1", "a"),
        ("ZMSCORE", "{T}z", "a", "nom"), ("ZADD", "{T}z", "INCR", "1", "c"),
        ("ZRANK", "{T}z", "b"), ("ZREVRANGEBYSCORE", "{T}z", "+inf", "-inf", "WITHSCORES"),
        ("ZPOPMIN", "{T}z"), ("ZPOPMAX", "{T}z", "2"), ("ZADD", "{T}y", "1", "a"),
        ("ZUNION", "2", "{T}z", "{T}y", "WITHSCORES"), ("ZMPOP", "1", "{T}y", "MIN"),
        ("ZCARD", "{T}z"),
    ],
    "list": [
        ("RPUSH", "{T}l", "a", "b", "c", "b"), ("LRANGE", "{T}l", "0", "-1"),
        ("LPOS", "{T}l", "b", "COUNT", "0"), ("LPOS", "{T}l", "q"), ("LPOP", "{T}l", "2"),
        ("LPOP", "{T}none", "2"), ("LINDEX", "{T}l", "9"), ("LMPOP", "1", "{T}l", "LEFT"),
        ("LMPOP", "1", "{T}none", "LEFT"), ("BLPOP", "{T}l", "1"), ("LLEN", "{T}l"),
    ],
    "stream": [
        ("XADD", "{T}x", "1-1", "f", "v"), ("XADD", "{T}x", "2-1", "g", "w"),
        ("XRANGE", "{T}x", "-", "+"), ("XREVRANGE", "{T}x", "+", "-", "COUNT", "1"),
        ("XLEN", "{T}x"), ("XREAD", "COUNT", "1", "STREAMS", "{T}x", "0"),
        ("XREAD", "STREAMS", "{T}x", "9-9"), ("XGROUP", "CREATE", "{T}x", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "{T}x", ">"),
        ("XPENDING", "{T}x", "g"), ("XINFO", "GROUPS", "{T}x"),
    ],
    "generic": [
        ("SET", "{T}k", "1"), ("EXISTS", "{T}k", "{T}none"), ("TYPE", "{T}k"),
        ("TTL", "{T}k"), ("PEXPIRE", "{T}k", "100000"), ("EXPIRETIME", "{T}none"),
        ("OBJECT", "ENCODING", "{T}k"), ("OBJECT", "ENCODING", "{T}none"),
        ("COPY", "{T}k", "{T}k2"), ("RENAME", "{T}k2", "{T}k3"), ("DUMP", "{T}none"),
        ("DEL", "{T}k", "{T}k3"), ("TOUCH", "{T}k"), ("NOSUCHCOMMAND", "{T}k"),
        ("GET",), ("SET", "{T}k"),
    ],
    "script": [
        ("EVAL", "return {1, 'a', redis.call('ping'), false}", "1", "{T}e"),
        ("EVAL", "redis.setresp(3); redis.call('hset', KEYS[1], 'a', '1'); "
                 "return redis.call('hgetall', KEYS[1])", "1", "{T}e"),
        ("EVAL", "redis.setresp(3); return redis.call('zscore', KEYS[1], 'm')", "1", "{T}e"),
        ("EVAL", "return redis.error_reply('MY failure')", "1", "{T}e"),
        ("EVAL", "return {double=3.5}", "1", "{T}e"),
        ("EVAL", "redis.setresp(3); redis.call('sadd', KEYS[2], 'q'); "
                 "return redis.call('smembers', KEYS[2])", "2", "{T}e", "{T}e2"),
    ],
    "transaction": [
        ("MULTI",), ("HSET", "{T}t", "a", "1"), ("HGETALL", "{T}t"), ("GET", "{T}none"),
        ("ZADD", "{T}tz", "1.5", "m"), ("ZSCORE", "{T}tz", "m"), ("EXEC",),
        ("WATCH", "{T}t"), ("MULTI",), ("SMEMBERS", "{T}none"), ("EXEC",),
    ],
}


def tags_on_each(px, proto):
    """A hash tag per server of px, each placing its keys there."""
    return ["{%s}" % px.keys_on("resp%d-" % proto, i)[0].decode()
            for i in range(len(px.servers))]


def run_family(port, cmds, tag, proto):
    """The replies, as bytes, to cmds sent one by one on a fresh connection."""
    c = Raw(port)
    try:
        if proto == 3:
            hello = c.cmd("HELLO", "3")
            expect(hello.startswith(b"%7\r\n"), "HELLO 3 answered %s" % h.short(hello))
        out = []
        for cmd in cmds:
            out.append(c.cmd(*[a.replace("{T}", tag) for a in cmd]))
        return out
    finally:
        c.close()


def t_conformance(px, direct, family, proto):
    cmds = FAMILIES[family]
    for tag in tags_on_each(px, proto):
        got = run_family(px.port, cmds, tag + family, proto)
        want = run_family(direct.port, cmds, tag + family, proto)
        for cmd, g, w in zip(cmds, got, want):
            expect_eq(g, w, "RESP%d %s (%s)" % (proto, " ".join(cmd), tag))


def hello_fields(raw):
    """HELLO's reply without its id (a connection counter of whoever answers)."""
    return re.sub(rb"\$2\r\nid\r\n:\d+\r\n", b"$2\r\nid\r\n:N\r\n", raw)


def t_hello(px, direct):
    for args in [("HELLO", "3"), ("HELLO", "2"), ("HELLO",), ("HELLO", "4"), ("HELLO", "1"),
                 ("HELLO", "x"), ("HELLO", "3", "SETNAME", "a b"), ("HELLO", "3", "BOGUS"),
                 ("HELLO", "3", "AUTH", "default"), ("HELLO", "3", "SETNAME", "app")]:
        a, b = Raw(px.port), Raw(direct.port)
        expect_eq(hello_fields(a.cmd(*args)), hello_fields(b.cmd(*args)), " ".join(args))
        # Whatever HELLO did to the protocol, the next reply shows it.
        expect_eq(a.cmd("HGETALL", "nokey"), b.cmd("HGETALL", "nokey"),
                  "HGETALL after " + " ".join(args))
        a.close()
        b.close()
    # Back to RESP2 on one connection.
    a = Raw(px.port)
    a.cmd("HELLO", "3")
    expect_eq(a.cmd("GET", "nokey"), b"_\r\n", "GET nil in RESP3")
    a.cmd("HELLO", "2")
    expect_eq(a.cmd("GET", "nokey"), b"$-1\r\n", "GET nil after HELLO 2")
    expect_eq(a.cmd("CLIENT", "INFO").split(b" resp=")[1][:1], b"2", "CLIENT INFO resp")
    a.cmd("HELLO", "3")
    info = a.cmd("CLIENT", "INFO")
    expect(info.startswith(b"=") and b" resp=3\n" in info, "CLIENT INFO in RESP3: %r" % info)
    a.close()


def t_hello_keeps(px, direct):
    """HELLO with no version keeps the client's protocol, as redis-server's."""
    for port in (px.port, direct.port):
        a = Raw(port)
        a.cmd("HELLO", "3")
        r = a.cmd("HELLO")
        expect(r.startswith(b"%7\r\n") and b"$5\r\nproto\r\n:3\r\n" in r,
               "HELLO after HELLO 3 (port %d): %s" % (port, h.short(r)))
        expect_eq(a.cmd("GET", "nokey"), b"_\r\n", "still RESP3 (port %d)" % port)
        a.close()


def t_hello_order(px):
    """Requests a client sent before HELLO changed its protocol run before
    those it sent after, though they go over other connections: here the
    first SET waits behind other clients' pipelines of 100 KB GETs on the
    shared RESP2 connection, while the RESP3 one is free."""
    big = px.keys_on("order-", 0)[0]
    key = b"{%s}k" % big
    px.client.set(big, b"x" * 100000)
    slow = [Raw(px.port, timeout=60) for _ in range(8)]
    for s in slow:
        s.send(enc("GET", big) * 1000)
    c = Raw(px.port, timeout=60)
    c.send(enc("SET", key, "1") + enc("HELLO", "3") + enc("SET", key, "2"))
    expect_eq(c.reply(), b"+OK\r\n", "SET 1")
    expect(c.reply().startswith(b"%7"), "HELLO 3")
    expect_eq(c.reply(), b"+OK\r\n", "SET 2")
    for s in slow:
        for _ in range(1000):
            s.reply()
        s.close()
    expect_eq(c.cmd("GET", key), b"$1\r\n2\r\n", "the value is the last SET's")
    c.cmd("DEL", key, big)
    c.close()


def t_gated_keeps_protocol(px):
    """A request that waited at the gate while its client said HELLO 3 and
    then WATCH (a RESP3 connection of its own to the same server) is still
    answered in RESP2, the protocol it was sent in."""
    key = px.keys_on("gated-", 0)[0]
    c = Raw(px.port)
    c.send(enc("WAIT", "1", "300") + enc("GET", key) + enc("HELLO", "3") + enc("WATCH", key) +
           enc("GET", key))
    expect_eq(c.reply(), b":0\r\n", "WAIT")
    expect_eq(c.reply(), b"$-1\r\n", "GET sent in RESP2")
    expect(c.reply().startswith(b"%7"), "HELLO 3")
    expect_eq(c.reply(), b"+OK\r\n", "WATCH")
    expect_eq(c.reply(), b"_\r\n", "GET sent in RESP3")
    c.close()


def t_backend_refuses_hello():
    """A server that refuses HELLO 3 fails its RESP3 clients' requests with
    the reason, and RESP2 clients on it go on."""
    srv = h.RedisServer("nohello", extra=["--rename-command", "HELLO", ""])
    px = h.Shardis("resp3-nohello", [srv])
    try:
        c3, c2 = Raw(px.port), Raw(px.port)
        c3.cmd("HELLO", "3")
        r = c3.cmd("GET", "k")
        expect(r.startswith(b"-ERR backend redis1 unavailable: handshake refused: ERR unknown "
                            b"command 'HELLO'"), "RESP3 GET: %s" % h.short(r))
        expect_eq(c2.cmd("SET", "k", "v"), b"+OK\r\n", "RESP2 SET")
        expect_eq(c2.cmd("GET", "k"), b"$1\r\nv\r\n", "RESP2 GET")
        c3.close()
        c2.close()
    finally:
        for p in (px, srv):
            h.stop(p.proc)


def t_hello_auth():
    servers = [h.RedisServer("auth%d" % i, password="sekret") for i in range(2)]
    px = h.Shardis("resp3-auth", servers, redis_auth="sekret")
    try:
        a = Raw(px.port)
        expect_eq(a.cmd("HELLO", "3"),
                  b"-NOAUTH HELLO must be called with the client already authenticated, "
                  b"otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                  b"authenticate the client and select the RESP protocol version at the same "
                  b"time\r\n", "HELLO 3 unauthenticated")
        expect_eq(a.cmd("HELLO", "3", "AUTH", "default", "wrong"),
                  b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
                  "HELLO 3 AUTH wrong")
        expect_eq(a.cmd("GET", "k"), b"-NOAUTH Authentication required.\r\n",
                  "still unauthenticated")
        r = a.cmd("HELLO", "3", "AUTH", "default", "sekret")
        expect(r.startswith(b"%7\r\n"), "HELLO 3 AUTH right: %s" % h.short(r))
        expect_eq(a.cmd("GET", "k"), b"_\r\n", "GET in RESP3 after HELLO AUTH")
        a.close()
    finally:
        for p in [px] + servers:
            h.stop(p.proc)


def t_interleaved(px):
    """A RESP2 and a RESP3 client pipelining into the same shared connections
    each get their own encoding, every time."""
    c2, c3 = Raw(px.port), Raw(px.port)
    c3.cmd("HELLO", "3")
    keys = [px.keys_on("il-", i, 2) for i in range(len(px.servers))]
    flat = [k for ks in keys for k in ks]
    c2.cmd("HSET", flat[0], "f", "v")
    batch2, batch3 = [], []
    for i in range(100):
        k = flat[i % len(flat)]
        batch2 += [enc("HGETALL", flat[0]), enc("GET", b"none" + k), enc("ZSCORE", k, "m")]
        batch3 += [enc("HGETALL", flat[0]), enc("GET", b"none" + k), enc("ZSCORE", k, "m")]
    for i in range(0, len(batch2), 30):     # interleaved sends, both in flight
        c2.send(b"".join(batch2[i:i + 30]))
        c3.send(b"".join(batch3[i:i + 30]))
    want2 = [b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n", b"$-1\r\n", None]
    want3 = [b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n", b"_\r\n", None]
    for i in range(len(batch2)):
        g2, g3 = c2.reply(), c3.reply()
        if want2[i % 3] is not None:
            expect_eq(g2, want2[i % 3], "RESP2 reply %d" % i)
            expect_eq(g3, want3[i % 3], "RESP3 reply %d" % i)
        else:   # ZSCORE on a string or a missing key: an error, or nil
            expect(g2 in (b"$-1\r\n",) or g2.startswith(b"-WRONGTYPE"), "RESP2 %r" % g2)
            expect(g3 in (b"_\r\n",) or g3.startswith(b"-WRONGTYPE"), "RESP3 %r" % g3)
    c2.close()
    c3.close()


def t_pubsub(px, direct):
    """RESP3 subscribers get pushes, may send any command meanwhile, and
    PING answers +PONG; as a direct redis-server does."""
    key = px.keys_on("ps-", 1)[0]
    out = {}
    for name, port in (("px", px.port), ("direct", direct.port)):
        sub, pub = Raw(port), Raw(port)
        sub.cmd("HELLO", "3")
        got = [sub.cmd("SUBSCRIBE", "news"), sub.cmd("PSUBSCRIBE", "n*")]
        got.append(sub.cmd("SET", key, "1"))
        got.append(sub.cmd("GET", key))
        got.append(sub.cmd("PING"))
        pub.cmd("PUBLISH", "news", "hello")
        got += [sub.reply(), sub.reply()]
        got.append(sub.cmd("HELLO", "2")[:4])
        got.append(sub.cmd("GET", key))     # RESP2 in subscriber mode: refused
        got.append(sub.cmd("PING"))
        pub.cmd("PUBLISH", "news", "again")
        got += [sub.reply(), sub.reply()]
        out[name] = got
        sub.close()
        pub.close()
    for i, (g, w) in enumerate(zip(out["px"], out["direct"])):
        expect_eq(g, w, "step %d" % i)


def t_refused_in_tx(px):
    a = Raw(px.port)
    a.cmd("WATCH", "k")
    r = a.cmd("HELLO", "3")
    expect(r.startswith(b"-ERR shardis cannot change the protocol"), "HELLO 3 in WATCH: %r" % r)
    expect_eq(a.cmd("GET", "nokey"), b"$-1\r\n", "still RESP2")
    a.cmd("UNWATCH")
    r = a.cmd("HELLO", "3")
    expect(r.startswith(b"%7"), "HELLO 3 after UNWATCH: %r" % r)
    expect_eq(a.cmd("HELLO", "3")[:2], b"%7", "HELLO 3 again (no change) is fine")
    a.close()


def t_redis_cli(px):
    cli = h.ARGS.redis_cli
    script = b"HELLO 3\nHSET {c}h a 1\nHGETALL {c}h\nMULTI\nSET {c}k 1\nGET {c}k\nEXEC\n" \
             b"EVAL \"return redis.call('get', KEYS[1])\" 1 {c}k\nZADD {c}z 2.5 m\nZSCORE {c}z m\n"
    out = subprocess.run([cli, "-3", "-p", str(px.port)], input=script, capture_output=True,
                         timeout=20).stdout
    want = subprocess.run([cli, "-3", "-p", str(px.servers[0].port)], input=script,
                          capture_output=True, timeout=20).stdout
    # The id in HELLO's map is the answering server's own counter.
    strip = lambda b: re.sub(rb"\nid \d+\n", b"\nid N\n", b)
    expect_eq(strip(out), strip(want), "redis-cli -3 session")
    # --scan walks every server through shardis's SCAN, in RESP3.
    keys = set(subprocess.run([cli, "-3", "-p", str(px.port), "--scan", "--pattern", "{c}*"],
                              capture_output=True, timeout=20).stdout.split())
    expect_eq(keys, {b"{c}h", b"{c}k", b"{c}z"}, "redis-cli -3 --scan")


def body():
    servers = h.fresh_servers(3)
    direct = h.RedisServer("direct")
    px = h.Shardis("resp3", servers)
    check("HELLO answered as redis-server 7.0 answers it, each protocol after it",
          t_hello, px, direct)
    check("HELLO AUTH: NOAUTH and WRONGPASS as redis-server, RESP3 after it", t_hello_auth)
    check("HELLO with no version keeps the protocol", t_hello_keeps, px, direct)
    check("a server that refuses HELLO 3 fails RESP3 requests only", t_backend_refuses_hello)
    check("requests sent before HELLO 3 run before those sent after it", t_hello_order, px)
    check("a request waiting at the gate across HELLO 3 and WATCH is answered in RESP2",
          t_gated_keeps_protocol, px)
    for proto in (2, 3):
        for family in FAMILIES:
            check("RESP%d %s family: replies byte for byte as a direct redis-server, keys on "
                  "every backend" % (proto, family), t_conformance, px, direct, family, proto)
    check("a RESP2 and a RESP3 client pipelining on the same servers never see each "
          "other's encoding", t_interleaved, px)
    check("RESP3 pub/sub: pushes, commands while subscribed, PING, back to RESP2",
          t_pubsub, px, direct)
    check("HELLO that changes the protocol is refused while a connection is the client's "
          "(WATCH); the same protocol is fine", t_refused_in_tx, px)
    check("redis-cli -3: a session and --scan as against redis-server", t_redis_cli, px)
    h.t_exit_clean(px)


if __name__ == "__main__":
    sys.exit(h.main(body))
