#!/usr/bin/python3
"""test_namespace.py -- what belongs to shardis stays shardis's, and what a
client names reaches only what it may, against real redis-servers.

- channels under __shardis: (the proxies' group, WAIT's marker) cannot be
  named by a client: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, PUBLISH and
  SPUBLISH get an error and subscribe nothing; a pattern that matches them
  ("*", "__shard*") never delivers their messages; a client that tries to
  pose as a proxy of the group does not keep a second shardis from
  starting nor a reload from completing;
- shardis's own keys ($equence{LL}, idgen's sequences, and __shardis:*)
  are refused on every path a key is taken from: keyed and split
  commands, STORE destinations, scripts' declared keys, subcommands with
  keys, WATCH and MULTI, SORT patterns; so a client cannot rewind a
  sequence and make SHARD.GENKEY hand out an id twice; the sequences still
  move with a reshard;
- SORT and SORT_RO BY/GET patterns whose keys may live on other servers
  are refused with Redis Cluster's texts; patterns with the key's hash
  tag, BY nosort and GET # answer what a redis-server answers;
- SSUBSCRIBE after a reload that gives its channel another server: the
  client is told with redis-server's sunsubscribe push (as Redis Cluster
  does when a slot moves), subscribes again and gets what is SPUBLISHed;
  a shard channel that stays keeps its subscription.

Run: /usr/bin/python3 tests/integration/test_namespace.py --shardis build/shardis
"""
import os
import sys

import redis

import harness
from harness import Fail, Raw, RedisServer, Shardis, array, bulk, check, expect, expect_eq, until
from test_reshard import locate, reload, status, wait_stable, write_servers

HOST = "127.0.0.1"
CHAN_ERR = b"-ERR channels under '__shardis:' are shardis's own\r\n"
KEY_ERR = b"-ERR keys under '__shardis:' or '$equence{' are shardis's own\r\n"
SORT_ERR = (b"-ERR %s option of SORT denied in Cluster mode when keys formed by the pattern "
            b"may be in different slots.\r\n")


def frame(*items):
    """A RESP2 push or confirmation: bulks, and an int last if it is one."""
    return array([b":%d\r\n" % i if isinstance(i, int) else bulk(i) for i in items])


# ---- channels -------------------------------------------------------------------------

def t_channels(rs):
    px = Shardis("chan", rs[:2])
    c = Raw(px.port)
    group = b"__shardis:group:alpha:evil:S:%016x:%016x" % (0, 0)
    for cmd in (("SUBSCRIBE", group), ("SUBSCRIBE", "ok", "__shardis:x"),
                ("PSUBSCRIBE", "__shardis:*"), ("SSUBSCRIBE", "__shardis:x"),
                ("PUBLISH", "__shardis:wait", "x"), ("SPUBLISH", "__shardis:x", "y")):
        expect_eq(c.cmd(*cmd), CHAN_ERR, " ".join(str(a) for a in cmd))
    # Refused whole: "ok" was not subscribed either.
    expect_eq(c.cmd("PING"), b"+PONG\r\n", "PING, not in subscriber mode")
    expect_eq(c.cmd("SUBSCRIBE", "a"), frame(b"subscribe", b"a", 1), "SUBSCRIBE a")
    expect_eq(c.cmd("SUBSCRIBE", "__shardis:wait"), CHAN_ERR, "SUBSCRIBE while subscribed")
    expect_eq(c.cmd("PING"), frame(b"pong", b""), "still a subscriber of a")
    expect_eq(px.client.publish("a", "m"), 1, "PUBLISH a")
    expect_eq(c.reply(), frame(b"message", b"a", b"m"), "a's message")
    for s in rs[:2]:
        expect_eq([ch for ch in s.client.pubsub_channels() if ch.startswith(b"__shardis:") and
                   b"evil" in ch], [], "a client's channel under __shardis: on " + s.name)
    c.close()
    harness.t_exit_clean(px)


def t_patterns(rs):
    """WAIT publishes its marker on __shardis:wait on every server: a
    client's pattern that matches it must not deliver it."""
    px = Shardis("pat", rs[:2])
    sub = Raw(px.port)
    sub.send(harness.enc("PSUBSCRIBE", "*", "__shard*"))
    expect_eq(sub.reply() + sub.reply(),
              frame(b"psubscribe", b"*", 1) + frame(b"psubscribe", b"__shard*", 2), "PSUBSCRIBE")
    expect_eq(px.client.execute_command("WAIT", 0, 0), 0, "WAIT 0 0")
    expect_eq(px.client.publish("visible", "m"), 1, "PUBLISH visible")
    expect_eq(sub.reply(), frame(b"pmessage", b"*", b"visible", b"m"),
              "the first message the pattern subscriber gets")
    sub.close()
    harness.t_exit_clean(px)


def t_group(rs):
    p1 = Shardis("grp1", rs[:3], admin_commands="true")
    evil = Raw(p1.port)
    got = evil.cmd("SUBSCRIBE", b"__shardis:group:alpha:evil:S:%016x:%016x" % (0, 0))
    try:
        p2 = Shardis("grp2", rs[:3], admin_commands="true")
    except RuntimeError as e:
        raise Fail("a second shardis did not start: %s" % harness.one_line(e)[-200:])
    expect_eq(got, CHAN_ERR, "a client posing as a proxy of the group")
    until("each proxy sees both", lambda: all(
        status(px).get("group_proxies") == "2" for px in (p1, p2)))
    for px in (p1, p2):
        write_servers(px, rs[:4])
        px.client.execute_command("SHARD.RELOAD")
    until("both switched", lambda: all(status(px)["epoch"] == "1" for px in (p1, p2)), 10)
    for px in (p1, p2):
        wait_stable(px, servers=rs)
    evil.close()
    harness.t_exit_clean(p1)
    harness.t_exit_clean(p2)


# ---- shardis's own keys ------------------------------------------------------------------

def t_reserved_keys(rs):
    px = Shardis("keys", rs[:3], idgen="{types: {user: 1}}")
    c = Raw(px.port)
    seq = "$equence{2K}"
    px.client.rpush("{2K}l", "1", "")
    px.client.set("{2K}a", "x")
    cmds = [
        ("GET", seq), ("HGETALL", seq), ("HSET", seq, "slot", "0"), ("EXISTS", seq),
        ("GET", "__shardis:ctl:alpha"), ("TYPE", "$equence{"),
        ("MGET", "a", "b", seq), ("DEL", "a", seq), ("MSET", "a", "1", seq, "2"),
        ("UNLINK", seq), ("TOUCH", "a", seq),
        ("RENAME", "{2K}a", seq), ("COPY", "{2K}a", seq), ("DUMP", seq),
        ("RESTORE", seq, "0", "x"),
        ("SORT", "{2K}l", "STORE", seq), ("SORT_RO", seq),
        ("SORT", "{2K}l", "BY", "nosort", "GET", "$equence{2K}*->slot"),
        ("SORT", "{2K}l", "BY", "$equence{2K}*->slot"),
        ("GEORADIUS", "{2K}g", "0", "0", "1", "km", "STORE", seq),
        ("GEORADIUSBYMEMBER", "{2K}g", "m", "1", "km", "STOREDIST", seq),
        ("EVAL", "return redis.call('hgetall', KEYS[1])", "1", seq),
        ("EVAL_RO", "return 1", "2", "{2K}a", seq),
        ("EVALSHA", "0" * 40, "1", seq), ("FCALL", "f", "1", seq),
        ("OBJECT", "ENCODING", seq), ("MEMORY", "USAGE", seq),
        ("XREAD", "STREAMS", seq, "0"), ("BLPOP", seq, "1"),
        ("WATCH", seq), ("SSUBSCRIBE", seq),
    ]
    for cmd in cmds:
        expect_eq(c.cmd(*cmd), KEY_ERR, " ".join(cmd))
    expect_eq(c.cmd("MULTI"), b"+OK\r\n", "MULTI")
    expect_eq(c.cmd("HSET", seq, "slot", "0"), KEY_ERR, "HSET in MULTI")
    expect(c.cmd("EXEC").startswith(b"-EXECABORT"), "EXEC after a refused command")
    # Inline commands take the same path.
    c.send(b"HGETALL $equence{2K}\r\n")
    expect_eq(c.reply(), KEY_ERR, "inline HGETALL")
    # Keys that only look alike are anyone's.
    for k in ("$equence", "$equence}2K", "__shardis", "x$equence{2K}"):
        expect_eq(c.cmd("SET", k, "v"), b"+OK\r\n", "SET " + k)
    c.close()
    harness.t_exit_clean(px)


def t_rewind(rs):
    """The hardening issue's case: a client read a sequence and set its slot
    back; the next GENKEY NEAR then gave an id it had handed out before.
    The sequence runs a minute ahead here (restart_guard_ms), so a rewound
    slot would be used again at once."""
    px = Shardis("rewind", rs[:3],
                 idgen="{types: {user: 1}, max_ahead_ms: 120000, restart_guard_ms: 60000}")
    first = px.client.execute_command("SHARD.GENKEY", "user")
    seq = "$equence{%s}" % first.decode()[8:10]
    owner = rs[px.whereis([seq])[seq]].client
    state = owner.hgetall(seq)
    expect(state.get(b"slot") == b"1", "the sequence after one id: %r" % state)
    c = Raw(px.port)
    read = c.cmd("HGETALL", seq)
    rewind = c.cmd("HSET", seq, "slot", "0")
    again = px.client.execute_command("SHARD.GENKEY", "user", "NEAR", first)
    expect(again != first, "SHARD.GENKEY handed out %r twice" % first)
    expect_eq(again[7:11], first[7:11], "NEAR keeps the shard")
    expect_eq(read, KEY_ERR, "HGETALL " + seq)
    expect_eq(rewind, KEY_ERR, "HSET %s slot 0" % seq)
    state[b"slot"] = b"2"
    expect_eq(owner.hgetall(seq), state, "the sequence after the client's HSET and an id")
    c.close()
    harness.t_exit_clean(px)


def t_sequences_move(rs):
    """The mover leaves __shardis: keys where they are but moves the
    sequences like any key: after a reshard each lives on its owner only."""
    # md5 spreads the {LL} tags over every server (fnv1a_64 keeps most on one).
    px = Shardis("seqmove", rs[:2], admin_commands="true", idgen="{types: {user: 1}}",
                 hash="md5")
    ids = set()
    for _ in range(40):
        ids.update(px.client.execute_command("SHARD.GENKEY", "user", "COUNT", 5))
    seqs = sorted({b"$equence{%s}" % k[8:10] for k in ids})
    was = px.whereis(seqs)
    write_servers(px, rs[:3])
    reload(px, 1)
    wait_stable(px, servers=rs)
    where = px.whereis(seqs)
    moved = sum(was[k] != where[k] for k in seqs)
    expect(moved > 0, "no sequence moved: nothing to prove")
    for k in seqs:
        on = [s.name for s in rs[:3] if s.client.exists(k)]
        expect_eq(on, [rs[where[k]].name], "servers holding %r" % k)
    for _ in range(40):
        for k in px.client.execute_command("SHARD.GENKEY", "user", "COUNT", 5):
            expect(k not in ids, "id %r handed out twice across the reshard" % k)
            ids.add(k)
    harness.t_exit_clean(px)
    return "%d of %d sequences moved" % (moved, len(seqs))


# ---- SORT patterns -----------------------------------------------------------------------

def t_sort(rs):
    px = Shardis("sort", rs[:3])
    ref = RedisServer("sortref")
    c = Raw(px.port)
    r = Raw(ref.port)
    # Prefixes whose keys (<prefix>1 .. 3) all live away from l's server.
    home = px.whereis(["l"])["l"]
    away = [p for p in ("%s%d_" % (ch, n) for n in range(100) for ch in "wo")
            if home not in px.whereis([p + str(i) for i in (1, 2, 3)]).values()]
    w = next((p for p in away if p[0] == "w"), None)
    o = next((p for p in away if p[0] == "o"), None)
    expect(w and o, "no pattern whose keys all live away from l's server")
    for conn in (px.client, ref.client):
        conn.rpush("l", 1, 2, 3)
        conn.rpush("{t}l", 1, 2, 3)
        for i, wt in ((1, 3), (2, 1), (3, 2)):
            conn.mset({w + str(i): wt, o + str(i): "o%d" % i, "{t}w_%d" % i: wt,
                       "{t}o_%d" % i: "o%d" % i, "w_{t}%d" % i: wt, "{l}w_%d" % i: wt})
            conn.hset("{t}h_%d" % i, "f", wt)
    refused = [
        (("SORT", "l", "BY", w + "*"), b"BY"), (("SORT", "l", "GET", o + "*"), b"GET"),
        (("SORT_RO", "l", "BY", w + "*"), b"BY"),
        (("SORT_RO", "l", "GET", "#", "GET", o + "*"), b"GET"),
        (("SORT", "{t}l", "BY", "{u}w_*"), b"BY"), (("SORT", "{t}l", "BY", "*{t}"), b"BY"),
        (("SORT", "{t}l", "BY", "{t*}w"), b"BY"), (("SORT", "{t}l", "GET", "{}{t}*"), b"GET"),
        (("SORT", "{t}l", "BY", "{t}w_*", "GET", o + "*"), b"GET"),
        (("SORT", "{t}l", "GET", "{t}o_*", "BY", w + "*", "STORE", "{t}d"), b"BY"),
    ]
    for cmd, which in refused:
        expect_eq(c.cmd(*cmd), SORT_ERR % which, " ".join(cmd))
    same = [
        ("SORT", "{t}l", "BY", "{t}w_*"),
        ("SORT", "{t}l", "BY", "{t}w_*", "GET", "#", "GET", "{t}o_*"),
        ("SORT", "{t}l", "BY", "{t}h_*->f", "GET", "{t}h_*->f", "DESC"),
        ("SORT", "{t}l", "BY", "w_{t}*", "LIMIT", "0", "2"),
        ("SORT", "{t}l", "BY", "{t}w_*", "STORE", "{t}dst"),
        ("SORT_RO", "{t}l", "BY", "{t}w_*", "GET", "{t}o_*"),
        ("SORT", "l", "BY", "{l}w_*"),          # the whole key is the tag
        ("SORT", "l", "BY", "nosort", "GET", "#"), ("SORT", "l", "BY", w + "1"),
        ("SORT", "l", "GET", o + "1"), ("SORT_RO", "l", "DESC", "ALPHA"),
        # What redis-server refuses first is its own error.
        ("SORT", "l", "LIMIT", "0", "x", "BY", w + "*"), ("SORT", "l", "FOO", "BY", w + "*"),
        ("SORT_RO", "l", "STORE", "{l}d", "BY", w + "*"),
    ]
    for cmd in same:
        expect_eq(c.cmd(*cmd), r.cmd(*cmd), " ".join(cmd))
    expect_eq(px.client.lrange("{t}dst", 0, -1), [b"2", b"3", b"1"], "SORT ... STORE")
    c.close()
    r.close()
    harness.t_exit_clean(px)


# ---- shard channels across a reload --------------------------------------------------------

def t_ssubscribe_reload(rs):
    px = Shardis("ssub", rs[:2], admin_commands="true")
    names = ["ch:%d" % i for i in range(200)]
    where = px.whereis(names)
    before = {n: rs[where[n]].name for n in names}
    write_servers(px, rs[:3])
    after = locate(px.conf, names)
    moving = next(n for n in names if before[n] != after[n]).encode()
    staying = next(n for n in names if before[n] == after[n]).encode()
    both = Raw(px.port)            # a moving channel and one that stays
    alone = Raw(px.port)           # only the moving one
    expect_eq(both.cmd("SSUBSCRIBE", moving), frame(b"ssubscribe", moving, 1), "SSUBSCRIBE")
    expect_eq(both.cmd("SSUBSCRIBE", staying), frame(b"ssubscribe", staying, 2), "SSUBSCRIBE")
    expect_eq(alone.cmd("SSUBSCRIBE", moving), frame(b"ssubscribe", moving, 1), "SSUBSCRIBE")
    reload(px, 1)
    expect_eq(both.reply(), frame(b"sunsubscribe", moving, 1), "the push for the moved channel")
    expect_eq(alone.reply(), frame(b"sunsubscribe", moving, 0), "the push for the moved channel")
    expect_eq(alone.cmd("PING"), b"+PONG\r\n", "no subscription left: out of subscriber mode")
    expect_eq(px.client.execute_command("SPUBLISH", staying, "s1"), 1, "SPUBLISH staying")
    expect_eq(both.reply(), frame(b"smessage", staying, b"s1"), "the staying channel's message")
    for c, n in ((both, 2), (alone, 1)):
        expect_eq(c.cmd("SSUBSCRIBE", moving), frame(b"ssubscribe", moving, n), "again")
    expect_eq(px.client.execute_command("SPUBLISH", moving, "m1"), 2, "SPUBLISH moved")
    for c in (both, alone):
        expect_eq(c.reply(), frame(b"smessage", moving, b"m1"), "the moved channel's message")
    expect_eq(rs[[s.name for s in rs].index(after[moving.decode()])].client
              .execute_command("PUBSUB", "SHARDNUMSUB", moving), [moving, 2],
              "subscribers on the new owner")
    old = rs[[s.name for s in rs].index(before[moving.decode()])].client
    until("the old owner has no subscriber left",
          lambda: old.execute_command("PUBSUB", "SHARDNUMSUB", moving) == [moving, 0])
    both.close()
    alone.close()
    wait_stable(px, servers=rs)
    harness.t_exit_clean(px)


def body():
    run = harness.run_with_servers

    run("client channels cannot reach __shardis: (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, "
        "PUBLISH, SPUBLISH)", t_channels, 2)
    run("a pattern subscriber never gets shardis's own messages (WAIT's marker)",
        t_patterns, 2)
    run("a client cannot pose as a proxy: a second shardis starts, a reload completes",
        t_group, 4)
    run("$equence{..} and __shardis: keys are refused on every path a key is taken from",
        t_reserved_keys, 3)
    run("a client cannot rewind an id sequence: GENKEY never repeats an id", t_rewind, 3)
    run("the sequences still move with a reshard; ids stay unique", t_sequences_move, 3)
    run("SORT/SORT_RO BY and GET patterns: the key's tag routes, others refused as Redis "
        "Cluster does", t_sort, 3)
    run("SSUBSCRIBE across a reload that moves its channel: sunsubscribe push, subscribe "
        "again, messages arrive", t_ssubscribe_reload, 3)


if __name__ == "__main__":
    sys.exit(harness.main(body))
