#!/usr/bin/python3
"""test_lifetimes.py -- the order a client's requests run in, what a request
may hold on to while it waits, and how much a client may make the proxy
hold, against real redis-servers.

- a client that writes its whole pipeline before it reads a reply (a bulk
  loader: redis-py and hiredis pipelines do) completes, as on one
  redis-server; one that never reads its replies is closed once they pass
  the limit, with a log line, and the proxy's memory comes back;
- a backend still sending (a pipeline of 100 MB values under a 3 s
  timeout) is not declared timed out; a stopped one still is;
- a command sent after a blocking command does not run before it, even on
  another server: it reads what a single redis-server would let it read;
- a BLPOP of 40 keys waiting when its keys move is sent again from its own
  copy of its arguments (the client's framer has moved on);
- a request waiting for its keys to move holds no connection that its
  client may give back meanwhile: another client's transaction never gets
  it (its reply, or its +QUEUED);
- PUBLISH and SCRIPT KILL-like commands wait behind the client's earlier
  requests like every other command.

Run: /usr/bin/python3 tests/integration/test_lifetimes.py --shardis build/shardis
"""
import os
import random
import re
import signal
import socket
import sys
import threading
import time

import redis

import harness
from harness import Fail, RedisServer, Shardis, check, expect, expect_eq, until
from test_faults import Port, Relay, frame_end
from test_reshard import locate, reload, status, wait_stable, write_servers

HOST = "127.0.0.1"


def log_text(px):
    with open(px.log, errors="replace") as f:
        return f.read()


def small_rcvbuf_socket(port):
    """A client socket with a small receive buffer: replies it does not read
    stay in the proxy, not in the kernel."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((HOST, port))
    s.settimeout(30)
    return s


def t_pipeline_before_reading(rs):
    """150,000 GETs of a 100-byte value (19 MB of requests, 16 MB of
    replies) written before any reply is read: with the proxy holding back
    its reads while the client was blocked writing, neither moved (redis-py:
    'Timeout writing to socket')."""
    px = Shardis("bulk", rs)
    n = 150000
    key, value = "k" * 100, b"v" * 100
    px.client.set(key, value)
    data = harness.enc("GET", key) * n
    want = harness.bulk(value) * n
    s = small_rcvbuf_socket(px.port)
    done = {}

    def write():
        try:
            s.sendall(data)
            done["ok"] = True
        except OSError as e:
            done["err"] = e

    w = threading.Thread(target=write, daemon=True)
    w.start()
    w.join(30)
    expect(not w.is_alive(), "the client is still blocked writing its pipeline after 30 s "
           "(the proxy stopped reading it)")
    expect("err" not in done, "writing: %r" % done.get("err"))
    got = bytearray()
    while len(got) < len(want):
        d = s.recv(1 << 20)
        expect(d, "connection closed after %d of %d reply bytes" % (len(got), len(want)))
        got += d
    s.close()
    expect(bytes(got) == want, "the replies differ from %d values" % n)
    harness.t_exit_clean(px)
    return "%d replies" % n


def t_unread_replies_limit(rs):
    """A client that pipelines GETs of a 1 MB value and never reads keeps
    over 256 MiB unread: closed once that has lasted 10 s (redis-server's
    soft client-output-buffer-limit, here of 10 s), with a log line; the
    proxy goes on."""
    px = Shardis("hog", rs, client_output_buffer_limit='"normal 512mb 256mb 10"')
    px.client.set("big", b"x" * (1 << 20))
    s = small_rcvbuf_socket(px.port)
    s.sendall(harness.enc("GET", "big") * 300)
    time.sleep(3)
    expect("over the limit" not in log_text(px), "closed before 10 s over the soft limit")
    time.sleep(8)
    s.sendall(harness.enc("GET", "big"))
    until("the proxy closes the client that does not read",
          lambda: "over the limit" in log_text(px), timeout=10)
    s.settimeout(5)
    closed = False
    try:
        while True:
            d = s.recv(1 << 20)
            if not d:
                closed = True
                break
    except ConnectionResetError:
        closed = True
    s.close()
    expect(closed, "the connection was not closed")
    expect_eq(px.client.ping(), True, "another client, after")
    harness.t_exit_clean(px)


def t_backend_still_sending(rs):
    """4 pipelined GETs of a 100 MB value under timeout: 3000 are answered
    (the backend was sending all along); a stopped backend still times out.
    (redis-server 7.0 copies all four replies, 400 MB, before it writes a
    byte of them: on a slow machine that took 0.4 to 1.5 s, so a shorter
    timeout finds a server that has sent nothing yet, as a stopped one.)"""
    px = Shardis("sending", rs[:1], timeout=3000)
    big = b"y" * (100 << 20)
    rs[0].client.set("huge", big)
    c = harness.Raw(px.port, timeout=30)
    c.send(harness.enc("GET", "huge") * 4)
    other = redis.Redis(HOST, px.port, socket_timeout=30)
    other_got = {}
    t = threading.Thread(target=lambda: other_got.update(v=harness_reply(other.get, "k")))
    t.start()
    for i in range(4):
        r = c.reply()
        expect(r.startswith(b"$104857600\r\n"), "GET %d: %s" % (i, harness.short(r[:80])))
    c.close()
    t.join(30)
    expect_eq(other_got.get("v"), None, "another client's GET on the same server")
    expect("timeout" not in log_text(px), "the backend was declared timed out")
    os.kill(rs[0].pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        err = harness_reply(px.client.get, "k")
        took = time.monotonic() - t0
    finally:
        os.kill(rs[0].pid, signal.SIGCONT)
    expect("unavailable: timeout" in str(err), "a stopped backend: %r" % (err,))
    expect(took < 5, "a stopped backend answered after %.1f s" % took)
    harness.t_exit_clean(px)


def harness_reply(fn, *args):
    try:
        return fn(*args)
    except redis.RedisError as e:
        return e


def t_after_blocking(rs):
    """BLPOP k1 0 then GET k2 (another server), pipelined: the GET runs after
    the BLPOP returns, so it sees what was written before the push that
    ended the BLPOP (on one redis-server, commands run in the order sent)."""
    px = Shardis("after", rs)
    k1 = px.keys_on("blk", 0)[0].decode()
    k2 = px.keys_on("val", 1)[0].decode()
    c = harness.Raw(px.port, timeout=10)
    c.send(harness.enc("BLPOP", k1, "0") + harness.enc("GET", k2))
    until("the BLPOP waits", lambda: px.client.info("clients")["blocked_clients"] == 1)
    time.sleep(0.2)                 # the GET, if it was sent, has run by now
    px.client.set(k2, "written-before-the-push")
    px.client.rpush(k1, "x")
    expect_eq(harness.parse(c.reply()), [k1.encode(), b"x"], "BLPOP")
    expect_eq(c.reply(), harness.bulk(b"written-before-the-push"),
              "the GET sent after the BLPOP")
    c.close()
    harness.t_exit_clean(px)


def moving_tag(px, new_conf, same_owner_too=None):
    """A hash tag whose owner changes from the current ring to new_conf's."""
    tags = ["t%d" % i for i in range(400)]
    before = {t: px.client.execute_command("SHARD.WHEREIS", "{%s}" % t).decode() for t in tags}
    after = locate(new_conf, ["{%s}" % t for t in tags])
    return [t for t in tags if before[t] != after["{%s}" % t]]


def t_blpop_many_keys_reissued(rs):
    """BLPOP of 40 keys waiting when they move: sent again by the new ring
    from its kept arguments (it read the client's framer, which holds 4)."""
    px = Shardis("blpop40", rs[:3], admin_commands="true")
    write_servers(px, rs[:4])
    tag = moving_tag(px, px.conf)[0]
    keys = ["{%s}:%d" % (tag, i) for i in range(40)]
    c = harness.Raw(px.port, timeout=10)
    c.send(harness.enc("BLPOP", *keys, "0"))
    until("the BLPOP waits", lambda: px.client.info("clients")["blocked_clients"] == 1)
    reload(px, 1)
    until("the BLPOP waits on the new owner",
          lambda: sum(s.client.info("clients")["blocked_clients"] for s in rs[:4]) == 1)
    px.client.rpush(keys[37], "v")
    expect_eq(harness.parse(c.reply()), [keys[37].encode(), b"v"], "the BLPOP after the push")
    c.close()
    wait_stable(px, servers=rs)
    harness.t_exit_clean(px)


def t_publish_waits(rs):
    """While keys move, SET k (waiting for k to move: its source is stopped)
    then PUBLISH, pipelined: the PUBLISH does not run before the SET is sent
    (a subscriber that reads k on the message's arrival sees the SET)."""
    a, b, c_, d = rs[:4]
    px = Shardis("publish", [a, b, c_], admin_commands="true", migrate_timeout=5000,
                 migration_rate=1)
    names = {"redis1": a, "redis2": b, "redis3": c_, "redis4": d}
    write_servers(px, [a, b, c_, d])
    rnd = random.Random(7)
    cands = ["pk:%08x" % rnd.getrandbits(32) for i in range(400)]
    before = {k: px.client.execute_command("SHARD.WHEREIS", k).decode() for k in cands}
    after = locate(px.conf, cands)
    key = [k for k in cands if after[k] == "redis4"][0]
    src = names[before[key]]
    chans = ["ch:%08x" % rnd.getrandbits(32) for i in range(100)]
    where = locate(px.conf, chans)
    chan = [ch for ch in chans if names[where[ch]] not in (src, d)][0]
    px.client.set(key, "old")
    reload(px, 1)
    sub = harness.Raw(px.port, timeout=10)
    sub.cmd("SUBSCRIBE", chan)
    seen = {}

    def listen():
        try:
            sub.reply()                 # the message
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.3:
                if d.client.get(key) == b"new":
                    seen["value"] = b"new"
                    return
                time.sleep(0.01)
            seen["value"] = d.client.get(key)
        except Exception as e:          # reported below
            seen["error"] = e

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    c = harness.Raw(px.port, timeout=10)
    os.kill(src.pid, signal.SIGSTOP)
    try:
        c.send(harness.enc("SET", key, "new") + harness.enc("PUBLISH", chan, "hello"))
        time.sleep(1.5)
    finally:
        os.kill(src.pid, signal.SIGCONT)
    expect_eq(c.reply(), b"+OK\r\n", "SET")
    expect_eq(c.reply(), b":1\r\n", "PUBLISH")
    t.join(5)
    expect("error" not in seen, "subscriber: %r" % seen.get("error"))
    expect_eq(seen.get("value"), b"new", "the key when the message arrived (within 0.3 s)")
    c.close()
    sub.close()
    harness.t_exit_clean(px)


def replies_of(port, cmds, timeout=4.0):
    """Pipeline cmds on a fresh connection; every reply, or Fail naming
    what came before the one that did not."""
    c = harness.Raw(port, timeout=timeout)
    c.send(b"".join(harness.enc(*x) for x in cmds))
    out = []
    try:
        for _ in cmds:
            out.append(c.reply())
    except Fail as e:
        raise Fail("%r: got %r, then %s" % (cmds, out, e))
    finally:
        c.close()
    return out


def t_pipelines_answered(rs):
    """Blocking commands, WAIT, transactions and plain commands pipelined in
    one write are all answered: the hold waits only for what was sent (a
    request still waiting at the gate once held everything behind it)."""
    px = Shardis("pipes", rs)
    for cmds in ([("BLPOP", "nolist", "1"), ("GET", "a"), ("WAIT", "0", "0")],
                 [("WAIT", "1", "300"), ("GET", "a"), ("MULTI",), ("SET", "k", "v"), ("EXEC",)],
                 [("WAIT", "1", "300"), ("GET", "a"), ("BLPOP", "l", "1")],
                 [("BLPOP", "l", "1"), ("GET", "a"), ("GET", "b"), ("WAIT", "0", "0")],
                 [("GET", "a"), ("MGET", "a", "b", "c", "d"), ("WAIT", "0", "0"), ("GET", "b")]):
        replies_of(px.port, cmds)
    harness.t_exit_clean(px)


def t_moving_then_multi(rs):
    """While keys move (the mover paused, one key at a time at most, so they
    move on touch): two GETs of moving keys then a transaction, pipelined:
    every reply comes."""
    px = Shardis("movmulti", rs[:2], admin_commands="true", migration_rate=1,
                 migration_batch=1)
    keys = ["k:%d" % i for i in range(300)]
    pipe = px.client.pipeline(transaction=False)
    for k in keys:
        pipe.set(k, "v")
    pipe.execute()
    before = {k: px.client.execute_command("SHARD.WHEREIS", k).decode() for k in keys}
    write_servers(px, rs[:3])
    after = locate(px.conf, keys)
    moving = [k for k in keys if before[k] != after[k]]
    reload(px, 1)
    px.client.execute_command("SHARD.MIGRATION", "PAUSE")
    out = replies_of(px.port, [("GET", moving[0]), ("GET", moving[1]), ("MULTI",),
                               ("SET", "{t}x", "1"), ("EXEC",)])
    expect_eq(out[:2], [harness.bulk(b"v")] * 2, "the moving keys")
    expect_eq(out[4], b"*1\r\n+OK\r\n", "EXEC")
    harness.t_exit_clean(px)


BUSY = ("local s = tonumber(redis.call('TIME')[1]) "
        "while tonumber(redis.call('TIME')[1]) - s < 2 do end return 1")


def t_wait_conn_dies(rs):
    """WAIT behind a 2 s script waits at the gate for connections of its
    own; one of their servers dies meanwhile: WAIT gets that server's
    error, and the proxy reads no freed connection (ASan)."""
    px = Shardis("waitdies", rs, timeout=10000)
    ka = px.keys_on("a", 0)[0]
    kb = px.keys_on("b", 1)[0]
    for k in (ka, kb):                  # spare connections to both, for WAIT
        replies_of(px.port, [("MULTI",), ("SET", k, "1"), ("EXEC",)])
    c = harness.Raw(px.port, timeout=8)
    c.send(harness.enc("EVAL", BUSY, "1", ka) + harness.enc("WAIT", "0", "0"))
    time.sleep(0.5)
    rs[1].kill()
    expect_eq(c.reply(), b":1\r\n", "the script")
    w = c.reply()
    expect(w.startswith(b"-ERR backend redis2 unavailable") or w.startswith(b":"),
           "WAIT: %r" % w)
    c.close()
    expect_eq(px.client.get(ka), b"1", "another command, after")
    harness.t_exit_clean(px)


def pipeline_replies(port, cmds, n):
    """Send cmds at once on a new connection, read n replies (RESP2 or 3)."""
    s = socket.create_connection((HOST, port))
    s.settimeout(10)
    s.sendall(b"".join(harness.enc(*c) for c in cmds))
    buf, out = b"", []
    while len(out) < n:
        end = frame_end(buf, 0)
        if end is None:
            d = s.recv(65536)
            expect(d, "closed after %d replies: %r" % (len(out), out))
            buf += d
            continue
        out.append(buf[:end])
        buf = buf[end:]
    s.close()
    return out


def t_reset_keeps_order(rs):
    """A write after RESET (after a transaction, a WATCH, a RESP3 SUBSCRIBE)
    never runs before one sent ahead of it. The client's own connection to
    the server is a new one whose first reply comes 300 ms late (a relay
    holds it: as when every spare is taken and it is still connecting),
    while the shared connection is up: what RESET let go of must still
    finish first."""
    relay = Relay(rs[0].port)
    try:
        px = Shardis("order", [Port(relay.port)])
        px.client.set("{t}a", "0")          # the shared connection is up
        relay.slow_start = 0.3
        cases = [
            ("after EXEC", [("SET", "{t}x", "v"), ("MULTI",), ("GET", "{t}b"), ("EXEC",)], 4),
            ("after WATCH", [("WATCH", "{t}w")], 1),
            ("after WATCH, UNWATCH", [("WATCH", "{t}w"), ("UNWATCH",)], 2),
            ("after a RESP3 SUBSCRIBE", [("HELLO", "3"), ("SUBSCRIBE", "ch")], 2),
        ]
        wrong = []
        for what, head, nhead in cases:
            px.client.set("{t}a", "0")
            cmds = head + [("SET", "{t}a", "1"), ("RESET",), ("SET", "{t}a", "2")]
            got = pipeline_replies(px.port, cmds, nhead + 3)
            expect_eq(got[nhead:], [b"+OK\r\n", b"+RESET\r\n", b"+OK\r\n"], what)
            if px.client.get("{t}a") != b"2":
                wrong.append(what)
        expect(not wrong, "the later SET ran first: %s" % ", ".join(wrong))
        harness.t_exit_clean(px)
    finally:
        relay.stop()


def t_subscribe_then_publish(rs, direct):
    """A client sends SUBSCRIBE and does not wait; another publishes on that
    channel at once (channels_redis, asyncio clients). One redis-server
    delivers every message; through shardis the subscription goes on new
    connections of the subscriber's own, to every server, and the PUBLISH
    reached the channel's server first: 13 to 16 of 40 lost. A PUBLISH now
    waits for subscriptions on their way to its server."""
    px = Shardis("subpub", rs)

    def lost(port, rounds=40):
        pub = harness.Raw(port)
        n = 0
        for i in range(rounds):
            ch = "sp:%d:%d" % (port, i)
            sub = socket.create_connection((HOST, port))
            sub.sendall(harness.enc("PING"))        # (connected, as a pool's are)
            expect_eq(sub.recv(64), b"+PONG\r\n", "PING")
            sub.sendall(harness.enc("SUBSCRIBE", ch))
            pub.send(harness.enc("PUBLISH", ch, "m%d" % i))
            pub.reply()
            sub.settimeout(3.0)                 # (loaded machine: late is not lost)
            buf = b""
            try:
                while b"m%d\r\n" % i not in buf:
                    d = sub.recv(4096)
                    if not d:
                        break
                    buf += d
            except socket.timeout:
                pass
            n += b"m%d\r\n" % i not in buf
            sub.close()
        pub.close()
        return n

    want = lost(direct.port)
    got = lost(px.port)
    expect(want == 0, "test premise: a direct redis-server lost %d of 40" % want)
    expect_eq(got, 0, "messages lost through shardis")
    harness.t_exit_clean(px)
    return "0 of 40 lost, direct and through shardis"


def body():
    run = harness.run_with_servers
    direct = RedisServer("direct")
    # (With several loops, a SUBSCRIBE and a PUBLISH sent at the same
    # moment by clients on two loops are read by two threads in no set
    # order: doc/operating.md, "Several threads".)
    run("a PUBLISH right after another client's SUBSCRIBE reaches it, as on one server",
        harness.one_loop(lambda rs: t_subscribe_then_publish(rs, direct)), 3)
    run("RESET never lets a later request overtake an earlier one", t_reset_keeps_order, 1)

    run("a client that writes its whole pipeline before reading completes",
        t_pipeline_before_reading, 4)
    run("a client that never reads is closed past the reply limit, with a log line",
        t_unread_replies_limit, 2)
    run("a backend still sending is not timed out; a stopped one is", t_backend_still_sending, 1)
    run("a GET sent after a BLPOP runs after it, on any server", t_after_blocking, 2)
    run("a BLPOP of 40 keys waiting when its keys move is sent again whole",
        t_blpop_many_keys_reissued, 4)
    run("a PUBLISH pipelined after a SET waiting for its key to move waits too",
        t_publish_waits, 4)
    run("blocking commands, WAIT and transactions pipelined together are all answered",
        t_pipelines_answered, 2)
    run("two GETs of moving keys then a transaction, pipelined: all answered",
        t_moving_then_multi, 3)
    run("WAIT waiting for connections of its own whose server dies gets its error",
        t_wait_conn_dies, 2)


if __name__ == "__main__":
    sys.exit(harness.main(body))
