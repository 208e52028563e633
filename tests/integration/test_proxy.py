#!/usr/bin/python3
"""test_proxy.py -- shardis behaves as one Redis in front of three.

Starts its own redis-servers (loopback, free ports, no persistence) and
shardis processes, and drives them the way real clients do: raw sockets
(exact bytes), redis-py, redis-cli (one-shot and interactive on a pty) and
redis-benchmark. Each named check prints `ok   <name>` or
`FAIL <name>: <detail>`; the run ends with `N passed, N failed`.

What it proves:
- placement: every key (ascii, {tag}ged, binary) is stored on exactly the
  server SHARD.WHEREIS names, and on no other; a hash tag keeps keys together;
- order and exactness: 10,000 pipelined mixed commands (forwarded, split,
  local, refused) are answered in order, each exactly as computed; values
  (binary, CRLF, empty, 1/5/20 MB) come back byte for byte; MSET/MGET/DEL
  split across servers work with hundreds of keys per server;
- local commands (PING, ECHO, TIME, SELECT, HELLO, CLIENT, COMMAND, INFO,
  SHARD.*, QUIT) and inline commands work;
- wherever shardis mimics redis-server (unknown command, wrong arity,
  unknown subcommand, protocol errors, AUTH), its reply is byte-for-byte the
  reply of a direct redis-server to the same bytes; a protocol error closes
  that connection only;
- CROSSSLOT for keys on two servers, success for {tag}ged ones;
- AUTH: clients must authenticate, and the backends get the password;
- failures: a backend killed mid-pipeline or hung (SIGSTOP, timeout) fails
  only its own keys, with `-ERR backend <name> unavailable: ...`, and the
  others keep answering; a client that does not read does not slow others
  or blow up memory; client_connections; SIGTERM drains and exits 0;
- memory per client (measured and printed; at most 1 KiB after a request,
  and back near idle once the clients leave), and
  an idle client holds no 14 KiB chunk after a locally answered request;
- every shardis exits 0 on SIGTERM with a clean stderr (run it with a
  sanitizer build, e.g. --shardis build-asan/shardis, to catch memory errors).

Run: /usr/bin/python3 tests/integration/test_proxy.py --shardis build/shardis
Only processes it started are stopped (by PID); all traffic is loopback;
the whole run takes well under two minutes.
"""
import fcntl
import os
import random
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

import redis

import harness
from harness import (HOST, Fail, Raw, RedisServer, Shardis, array, bulk, check, enc, expect,
                     expect_eq, one_reply, parse, reply_then_eof, rss, short, silent_open,
                     stop, t_exit_clean, until)


# ---- 1. placement ------------------------------------------------------------------

def placement_keys():
    rnd = random.Random(1)
    keys = [b"pl:%d" % i for i in range(1200)]
    for i in range(200):
        keys += [b"{user%d}.a" % i, b"{user%d}.b" % i]
    while len(keys) < 2000:
        keys.append(bytes(rnd.choice(b"\x00\r\n\xff\x80{} ab") if rnd.random() < 0.3
                          else rnd.randrange(256) for _ in range(rnd.randint(1, 24))))
        keys = list(dict.fromkeys(keys))
    return keys


def t_placement(px, backends):
    keys = placement_keys()
    pipe = px.client.pipeline(transaction=False)
    for k in keys:
        pipe.set(k, b"val:" + k)
    res = pipe.execute(raise_on_error=False)
    bad = [(k, r) for k, r in zip(keys, res) if r is not True]
    expect(not bad, "%d SETs failed, e.g. %s" % (len(bad), short(bad[:2])))
    where = px.whereis(keys)
    held = []
    for b in backends:
        pipe = b.client.pipeline(transaction=False)
        for k in keys:
            pipe.get(k)
        held.append(pipe.execute())
    wrong = []
    for i, k in enumerate(keys):
        on = [s for s in range(len(backends)) if held[s][i] is not None]
        if on != [where[k]] or held[where[k]][i] != b"val:" + k:
            wrong.append((k, where[k], on))
    expect(not wrong, "%d of %d keys not (only) where SHARD.WHEREIS says, e.g. "
           "(key, whereis, held by) %s" % (len(wrong), len(keys), short(wrong[:3], 300)))
    per = [sum(1 for k in keys if where[k] == s) for s in range(3)]
    expect(min(per) > len(keys) // 10, "lopsided placement %s" % per)
    nbin = sum(1 for k in keys if not k.isascii() or b"\r" in k or b"\x00" in k)
    return "%d keys (%d binary), per server %s" % (len(keys), nbin, per)


def t_tag_together(px, backends):
    where = px.whereis([b"{user1}.a", b"{user1}.b"])
    expect_eq(where[b"{user1}.a"], where[b"{user1}.b"], "servers of {user1}.a, {user1}.b")
    s = where[b"{user1}.a"]
    for k in (b"{user1}.a", b"{user1}.b"):
        expect_eq(backends[s].client.get(k), b"val:" + k, "%r on redis%d" % (k, s + 1))
    # 200 tags: both keys of each on one server, and the tags spread out.
    tags = [b"{user%d}" % i for i in range(200)]
    w = px.whereis([t + b".a" for t in tags] + [t + b".b" for t in tags])
    split = [t for t in tags if w[t + b".a"] != w[t + b".b"]]
    expect(not split, "tags split across servers: %s" % short(split[:5]))
    on = len({w[t + b".a"] for t in tags})
    expect(on >= 2, "200 tags all on %d server" % on)
    return "{user1} on redis%d" % (s + 1)


# ---- 2. pipeline order -------------------------------------------------------------

def order_pipeline(prefix, n=10000, seed=2):
    """n mixed commands and the exact reply each must get, from a model."""
    rnd = random.Random(seed)
    skeys = [prefix + b"s:%d" % i for i in range(40)]
    ckeys = [prefix + b"c:%d" % i for i in range(20)]
    lkeys = [prefix + b"l:%d" % i for i in range(20)]
    strings, counters, lists = {}, {}, {}
    reqs, wants = [], []
    ops = ["set"] * 6 + ["get"] * 6 + ["incr"] * 3 + ["lpush"] * 3 + ["lrange"] * 2 + \
          ["del", "mget", "del3", "ping", "echo", "unknown", "arity", "wrongtype", "inline"]
    for i in range(n):
        op = rnd.choice(ops)
        if op == "set":
            k, v = rnd.choice(skeys), b"v%d" % i
            strings[k] = v
            req, want = enc("SET", k, v), b"+OK\r\n"
        elif op == "get":
            k = rnd.choice(skeys)
            req, want = enc("GET", k), bulk(strings.get(k))
        elif op == "incr":
            k = rnd.choice(ckeys)
            counters[k] = counters.get(k, 0) + 1
            req, want = enc("INCR", k), b":%d\r\n" % counters[k]
        elif op == "lpush":
            k, v = rnd.choice(lkeys), b"e%d" % i
            lists.setdefault(k, []).insert(0, v)
            req, want = enc("LPUSH", k, v), b":%d\r\n" % len(lists[k])
        elif op == "lrange":
            k = rnd.choice(lkeys)
            req, want = enc("LRANGE", k, 0, 2), array([bulk(v) for v in lists.get(k, [])[:3]])
        elif op == "del":
            k = rnd.choice(skeys)
            req, want = enc("DEL", k), b":%d\r\n" % (strings.pop(k, None) is not None)
        elif op == "mget":          # keys on several servers: split and merged
            ks = rnd.sample(skeys, 4)
            req, want = enc("MGET", *ks), array([bulk(strings.get(k)) for k in ks])
        elif op == "del3":
            ks = rnd.sample(skeys, 3)
            req = enc("DEL", *ks)
            want = b":%d\r\n" % sum(strings.pop(k, None) is not None for k in ks)
        elif op == "ping":
            req, want = enc("PING"), b"+PONG\r\n"
        elif op == "echo":
            v = b"hi %d\r\n" % i
            req, want = enc("ECHO", v), bulk(v)
        elif op == "unknown":
            req = enc("NOSUCH%d" % (i % 5), "a", "b%d" % i)
            want = b"-ERR unknown command 'NOSUCH%d', with args beginning with: 'a' 'b%d' \r\n" \
                % (i % 5, i)
        elif op == "arity":
            req, want = enc("GET"), b"-ERR wrong number of arguments for 'get' command\r\n"
        elif op == "wrongtype":
            k = rnd.choice(lkeys)
            if k in lists:
                want = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
            else:
                counters[k] = counters.get(k, 0) + 1   # (an INCR'd list key stays a counter)
                want = b":%d\r\n" % counters[k]
                lkeys.remove(k)
                ckeys.append(k)
            req = enc("INCR", k)
        else:                       # inline, in the middle of the array requests
            k = rnd.choice(skeys)
            req, want = b"GET " + k + b"\r\n", bulk(strings.get(k))
        reqs.append(req)
        wants.append(want)
    return reqs, wants


def run_pipeline(port, reqs, timeout=20.0):
    """Send every request in one write (from a thread) and read as many replies."""
    c = Raw(port, timeout)
    data = b"".join(reqs)
    t = threading.Thread(target=c.send, args=(data,), daemon=True)
    t.start()
    try:
        got = [c.reply() for _ in reqs]
    finally:
        t.join(timeout)
        c.close()
    return got


def t_order(px, direct):
    prefix = b"ord:%d:" % os.getpid()
    reqs, wants = order_pipeline(prefix)
    # Premise: the model is redis-server's behaviour (same commands, direct).
    dreqs, dwants = order_pipeline(b"orddirect:%d:" % os.getpid())
    dgot = run_pipeline(direct.port, dreqs)
    bad = [i for i in range(len(dreqs)) if dgot[i] != dwants[i]]
    expect(not bad, "test premise: direct redis-server disagrees with the model at #%d: "
           "%s vs %s" % (bad[0], short(dgot[bad[0]]), short(dwants[bad[0]])) if bad else "")
    t0 = time.monotonic()
    got = run_pipeline(px.port, reqs)
    dt = time.monotonic() - t0
    bad = [i for i in range(len(reqs)) if got[i] != wants[i]]
    if bad:
        i = bad[0]
        raise Fail("%d of %d replies wrong; first #%d for %s: got %s, want %s"
                   % (len(bad), len(reqs), i, short(reqs[i], 80), short(got[i]), short(wants[i])))
    return "%d replies in order in %.2f s" % (len(reqs), dt)


# ---- 3. byte-for-byte --------------------------------------------------------------

def t_value(px, backends, key, val):
    c = Raw(px.port, 10)
    try:
        expect_eq(c.cmd("SET", key, val), b"+OK\r\n", "SET")
        expect_eq(c.cmd("GET", key), bulk(val), "GET")
    finally:
        c.close()
    owner = px.whereis([key])[key]
    expect(backends[owner].client.get(key) == val,
           "redis%d (the owner) does not hold the exact bytes" % (owner + 1))
    return "%d bytes" % len(val)


def t_huge_set(px, backends, size):
    """SET of a value larger than 1,024 read chunks, then PING behind it."""
    val = bytes(random.Random(3).randrange(256) for _ in range(4096)) * (size // 4096)
    key = b"huge:set"
    c = Raw(px.port, 5)
    try:
        c.send(enc("SET", key, val) + enc("PING"))
        got = [c.reply(), c.reply()]
    finally:
        c.close()
    expect_eq(got, [b"+OK\r\n", b"+PONG\r\n"], "SET %d bytes + PING" % len(val))
    owner = px.whereis([key])[key]
    expect(backends[owner].client.get(key) == val, "the owner does not hold the value")
    return "%d bytes" % len(val)


def t_huge_get(px, backends, size):
    """GET of a value larger than 1,024 chunks (stored directly on its owner)."""
    val = bytes(random.Random(4).randrange(256) for _ in range(4096)) * (size // 4096)
    key = b"huge:get"
    owner = px.whereis([key])[key]
    backends[owner].client.set(key, val)
    want = bulk(val) + b"+PONG\r\n"
    c = Raw(px.port, 5)
    try:
        c.send(enc("GET", key) + enc("PING"))
        got = b""
        try:
            while len(got) < len(want):
                d = c.sock.recv(1 << 20)
                if not d:
                    break
                got += d
        except socket.timeout:
            raise Fail("got %d of %d reply bytes in 5 s: the reply never comes"
                       % (len(got), len(want)))
    finally:
        c.close()
    expect(got == want, "reply differs (%d bytes, want %d)" % (len(got), len(want)))
    return "%d bytes" % len(val)


def keys_by_server(px, prefix, n):
    """n keys on each server: {server index: [keys]}."""
    rnd = random.Random(prefix)
    cands = [b"%s%08x" % (prefix, rnd.getrandbits(32)) for _ in range(6 * n)]
    where = px.whereis(cands)
    by = {s: [k for k in cands if where[k] == s][:n] for s in range(3)}
    expect(all(len(v) == n for v in by.values()), "could not find %d keys per server" % n)
    return by


def wait_healthy(px, timeout=6.0):
    """Wait until every server answers through px (after an earlier failure
    its backend is retried with a backoff of up to 2 s)."""
    keys = [px.keys_on("health:", s)[0] for s in range(len(px.servers))]
    end = time.monotonic() + timeout
    c = Raw(px.port)
    try:
        while True:
            bad = [k for k in keys if c.cmd("GET", k).startswith(b"-")]
            if not bad:
                return
            if time.monotonic() > end:
                raise Fail("backends still failing %.0f s later" % timeout)
            time.sleep(0.1)
    finally:
        c.close()


def t_split_many(px, backends, cmd, per_server, servers):
    """A split MSET/MGET/DEL with per_server keys on each of servers, the
    servers alternating key by key (so no two neighbours share a reply)."""
    wait_healthy(px)
    by = keys_by_server(px, b"many:%s:" % cmd.encode(), per_server)
    keys = [by[s][i] for i in range(per_server) for s in servers]
    for s in servers:                # the values, stored directly on their owners
        pipe = backends[s].client.pipeline(transaction=False)
        for k in by[s]:
            pipe.set(k, b"old:" + k)
        pipe.execute()
    if cmd == "MSET":
        req = enc("MSET", *[x for k in keys for x in (k, b"new:" + k)])
        want = b"+OK\r\n"
    elif cmd == "MGET":
        req, want = enc("MGET", *keys), array([bulk(b"old:" + k) for k in keys])
    else:
        req, want = enc("DEL", *keys), b":%d\r\n" % len(keys)
    c = Raw(px.port, 4)
    try:
        c.send(req + enc("PING"))
        got = c.reply()
        expect_eq(got, want, "%s of %d keys (%d per server)" % (cmd, len(keys), per_server))
        expect_eq(c.reply(), b"+PONG\r\n", "PING behind it")
    finally:
        c.close()
    if cmd == "MSET":
        for s in servers:
            vals = backends[s].client.mget(by[s])
            expect(vals == [b"new:" + k for k in by[s]], "redis%d lacks the new values" % (s + 1))
    return "%d keys" % len(keys)


def t_split_sizes(px, backends):
    """Split MSET and MGET whose keys and values straddle the size up to
    which shardis copies an argument (512 bytes) or a reply's element (512
    with its header: a 504-byte value) rather than forwarding slices of it, pipelined so that arguments also straddle the
    14 KiB read chunks: every byte must land on, and come back from, the
    right server."""
    wait_healthy(px)
    sizes = [0, 1, 63, 504, 505, 511, 512, 513, 1000, 16383, 16384, 70000]
    by = keys_by_server(px, b"sizes:", len(sizes))
    rnd = random.Random(7)
    keys, vals = [], {}
    for i, n in enumerate(sizes):
        for s in range(3):      # neighbours on different servers
            # Keys of several lengths too, kept on server s by a hash tag.
            k = b"{" + by[s][i] + b"}" + b"." * rnd.choice([0, 500, 600])
            keys.append(k)
            vals[k] = bytes(rnd.getrandbits(8) for _ in range(n))
    reqs = b""
    for _ in range(3):
        rnd.shuffle(keys)
        reqs += enc("MSET", *[x for k in keys for x in (k, vals[k])]) + enc("MGET", *keys)
    c = Raw(px.port, 10)
    try:
        c.send(reqs)
        for _ in range(3):
            expect_eq(c.reply(), b"+OK\r\n", "MSET of values of every size")
            c.reply()
        rnd.shuffle(keys)
        got = c.cmd("MGET", *keys)
    finally:
        c.close()
    expect_eq(got, array([bulk(vals[k]) for k in keys]), "MGET of values of every size")
    where = px.whereis(keys)
    for k in keys:
        expect(backends[where[k]].client.get(k) == vals[k],
               "redis%d lacks the exact value of a %d-byte key" % (where[k] + 1, len(k)))
    return "%d keys, %d bytes per MSET" % (len(keys), sum(map(len, vals.values())))


# ---- 4. redis-cli ------------------------------------------------------------------

def t_cli_oneshot(px):
    def cli(*a):
        p = subprocess.run([harness.ARGS.redis_cli, "-h", HOST, "-p", str(px.port)] + list(a),
                           capture_output=True, timeout=10)
        return p.returncode, p.stdout
    expect_eq(cli("set", "clik", "cli value"), (0, b"OK\n"), "redis-cli set")
    expect_eq(cli("get", "clik"), (0, b"cli value\n"), "redis-cli get")
    expect_eq(cli("get", "cli:missing"), (0, b"\n"), "redis-cli get of a missing key")
    return ""


def t_cli_interactive(px):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    home = os.path.join(harness.TMP, "clihome")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, TERM="xterm", HOME=home,
               REDISCLI_HISTFILE=os.path.join(home, "history"))
    p = subprocess.Popen([harness.ARGS.redis_cli, "-h", HOST, "-p", str(px.port)], stdin=slave,
                         stdout=slave, stderr=slave, env=env, start_new_session=True)
    harness.PROCS.append(p)
    os.close(slave)
    seen = b""

    def until(pat, timeout=5.0):
        nonlocal seen
        end = time.monotonic() + timeout
        while pat not in seen and time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    d = os.read(master, 4096)
                except OSError:
                    break
                if not d:
                    break
                seen += d
        if pat not in seen:
            raise Fail("redis-cli never printed %r; screen: %s" % (pat, short(seen[-300:], 400)))
        at = seen.index(pat) + len(pat)
        seen = seen[at:]

    try:
        prompt = b"%s:%d> " % (HOST.encode(), px.port)
        until(prompt)
        os.write(master, b"set ik iv\r")
        until(b"\r\nOK\r\n")
        until(prompt)
        os.write(master, b"get ik\r")
        until(b'\r\n"iv"\r\n')
        until(prompt)
        os.write(master, b"quit\r")
        try:
            rc = p.wait(5)
        except subprocess.TimeoutExpired:
            raise Fail("redis-cli did not exit after quit")
        expect_eq(rc, 0, "redis-cli exit code")
    finally:
        stop(p)
        os.close(master)
    expect_eq(px.client.get("ik"), b"iv", "ik through the proxy afterwards")
    return ""


# ---- 5. redis-py -------------------------------------------------------------------

def t_py_pipeline(px):
    r = px.client
    pipe = r.pipeline(transaction=False)
    for i in range(250):
        pipe.set("py:%d" % i, i)
        pipe.incr("py:%d" % i)
    res = pipe.execute()
    expect_eq(len(res), 500, "replies")
    want = [x for i in range(250) for x in (True, i + 1)]
    expect_eq(res, want, "pipeline replies")
    expect_eq(r.get("py:249"), b"250", "py:249 afterwards")
    return "500 commands"


def t_py_mget(px):
    r = px.client
    keys = ["{mg}.%d" % i for i in range(10)]
    where = px.whereis([k.encode() for k in keys])
    expect(len(set(where.values())) == 1, "{mg} keys on several servers")
    r.mset({k: "v" + k for k in keys})
    expect_eq(r.mget(keys + ["{mg}.missing"]), [("v" + k).encode() for k in keys] + [None],
              "MGET (one server)")
    # And across servers: split per server, merged in key order.
    rnd = random.Random(6)
    keys = ["mgx:%08x" % rnd.getrandbits(32) for i in range(30)]
    expect(len(set(px.whereis([k.encode() for k in keys]).values())) == 3,
           "mgx keys not on all 3 servers")
    r.mset({k: "w" + k for k in keys[::2]})
    expect_eq(r.mget(keys), [("w" + k).encode() if i % 2 == 0 else None
                             for i, k in enumerate(keys)], "MGET (3 servers)")
    expect_eq(r.delete(*keys), 15, "DEL across servers (sum)")
    return ""


def t_py_hash(px):
    r = px.client
    r.delete("h:1")
    expect_eq(r.hset("h:1", mapping={"a": "1", "b": "2", "c": "x"}), 3, "HSET")
    expect_eq(r.hget("h:1", "b"), b"2", "HGET")
    expect_eq(r.hincrby("h:1", "a", 5), 6, "HINCRBY")
    expect_eq(r.hgetall("h:1"), {b"a": b"6", b"b": b"2", b"c": b"x"}, "HGETALL")
    expect_eq(r.hdel("h:1", "c", "zz"), 1, "HDEL")
    expect_eq(r.hlen("h:1"), 2, "HLEN")
    expect_eq(r.hmget("h:1", "a", "b", "q"), [b"6", b"2", None], "HMGET")
    return ""


def t_py_expire(px):
    r = px.client
    r.set("ttl:1", "x")
    expect_eq(r.ttl("ttl:1"), -1, "TTL without expiry")
    expect(r.expire("ttl:1", 100) is True, "EXPIRE")
    t = r.ttl("ttl:1")
    expect(99 <= t <= 100, "TTL after EXPIRE 100: %r" % t)
    expect(r.pexpire("ttl:1", 300) is True, "PEXPIRE")
    time.sleep(0.5)
    expect_eq(r.get("ttl:1"), None, "value after its 300 ms expired")
    expect_eq(r.ttl("ttl:1"), -2, "TTL of a missing key")
    return ""


def t_py_eval(px):
    r = px.client
    r.set("ev:1", "from lua")
    expect_eq(r.eval("return redis.call('get', KEYS[1])", 1, "ev:1"), b"from lua", "EVAL 1 key")
    # No key: it runs read-only (test_compat.py has the rest).
    expect_eq(r.eval("return 1", 0), 1, "EVAL 0 keys")
    try:
        r.eval("return redis.call('set', 'ev:2', 1)", 0)
    except redis.ResponseError as e:
        expect("read-only" in str(e), "a keyless EVAL that writes: %r" % str(e))
        return "EVAL 0 that writes: %s" % e
    raise Fail("a keyless EVAL that writes did not fail")


# ---- 6. redis-benchmark --------------------------------------------------------------

def t_benchmark(px, extra):
    p = subprocess.run([harness.ARGS.redis_benchmark, "-h", HOST, "-p", str(px.port), "-t", "set,get",
                        "-n", "5000", "-c", "10", "-q"] + extra, capture_output=True, timeout=60)
    out = p.stdout.decode(errors="replace")
    lines = [l.strip() for l in re.split(r"[\r\n]", out)]
    rps = [l for l in lines if re.match(r"^(SET|GET): [\d.]+ requests per second", l)]
    expect_eq(p.returncode, 0, "exit code")
    expect(len(rps) == 2, "want 2 'requests per second' lines, got: %s" % short(rps, 300))
    return "; ".join(l.split(",")[0] for l in rps)


# ---- 7. local commands ------------------------------------------------------------------

def t_local_simple(px):
    c = Raw(px.port)
    try:
        expect_eq(c.cmd("PING"), b"+PONG\r\n", "PING")
        expect_eq(c.cmd("ping", "hello\r\nthere"), bulk(b"hello\r\nthere"), "PING msg")
        expect_eq(c.cmd("ECHO", b"\x00bin\xff"), bulk(b"\x00bin\xff"), "ECHO")
        expect_eq(c.cmd("SELECT", "0"), b"+OK\r\n", "SELECT 0")
        expect_eq(c.cmd("SELECT", "16"),
                  b"-ERR DB index is out of range\r\n", "SELECT 16")
    finally:
        c.close()
    return ""


def t_time(px):
    v = parse(one_reply(px.port, enc("TIME")))
    expect(isinstance(v, list) and len(v) == 2 and all(re.fullmatch(rb"\d+", x) for x in v),
           "TIME: %r" % (v,))
    t = int(v[0]) + int(v[1]) / 1e6
    expect(abs(t - time.time()) < 2, "TIME %.3f vs now %.3f" % (t, time.time()))
    expect(int(v[1]) < 1000000, "microseconds %r" % v[1])
    return "off by %.3f s" % (t - time.time())


def t_hello(px):
    """HELLO and INFO say what the servers are, as one of them says it
    (Redis: redis and redis_version; Valkey: valkey and valkey_version),
    once shardis has read their INFO."""
    v = parse(one_reply(px.servers[0].port, enc("HELLO", "2")))
    want = dict(zip(v[::2], v[1::2]))
    server_info = px.servers[0].client.info("server")

    def hello():
        v = parse(one_reply(px.port, enc("HELLO", "2")))
        expect(isinstance(v, list) and b"proto" in v, "HELLO 2: %s" % short(v))
        d = dict(zip(v[::2], v[1::2]))
        return d if (d.get(b"server"), d.get(b"version")) == (want[b"server"],
                                                              want[b"version"]) else None
    d = until("HELLO says %s %s" % (want[b"server"], want[b"version"]), hello)
    expect_eq(d.get(b"proto"), 2, "proto")
    info = px.client.info("server")
    for field in ("redis_version", "server_name", "valkey_version"):
        expect_eq(info.get(field), server_info.get(field), "INFO " + field)
    v = one_reply(px.port, enc("HELLO", "3"))
    expect(v.startswith(b"%7\r\n") and b"$5\r\nproto\r\n:3\r\n" in v, "HELLO 3: %s" % short(v))
    v = one_reply(px.port, enc("HELLO", "4"))
    expect_eq(v, b"-NOPROTO unsupported protocol version\r\n", "HELLO 4")


def t_client(px):
    c = Raw(px.port)
    try:
        expect_eq(c.cmd("CLIENT", "GETNAME"), b"$-1\r\n", "GETNAME before SETNAME")
        expect_eq(c.cmd("CLIENT", "SETNAME", "worker-7"), b"+OK\r\n", "SETNAME")
        expect_eq(c.cmd("CLIENT", "GETNAME"), bulk(b"worker-7"), "GETNAME")
        idr = c.cmd("CLIENT", "ID")
        expect(re.fullmatch(rb":\d+\r\n", idr), "CLIENT ID: %s" % short(idr))
        cid = int(idr[1:-2])
        info = parse(c.cmd("CLIENT", "INFO"))
        expect(isinstance(info, bytes) and b"id=%d " % cid in info and b"name=worker-7 " in info,
               "CLIENT INFO: %s" % short(info))
        expect_eq(c.cmd("CLIENT", "SETINFO", "lib-name", "test"), b"+OK\r\n", "SETINFO")
        expect_eq(c.cmd("CLIENT", "SETNAME", "a b"),
                  b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
                  "SETNAME with a space")
        hello = parse(c.cmd("HELLO", "2"))
        expect_eq(dict(zip(hello[::2], hello[1::2]))[b"id"], cid, "HELLO id vs CLIENT ID")
    finally:
        c.close()
    d = one_reply(px.port, enc("CLIENT", "ID"))
    expect(d != idr, "two connections share CLIENT ID %s" % short(d))
    return "id %d" % cid


def t_command(px, direct):
    n = parse(one_reply(px.port, enc("COMMAND", "COUNT")))
    expect(isinstance(n, int) and n > 200, "COMMAND COUNT: %r" % n)
    dn = parse(one_reply(direct.port, enc("COMMAND", "COUNT")))
    v = parse(one_reply(px.port, enc("COMMAND", "INFO", "get")))
    expect(isinstance(v, list) and len(v) == 1 and isinstance(v[0], list), "COMMAND INFO: %r" % v)
    e = v[0]
    expect_eq((e[0], e[1], e[3], e[4], e[5]), (b"get", 2, 1, 1, 1),
              "COMMAND INFO get (name, arity, first, last, step)")
    d = parse(one_reply(direct.port, enc("COMMAND", "INFO", "get")))[0]
    expect_eq(sorted(e[2]), sorted(d[2]), "GET flags vs redis-server")
    # COMMAND LIST and its filters name what redis-server names (in another
    # order), plus client|setinfo, which shardis answers even where its
    # server (7.0) does not know it; a newer server lists it itself.
    for args in ((), ("FILTERBY", "PATTERN", "cl*"), ("FILTERBY", "PATTERN", "*[ab]??"),
                 ("FILTERBY", "ACLCAT", "string"), ("FILTERBY", "ACLCAT", "nonexist"),
                 ("FILTERBY", "MODULE", "x"), ("bad_arg",), ("FILTERBY", "PATTERN")):
        got = parse(one_reply(px.port, enc("COMMAND", "LIST", *args)))
        want = parse(one_reply(direct.port, enc("COMMAND", "LIST", *args)))
        if isinstance(got, list):
            got = sorted(set(got) - ({b"client|setinfo"} - set(want)))
            want = sorted(want)
        expect_eq(got, want, "COMMAND LIST %s" % " ".join(args))
    return "COUNT %d (redis-server: %d); COMMAND LIST and its filters as redis-server's" % (n, dn)


def t_info(px):
    v = parse(one_reply(px.port, enc("INFO")))
    expect(isinstance(v, bytes), "INFO: %s" % short(v))
    text = v.decode(errors="replace")
    expect("# Shardis\r\n" in text, "no '# Shardis' section")
    for i, s in enumerate(px.servers):
        pat = r"backend_0_%d:name=redis%d,addr=127\.0\.0\.1:%d,state=\w+" % (i, i + 1, s.port)
        expect(re.search(pat, text), "no line matching %s" % pat)
    expect(re.search(r"connected_clients:\d+", text), "no connected_clients")
    return ""


def t_nodes(px):
    v = parse(one_reply(px.port, enc("SHARD.NODES")))
    expect(isinstance(v, list) and len(v) == 3, "SHARD.NODES: %s" % short(v, 300))
    total = 0.0
    for i, (e, s) in enumerate(zip(v, px.servers)):
        expect(isinstance(e, list) and len(e) == 12, "entry %d: %r" % (i, e))
        expect_eq(e[0::2], [b"name", b"addr", b"weight", b"points", b"share", b"state"],
                  "fields %d" % i)
        e = dict(zip(e[0::2], e[1::2]))
        expect_eq(e[b"name"], b"redis%d" % (i + 1), "name %d" % i)
        expect_eq(e[b"addr"], b"127.0.0.1:%d" % s.port, "address %d" % i)
        expect_eq(e[b"weight"], 1, "weight %d" % i)
        expect_eq(e[b"state"], b"up", "state %d" % i)
        total += float(e[b"share"])
    expect(abs(total - 100) < 0.01, "shares sum to %f" % total)
    # RESP3: the same, each node a map.
    c = Raw(px.port)
    c.cmd("HELLO", "3")
    raw = c.cmd("SHARD.NODES")
    expect(raw.startswith(b"*3\r\n%6\r\n$4\r\nname\r\n$6\r\nredis1\r\n"),
           "SHARD.NODES in RESP3: %s" % short(raw, 200))
    c.close()
    return "shares " + ", ".join(e[b"share"].decode() for e in
                                 (dict(zip(x[0::2], x[1::2])) for x in v))


def t_quit(px):
    c = Raw(px.port)
    try:
        c.send(enc("QUIT") + enc("PING"))
        out, eof = c.rest_until_eof(3)
    finally:
        c.close()
    expect_eq(out, b"+OK\r\n", "bytes before close")
    expect(eof, "connection not closed after QUIT")
    return ""


# ---- 8. inline ------------------------------------------------------------------------

def t_inline(px):
    c = Raw(px.port)
    try:
        c.send(b"PING\r\n")
        expect_eq(c.reply(), b"+PONG\r\n", "PING")
        c.send(b'SET inl "a b"\r\n')
        expect_eq(c.reply(), b"+OK\r\n", "SET inl \"a b\"")
        c.send(b"GET inl\r\n")
        expect_eq(c.reply(), bulk(b"a b"), "GET inl")
        c.send(b'SET inlx "\\x00\\r\\n\\x41" \n  GET   inlx\n\r\n')   # escapes, LF only, blank
        expect_eq([c.reply(), c.reply()], [b"+OK\r\n", bulk(b"\x00\r\nA")], "escapes")
        # Inline multi-key commands split across servers (re-encoded per server).
        rnd = random.Random(8)
        keys = [b"inl:%08x" % rnd.getrandbits(32) for _ in range(12)]
        expect(len(set(px.whereis(keys).values())) == 3, "inl: keys not on 3 servers")
        c.send(b"MSET " + b" ".join(k + b" '" + k + b" v'" for k in keys) + b"\r\n")
        expect_eq(c.reply(), b"+OK\r\n", "inline MSET across servers")
        c.send(b"MGET " + b" ".join(keys + [b"inl:none"]) + b"\r\n")
        expect_eq(c.reply(), array([bulk(k + b" v") for k in keys] + [bulk(None)]),
                  "inline MGET across servers")
        c.send(b"DEL " + b" ".join(keys) + b"\r\n")
        expect_eq(c.reply(), b":12\r\n", "inline DEL across servers")
    finally:
        c.close()
    return ""


# ---- 9. cross-node -------------------------------------------------------------------

def t_crossslot(px, backends):
    a = px.keys_on("cs:a", 0)[0]
    b = px.keys_on("cs:b", 1)[0]
    cross = b"-CROSSSLOT Keys in request don't hash to the same node\r\n"
    c = Raw(px.port)
    try:
        c.cmd("SADD", a, "x", "y")
        c.cmd("SADD", b, "y", "z")
        expect_eq(c.cmd("SINTER", a, b), cross, "SINTER %s %s" % (a, b))
        expect_eq(c.cmd("RENAME", a, b), cross, "RENAME %s %s" % (a, b))
        expect_eq(backends[0].client.exists(a), 1, "source after a refused RENAME")
        ta, tb = b"{cs}.a", b"{cs}.b"
        c.cmd("DEL", ta, tb)
        c.cmd("SADD", ta, "x", "y")
        c.cmd("SADD", tb, "y", "z")
        expect_eq(c.cmd("SINTER", ta, tb), array([bulk(b"y")]), "SINTER tagged")
        expect_eq(c.cmd("RENAME", ta, b"{cs}.c"), b"+OK\r\n", "RENAME tagged")
        expect_eq(c.cmd("SMEMBERS", b"{cs}.c").count(b"$1\r\n"), 2, "renamed set")
    finally:
        c.close()
    return "%s on redis1, %s on redis2" % (a.decode(), b.decode())


# ---- mimicry of redis-server ----------------------------------------------------------

def t_mimic(px, direct, data):
    want = one_reply(direct.port, data)
    got = one_reply(px.port, data)
    expect_eq(got, want, "proxy vs redis-server")
    return want.decode(errors="replace").strip()[:90]


# ---- 10. protocol errors -----------------------------------------------------------------

def t_proto(px, direct, other, data, redis_data=None):
    """data gets redis-server's protocol error (for redis_data, if given),
    then the proxy closes that connection; other keeps working."""
    want, weof = reply_then_eof(direct.port, redis_data or data)
    expect(b"-ERR Protocol error: " in want and weof,
           "test premise: direct redis-server gave %s, eof=%s" % (short(want), weof))
    got, eof = reply_then_eof(px.port, data, 1.5)
    expect_eq(got, want, "proxy vs redis-server")
    expect(eof, "the proxy did not close the connection")
    expect_eq(other.cmd("PING"), b"+PONG\r\n", "another client's PING")
    expect_eq(other.cmd("GET", "pl:1"), bulk(b"val:pl:1"), "another client's GET")
    return want.decode().strip()


def t_proto_limit_ok(px, direct, data):
    """A header exactly at the limit is not an error (the connection waits)."""
    dq, dout, deof = silent_open(direct.port, data)
    expect(dq, "test premise: redis-server answered %s eof=%s" % (short(dout), deof))
    q, out, eof = silent_open(px.port, data)
    expect(q, "proxy answered %s eof=%s" % (short(out), eof))
    return ""


# ---- 11. AUTH ------------------------------------------------------------------------------

def t_auth(apx, abackends):
    direct = abackends[0]
    # Before AUTH: refused, exactly as a redis-server with requirepass refuses.
    for req in (enc("GET", "k"), enc("PING"), enc("SET", "k", "v")):
        expect_eq(one_reply(apx.port, req), one_reply(direct.port, req),
                  "before AUTH, %s" % short(req))
    expect_eq(one_reply(apx.port, enc("GET", "k")), b"-NOAUTH Authentication required.\r\n",
              "GET before AUTH")
    c = Raw(apx.port)
    try:
        wrong = c.cmd("AUTH", "not-it")
        expect(wrong.startswith(b"-WRONGPASS"), "wrong password: %s" % short(wrong))
        expect_eq(wrong, one_reply(direct.port, enc("AUTH", "not-it")), "vs redis-server")
        expect_eq(c.cmd("GET", "k"), b"-NOAUTH Authentication required.\r\n",
                  "GET after a wrong AUTH")
        expect_eq(c.cmd("AUTH", "secret"), b"+OK\r\n", "right password")
        keys = [apx.keys_on("auth:", s)[0] for s in range(3)]
        for s, k in enumerate(keys):   # every backend connection authenticated itself
            expect_eq(c.cmd("SET", k, b"on%d" % s), b"+OK\r\n", "SET %s" % k)
            expect_eq(c.cmd("GET", k), bulk(b"on%d" % s), "GET %s" % k)
            expect_eq(abackends[s].client.get(k), b"on%d" % s, "%s on redis%d" % (k, s + 1))
    finally:
        c.close()
    c = Raw(apx.port)
    try:
        expect_eq(c.cmd("AUTH", "default", "secret"), b"+OK\r\n", "AUTH default secret")
        expect_eq(c.cmd("PING"), b"+PONG\r\n", "PING after AUTH")
    finally:
        c.close()
    return ""


# ---- 12. backend killed mid-pipeline ---------------------------------------------------------

def t_backend_killed(kpx, kbackends):
    victim = 1
    keys = [b"kill:%d" % i for i in range(1500)]
    where = kpx.whereis(keys)
    for s in range(3):    # connect every backend first
        kpx.client.set(kpx.keys_on("warm:", s)[0], "x")
    reqs, wants, owners = [], [], []
    for i, k in enumerate(keys):
        reqs += [enc("SET", k, b"v%d" % i), enc("GET", k)]
        wants += [b"+OK\r\n", bulk(b"v%d" % i)]
        owners += [where[k], where[k]]
    half = len(reqs) // 2
    errpat = re.compile(rb"-ERR backend redis%d unavailable: [^\r\n]+\r\n" % (victim + 1))
    c = Raw(kpx.port, 10)
    try:
        # The victim stops right after the first half is sent, so some of
        # its requests are surely in flight (written, unanswered) when it dies.
        q = half // 2
        c.send(b"".join(reqs[:q]))
        time.sleep(0.05)                 # (these are answered)
        c.send(b"".join(reqs[q:half]))
        os.kill(kbackends[victim].pid, signal.SIGSTOP)
        time.sleep(0.1)
        os.kill(kbackends[victim].pid, signal.SIGKILL)
        kbackends[victim].proc.wait(5)
        time.sleep(0.05)
        c.send(b"".join(reqs[half:]))
        got = [c.reply() for _ in reqs]
    finally:
        c.close()
    errors_first = errors_second = ok_first = 0
    reasons = set()
    for i, (g, w, o) in enumerate(zip(got, wants, owners)):
        if g == w:
            ok_first += o == victim
            expect(not (o == victim and i >= half),
                   "#%d (%s) answered %s after its server was killed" % (i, short(reqs[i], 60), short(g)))
            continue
        expect(o == victim and errpat.fullmatch(g),
               "#%d %s on redis%d: got %s, want %s or the redis%d error"
               % (i, short(reqs[i], 60), o + 1, short(g), short(w), victim + 1))
        reasons.add(g.decode().split(": ", 1)[1].strip())
        if i < half:
            errors_first += 1
        else:
            errors_second += 1
    expect(errors_second == sum(1 for o in owners[half:] if o == victim),
           "not every later request of the dead server failed")
    # Afterwards: the others still answer; the dead server's keys fail fast.
    c = Raw(kpx.port, 5)
    try:
        for s in (0, 2):
            k = kpx.keys_on("after:", s)[0]
            expect_eq(c.cmd("SET", k, "ok"), b"+OK\r\n", "SET on live redis%d" % (s + 1))
        k = kpx.keys_on("after:", victim)[0]
        slowest = 0.0
        for _ in range(5):
            t0 = time.monotonic()
            g = c.cmd("GET", k)
            slowest = max(slowest, time.monotonic() - t0)
            expect(errpat.fullmatch(g), "GET on the dead server: %s" % short(g))
            time.sleep(0.1)
        expect(slowest < 1.0, "dead server's error took %.2f s" % slowest)
    finally:
        c.close()
    return ("dead server's requests: %d answered and %d failed before the kill, %d failed "
            "after; reasons %s; dead-key error in %.0f ms"
            % (ok_first, errors_first, errors_second, sorted(reasons), slowest * 1000))


def t_sigterm_drain(kpx, kbackends):
    """SIGTERM with a request in flight (its server SIGSTOPped): the client
    still gets its reply, then the connection closes and shardis exits 0."""
    s = 0
    k = kpx.keys_on("drain:", s)[0]
    kpx.client.set(k, "drained")
    c = Raw(kpx.port, 8)
    try:
        os.kill(kbackends[s].pid, signal.SIGSTOP)
        try:
            c.send(enc("GET", k))
            time.sleep(0.2)
            kpx.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
        finally:
            os.kill(kbackends[s].pid, signal.SIGCONT)
        expect_eq(c.reply(), bulk(b"drained"), "reply of the request in flight")
        out, eof = c.rest_until_eof(6)
        expect(out == b"" and eof, "after the reply: %s eof=%s" % (short(out), eof))
    finally:
        c.close()
    try:
        rc = kpx.proc.wait(6)
    except subprocess.TimeoutExpired:
        raise Fail("shardis still running 6 s after SIGTERM")
    expect_eq(rc, 0, "exit code")
    return ""


# ---- 13. backend that hangs ------------------------------------------------------------------

def t_handshake_refused(px):
    """A backend that refuses the proxy's AUTH: the request gets the
    refusal, and nothing leaks (exit_clean reads the sanitizer's report:
    the refused handshake's own request was once never freed)."""
    c = Raw(px.port)
    try:
        expect_eq(c.cmd("AUTH", "not-it"), b"+OK\r\n", "AUTH to the proxy")
        r = c.cmd("GET", "k")
        expect(r.startswith(b"-ERR backend") and b"handshake refused: WRONGPASS" in r,
               "GET: %s" % short(r))
    finally:
        c.close()
    return ""


def t_backend_hang(hpx, hbackends):
    victim = 2
    vk = hpx.keys_on("hang:", victim)[0]
    others = [hpx.keys_on("hang:", s)[0] for s in (0, 1)]
    for k in [vk] + others:
        hpx.client.set(k, b"val:" + k)
    errpat = re.compile(rb"-ERR backend redis%d unavailable: timeout\r\n" % (victim + 1))
    a, b = Raw(hpx.port, 5), Raw(hpx.port, 5)
    try:
        os.kill(hbackends[victim].pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            a.send(enc("GET", vk) * 3)
            slow = 0.0
            for k in others * 5:          # while the hung request waits
                t1 = time.monotonic()
                expect_eq(b.cmd("GET", k), bulk(b"val:" + k), "GET %s during the hang" % k)
                slow = max(slow, time.monotonic() - t1)
            got = [a.reply() for _ in range(3)]
            dt = time.monotonic() - t0
            expect(all(errpat.fullmatch(g) for g in got), "hung GETs answered %s" % short(got))
            expect(0.25 <= dt <= 2.0, "timeout error after %.2f s (timeout: 300)" % dt)
            expect(slow < 0.2, "other servers' GETs took up to %.2f s" % slow)
        finally:
            os.kill(hbackends[victim].pid, signal.SIGCONT)
        t2 = time.monotonic()
        while True:
            g = a.cmd("GET", vk)
            if g == bulk(b"val:" + vk):
                break
            expect(errpat.fullmatch(g) or re.match(rb"-ERR backend redis3 unavailable", g),
                   "after SIGCONT: %s" % short(g))
            expect(time.monotonic() - t2 < 5, "key still failing 5 s after SIGCONT: %s" % short(g))
            time.sleep(0.1)
        back = time.monotonic() - t2
    finally:
        a.close()
        b.close()
    return "timeout error after %.2f s; others answered in <= %.0f ms; back %.2f s after SIGCONT" \
        % (dt, slow * 1000, back)


# ---- 13b. a dead server: eject_mode fail and rehash ------------------------------------------

def node_states(px):
    return {e[1]: e[11] for e in px.client.execute_command("SHARD.NODES")}


def t_eject(E):
    """A killed server: with eject_mode fail (the default) its keys fail fast
    and SHARD.NODES says down; with eject_mode rehash (twemproxy's
    auto_eject_hosts) it leaves the ring after server_failure_limit failures
    (its keys are served by the others, new ids go elsewhere, NODES says
    ejected) and comes back after server_retry_timeout."""
    fail = Shardis("ejfail", E, timeout=500)
    rehash = Shardis("ejrehash", E, timeout=500, auto_eject_hosts="true",
                     eject_mode="rehash", server_failure_limit=2, server_retry_timeout=1500)
    victim = E[1]
    keys = rehash.keys_on("ej:", 1, 20)
    for px in (fail, rehash):
        px.client.set(keys[0], "before")            # connect to the victim
    victim.kill()
    try:
        fail.client.set(keys[1], "x")
        raise Fail("SET on a dead server's key answered OK with eject_mode fail")
    except redis.ResponseError as e:
        expect("backend redis2 unavailable" in str(e), "fail mode: %s" % e)
    until("fail mode: redis2 down", lambda: node_states(fail)[b"redis2"] == b"down")
    errors = 0
    for _ in range(10):                 # failures until it is ejected
        try:
            rehash.client.set(keys[2], "x")
            break
        except redis.ResponseError:
            errors += 1
            time.sleep(0.05)
    expect(errors >= 1, "rehash: no request failed before the ejection")
    expect_eq(node_states(rehash)[b"redis2"], b"ejected", "rehash state")
    for k in keys[3:]:
        rehash.client.set(k, "during")
    held = [sum(1 for k in keys[3:] if s.client.get(k) == b"during") for s in (E[0], E[2])]
    expect_eq(sum(held), len(keys) - 3, "keys of the ejected server stored on the others")
    owners = set()
    for _ in range(100):
        k = rehash.client.execute_command("SHARD.GENKEY")
        owners.add(rehash.client.execute_command("SHARD.WHEREIS", k))
    expect(b"redis2" not in owners, "new ids on the ejected server: %s" % owners)
    victim.launch()
    until("rehash: redis2 back in the ring", lambda: node_states(rehash)[b"redis2"] != b"ejected",
          timeout=4.0)
    until("rehash: redis2 serves its keys again",
          lambda: rehash.client.set(keys[0], "after") and victim.client.get(keys[0]) == b"after")
    for px in (fail, rehash):
        t_exit_clean(px)
    return "fail: its keys fail fast, NODES down; rehash: ejected after %d failed requests, " \
           "%s keys on redis1/redis3, new ids on %s, back after the retry timeout" % (
               errors, held, sorted(o.decode() for o in owners))


# ---- 14. slow client -------------------------------------------------------------------------

CHUNK = 14336       # sizeof(struct mbuf)


def held(px):
    """What the proxy holds: its RSS, or under a sanitizer (whose quarantine
    keeps freed memory) its buffer chunks, from INFO."""
    if not harness.ARGS.sanitized:
        return rss(px.pid)
    return px.client.info("stats")["chunks_allocated"] * CHUNK


def t_slow_client(px):
    r = px.client
    big = bytes(random.Random(5).randrange(256) for _ in range(1024)) * 100
    r.set("bigkey", big)
    s = px.whereis([b"bigkey"])[b"bigkey"]
    near = px.keys_on("near:", s)[0]      # a key on the same server as bigkey
    r.set(near, "close by")
    base = held(px)
    slow = socket.create_connection((HOST, px.port))

    def sender():
        try:
            slow.sendall(enc("GET", "bigkey") * 20000)
        except OSError:         # the proxy or we closed it
            pass
    t = threading.Thread(target=sender, daemon=True)
    t.start()
    fast = Raw(px.port, 5)
    worst_ping = worst_get = 0.0
    peak = base
    try:
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            t0 = time.monotonic()
            expect_eq(fast.cmd("PING"), b"+PONG\r\n", "PING")
            t1 = time.monotonic()
            expect_eq(fast.cmd("GET", near), bulk(b"close by"), "GET on bigkey's server")
            t2 = time.monotonic()
            worst_ping = max(worst_ping, t1 - t0)
            worst_get = max(worst_get, t2 - t1)
            peak = max(peak, held(px))
            time.sleep(0.03)
        with open(px.log, errors="replace") as f:
            closed = "over the limit" in f.read()
        try:
            slow.shutdown(socket.SHUT_RDWR)    # also wakes the sender if it is blocked
        except OSError:                         # the proxy closed it already
            pass
        slow.close()
        t.join(5)
        time.sleep(0.3)
        expect_eq(fast.cmd("PING"), b"+PONG\r\n", "PING after the slow client left")
        expect_eq(fast.cmd("GET", "bigkey"), bulk(big), "GET bigkey after")
    finally:
        fast.close()
        slow.close()
    expect(worst_ping < 0.5, "a PING took %.2f s" % worst_ping)
    expect(peak < 400 << 20, "%s reached %d MB" % ("chunks" if harness.ARGS.sanitized
                                                    else "RSS", peak >> 20))
    time.sleep(1.5)
    after = held(px)
    return ("peak %s %d MB (from %d MB, %d MB 1.5 s after); worst PING %.0f ms, worst GET "
            "on the same server %.0f ms; slow client %s"
            % ("chunks" if harness.ARGS.sanitized else "RSS", peak >> 20, base >> 20, after >> 20, worst_ping * 1000, worst_get * 1000,
               "closed by the proxy (over the limit)" if closed else "not closed by the proxy"))


# ---- 15./16. client_connections and SIGTERM -------------------------------------------------------

def t_max_clients(lpx):
    time.sleep(0.3)     # let the proxy see wait_port's probe connection close
    a, b = Raw(lpx.port), Raw(lpx.port)
    try:
        expect_eq(a.cmd("PING"), b"+PONG\r\n", "first client")
        expect_eq(b.cmd("PING"), b"+PONG\r\n", "second client")
        out, eof = reply_then_eof(lpx.port, enc("PING"))
        expect_eq(out, b"-ERR max number of clients reached\r\n", "third client")
        expect(eof, "third client not closed")
        expect_eq(a.cmd("GET", "pl:1"), bulk(b"val:pl:1"), "first client still works")
        a.close()
        time.sleep(0.2)
        c = Raw(lpx.port)
        try:
            expect_eq(c.cmd("PING"), b"+PONG\r\n", "a client in the freed slot")
        finally:
            c.close()
    finally:
        a.close()
        b.close()
    return ""


def t_sigterm_idle(lpx):
    c = Raw(lpx.port)
    try:
        expect_eq(c.cmd("PING"), b"+PONG\r\n", "PING")
        t0 = time.monotonic()
        lpx.proc.send_signal(signal.SIGTERM)
        try:
            rc = lpx.proc.wait(6)
        except subprocess.TimeoutExpired:
            raise Fail("still running 6 s after SIGTERM")
        dt = time.monotonic() - t0
        out, eof = c.rest_until_eof(1)
        expect(eof and out == b"", "connected client saw %s eof=%s" % (short(out), eof))
    finally:
        c.close()
    expect_eq(rc, 0, "exit code")
    return "exited in %.2f s" % dt


# ---- 17. memory per idle client ----------------------------------------------------------------

def t_memory(mpx, n=1000):
    chunks = []

    def settle():
        time.sleep(1.5)          # jemalloc hands freed pages back within a second
        info = parse(ctl.cmd("INFO", "stats")).decode()
        held = int(re.search(r"chunks_allocated:(\d+)", info).group(1)) - \
            int(re.search(r"chunks_free:(\d+)", info).group(1))
        chunks.append(held)
        return rss(mpx.pid)

    ctl = Raw(mpx.port)
    socks = []
    try:
        ctl.cmd("PING")
        base = settle()
        socks = []
        for _ in range(n):
            socks.append(socket.create_connection((HOST, mpx.port), timeout=5))
        end = time.monotonic() + 5
        while b"connected_clients:%d\r\n" % (n + 1) not in ctl.cmd("INFO", "clients"):
            expect(time.monotonic() < end, "the proxy never counted %d clients" % (n + 1))
            time.sleep(0.05)
        idle = settle()

        def each(req, want_of):
            for i, s in enumerate(socks):
                s.sendall(req(i))
            for i, s in enumerate(socks):
                want, got = want_of(i), b""
                while len(got) < len(want):
                    d = s.recv(65536)
                    if not d:
                        break
                    got += d
                expect_eq(got, want, "client %d" % i)
        keys = [b"mem:%d" % i for i in range(n)]
        pipe = mpx.client.pipeline(transaction=False)
        for k in keys:
            pipe.set(k, b"x" * 10)
        pipe.execute()
        each(lambda i: enc("GET", keys[i]), lambda i: bulk(b"x" * 10))
        after_get = settle()
        each(lambda i: enc("PING"), lambda i: b"+PONG\r\n")
        after_ping = settle()
        for s in socks:
            s.close()
        socks = []
        end = time.monotonic() + 5
        while int(re.search(rb"connected_clients:(\d+)", ctl.cmd("INFO", "clients"))
                  .group(1)) > 2:       # ctl and the redis-py connection
            expect(time.monotonic() < end, "the proxy still counts closed clients")
            time.sleep(0.05)
        after_close = settle()
    finally:
        ctl.close()
        for s in socks:
            s.close()
    per = [(v - base) / n for v in (idle, after_get, after_ping)]
    detail = ("RSS bytes/client: %.0f idle, %.0f after a GET, %.0f after a PING; "
              "%+d KiB after they left (RSS %d KiB -> %d, %d, %d, %d KiB; 14 KiB chunks "
              "in use %s)" % (per[0], per[1], per[2], (after_close - base) >> 10,
                              base >> 10, idle >> 10, after_get >> 10, after_ping >> 10,
                              after_close >> 10, "/".join(map(str, chunks))))
    per.append(chunks)
    # RSS means nothing under AddressSanitizer (quarantine, shadow memory):
    # there only the chunk counts are asserted.
    expect(harness.ARGS.sanitized or per[1] <= 1024,
           "%.0f bytes per client after a GET (limit 1024); %s" % (per[1], detail))
    expect(harness.ARGS.sanitized or after_close - base <= 512 << 10,
           "RSS is not back near idle after the clients left; %s" % detail)
    expect(chunks[4] <= chunks[0] + 1, "%d chunks held after the clients left, %d before"
           % (chunks[4], chunks[0]))
    return detail, per


def t_memory_local(per, n=1000):
    """After a locally answered request (PING) an idle client holds no
    chunk, as after a forwarded one (client.c: "An idle client holds no
    chunk"), and stays within 1 KiB."""
    chunks = per[3]
    expect(chunks[3] - chunks[2] < n // 10,
           "%d more 14 KiB chunks in use after %d idle clients each got a PING reply "
           "(in use: %d before, %d after); RSS %.0f bytes/client (%.0f after a GET)"
           % (chunks[3] - chunks[2], n, chunks[2], chunks[3], per[2], per[1]))
    expect(harness.ARGS.sanitized or per[2] <= 1024,
           "%.0f bytes per client after a PING (limit 1024; %.0f after a GET)" % (per[2], per[1]))
    return "%.0f bytes/client, chunks in use %d" % (per[2], chunks[3])


# ---- main ------------------------------------------------------------------------------------

MIMIC = [
    ("mimic_unknown_command_args", enc("foo", "a", "b")),
    ("mimic_unknown_command_inline", b"foo a b\r\n"),
    ("mimic_unknown_command_long", enc("x" * 200, "y" * 100, "z" * 100, "w")),
    ("mimic_unknown_command_crlf_arg", enc("foo", "a\r\nb")),
    ("mimic_empty_command", enc("")),
    ("mimic_arity_get", enc("GET")),
    ("mimic_arity_set", enc("SET", "k")),
    ("mimic_arity_mset_odd", enc("MSET", "a", "1", "b")),
    ("mimic_arity_ping", enc("PING", "a", "b")),
    ("mimic_arity_echo", enc("ECHO")),
    ("mimic_arity_select", enc("SELECT")),
    ("mimic_arity_auth", enc("AUTH")),
    ("mimic_arity_time", enc("TIME", "x")),
    ("mimic_arity_client_id", enc("CLIENT", "ID", "x")),
    ("mimic_arity_command_count", enc("COMMAND", "COUNT", "x")),
    ("mimic_unknown_subcommand_object", enc("OBJECT", "foo")),
    ("mimic_unknown_subcommand_config", enc("CONFIG", "foo")),
    ("mimic_unknown_subcommand_xinfo", enc("XINFO", "foo", "k")),
    ("mimic_unknown_subcommand_command", enc("COMMAND", "foo")),
    ("mimic_unknown_subcommand_client", enc("CLIENT", "foo")),
    ("mimic_auth_without_password", enc("AUTH", "x")),
    ("mimic_hello_bad_version", enc("HELLO", "x")),
    ("mimic_eval_negative_numkeys", enc("EVAL", "return 1", "-1")),
    ("mimic_zunionstore_zero_numkeys", enc("ZUNIONSTORE", "d", "0", "a")),
]

PROTO = [
    ("proto_bad_multibulk_length", b"*x\r\n", None),
    ("proto_expected_dollar", b"*1\r\n:1\r\n", None),
    ("proto_negative_bulk_length", b"*1\r\n$-5\r\n", None),
    ("proto_bulk_over_512mb", b"*1\r\n$536870913\r\n", None),
    # redis-server 7.0 allows up to INT_MAX elements (test_limits.py
    # sends more than 1,048,576).
    ("proto_over_int_max_elements", b"*2147483648\r\n", None),
    ("proto_unbalanced_quotes", b'SET a "b\r\n', None),
    ("proto_unbalanced_single_quote", b"SET a 'b\r\n", None),
    ("proto_quote_then_char", b'SET a "b"c\r\n', None),
    ("proto_inline_too_big", b"x" * 70000, None),
    ("proto_bulk_length_junk", b"*1\r\n$4x\r\n", None),
    ("proto_leading_zero_multibulk", b"*01\r\n$4\r\nPING\r\n", None),
    ("proto_leading_zero_bulk", b"*1\r\n$04\r\nPING\r\n", None),
    # Requests before the bad one are answered first, in order; none after it.
    ("proto_error_after_pipelined_requests",
     enc("PING") + enc("GET", "nokey:proto") + b"GET nokey:inline\r\n*x\r\n" + enc("PING"),
     None),
]


def body():
    R = [RedisServer("redis%d" % (i + 1)) for i in range(3)]
    px = Shardis("main", R, timeout=3000)

    check("placement_2000_keys", t_placement, px, R)
    check("placement_hash_tag", t_tag_together, px, R)
    check("pipeline_order_10000", t_order, px, R[0])
    for name, val in [("bytes_binary", bytes(range(256)) * 3),
                      ("bytes_crlf_inside", b"a\r\nb\r\n$3\r\n*1\r\n\r\n-ERR x\r\n\n\r"),
                      ("bytes_empty", b""),
                      ("bytes_1mb", os.urandom(1 << 20)),
                      ("bytes_5mb", os.urandom(5 << 20))]:
        check(name, t_value, px, R, b"bytes:" + name.encode(), val)
    check("redis_cli_oneshot", t_cli_oneshot, px)
    check("redis_cli_interactive", t_cli_interactive, px)
    check("redispy_pipeline_500", t_py_pipeline, px)
    check("redispy_mget", t_py_mget, px)
    check("redispy_hash", t_py_hash, px)
    check("redispy_expire_ttl", t_py_expire, px)
    check("redispy_eval", t_py_eval, px)
    check("benchmark", t_benchmark, px, [])
    check("benchmark_pipelined_16", t_benchmark, px, ["-P", "16"])
    check("local_ping_echo_select", t_local_simple, px)
    check("local_time", t_time, px)
    check("local_hello", t_hello, px)
    check("local_client", t_client, px)
    check("local_command", t_command, px, R[0])
    check("local_info", t_info, px)
    check("local_shard_nodes", t_nodes, px)
    check("local_quit", t_quit, px)
    check("inline_commands", t_inline, px)
    check("crossslot", t_crossslot, px, R)
    for name, data in MIMIC:
        check(name, t_mimic, px, R[0], data)
    other = Raw(px.port)
    other.cmd("PING")
    for name, data, rdata in PROTO:
        check(name, t_proto, px, R[0], other, data, rdata)
    other.close()
    check("proto_int_max_elements_accepted", t_proto_limit_ok, px, R[0], b"*2147483647\r\n")
    check("proto_512mb_bulk_accepted", t_proto_limit_ok, px, R[0],
          b"*2\r\n$3\r\nSET\r\n$536870912\r\n")
    check("slow_client", t_slow_client, px)

    # Values beyond 1,024 chunks (~14.7 MB), on a shardis of their own
    # (with a timeout, so a stuck backend cannot hold it up).
    big = Shardis("big", R, timeout=2000)
    check("bytes_20mb_set", t_huge_set, big, R, 20 << 20)
    check("bytes_20mb_get", t_huge_get, big, R, 20 << 20)
    # Split multi-key commands with many keys per server (fragments of
    # more than 1,024 slices), and merged replies of more than 1,024.
    check("split_mset_200_keys_per_server", t_split_many, big, R, "MSET", 200, (0, 1))
    check("split_mset_300_keys_per_server", t_split_many, big, R, "MSET", 300, (0, 1))
    check("split_mget_400_keys_per_server", t_split_many, big, R, "MGET", 400, (0, 1))
    check("split_mget_600_keys_per_server", t_split_many, big, R, "MGET", 600, (0, 1))
    check("split_values_of_every_size", t_split_sizes, big, R)
    check("split_del_600_keys_per_server", t_split_many, big, R, "DEL", 600, (0, 1))
    check("split_mget_1200_keys_3_servers", t_split_many, big, R, "MGET", 400, (0, 1, 2))
    check("exit_clean_big", t_exit_clean, big)

    A = [RedisServer("auth%d" % (i + 1), password="secret") for i in range(3)]
    apx = Shardis("auth", A, redis_auth="secret")
    check("auth", t_auth, apx, A)
    check("exit_clean_auth", t_exit_clean, apx)
    wpx = Shardis("wrongauth", A, redis_auth="not-it")
    check("handshake_refused", t_handshake_refused, wpx)
    check("exit_clean_wrongauth", t_exit_clean, wpx)
    for p in [apx.proc] + [s.proc for s in A]:
        stop(p)

    K = [RedisServer("kill%d" % (i + 1)) for i in range(3)]
    kpx = Shardis("kill", K)
    check("backend_killed_mid_pipeline", t_backend_killed, kpx, K)
    check("sigterm_drains_in_flight", t_sigterm_drain, kpx, K)
    check("exit_clean_kill", t_exit_clean, kpx)

    H = [RedisServer("hang%d" % (i + 1)) for i in range(3)]
    hpx = Shardis("hang", H, timeout=300)
    check("backend_hang_timeout", t_backend_hang, hpx, H)
    check("exit_clean_hang", t_exit_clean, hpx)

    E = [RedisServer("eject%d" % (i + 1)) for i in range(3)]
    check("dead_server_eject_fail_and_rehash", t_eject, E)

    lpx = Shardis("limit", R, client_connections=2)
    check("client_connections_2", t_max_clients, lpx)
    check("sigterm_idle_client", t_sigterm_idle, lpx)
    check("exit_clean_limit", t_exit_clean, lpx)

    mpx = Shardis("mem", R)
    per = [None]

    def mem():
        detail, per[0] = t_memory(mpx)
        return detail
    check("memory_per_idle_client", mem)
    if per[0] is not None:
        check("memory_after_local_reply", t_memory_local, per[0])
    check("exit_clean_mem", t_exit_clean, mpx)
    check("exit_clean_main", t_exit_clean, px)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-proxy-"))
