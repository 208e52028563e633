#!/usr/bin/python3
"""test_local.py -- what the proxy answers itself, against real redis-servers.

- CLIENT INFO after CLIENT SETNAME of 600 bytes (and of 100 KB) is exact:
  redis-server's fields, in its order, for those shardis has, the whole
  name, and nothing after it (it once sent ~280 bytes of its own stack);
  HELLO and TIME replies are whole and well formed;
- PUNSUBSCRIBE of a 1 MB pattern reaches the servers well formed: the
  subscriber's connection survives and gets the next message (its header
  once overran a 32-byte buffer);
- COMMAND LIST FILTERBY PATTERN matches as redis-server does (checked
  against a redis-server for every name both know, with odd patterns), and
  "*?*?...#" no longer backtracks exponentially: another client's PING is
  answered within 2 s (it took seconds per command, all clients waiting);
- with distribution jedis and a hash tag, a key of 1.6 MB of '{' is one
  pass: another client's PING is answered within 2 s (it took minutes);
- SHARD.MIGRATION PAUSE and RESUME are admin commands, as SHARD.RELOAD is:
  refused without admin_commands (a migration started by SIGHUP goes on
  moving), while STATUS answers everyone.

Run: /usr/bin/python3 tests/integration/test_local.py --shardis build/shardis
"""
import os
import re
import signal
import sys
import time

import redis

import harness
from harness import (Fail, Raw, RedisServer, Shardis, check, enc, expect, expect_eq, parse,
                     until)

HOST = "127.0.0.1"


def info_fields(line):
    """CLIENT INFO's line as [(field, value)], in order."""
    expect(line.endswith(b"\n") and b"\n" not in line[:-1], "one line: %r" % line[-60:])
    return [tuple(f.split(b"=", 1)) for f in line[:-1].split(b" ")]


# ---- CLIENT INFO, HELLO, TIME ----------------------------------------------------------

def t_client_info(rs):
    px = Shardis("info", [rs])
    direct = Raw(rs.port)
    for n in (600, 100000):
        name = (b"n%d-" % n + b"abcdefghij" * (n // 10))[:n]
        c = Raw(px.port)
        expect_eq(c.cmd("CLIENT", "SETNAME", name), b"+OK\r\n", "CLIENT SETNAME")
        raw = c.cmd("CLIENT", "INFO")
        line = parse(raw)
        expect(isinstance(line, bytes), "CLIENT INFO: %s" % harness.short(raw))
        cid = parse(c.cmd("CLIENT", "ID"))
        port = c.sock.getsockname()[1]
        head = b"id=%d addr=%s:%d laddr=%s:%d fd=" % (cid, HOST.encode(), port, HOST.encode(),
                                                      px.port)
        at = line.find(b" name=" + name + b" age=")
        expect(line.startswith(head) and at > 0, "the name is not all in CLIENT INFO (%d "
               "bytes), which ends %r" % (len(line), raw[-48:]))
        expect(line.endswith(b" cmd=client|info user=default redir=-1 resp=2\n"),
               "CLIENT INFO ends %r" % line[-60:])
        # The same fields as redis-server, in its order, with its values.
        expect_eq(direct.cmd("CLIENT", "SETNAME", name), b"+OK\r\n", "SETNAME on redis")
        theirs = dict(info_fields(parse(direct.cmd("CLIENT", "INFO"))))
        ours = info_fields(line)
        expect_eq([k for k, _ in ours], list(theirs), "redis-server's fields, in its order")
        # (What is the connection's own: where, when, and its buffers.)
        own = (b"id", b"addr", b"laddr", b"fd", b"age", b"idle", b"qbuf", b"qbuf-free",
               b"argv-mem", b"multi-mem", b"rbs", b"rbp", b"obl", b"oll", b"omem", b"tot-mem")
        for k, v in ours:
            if k not in own:
                expect_eq(v, theirs[k], "field %s" % k.decode())
        expect_eq(c.cmd("PING"), b"+PONG\r\n", "PING after CLIENT INFO")
        c.close()
    direct.close()
    harness.t_exit_clean(px)
    return "names of 600 and 100000 bytes"


def t_hello_time(rs):
    px = Shardis("hello", [rs])
    c = Raw(px.port)
    name = b"h" * 5000
    hello = parse(c.cmd("HELLO", "2", "SETNAME", name))
    expect(isinstance(hello, list) and len(hello) == 14, "HELLO: %r" % (hello,))
    direct = harness.one_reply(rs.port, enc("HELLO", "2"))
    expect_eq(hello[0::2], parse(direct)[0::2], "HELLO's keys, as redis-server's")
    expect_eq(parse(c.cmd("CLIENT", "GETNAME")), name, "the name HELLO set")
    t = parse(c.cmd("TIME"))
    expect(isinstance(t, list) and len(t) == 2 and all(re.fullmatch(rb"\d+", x) for x in t),
           "TIME: %r" % (t,))
    expect(abs(int(t[0]) - time.time()) < 5, "TIME's seconds: %r" % t[0])
    c.close()
    harness.t_exit_clean(px)


def t_hello_setname_checked(rs):
    """HELLO ... SETNAME checks the name as CLIENT SETNAME does (a name with
    a space or a newline would break CLIENT INFO and CLIENT LIST), each as
    it comes, with redis-server's replies; an empty name removes it."""
    px = Shardis("helloname", [rs])
    for args in (["HELLO", "2", "SETNAME", "a b"], ["HELLO", "2", "SETNAME", "x\ny"],
                 ["HELLO", "2", "SETNAME", "ok", "SETNAME", "no good"],
                 ["HELLO", "2", "SETNAME", "fine"], ["HELLO", "2", "SETNAME", ""]):
        c, d = Raw(px.port), Raw(rs.port)
        got, want = c.cmd(*args), d.cmd(*args)
        if want.startswith(b"-"):
            expect_eq(got, want, "%r" % (args,))
        else:
            expect(got.startswith(b"*14\r\n"), "%r: %r" % (args, got[:40]))
        expect_eq(c.cmd("CLIENT", "GETNAME"), d.cmd("CLIENT", "GETNAME"),
                  "CLIENT GETNAME after %r" % (args,))
        c.close()
        d.close()
    harness.t_exit_clean(px)


# ---- PUNSUBSCRIBE of a long pattern ----------------------------------------------------

def t_punsubscribe_long(rs):
    px = Shardis("unsub", [rs])
    for verb, unverb, name in (("PSUBSCRIBE", "PUNSUBSCRIBE", b"p" * 1000000 + b"*"),
                               ("SUBSCRIBE", "UNSUBSCRIBE", b"c" * 1000000)):
        sub = Raw(px.port)
        kind = verb.lower().encode()
        expect_eq(sub.cmd(verb, name), b"*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n:1\r\n"
                  % (len(kind), kind, len(name), name), verb)
        expect_eq(parse(sub.cmd(verb, "x*" if verb[0] == "P" else "xy"))[2], 2, verb + " xy")
        un = unverb.lower().encode()
        expect_eq(sub.cmd(unverb, name), b"*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n:1\r\n"
                  % (len(un), un, len(name), name), unverb)
        # The servers took the PUNSUBSCRIBE: the connection is still there.
        # (The proxy's group has a channel of its own there, and no pattern.)
        left = (lambda: rs.client.execute_command("PUBSUB", "NUMPAT")) if verb[0] == "P" \
            else (lambda: sum(n for _, n in rs.client.pubsub_numsub(name, "xy")))
        until("%s: the server has one subscription of ours left" % unverb,
              lambda: left() == 1)
        expect_eq(px.client.publish("xy", "hello"), 1, "PUBLISH receivers")
        msg = parse(sub.reply())
        expect_eq(msg[-1], b"hello", "the message after %s" % unverb)
        sub.close()
    harness.t_exit_clean(px)
    return "1 MB pattern and channel"


# ---- COMMAND LIST FILTERBY PATTERN -------------------------------------------------------

PATTERNS = [b"GET", b"get", b"client|*", b"CLIENT|*", b"*|*", b"?et", b"[a-c]*", b"[^a-y]*",
            b"h[a-e]*", b"*[", b"[a-", b"[a-]*", b"[Z-a]*", b"[]]*", b"*\\", b"x\\*",
            b"[\\]]*", b"[\\-]*", b"*e?", b"s*t", b"**", b"*", b"[", b"[^", b"*[^a-z|]*",
            b"\\g\\et", b"z*z", b"[abc", b"*x*y*z*", b"b[l-r]*", b"[r-b]*", b"*\xff*",
            b"[a-\xff]*", b"shard.*"]


def names(conn, *filt):
    return {n.lower() for n in parse(conn.cmd("COMMAND", "LIST", *filt))}


def t_pattern_like_redis(rs):
    px = Shardis("pattern", [rs])
    c, direct = Raw(px.port), Raw(rs.port)
    both = names(c) & names(direct)
    expect(len(both) > 150, "names both know: %d" % len(both))
    for p in PATTERNS:
        ours = names(c, "FILTERBY", "PATTERN", p) & both
        theirs = names(direct, "FILTERBY", "PATTERN", p) & both
        expect_eq(sorted(ours), sorted(theirs), "names matching %r" % p)
    c.close()
    direct.close()
    harness.t_exit_clean(px)
    return "%d patterns over %d names" % (len(PATTERNS), len(both))


def t_pattern_bounded(rs):
    px = Shardis("glob", [rs])
    bad = b"*?" * 16 + b"#"
    other = Raw(px.port, timeout=2)
    expect_eq(other.cmd("PING"), b"+PONG\r\n", "PING before")
    c = Raw(px.port, timeout=10)
    c.send(enc("COMMAND", "LIST", "FILTERBY", "PATTERN", bad) * 3)
    time.sleep(0.2)            # let the proxy begin on it; the old glob took seconds each
    t0 = time.monotonic()
    expect_eq(other.cmd("PING"), b"+PONG\r\n", "another client's PING meanwhile")
    waited = time.monotonic() - t0
    want = harness.one_reply(rs.port, enc("COMMAND", "LIST", "FILTERBY", "PATTERN", bad))
    for _ in range(3):
        expect_eq(c.reply(), want, "the reply, as redis-server's")
    c.close()
    other.close()
    harness.t_exit_clean(px)
    return "PING answered in %.3f s" % waited


# ---- jedis hash tags ----------------------------------------------------------------------

def t_jedis_tag_linear(rs):
    px = Shardis("jedis", [rs], distribution="jedis", hash="murmur64a")
    other = Raw(px.port, timeout=2)
    expect_eq(other.cmd("PING"), b"+PONG\r\n", "PING before")
    key = b"{" * 1600000
    c = Raw(px.port, timeout=10)
    c.send(enc("SET", key, "v") + enc("GET", key))
    time.sleep(0.2)            # let the proxy begin on it; the old scan took minutes
    t0 = time.monotonic()
    expect_eq(other.cmd("PING"), b"+PONG\r\n", "another client's PING meanwhile")
    waited = time.monotonic() - t0
    expect_eq(c.reply(), b"+OK\r\n", "SET of the long key")
    expect_eq(c.reply(), b"$1\r\nv\r\n", "GET of the long key")
    expect_eq(rs.client.get(key), b"v", "the key on its server")
    c.close()
    other.close()
    harness.t_exit_clean(px)
    return "PING answered in %.3f s" % waited


# ---- SHARD.MIGRATION PAUSE|RESUME ---------------------------------------------------------

def migration_status(px):
    text = px.client.execute_command("SHARD.MIGRATION", "STATUS").decode()
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


def t_migration_admin(servers):
    a, b, c = servers
    plain = Shardis("plain", [a], migration_rate=20, migration_batch=10)
    admin = Shardis("admin", [c], admin_commands="true")   # not in plain's group
    for verb in ("PAUSE", "RESUME"):
        for px, want in ((plain, "ERR 'shard.migration %s' is an admin command: it runs only "
                          "with admin_commands: true in pool 'alpha'" % verb.lower()),
                         (admin, "ERR no migration in progress")):
            try:
                px.client.execute_command("SHARD.MIGRATION", verb)
                raise Fail("%s: SHARD.MIGRATION %s with no migration answered OK"
                           % (px.name, verb))
            except redis.ResponseError as e:
                expect_eq("ERR " + str(e), want, "%s: %s" % (px.name, verb))
    expect_eq(migration_status(plain)["state"], "stable", "STATUS without admin_commands")
    # A migration begun by SIGHUP (no admin command needed): still refused.
    pipe = plain.client.pipeline(transaction=False)
    for i in range(2000):
        pipe.set("k:%d" % i, i)
    pipe.execute()
    text = open(plain.conf).read()
    with open(plain.conf, "w") as f:
        f.write(text + "    - %s:%d:1 redis2\n" % (HOST, b.port))
    os.kill(plain.pid, signal.SIGHUP)
    until("the migration is moving", lambda: migration_status(plain)["state"] == "moving")
    for verb in ("PAUSE", "RESUME"):
        try:
            plain.client.execute_command("SHARD.MIGRATION", verb)
            raise Fail("SHARD.MIGRATION %s without admin_commands answered OK" % verb)
        except redis.ResponseError as e:
            expect("admin command" in str(e), "error %r" % str(e))
        expect_eq(migration_status(plain)["state"], "moving", "state after a refused " + verb)
    harness.t_exit_clean(admin)
    harness.t_exit_clean(plain)


def body():
    rs = RedisServer("r1")
    check("CLIENT INFO after a 600-byte (and 100 KB) CLIENT SETNAME: exact, as redis-server",
          t_client_info, rs)
    check("HELLO 2 SETNAME of 5 KB and TIME: whole replies", t_hello_time, rs)
    check("HELLO SETNAME refuses what CLIENT SETNAME refuses, as redis-server",
          t_hello_setname_checked, rs)
    check("PUNSUBSCRIBE / UNSUBSCRIBE of a 1 MB name reach the server well formed",
          t_punsubscribe_long, rs)
    check("COMMAND LIST FILTERBY PATTERN matches as redis-server does", t_pattern_like_redis, rs)
    check("COMMAND LIST FILTERBY PATTERN *?*?...#: other clients answered within 2 s",
          t_pattern_bounded, rs)
    check("jedis hash tag of a 1.6 MB key of '{': other clients answered within 2 s",
          t_jedis_tag_linear, rs)
    check("SHARD.MIGRATION PAUSE|RESUME need admin_commands; STATUS does not",
          t_migration_admin, [RedisServer("m%d" % i) for i in (1, 2, 3)])


if __name__ == "__main__":
    sys.exit(harness.main(body))
