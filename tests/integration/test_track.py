#!/usr/bin/python3
"""test_track.py -- client-side caching through shardis (CLIENT TRACKING):
each check runs against a direct redis-server first (the reference: what a
client sees from one Redis) and then through shardis in front of three
servers, with the keys it tracks on every server, and must see the same
invalidations:

- default mode: every key read (GET, a split MGET) is invalidated once when
  it changes, by a client of shardis or by a write made directly on its
  server; a key not read, or read and invalidated already, is not;
- OPTIN with CLIENT CACHING YES, OPTOUT with CLIENT CACHING NO, NOLOOP;
- a transaction's reads are tracked;
- FLUSHALL: one null invalidation;
- pushes interleaved with pipelined replies are never taken for replies;
- CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO answer as
  redis-server does, errors included;
and, through shardis only: a server that is killed, and a reload that
gives keys another server, each send a null invalidation ("drop
everything"), so that nothing cached stays stale.

Invalidations are awaited deterministically: after the writes, the
tracking client reads a key on each server over its own connection (a
barrier), and redis-server sends an invalidation on a connection before
any reply that comes after it.

Run: /usr/bin/python3 tests/integration/test_track.py --shardis build/shardis
"""
import os
import signal
import sys
import time

import redis

import harness as h
from harness import Fail, Raw, RedisServer, Shardis, check, enc, expect, expect_eq

DEBUG = ["--enable-debug-command", "yes"]  # (DEBUG SLEEP in a transaction)


NULL_PUSH = b">2\r\n$10\r\ninvalidate\r\n_\r\n"


def bulk(n):
    return b"$%d\r\n%d\r\n" % (len(str(n)), n)


def is_push(frame):
    return frame.startswith(b">")


class Tracker:
    """A RESP3 client that tracks: replies in order, pushes set aside."""

    def __init__(self, port, *track):
        self.raw = Raw(port)
        self.pushes = []
        self.cmd("HELLO", "3")
        if track:
            expect_eq(self.cmd("CLIENT", "TRACKING", "ON", *track), b"+OK\r\n",
                      "CLIENT TRACKING ON")

    def reply(self):
        while True:
            f = self.raw.reply()
            if not is_push(f):
                return f
            self.pushes.append(f)

    def cmd(self, *args):
        self.raw.send(enc(*args))
        return self.reply()

    def pipeline(self, *cmds):
        self.raw.send(b"".join(enc(*c) for c in cmds))
        return [self.reply() for _ in cmds]

    def invalidated(self, barrier):
        """The invalidations received up to a read of each barrier key:
        [key, ...] (None for a null one), in order; then none are kept."""
        for k in barrier:
            self.reply_to(k)
        out = []
        for f in self.pushes:
            if f == NULL_PUSH:
                out.append(None)
                continue
            v = h.parse(b"*" + f[1:])          # a push parsed as the array it is
            expect(v[0] == b"invalidate", "a push that is no invalidation: %r" % f)
            out.extend(v[1])
        self.pushes = []
        return out

    def reply_to(self, key):
        got = self.cmd("EXISTS", key)
        expect_eq(got, b":0\r\n", "EXISTS %s (a barrier)" % key)

    def close(self):
        self.raw.close()


class Target:
    """Where a check runs: a direct redis-server, or shardis in front of
    three; keys(n) gives n keys on each server, barrier one key per server
    (never written), write() a client of the same target."""

    def __init__(self, name, port, servers, px=None):
        self.name = name
        self.port = port
        self.servers = servers
        self.px = px
        self.writer = redis.Redis(h.HOST, port, socket_timeout=10)
        self.barrier = self.keys("barrier:", 1)
        self.seq = 0

    def keys(self, prefix, n):
        if self.px is None:
            return [("%s%d" % (prefix, i)).encode() for i in range(n)]
        out = []
        for s in range(len(self.servers)):
            out += self.px.keys_on(prefix, s, n)
        return out

    def fresh(self, prefix, n=1):
        self.seq += 1
        return self.keys("%s%d:" % (prefix, self.seq), n)


def t_default(t):
    """GET and a split MGET track every key read; a change by another
    client, or made directly on the server, invalidates it once."""
    a = Tracker(t.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    ks = t.fresh("def:", 2)
    for k in ks:
        t.writer.set(k, "v")
    half = len(ks) // 2
    for k in ks[:half]:
        expect_eq(a.cmd("GET", k), b"$1\r\nv\r\n", "GET")
    got = a.cmd("MGET", *ks[half:])
    expect(got.startswith(b"*%d\r\n" % (len(ks) - half)), "MGET: %r" % got)
    expect_eq(a.invalidated(t.barrier), [], "invalidations before any write")
    for k in ks[::2]:
        t.writer.set(k, "w")
    for i, k in enumerate(ks[1::2]):        # directly on the server that holds it
        srv = t.servers[0] if t.px is None else t.servers[t.px.whereis([k])[k]]
        srv.client.set(k, "x")
    got = a.invalidated(t.barrier)
    expect_eq(sorted(got), sorted(ks), "keys invalidated")
    for k in ks:                            # not read again: not tracked any more
        t.writer.set(k, "y")
    expect_eq(a.invalidated(t.barrier), [], "invalidations of keys not read since")
    a.close()
    return "%d keys, each invalidated once" % len(ks)


def t_not_read(t):
    """A key written but never read by the tracking client: no invalidation."""
    a = Tracker(t.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    ks = t.fresh("nr:")
    for k in ks:
        a.cmd("SET", k, "1")
        t.writer.incr(k)
    expect_eq(a.invalidated(t.barrier), [], "invalidations")
    a.close()


def t_opt(t, mode, caching):
    """OPTIN with CLIENT CACHING YES before a read, OPTOUT with CACHING NO:
    only the reads that count are told of."""
    a = Tracker(t.port, mode)
    ks = t.fresh(mode.lower() + ":", 2)
    cached = []
    for i, k in enumerate(ks):
        if i % 2:
            expect_eq(a.cmd("CLIENT", "CACHING", caching), b"+OK\r\n", "CACHING " + caching)
        if (i % 2 == 1) == (mode == "OPTIN"):
            cached.append(k)
        a.cmd("GET", k)
    for k in ks:
        t.writer.set(k, "1")
    expect_eq(sorted(a.invalidated(t.barrier)), sorted(cached), "keys invalidated")
    a.close()
    return "%d of %d reads cached" % (len(cached), len(ks))


def t_noloop(t):
    """NOLOOP: the client's own writes are not reported, others' are."""
    a = Tracker(t.port, "NOLOOP")
    ks = t.fresh("loop:", 2)
    a.cmd("MGET", *ks)
    mine, theirs = ks[::2], ks[1::2]
    for k in mine:
        expect_eq(a.cmd("SET", k, "mine"), b"+OK\r\n", "SET")
    for k in theirs:
        t.writer.set(k, "theirs")
    expect_eq(sorted(a.invalidated(t.barrier)), sorted(theirs), "keys invalidated")
    a.close()


def t_transaction(t):
    """What a transaction reads is tracked."""
    a = Tracker(t.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    k = t.fresh("tx:")[0]
    t.writer.set(k, "1")
    got = a.pipeline(("MULTI",), ("GET", k), ("EXEC",))
    expect_eq(got[2], b"*1\r\n$1\r\n1\r\n", "EXEC")
    t.writer.set(k, "2")
    expect_eq(a.invalidated(t.barrier), [k], "keys invalidated")
    a.close()


def t_pipelined(t):
    """Invalidations that come while a pipeline's replies do are pushes,
    never taken for replies: every reply is the one its request expects."""
    a = Tracker(t.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    ks = t.fresh("pipe:", 2)
    for k in ks:
        t.writer.set(k, "0")
    rounds = 30
    for n in range(rounds):
        a.raw.send(b"".join(enc("GET", k) for k in ks) + enc("PING"))
        for k in ks:
            t.writer.set(k, str(n + 1))     # while the pipeline is on its way
        for k in ks:
            got = a.reply()
            expect(got in (bulk(n), bulk(n + 1)),
                   "GET %s in round %d: %r" % (k, n, got))
        expect_eq(a.reply(), b"+PONG\r\n", "PING")
        a.invalidated(t.barrier)
        for k in ks:                        # the value of this round, read again
            a.cmd("GET", k)
    for k in ks:
        t.writer.set(k, "end")
    expect_eq(sorted(a.invalidated(t.barrier)), sorted(ks), "last round's invalidations")
    a.close()
    return "%d rounds of %d GETs" % (rounds, len(ks))


def t_switch_keeps_order(t):
    """CLIENT TRACKING ON, OFF and RESET move a client's requests to other
    server connections: what it sent before runs first. A 4 MB SET, then
    the switch and a GET of the key, pipelined: the GET sees that SET. (A
    server reads a 4 MB SET over several turns, and a GET on another
    connection meanwhile: without the wait, a third of the rounds saw the
    value before.)"""
    a = Raw(t.port, timeout=10)
    k = t.fresh("order:")[0]
    rounds = 0

    def reply():                                # (invalidations set aside)
        while True:
            got = a.reply()
            if not got.startswith(b">"):
                return got

    for proto in ("2", "3"):
        for switch in (("CLIENT", "TRACKING", "ON"), ("CLIENT", "TRACKING", "OFF"),
                       ("RESET",)):
            for n in range(10):
                a.send(enc("HELLO", proto))
                reply()
                if switch[-1] == "OFF" or switch == ("RESET",):
                    a.send(enc("CLIENT", "TRACKING", "ON"))
                    expect_eq(reply(), b"+OK\r\n", "TRACKING ON")
                value = ("%s-%s-%d-" % (proto, switch[-1], n)).encode() + b"x" * (4 << 20)
                a.send(enc("SET", k, value) + enc(*switch) + enc("GET", k))
                expect_eq(reply(), b"+OK\r\n", "SET")
                reply()
                got = reply()
                expect(got.endswith(value + b"\r\n"), "%s after %s: GET saw %r" % (
                    proto, " ".join(switch), got[:40]))
                a.send(enc("CLIENT", "TRACKING", "OFF"))
                reply()
                rounds += 1
    a.close()
    return "%d rounds" % rounds


def t_flushall(t):
    """FLUSHALL: one null invalidation ("drop everything"). FLUSHDB in the
    client's own transaction: EXEC's reply, then the one null, never
    between (Redis's "flushdb tracking invalidation message is not
    interleaved with transaction response")."""
    a = Tracker(t.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    ks = t.fresh("flush:")
    for k in ks:
        a.cmd("GET", k)
    t.writer.flushall()
    got = a.invalidated(t.barrier)
    expect_eq(got, [None], "invalidations")
    for k in ks:
        a.cmd("GET", k)
    a.raw.send(enc("MULTI") + enc("FLUSHDB") + enc("EXEC"))
    got = [a.raw.reply() for _ in range(3)]         # (pushes not set aside)
    expect_eq(got, [b"+OK\r\n", b"+QUEUED\r\n", b"*1\r\n+OK\r\n"], "MULTI, FLUSHDB, EXEC")
    expect_eq(a.invalidated(t.barrier), [None], "invalidations after the transaction")
    a.close()


def t_commands(t):
    """CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: the replies and
    errors of the sequence, as its own connection gets them."""
    a = Tracker(t.port)
    out = []
    for c in [("CLIENT", "GETREDIR"), ("CLIENT", "TRACKINGINFO"),
              ("CLIENT", "CACHING", "YES"), ("CLIENT", "TRACKING", "MAYBE"),
              ("CLIENT", "TRACKING", "ON", "PREFIX", "a"),
              ("CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"),
              ("CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"),
              ("CLIENT", "TRACKING", "ON", "NOSUCH"),
              ("CLIENT", "TRACKING", "ON", "REDIRECT", "x"),
              ("CLIENT", "TRACKING", "ON", "OPTIN", "NOLOOP"),
              ("CLIENT", "TRACKINGINFO"), ("CLIENT", "GETREDIR"),
              ("CLIENT", "CACHING", "NO"), ("CLIENT", "CACHING", "MAYBE"),
              ("CLIENT", "CACHING", "YES"), ("CLIENT", "TRACKINGINFO"),
              ("CLIENT", "TRACKING", "ON", "OPTOUT"),
              ("CLIENT", "TRACKING", "OFF"), ("CLIENT", "TRACKINGINFO"),
              ("CLIENT", "TRACKING", "ON", "OPTOUT"), ("CLIENT", "CACHING", "NO"),
              ("CLIENT", "TRACKINGINFO"), ("CLIENT", "CACHING", "YES"),
              ("CLIENT", "TRACKING", "OFF"), ("CLIENT", "CACHING", "NO")]:
        out.append((" ".join(c), a.cmd(*c)))
    a.close()
    return out


class Subscriber:
    """A RESP2 client subscribed to __redis__:invalidate: a REDIRECT target."""

    def __init__(self, port):
        self.raw = Raw(port)
        self.id = int(self.raw.cmd("CLIENT", "ID")[1:-2])
        got = self.raw.cmd("SUBSCRIBE", "__redis__:invalidate")
        expect(got.startswith(b"*3\r\n$9\r\nsubscribe"), "SUBSCRIBE: %r" % got)

    def messages(self, n, timeout=5):
        """The keys of the next n messages (None for a null one)."""
        out = []
        self.raw.sock.settimeout(timeout)
        for _ in range(n):
            v = h.parse(self.raw.reply())
            expect(v[:2] == [b"message", b"__redis__:invalidate"], "a message: %r" % v)
            out.append(v[2])
        return out

    def drain(self, wait=0.2):
        """Whatever comes within wait s, dropped."""
        self.raw.sock.settimeout(wait)
        try:
            while True:
                if not self.raw.sock.recv(1 << 16):
                    break
        except OSError:
            pass
        finally:
            self.raw.sock.settimeout(5)
        self.raw.buf = bytearray()
        self.raw.pos = 0

    def within(self, wait):
        """The keys of every message that comes within wait s."""
        out, end = [], time.monotonic() + wait
        while time.monotonic() < end:
            try:
                out += self.messages(1, timeout=max(end - time.monotonic(), 0.01))
            except (OSError, Fail):
                break
        self.raw.sock.settimeout(5)
        return out

    def quiet(self, wait=0.3):
        """Nothing more arrives for wait s."""
        self.raw.sock.settimeout(wait)
        try:
            d = self.raw.sock.recv(1 << 16)
        except OSError:
            d = b""
        finally:
            self.raw.sock.settimeout(5)
        left = bytes(self.raw.buf[self.raw.pos:]) + d
        expect_eq(left, b"", "more messages")


def t_redirect_resp2(t):
    """A RESP2 client tracks with REDIRECT to a subscriber: the subscriber
    gets one message per key changed (and a null one for FLUSHALL),
    whichever server holds the key."""
    sub = Subscriber(t.port)
    a = Raw(t.port)
    expect_eq(a.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", sub.id), b"+OK\r\n", "TRACKING")
    expect_eq(a.cmd("CLIENT", "GETREDIR"), b":%d\r\n" % sub.id, "GETREDIR")
    ks = t.fresh("r2:", 2)
    for k in ks:
        t.writer.set(k, "1")
        a.cmd("GET", k)
    for k in ks:
        t.writer.set(k, "2")
    got = sub.messages(len(ks))
    expect_eq(sorted(x[0] for x in got), sorted(ks), "keys invalidated")
    for k in ks:                            # read again, then changed again: told again
        a.cmd("GET", k)
    t.writer.set(ks[0], "3")
    expect_eq(sub.messages(1), [[ks[0]]], "invalidated again")
    sub.quiet()
    a.close()
    sub.raw.close()
    return "%d keys" % len(ks)


def t_redirect_resp2_race(t):
    """RESP2 and REDIRECT: the server's invalidation goes to another
    connection than the read's reply (through shardis, two connections to
    the server), and may be read before it. Here it is, on purpose: the
    read is pipelined behind a 4 MB one, and another client changes the
    key right after. Whenever the client read the old value, the
    subscriber must be told of the key."""
    sub = Subscriber(t.port)
    a = Raw(t.port, timeout=10)
    w = Raw(t.port)
    expect_eq(a.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", sub.id), b"+OK\r\n", "TRACKING")
    big, k = "{race%d}big" % t.seq, "{race%d}k" % t.seq
    t.seq += 1
    w.cmd("SET", big, "x" * (4 << 20))
    old_reads = 0
    for n in range(12):
        w.cmd("SET", k, "old%d" % n)
        sub.drain()
        a.send(enc("GET", big) + enc("GET", k))
        w.send(enc("SET", k, "new%d" % n))
        expect_eq(len(a.reply()), len(b"$4194304\r\n") + (4 << 20) + 2, "GET big")
        got = h.parse(a.reply())
        expect_eq(w.reply(), b"+OK\r\n", "SET")
        if got == b"old%d" % n:
            old_reads += 1
            msgs = sub.messages(1, timeout=3)
            expect_eq(msgs, [[k.encode()]], "round %d: the old value read, then" % n)
    expect(old_reads > 0, "no round read the old value: the race was not run")
    for c in (a, w, sub.raw):
        c.close()
    return "%d of 12 rounds read the old value, each invalidated" % old_reads


def t_noloop_no_change(t):
    """NOLOOP: a write of the client's own that fails (WRONGTYPE) or changes
    nothing (SET NX of a key that is there) leaves the key tracked: a later
    change by another client is told, in RESP3, in RESP2 (REDIRECT) and in
    BCAST mode."""
    out = []
    for mode in ("resp3", "resp2", "bcast"):
        sub = Subscriber(t.port) if mode != "resp3" else None
        a = Tracker(t.port) if mode == "resp3" else Raw(t.port)
        track = ["NOLOOP"] + (["REDIRECT", str(sub.id)] if sub else []) + \
                (["BCAST", "PREFIX", "nc%d:" % t.seq] if mode == "bcast" else [])
        expect_eq(a.cmd("CLIENT", "TRACKING", "ON", *track), b"+OK\r\n", "TRACKING")
        k, j = ("nc%d:k" % t.seq).encode(), ("nc%d:j" % t.seq).encode()
        t.seq += 1
        for x in (k, j):
            t.writer.set(x, "1")
            a.cmd("GET", x)
        got_k, got_j = a.cmd("LPUSH", k, "x"), a.cmd("SET", j, "mine", "NX")
        expect(got_k.startswith(b"-WRONGTYPE"), "LPUSH: %r" % got_k)
        expect(got_j in (b"$-1\r\n", b"_\r\n"), "SET NX: %r" % got_j)
        for x in (j, k):                # (j first: right after the client's own)
            t.writer.set(x, "theirs")
        if sub:
            got = sorted(x for m in sub.messages(2 if mode == "resp2" else 2) for x in m)
            sub.raw.close()
        else:
            got = sorted(a.invalidated(t.barrier))
        expect_eq(got, sorted([k, j]), "%s: invalidations after the others' writes" % mode)
        out.append(mode)
        a.close()
    return ", ".join(out)


def t_noloop_transaction(t):
    """NOLOOP: the client's own writes in a transaction are not reported:
    its element of EXEC's reply says whether each changed its key, as a
    write's reply says outside one. One that changed nothing (SET NX of a
    key that is there) leaves the key tracked: another client's change is
    told."""
    a = Tracker(t.port, "NOLOOP")
    ks = t.fresh("ltx:", 5)
    for k in ks:
        t.writer.set(k, "1")
    a.cmd("MGET", *ks)
    mine, same, theirs, discarded, aborted = ks[::5], ks[1::5], ks[2::5], ks[3::5], ks[4::5]
    for k in mine:
        # The write first, then after a read: what follows it in EXEC's
        # reply would not say it changed the key.
        expect_eq(a.pipeline(("MULTI",), ("SET", k, "mine"), ("ECHO", "x"), ("EXEC",))[3],
                  b"*2\r\n+OK\r\n$1\r\nx\r\n", "EXEC")
        expect_eq(a.cmd("GET", k), b"$4\r\nmine\r\n", "GET (tracked again)")
        got = a.pipeline(("MULTI",), ("GET", "ltx-n{%s}" % k.decode()), ("SET", k, "mine"),
                         ("ECHO", "x"), ("EXEC",))[4]
        expect(got in (b"*3\r\n$-1\r\n+OK\r\n$1\r\nx\r\n", b"*3\r\n_\r\n+OK\r\n$1\r\nx\r\n"),
               "EXEC: %r" % got)
        # Two transactions pipelined: the second's write is answered by
        # its own EXEC, not by the first's.
        expect_eq(a.cmd("GET", k), b"$4\r\nmine\r\n", "GET (tracked again)")
        got = a.pipeline(("MULTI",), ("GET", "ltx-n{%s}" % k.decode()), ("EXEC",),
                         ("MULTI",), ("SET", k, "mine"), ("EXEC",))
        expect(got[2] in (b"*1\r\n$-1\r\n", b"*1\r\n_\r\n") and got[5] == b"*1\r\n+OK\r\n",
               "two EXECs: %r" % got)
    for k in same:
        got = a.pipeline(("MULTI",), ("SET", k, "mine", "NX"), ("EXEC",))[2]
        expect(got in (b"*1\r\n$-1\r\n", b"*1\r\n_\r\n"), "EXEC of SET NX: %r" % got)
    # Transactions that never run: their writes were never the client's.
    for k in discarded:
        expect_eq(a.pipeline(("MULTI",), ("SET", k, "mine"), ("DISCARD",))[2], b"+OK\r\n",
                  "DISCARD")
    for k in aborted:
        got = a.pipeline(("MULTI",), ("SET", k, "mine"), ("NOSUCH",), ("EXEC",))[3]
        expect(got.startswith(b"-EXECABORT"), "EXEC: %r" % got)
    told = same + theirs + discarded + aborted
    for k in told:
        t.writer.set(k, "theirs")
    expect_eq(sorted(a.invalidated(t.barrier)), sorted(told), "keys invalidated")
    a.close()
    return "%d of %d keys written in transactions" % (len(mine), len(ks))


def t_noloop_transactions_pipelined(t):
    """NOLOOP: two transactions pipelined, the first sleeping on its server
    while another client changes a key the second writes without changing
    it (SET NX): the client is told (the second's write took the first
    EXEC's reply for its own, and the change went untold)."""
    a = Tracker(t.port, "NOLOOP")
    ks = t.fresh("tp:", 2)
    x, k = ks[0], ks[-1]                # (through shardis: on two servers)
    t.writer.set(k, "old")
    expect_eq(a.cmd("GET", k), b"$3\r\nold\r\n", "GET")
    a.raw.send(b"".join(enc(*c) for c in (
        ("MULTI",), ("SET", x, "x"), ("DEBUG", "SLEEP", "0.3"), ("EXEC",),
        ("MULTI",), ("SET", k, "mine", "NX"), ("EXEC",))))
    time.sleep(0.1)
    t.writer.set(k, "theirs")
    got = [a.reply() for _ in range(7)]
    expect_eq(got[3], b"*2\r\n+OK\r\n+OK\r\n", "the first EXEC")
    expect(got[6] in (b"*1\r\n_\r\n", b"*1\r\n$-1\r\n"), "the second EXEC: %r" % got[6])
    expect_eq(a.invalidated(t.barrier), [k], "keys invalidated")
    a.close()


def t_noloop_expired_in_transaction(t):
    """BCAST NOLOOP: a key the client writes in a transaction, with a TTL
    that runs out while the transaction sleeps (DEBUG SLEEP), expires in
    the same server instant as the write: one message names it, and the
    client is told; another key written in it is not (Redis's own
    "Tracking gets notification of lazy expired keys"). shardis cannot
    tell the expiry from the write in that one message: a key the client
    read after writing it is told. Nothing else comes (a transaction's
    connection closing as idle sent a null)."""
    sub = Subscriber(t.port)
    a = Raw(t.port)
    pfx = "lx%d:" % t.seq
    t.seq += 1
    expect_eq(a.cmd("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", pfx, "REDIRECT", sub.id,
                    "NOLOOP"), b"+OK\r\n", "TRACKING")
    k, other = (pfx + "{t}k").encode(), (pfx + "{t}other").encode()
    a.send(b"".join(enc(*c) for c in (("MULTI",), ("SET", k, "v", "PX", "1"),
                                        ("SET", other, "v"), ("DEBUG", "SLEEP", "0.1"),
                                        ("GET", k), ("EXEC",))))
    got = [a.reply() for _ in range(6)]
    expect_eq(got[5], b"*4\r\n+OK\r\n+OK\r\n+OK\r\n$1\r\nv\r\n",
              "EXEC (its commands run at EXEC's time)")
    # Once as redis-server says it; through shardis also, with it, what
    # it cannot tell from the client's own write (an expiry in another
    # instant is a message of its own).
    got = sub.messages(1) + sub.within(0.5)
    expect(got[:1] == [[k]] and all(m == [k] for m in got),
           "the expired key told, nothing else: %r" % got)
    a.close()
    sub.raw.close()


def t_writes_lose_nothing(t):
    """A tracking client's writes in a transaction (BCAST NOLOOP, as the
    last check's) leave nothing the server tracks: when its transaction's
    connection is closed as idle (0.5 s), other tracking clients keep
    their cache (that closing sent every one of them a null)."""
    a = Tracker(t.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    ks = t.fresh("wln:", 1)
    a.cmd("MGET", *ks)
    sub = Subscriber(t.port)
    b = Raw(t.port)
    b.cmd("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "wlb:", "REDIRECT", sub.id, "NOLOOP")
    y = "wlb:{%d}" % t.seq
    b.send(enc("MULTI") + enc("SET", y + "a", "1") + enc("SET", y + "b", "1") + enc("EXEC"))
    expect_eq([b.reply() for _ in range(4)][3], b"*2\r\n+OK\r\n+OK\r\n", "EXEC")
    b.close()
    sub.raw.close()
    time.sleep(1.2)
    expect_eq(a.invalidated(t.barrier), [], "invalidations after the other's transaction")
    a.close()


def t_noloop_same_instant(t):
    """NOLOOP: the client's write changes nothing (SET NX of a key that is
    there) and another client changes the key in the same instant of its
    server (CLIENT PAUSE WRITE on the server holds both, then runs them
    together): the change is the other's, and the client must be told,
    in RESP3 and RESP2 (REDIRECT). Through shardis the server sees one
    connection for both invalidations' purposes; only the write's reply
    says it changed nothing."""
    rounds = 0
    for mode in ("resp3", "resp2"):
        for n in range(3):
            k = t.fresh("inst:")[0]
            srv = t.servers[0] if t.px is None else t.servers[t.px.whereis([k])[k]]
            w = Raw(t.port)
            w.cmd("SET", k, "1")
            if mode == "resp3":
                a, sub = Tracker(t.port, "NOLOOP"), None
            else:
                sub = Subscriber(t.port)
                a = Raw(t.port)
                a.cmd("CLIENT", "TRACKING", "ON", "NOLOOP", "REDIRECT", sub.id)
            expect_eq(a.cmd("GET", k), b"$1\r\n1\r\n", "GET")
            srv.client.execute_command("CLIENT", "PAUSE", "300", "WRITE")
            raw = a.raw if sub is None else a
            raw.send(enc("SET", k, "mine", "NX"))
            time.sleep(0.05)
            w.send(enc("SET", k, "2"))
            got = a.reply()
            expect(got in (b"_\r\n", b"$-1\r\n"), "SET NX: %r" % got)
            expect_eq(w.reply(), b"+OK\r\n", "SET")
            if sub is None:
                expect_eq(a.invalidated(t.barrier), [k], "%s round %d: told" % (mode, n))
            else:
                expect_eq(sub.messages(1, timeout=3), [[k]], "%s round %d: told" % (mode, n))
                sub.raw.close()
            a.close()
            w.close()
            rounds += 1
    return "%d rounds" % rounds


def t_bcast_on_again(t):
    """CLIENT TRACKING ON BCAST, OFF, ON BCAST and PING pipelined: four
    replies, in order (the second BCAST waits for its connections too)."""
    a = Raw(t.port)
    a.send(enc("CLIENT", "TRACKING", "ON", "BCAST") + enc("CLIENT", "TRACKING", "OFF") +
           enc("CLIENT", "TRACKING", "ON", "BCAST") + enc("RESET") +
           enc("CLIENT", "TRACKING", "ON", "BCAST") + enc("PING"))
    got = [a.reply() for _ in range(6)]
    expect_eq(got, [b"+OK\r\n"] * 3 + [b"+RESET\r\n", b"+OK\r\n", b"+PONG\r\n"], "replies")
    a.close()


def t_caching_kept(t):
    """CLIENT CACHING YES stays through a CLIENT TRACKING ON given again (as
    in redis-server): the next read is tracked."""
    a = Tracker(t.port, "OPTIN")
    k = t.fresh("ck:")[0]
    got = a.pipeline(("CLIENT", "CACHING", "YES"), ("CLIENT", "TRACKING", "ON", "OPTIN"),
                     ("GET", k))
    expect_eq(got[:2], [b"+OK\r\n"] * 2, "replies")
    t.writer.set(k, "1")
    expect_eq(a.invalidated(t.barrier), [k], "keys invalidated")
    a.close()


def t_redirect_resp3(t):
    """A RESP3 client redirects to a RESP3 one: a push there, none to itself."""
    target = Tracker(t.port)
    tid = int(target.cmd("CLIENT", "ID")[1:-2])
    a = Tracker(t.port, "REDIRECT", str(tid))
    ks = t.fresh("r3:", 1)
    for k in ks:
        a.cmd("GET", k)
    for k in ks:
        t.writer.set(k, "1")
    expect_eq(sorted(target.invalidated(t.barrier)), sorted(ks), "pushed to the target")
    expect_eq(a.invalidated(t.barrier), [], "pushed to the tracking client")
    a.close()
    target.close()


def t_redirect_broken(t):
    """The target gone: the tracking client (RESP3) gets tracking-redir-broken
    with the target's id, and TRACKINGINFO says broken_redirect."""
    sub = Subscriber(t.port)
    a = Tracker(t.port, "REDIRECT", str(sub.id))
    k = t.fresh("broken:")[0]
    a.cmd("GET", k)
    sub.raw.close()
    got = None
    deadline = time.monotonic() + 5
    while got is None and time.monotonic() < deadline:
        t.writer.set(k, "x")
        a.cmd("GET", k)
        for f in a.pushes:
            if b"tracking-redir-broken" in f:
                got = f
        a.pushes = []
    expect_eq(got, b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % sub.id,
              "the push")
    info = a.cmd("CLIENT", "TRACKINGINFO")
    expect(b"broken_redirect" in info, "TRACKINGINFO: %r" % info)
    a.close()


def t_bcast(t):
    """BCAST with prefixes: every key changed under a prefix, read or not, on
    any server; one message per prefix; NOLOOP leaves out the client's own."""
    sub = Subscriber(t.port)
    a = Raw(t.port)
    expect_eq(a.cmd("CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", sub.id, "PREFIX", "bca:",
                    "PREFIX", "bcb:", "NOLOOP"), b"+OK\r\n", "TRACKING")
    ka = t.keys("bca:", 1)
    kb = t.keys("bcb:", 1)
    other = t.keys("bcc:", 1)
    for k in ka + kb + other:
        t.writer.set(k, "1")
    got = sub.messages(len(ka) + len(kb))
    expect_eq(sorted(x for m in got for x in m), sorted(ka + kb), "keys invalidated")
    for m in got:                           # each message: one prefix's keys
        expect(len({x[:4] for x in m}) == 1, "one prefix a message: %r" % m)
    for k in ka:
        expect_eq(a.cmd("SET", k, "mine"), b"+OK\r\n", "SET")   # its own: not told
    t.writer.set(kb[0], "2")
    expect_eq(sub.messages(1), [[kb[0]]], "after its own writes")
    info = a.cmd("CLIENT", "TRACKINGINFO")
    expect_eq(h.parse(info), [b"flags", [b"on", b"bcast", b"noloop"], b"redirect", sub.id,
                              b"prefixes", [b"bca:", b"bcb:"]], "TRACKINGINFO")
    sub.quiet()
    a.close()
    sub.raw.close()


def t_info(px):
    """INFO's tracking figures are shardis's: its tracking clients, the keys
    and entries of its table, the BCAST prefixes. (FLUSHALL first: what
    clients gone read stays in the table until it changes, as in
    redis-server's.)"""
    px.client.flushall()
    a = Tracker(px.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    b = Tracker(px.port, "BCAST", "PREFIX", "inf:")
    ks = px.keys_on("info:", 0, 1) + px.keys_on("info:", 1, 1)
    for k in ks:
        a.cmd("GET", k)
    text = Raw(px.port).cmd("INFO").decode()
    fig = dict(l.split(":", 1) for l in text.split("\r\n") if l.startswith("tracking_"))
    expect_eq(fig, {"tracking_clients": "2", "tracking_total_keys": "2",
                    "tracking_total_items": "2", "tracking_total_prefixes": "1"}, "INFO")
    a.close()
    b.close()


def both(name, fn, direct, px):
    """fn against the direct server, then through shardis: each must pass;
    a check that returns what it saw must see the same through both."""
    got = {}

    def run(t):
        got[t.name] = fn(t)
        if isinstance(got[t.name], list):
            return "%d replies" % len(got[t.name])
        return got[t.name]
    check("%s (direct)" % name, run, direct)
    check(name, run, px)
    if isinstance(got.get(px.name), list) and isinstance(got.get(direct.name), list):
        check("%s: shardis answers as redis-server" % name,
              lambda: [expect_eq(p, d, "reply to %s" % d[0]) for p, d in
                       zip(got[px.name], got[direct.name])] and None)


def t_server_killed(px, servers):
    """A server that fails: every tracking client may hold its keys, and
    gets a null invalidation as its connections fail."""
    a = Tracker(px.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    ks = []
    for s in range(3):
        ks += px.keys_on("kill:", s, 1)
    for k in ks:
        a.cmd("GET", k)
    servers[1].kill()
    a.raw.sock.settimeout(5)
    f = a.raw.reply()
    expect_eq(f, NULL_PUSH, "push after the server died")
    servers[1].launch()
    a.close()


def server_clients(r):
    return [dict(kv.split("=", 1) for kv in l.split(" ")) for l in
            r.execute_command("CLIENT", "LIST").decode().strip().split("\n")]


def t_track3_closed(px, servers):
    """The server closes the RESP3 tracking connection (CLIENT KILL there;
    a server's `timeout` would): a RESP2 client whose invalidations were
    redirected there gets a null, and its reads are told of again once
    shardis has redirected them to the new one."""
    sub = Subscriber(px.port)
    a = Raw(px.port)
    expect_eq(a.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", sub.id), b"+OK\r\n", "TRACKING")
    k = px.keys_on("closed:", 0, 1)[0]
    r = servers[0].client
    r.set(k, "1")
    expect_eq(a.cmd("GET", k), b"$1\r\n1\r\n", "GET")
    t3 = [c["id"] for c in server_clients(r) if "t" in c["flags"] and c["resp"] == "3"]
    expect(len(t3) >= 1, "no RESP3 tracking connection on the server")
    for i in t3:
        r.execute_command("CLIENT", "KILL", "ID", i)
    expect_eq(sub.messages(1), [None], "after the connection was closed")
    r.set(k, "2")
    h.until("a redirected read of the key again",
            lambda: a.cmd("GET", k) == b"$1\r\n2\r\n" and any(
                c["resp"] == "2" and c["redir"] not in ("-1", "0") and
                c["redir"] not in t3 for c in server_clients(r)))
    sub.drain()
    a.cmd("GET", k)
    r.set(k, "3")
    expect_eq(sub.messages(1), [[k]], "after the write, redirected anew")
    a.close()
    sub.raw.close()


def t_track3_closed_resp3(px, servers):
    """The server closes the RESP3 tracking connection a RESP3 client's
    reads went over: it forgets them, and the client gets a null."""
    a = Tracker(px.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    k = px.keys_on("closed3:", 0, 1)[0]
    r = servers[0].client
    a.cmd("GET", k)
    t3 = [c["id"] for c in server_clients(r) if "t" in c["flags"] and c["resp"] == "3"]
    expect_eq(len(t3), 1, "RESP3 tracking connections on the server")
    r.execute_command("CLIENT", "KILL", "ID", t3[0])
    a.raw.sock.settimeout(5)
    expect_eq(a.raw.reply(), NULL_PUSH, "after the connection was closed")
    a.close()


def t_noloop_write_failed(px, servers):
    """NOLOOP: a write whose tracking connection is closed before it runs
    (the server paused, then the connection killed) fails; it did not
    change the key, and a later change by another client is told (its
    note was left waiting for a reply that never came, and took every
    later invalidation of the key for the client's own)."""
    a = Tracker(px.port, "NOLOOP")
    k = px.keys_on("wfail:", 0, 1)[0]
    r = servers[0].client
    r.set(k, "1")
    expect_eq(a.cmd("GET", k), b"$1\r\n1\r\n", "GET")
    r.execute_command("CLIENT", "PAUSE", "3000", "WRITE")
    a.raw.send(enc("SET", k, "mine"))
    h.until("the SET waits on the server", lambda: any(
        c["cmd"] == "set" and "t" in c["flags"] for c in server_clients(r)))
    for c in server_clients(r):
        if "t" in c["flags"] and c["resp"] == "3":
            r.execute_command("CLIENT", "KILL", "ID", c["id"])
    got = a.reply()
    expect(got.startswith(b"-ERR backend"), "SET: %r" % got)
    r.execute_command("CLIENT", "UNPAUSE")
    h.until("a GET through a new connection", lambda: a.cmd("GET", k) == b"$1\r\n1\r\n")
    barrier = [px.keys_on("wfb:", s, 1)[0] for s in range(len(servers))]
    expect(None in a.invalidated(barrier), "a null for the connection lost")
    r.set(k, "theirs")
    # (A request routed while the invalidation is on its way is answered
    # first: wait for it rather than for a barrier.)
    got = []
    h.until("the invalidation", lambda: got.extend(a.invalidated(barrier)) or k in got)
    expect_eq(got, [k], "invalidated after the other's write")
    a.close()


def t_eject_return(servers):
    """eject_mode rehash: while a server is ejected its keys are read from
    another, and when it comes back they are written there again, where
    the other server cannot see it: a tracking client gets a null when
    the server returns, so nothing it read meanwhile stays cached."""
    px = Shardis("px-eject", servers, timeout=500, auto_eject_hosts="true",
                 eject_mode="rehash", server_failure_limit=1, server_retry_timeout=1500)
    k = px.keys_on("ej:", 1, 1)[0]
    barrier = [px.keys_on("ejb:", s, 1)[0] for s in range(3)]
    w = Raw(px.port)
    a = Tracker(px.port, )
    a.cmd("CLIENT", "TRACKING", "ON")

    def state():
        return {e[1]: e[11] for e in h.parse(w.cmd("SHARD.NODES"))}[b"redis2"]
    servers[1].kill()
    h.until("redis2 ejected", lambda: w.cmd("SET", k, "during") == b"+OK\r\n" and
            state() == b"ejected")
    expect_eq(a.cmd("GET", k), b"$6\r\nduring\r\n", "GET while it is ejected")
    a.invalidated([b for b in barrier if b != barrier[1]])     # (the failure's nulls)
    servers[1].launch()
    h.until("redis2 back", lambda: state() != b"ejected", timeout=5)
    expect_eq(w.cmd("SET", k, "after"), b"+OK\r\n", "SET after its return")
    expect_eq(a.invalidated(barrier), [None], "invalidations at its return")
    expect_eq(a.cmd("GET", k), b"$5\r\nafter\r\n", "GET after its return")
    a.close()
    w.close()
    h.t_exit_clean(px)


def t_reshard(px, servers):
    """A reload that adds a server gives keys new owners: a tracking client
    gets a null invalidation, and tracks again from there."""
    a = Tracker(px.port, )
    a.cmd("CLIENT", "TRACKING", "ON")
    b = Tracker(px.port, "BCAST")           # every key: none of shardis's own
    ks = px.keys_on("moved:", 0, 3) + px.keys_on("moved:", 1, 3)
    for k in ks:
        px.client.set(k, "1")
        a.cmd("GET", k)
    extra = RedisServer("extra-track")
    extra.name = "redis4"
    text = open(px.conf).read()
    with open(px.conf, "w") as f:
        f.write(text + "    - %s:%d:1 redis4\n" % (h.HOST, extra.port))
    px.client.execute_command("SHARD.RELOAD")
    a.raw.sock.settimeout(10)
    f = a.raw.reply()
    expect_eq(f, NULL_PUSH, "push after the reload")
    h.until("the migration finished", lambda: b"state:stable" in
            px.client.execute_command("SHARD.MIGRATION", "STATUS"), 30)
    for k in ks:
        expect_eq(a.cmd("GET", k), b"$1\r\n1\r\n", "GET %r after the move" % k)
    for k in ks:
        px.client.set(k, "2")
    barrier = [px.keys_on("b4:", s, 1)[0] for s in range(4)]
    expect_eq(sorted(a.invalidated(barrier)), sorted(ks), "invalidations after the move")
    heard = [x for x in b.invalidated(barrier) if x is not None]
    expect(heard and not [x for x in heard if x.startswith(b"__shardis")],
           "BCAST heard: %r" % heard[:8])
    a.close()
    b.close()
    extra.kill()


def body():
    direct_srv = RedisServer("direct", extra=DEBUG)
    servers = h.fresh_servers(3, extra=DEBUG)
    px = Shardis("px", servers, admin_commands="true")
    direct = Target("direct", direct_srv.port, [direct_srv])
    through = Target("shardis", px.port, servers, px)
    for name, fn in [("default", t_default), ("not_read", t_not_read), ("optin", lambda t: t_opt(t, "OPTIN", "YES")),
                     ("optout", lambda t: t_opt(t, "OPTOUT", "NO")), ("noloop", t_noloop),
                     ("transaction", t_transaction), ("pipelined", t_pipelined),
                     ("flushall", t_flushall), ("switch_keeps_order", t_switch_keeps_order),
                     ("commands", t_commands),
                     ("redirect_resp2", t_redirect_resp2),
                     ("redirect_resp2_race", t_redirect_resp2_race),
                     ("redirect_resp3", t_redirect_resp3),
                     ("redirect_broken", t_redirect_broken), ("bcast", t_bcast),
                     ("noloop_no_change", t_noloop_no_change),
                     ("noloop_same_instant", t_noloop_same_instant),
                     ("noloop_transaction", t_noloop_transaction),
                     ("noloop_expired_in_transaction", t_noloop_expired_in_transaction),
                     ("writes_lose_nothing", t_writes_lose_nothing),
                     ("noloop_transactions_pipelined", t_noloop_transactions_pipelined),
                     ("bcast_on_again", t_bcast_on_again), ("caching_kept", t_caching_kept)]:
        both(name, fn, direct, through)
    check("info", t_info, px)
    h.run_with_servers("track3_closed",     # (a shardis where only RESP2 tracks)
                       lambda s: t_track3_closed(Shardis("px-closed", s), s), 1)
    h.run_with_servers("track3_closed_resp3",
                       lambda s: t_track3_closed_resp3(Shardis("px-closed3", s), s), 1)
    h.run_with_servers("noloop_write_failed",
                       lambda s: t_noloop_write_failed(Shardis("px-wfail", s), s), 1)
    check("server_killed", t_server_killed, px, servers)
    h.run_with_servers("eject_return", t_eject_return, 3)
    h.run_with_servers("reshard", lambda s: t_reshard(Shardis("px-reshard", s, admin_commands="true"), s), 3)
    check("exit_clean", h.t_exit_clean, px)


if __name__ == "__main__":
    sys.exit(h.main(body))
