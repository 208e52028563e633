#!/usr/bin/python3
"""test_idgen.py -- SHARD.GENKEY and friends against real redis-servers.

What it proves, with its own decoder of the key layout (not shardis's):
- concurrency: two shardis processes in front of the same three backends
  mint ids from eight connections with COUNT 1..1000 for several seconds
  while one backend is killed (-9) and restarted empty: every id is
  distinct and decodable, each connection sees the ids of a logical shard
  strictly ascending, every COUNT batch is ascending and contiguous, and
  each shard's state on its backend is exactly the slot after its last id;
- a restart from an old snapshot (the state hash is there, but stale) is
  caught by the run_id and starts restart_guard_ms ahead, so ids minted
  before the restart with a clock running ahead are never handed out again;
- a clock stepped back (the allocator's test hook SHARDIS_TEST_CLOCK_SKEW_MS)
  keeps ids ascending and unique, with no error while within max_ahead_ms,
  and -TRYAGAIN for no longer than the step beyond max_ahead_ms;
- SHARD.CHANGETYPE siblings live on the same backend as the original
  (checked on the backends), NEAR keeps the logical shard, and
  SHARD.KEYINFO / SHARD.FIXEDKEY decode and encode every layout;
- idgen.subkeys: SHARD.MINIFY / SHARD.MAXIFY map fields both ways, in
  RESP2 and RESP3; a reload may add a name, not change or drop one;
- bad input gets a clear error and allocates nothing; a flushed script
  cache (NOSCRIPT) is recovered; a pool without {} hash tags refuses.

Run: /usr/bin/python3 tests/integration/test_idgen.py --shardis build/shardis
"""
import random
import subprocess
import sys
import threading
import time

import redis

import harness
from harness import (Fail, RedisServer, Shardis, check, enc, expect, expect_eq, one_reply,
                     t_exit_clean)

B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
SLOTS = 62 ** 3
EPOCH = 1325404800000
IDGEN = "{types: {user: 1, token: 2}, fixed: {users: user}}"


def b62(s):
    v = 0
    for ch in s:
        v = v * 62 + B62.index(ch)
    return v


def to_b62(v, width):
    out = ""
    for _ in range(width):
        out = B62[v % 62] + out
        v //= 62
    return out


def decode(key):
    """(ms, shard, slot, type) of a generated key, or Fail."""
    k = key.decode() if isinstance(key, bytes) else key
    if len(k) != 16 or k[7] != "{" or k[10] != "}" or \
            any(ch not in B62 for ch in k[:7] + k[8:10] + k[11:]):
        raise Fail("not a generated key: %r" % key)
    return b62(k[:7]), b62(k[8:10]), b62(k[11:14]), b62(k[14:])


def pos(key):
    """A generated key's place in its shard's sequence: ms * SLOTS + slot."""
    ms, _, slot, _ = decode(key)
    return ms * SLOTS + slot


def now_ms():
    return int(time.time() * 1000)


# ---- concurrent minting ---------------------------------------------------------------

class Minter(threading.Thread):
    """One connection minting batches until stop is set; records every batch."""

    def __init__(self, port, seed, stop, near=None, count_max=1000):
        super().__init__(daemon=True)
        self.port, self.stop, self.near = port, stop, near
        self.rnd = random.Random(seed)
        self.count_max = count_max
        self.batches = []       # lists of keys, in the order they were minted
        self.errors = []

    def run(self):
        c = redis.Redis(harness.HOST, self.port, socket_timeout=10)
        while not self.stop.is_set():
            n = self.rnd.choice([1, 1, 2, 10, self.rnd.randint(1, self.count_max)])
            args = ["SHARD.GENKEY", self.rnd.choice(["user", "token", "default", "7"]),
                    "COUNT", n]
            if self.near:
                args += ["NEAR", self.near]
            try:
                self.batches.append(c.execute_command(*args))
            except redis.ResponseError as e:
                self.errors.append(str(e))
            except redis.ConnectionError as e:
                self.errors.append("connection: %s" % e)
                time.sleep(0.01)


def check_minted(px, minters, lost):
    """Every id distinct, batches contiguous, per-connection order, and the
    backends' state just past each shard's last id (but on the backend lost,
    restarted empty, shards not minted since have no state). Returns (ids,
    shards, shards with state on lost)."""
    seen = set()
    last = {}                   # shard -> greatest position minted
    total = 0
    for m in minters:
        mine = {}               # shard -> last position this connection saw
        for batch in m.batches:
            expect(len(batch) >= 1, "empty batch")
            prev = pshard = None
            for key in batch:
                ms, shard, slot, _ = decode(key)
                p = ms * SLOTS + slot
                uid = key[:14]      # T{LL}S: the type is not part of uniqueness
                if uid in seen:
                    raise Fail("id %r minted twice" % key)
                seen.add(uid)
                if prev is not None:
                    expect(p == prev + 1 and shard == pshard,
                           "batch not contiguous: %r after position %d" % (key, prev))
                expect(p > mine.get(shard, -1),
                       "shard %d went backwards on one connection: %r" % (shard, key))
                mine[shard] = p
                last[shard] = max(last.get(shard, -1), p)
                prev, pshard = p, shard
                total += 1
    seqs = {shard: b"$equence{%s}" % to_b62(shard, 2).encode() for shard in last}
    where = px.whereis(list(seqs.values()))
    on_lost = 0
    for shard, p in last.items():
        srv = px.servers[where[seqs[shard]]]
        h = srv.client.hgetall(seqs[shard])
        if not h and srv is lost:
            continue        # its state died with the backend, and it was not used since
        on_lost += srv is lost
        state = int(h[b"ms"]) * SLOTS + int(h[b"slot"]) if h else None
        expect(state == p + 1, "shard %d: state %s on its server, but the last id minted "
               "is at %d" % (shard, state, p))
    return total, len(last), on_lost


def t_concurrent(pa, pb, backends):
    stop = threading.Event()
    minters = [Minter(p.port, i, stop) for i, p in enumerate([pa, pb] * 4)]
    for m in minters:
        m.start()
    time.sleep(1.5)
    backends[1].restart()           # kill -9, back empty: its shards' state is gone
    time.sleep(2.5)
    stop.set()
    for m in minters:
        m.join(15)
        expect(not m.is_alive(), "a minting connection hung")
    errors = [e for m in minters for e in m.errors]
    bad = [e for e in errors if "unavailable" not in e and "connection" not in e]
    expect(not bad, "unexpected errors: %s" % bad[:3])
    total, shards, after = check_minted(pa, minters, backends[1])
    calls = sum(len(m.batches) for m in minters)
    expect(calls > 200, "only %d GENKEY calls succeeded" % calls)
    expect(after > 0, "no shard of redis2 was minted after its restart")
    return "%d ids in %d calls over %d logical shards (%d on redis2 after its restart), " \
           "distinct and ordered; %d errors while redis2 restarted" % (
               total, calls, shards, after, len(errors))


# ---- restarts and clocks --------------------------------------------------------------

def mint_near(port, near, seconds, n=1):
    """Mint on one connection into near's shard for a while; all keys, in order."""
    c = redis.Redis(harness.HOST, port, socket_timeout=10)
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        pipe = c.pipeline(transaction=False)
        for _ in range(20):
            pipe.execute_command("SHARD.GENKEY", "COUNT", n, "NEAR", near)
        for batch in pipe.execute():
            out += batch
    return out


def wait_minting(px, near, timeout=5.0):
    """Wait until the proxy mints into near's shard again (after a restart
    its backend is retried with backoff)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return px.client.execute_command("SHARD.GENKEY", "NEAR", near)
        except redis.ResponseError as e:
            if "unavailable" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def owner(px, key):
    i = px.whereis([key])[key]
    return px.servers[i]


def t_restart_from_snapshot(px, ahead, backends):
    # One id creates the shard's state; SAVE keeps that (soon stale) state.
    first = px.client.execute_command("SHARD.GENKEY", "user")
    shard = decode(first)[1]
    seq = "$equence{%s}" % to_b62(shard, 2)
    srv = owner(px, seq)
    srv.client.save()
    old_rid = srv.client.hget(seq, "rid")
    # A proxy whose clock runs 1.5 s ahead mints into every ms of that shard.
    minted = mint_near(ahead.port, first, 0.4)
    srv.restart()                   # kill -9: back with the snapshot
    expect(srv.client.hget(seq, "rid") == old_rid, "the snapshot did not restore the state")
    t0 = now_ms()
    after = [wait_minting(px, first)]
    t1 = now_ms()
    after += mint_near(px.port, first, 1.2)
    uids = [k[:14] for k in minted + after]
    dup = len(uids) - len(set(uids))
    expect(dup == 0, "%d ids minted before the restart were minted again" % dup)
    # Minted somewhen in [t0, t1], restart_guard_ms (2000) ahead of then.
    at = decode(after[0])[0] + EPOCH
    lead = at - t0
    expect(t0 + 1950 <= at <= t1 + 2100, "first id after the restart is %d ms after the "
           "restart (%d ms to mint it); want the 2000 ms guard" % (lead, t1 - t0))
    expect(pos(after[0]) > max(pos(k) for k in minted), "ids went backwards after the restart")
    expect(srv.client.hget(seq, "rid") != old_rid, "the state still names the old run_id")
    return "%d ids before the restart (clock 1.5 s ahead), %d after; first after is %d ms " \
           "ahead" % (len(minted), len(after), lead)


def t_clock_back_within(px, behind):
    """A clock 3 s behind (< max_ahead_ms 5 s): no error, still ascending."""
    first = px.client.execute_command("SHARD.GENKEY")
    wait_minting(behind, first)
    a = mint_near(px.port, first, 0.3)
    b = mint_near(behind.port, first, 0.3)
    c = mint_near(px.port, first, 0.3)
    keys = [first] + a + b + c
    ps = [pos(k) for k in keys]
    expect(all(x < y for x, y in zip(ps, ps[1:])), "ids not ascending across the step back")
    expect(len(set(k[:14] for k in keys)) == len(keys), "duplicate ids")
    return "%d ids, ascending across a 3 s step back and forward" % len(keys)


def t_clock_back_beyond(px, far):
    """A clock 1.5 s behind with max_ahead_ms 500: -TRYAGAIN until that clock
    is within 500 ms of the shard's state (about 1 s), then ascending ids."""
    first = px.client.execute_command("SHARD.GENKEY", "COUNT", 1)[0]
    before = mint_near(px.port, first, 0.2)
    seq = "$equence{%s}" % first.decode()[8:10]
    state_ms = int(owner(px, seq).client.hget(seq, "ms"))
    stall = (state_ms - (now_ms() - EPOCH - 1500) - 500) / 1000.0
    c = redis.Redis(harness.HOST, far.port, socket_timeout=10)
    t0, errors = time.monotonic(), []
    while True:
        try:
            got = c.execute_command("SHARD.GENKEY", "NEAR", first)
            break
        except redis.ResponseError as e:
            errors.append(str(e))
            expect(str(e).startswith("TRYAGAIN id sequence $equence{"), "error %r" % str(e))
            expect(time.monotonic() - t0 < 3.0, "still refused after 3 s: %s" % e)
            time.sleep(0.02)
    waited = time.monotonic() - t0
    expect(stall > 0.5 and errors, "a clock 1.5 s behind got no TRYAGAIN with max_ahead_ms 500")
    expect(stall - 0.3 < waited < stall + 1.5,
           "refused for %.2f s; the clock was %.2f s too far behind" % (waited, stall))
    expect(pos(got) > max(pos(k) for k in before), "id after the stall is not the highest")
    return "TRYAGAIN for %.2f s of the %.2f s the clock was too far behind (%d replies, " \
           "e.g. %r), then ascending" % (waited, stall, len(errors), errors[0])


def t_spread(px, n=3000):
    """New ids go to the servers by their share of the ring, among the servers
    whose ring holds any {LL} tag."""
    seqs = [b"$equence{%s}" % to_b62(l, 2).encode() for l in range(62 * 62)]
    owners = px.whereis(seqs)
    nodes = {row[1]: float(row[9]) for row in px.client.execute_command("SHARD.NODES")}
    names = [b"redis%d" % (i + 1) for i in range(len(px.servers))]
    holding = sorted(set(owners.values()))
    total = sum(nodes[names[i]] for i in holding)
    pipe = px.client.pipeline(transaction=False)
    for _ in range(n):
        pipe.execute_command("SHARD.GENKEY")
    got = [0] * len(px.servers)
    for i in px.whereis(pipe.execute()).values():
        got[i] += 1
    for i in range(len(px.servers)):
        want = n * nodes[names[i]] / total if i in holding else 0
        expect(abs(got[i] - want) <= max(0.15 * want, 3 * want ** 0.5),
               "server %d got %d ids of %d, want about %.0f" % (i, got[i], n, want))
    return "ids per server %s (servers holding {LL} tags: %s)" % (got, holding)


# ---- commands ---------------------------------------------------------------------------

def t_replies(px):
    c = px.client
    one = c.execute_command("SHARD.GENKEY")
    expect(isinstance(one, bytes) and decode(one)[3] == 3843, "plain GENKEY: %r" % one)
    u = c.execute_command("SHARD.GENKEY", "user")
    expect_eq(decode(u)[3], 1, "type of 'user'")
    expect_eq(decode(c.execute_command("SHARD.GENKEY", 42))[3], 42, "type 42")
    arr = c.execute_command("SHARD.GENKEY", "COUNT", 1)
    expect(isinstance(arr, list) and len(arr) == 1, "COUNT 1 is an array: %r" % arr)
    many = c.execute_command("SHARD.GENKEY", "token", "COUNT", 100000)
    expect_eq(len(many), 100000, "COUNT 100000")
    ps = [pos(k) for k in many]
    expect(ps == list(range(ps[0], ps[0] + 100000)), "COUNT 100000 not contiguous")
    expect(sorted(many) == many, "byte order is not id order")
    t = decode(one)[0] + EPOCH
    expect(abs(t - now_ms()) < 60000, "id time %d is not now" % t)
    return "single %s, COUNT 100000 contiguous from %s" % (one.decode(), many[0].decode())


def t_near_changetype(px, backends):
    c = px.client
    placed = 0
    for _ in range(30):
        k = c.execute_command("SHARD.GENKEY", "user")
        near = c.execute_command("SHARD.GENKEY", "token", "COUNT", 3, "NEAR", k)
        sib = c.execute_command("SHARD.CHANGETYPE", k, "token")
        expect_eq(sib, k[:14] + b"02", "CHANGETYPE")
        expect_eq(c.execute_command("SHARD.CHANGETYPE", sib, 1), k, "CHANGETYPE back")
        for n in near:
            expect_eq(decode(n)[1], decode(k)[1], "NEAR shard")
        for key in [k, sib] + near:
            c.set(key, b"v")
        # On the backends: every sibling on the one server that holds k.
        holders = [i for i, b in enumerate(backends) if b.client.exists(k)]
        expect(len(holders) == 1, "%r on %d servers" % (k, len(holders)))
        for key in [sib] + near:
            expect(backends[holders[0]].client.exists(key), "%r is not beside %r" % (key, k))
        placed += 1
    return "%d ids, their CHANGETYPE siblings and NEAR ids on one backend each" % placed


def t_keyinfo(px):
    c = px.client

    def info(key):
        v = c.execute_command("SHARD.KEYINFO", key)
        return dict(zip(v[0::2], v[1::2]))
    k = c.execute_command("SHARD.GENKEY", "user")
    ms, shard, slot, typ = decode(k)
    i = info(k)
    expect_eq(i[b"format"], b"shardis", "format")
    expect_eq(i[b"ms"], ms + EPOCH, "ms")
    expect_eq(i[b"time"], time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((ms + EPOCH) // 1000))
              .encode() + b".%03dZ" % ((ms + EPOCH) % 1000), "time")
    expect_eq((i[b"shard"], i[b"slot"], i[b"type"], i[b"type_name"]),
              (shard, slot, typ, b"user"), "fields")
    expect_eq(i[b"server"], c.execute_command("SHARD.WHEREIS", k), "server")
    # A legacy shardjs key, as shardjs writes it: unpadded time, variant, type.
    t = now_ms() - 86400000
    sj = to_b62(t - EPOCH, 7).lstrip("0") + to_b62(1234, 2) + to_b62(2, 2)
    i = info(sj + "-suffix")
    expect_eq((i[b"format"], i[b"ms"], i[b"variant"], i[b"type"], i[b"type_name"]),
              (b"shardjs", t, 1234, 2, b"token"), "shardjs key")
    expect_eq(c.execute_command("SHARD.CHANGETYPE", sj + "-x", "user"),
              (sj[:-2] + "01-x").encode(), "CHANGETYPE of a shardjs key")
    f = c.execute_command("SHARD.FIXEDKEY", "users")
    expect_eq(f, c.execute_command("SHARD.FIXEDKEY", "users", "user"), "fixed key from config")
    expect(f.startswith(b"0000000{") and f.endswith(b"00001-users"), "fixed key %r" % f)
    expect(f < k, "a fixed key sorts before generated keys")
    i = info(f)
    expect_eq((i[b"format"], i[b"name"], i[b"type"]), (b"fixed", b"users", 1), "fixed key")
    i = info("user:1000")
    expect_eq(sorted(i), [b"format", b"server"], "unknown key fields")
    expect_eq(i[b"format"], b"unknown", "unknown key")
    return "generated, shardjs (%s-suffix), fixed (%s) and unknown keys" % (sj, f.decode())


ERRORS = [
    (["SHARD.GENKEY", "bogus"], "unknown key type 'bogus'; expected a number 0..3843 or one "
                                "of: user, token, default"),
    (["SHARD.GENKEY", "3844"], "key type '3844' is not a number 0..3843"),
    (["SHARD.GENKEY", "COUNT", "0"], "COUNT must be an integer from 1 to 100000"),
    (["SHARD.GENKEY", "COUNT", "100001"], "COUNT must be an integer from 1 to 100000"),
    (["SHARD.GENKEY", "user", "COUNT", "ten"], "COUNT must be an integer from 1 to 100000"),
    (["SHARD.GENKEY", "NEAR", "user:1"], "NEAR key 'user:1' is not a generated key"),
    (["SHARD.GENKEY", "user", "LATER", "1"], "syntax error"),
    (["SHARD.CHANGETYPE", "user:1", "user"], "'user:1' is not a generated, shardjs or "
                                             "fixed key"),
    (["SHARD.CHANGETYPE", "0000000{00}000zz", "nope"], "unknown key type 'nope'"),
    (["SHARD.CHANGETYPE", "x"], "wrong number of arguments for 'shard.changetype' command"),
    (["SHARD.KEYINFO"], "wrong number of arguments for 'shard.keyinfo' command"),
    (["SHARD.FIXEDKEY", "emails"], "fixed key 'emails' is not in idgen.fixed: give its type"),
    (["SHARD.FIXEDKEY", "has space", "user"], "a fixed key's name is 1 to 128 printable"),
]


def t_errors(px, backends):
    def state():
        return sorted(k for b in backends for k in b.client.keys("$equence{*}"))
    before = state()
    for args, want in ERRORS:
        try:
            got = px.client.execute_command(*args)
        except redis.ResponseError as e:
            expect(str(e).startswith(want), "%s: got %r, want %r" % (args, str(e), want))
        else:
            raise Fail("%s answered %r, want an error" % (args, got))
    expect_eq(state(), before, "sequence keys after bad requests")
    return "%d bad requests, each a clear error, nothing allocated" % len(ERRORS)


def t_noscript(px, backends):
    for b in backends:
        b.client.script_flush()
    keys = px.client.execute_command("SHARD.GENKEY", "COUNT", 50)
    expect_eq(len(keys), 50, "ids after SCRIPT FLUSH")
    again = px.client.execute_command("SHARD.GENKEY", "COUNT", 50)
    expect_eq(len(again), 50, "ids after the script was loaded again")
    return "SCRIPT FLUSH on every backend: GENKEY retried as EVAL"


def t_no_tag(R):
    px = Shardis("notag", R, hash_tag=None)
    try:
        px.client.execute_command("SHARD.GENKEY")
    except redis.ResponseError as e:
        expect(str(e).startswith('SHARD.GENKEY needs hash_tag: "{}"'), "got %r" % str(e))
    else:
        raise Fail("GENKEY worked without hash tags")
    harness.stop(px.proc)


def t_subkeys(R):
    """idgen.subkeys: SHARD.MINIFY and SHARD.MAXIFY map each field (one the
    dictionary does not name comes back as it is); a reload may add names,
    not change or drop one."""
    px = Shardis("subkeys", R, admin_commands="true",
                 idgen="{subkeys: {name: n, city: c, password: p}}")
    c = px.client
    expect_eq(c.execute_command("SHARD.MINIFY", "name", "city", "other", "n"),
              [b"n", b"c", b"other", b"n"], "SHARD.MINIFY")
    expect_eq(c.execute_command("SHARD.MAXIFY", "n", "p", "x", "name"),
              [b"name", b"password", b"x", b"name"], "SHARD.MAXIFY")
    expect_eq(one_reply(px.port, enc("SHARD.MINIFY")),
              b"-ERR wrong number of arguments for 'shard.minify' command\r\n", "no field")
    r3 = harness.Raw(px.port)
    r3.cmd("HELLO", "3")
    expect_eq(r3.cmd("SHARD.MAXIFY", "c"), b"*1\r\n$4\r\ncity\r\n", "RESP3")
    r3.close()
    text = open(px.conf).read()

    def reload_with(subkeys):
        with open(px.conf, "w") as f:
            f.write(text.replace("{name: n, city: c, password: p}", subkeys))
        try:
            return c.execute_command("SHARD.RELOAD").decode()
        except redis.ResponseError as e:
            return "refused: %s" % e

    got = reload_with("{name: n, city: c, password: p, zip: z}")
    expect(not got.startswith("refused"), "a reload that adds a name: %s" % got)
    expect_eq(c.execute_command("SHARD.MINIFY", "zip"), [b"z"], "the added name")
    for changed in ("{name: m, city: c, password: p, zip: z}", "{city: c, password: p, zip: z}"):
        got = reload_with(changed)
        expect("idgen.subkeys dropped a name or changed its short name" in got,
               "a reload that changes or drops a name: %s" % got)
    expect_eq(c.execute_command("SHARD.MINIFY", "name", "zip"), [b"n", b"z"], "kept")
    t_exit_clean(px)
    # (Looked up by a scan: a dictionary is held to 1024 names.)
    big = "{%s}" % ", ".join("f%d: s%d" % (i, i) for i in range(1025))
    with open(px.conf, "w") as f:
        f.write(text.replace("{name: n, city: c, password: p}", big))
    out = subprocess.run([harness.ARGS.shardis, "-t", "-c", px.conf], capture_output=True,
                         text=True, timeout=30)
    expect(out.returncode != 0 and "more than 1024 names" in out.stderr,
           "1025 names: %r" % out.stderr[-200:])


def t_auth():
    """With redis_auth: NOAUTH before AUTH; after it, the backends (which
    want the password too) run the allocator."""
    srv = RedisServer("idauth1", password="pw")
    px = Shardis("idauth", [srv], redis_auth="pw", idgen=IDGEN)
    expect_eq(one_reply(px.port, enc("SHARD.GENKEY")), b"-NOAUTH Authentication required.\r\n",
              "GENKEY before AUTH")
    expect_eq(len(px.client.execute_command("SHARD.GENKEY", "COUNT", 2)), 2, "ids after AUTH")
    for p in (px.proc, srv.proc):
        harness.stop(p)


def t_own_keys_hidden():
    """After SHARD.GENKEY on every server, the views of the keyspace show
    the clients' keys and not the sequences it made ("$equence{..}"): a
    SCAN walk, KEYS, DBSIZE, RANDOMKEY (one key among hundreds of
    sequences too, and nil with none), INFO keyspace; redis-cli --bigkeys
    and --memkeys, which ask TYPE and MEMORY USAGE of each key SCAN gives
    them and were refused a sequence, exit 0."""
    R = [RedisServer("hid%d" % (i + 1)) for i in range(3)]
    px = Shardis("hidden", R, admin_commands="true", hash="md5")
    c = px.client
    for _ in range(300):
        c.execute_command("SHARD.GENKEY")
    seqs = [len(s.client.keys("$equence{*")) for s in R]
    expect(all(n > 20 for n in seqs), "test premise: sequences on every server: %r" % seqs)
    keys = [k for i in range(3) for k in px.keys_on("hid%d:" % i, i, 5)]
    for k in keys:
        c.set(k, "v")
    got = list(c.scan_iter(count=3))
    expect_eq(sorted(got), sorted(keys), "the keys a SCAN walk returns")
    got = list(c.scan_iter(match="$equence{*"))
    expect_eq(got, [], "SCAN MATCH $equence{*")
    expect_eq(sorted(c.keys("*")), sorted(keys), "KEYS *")
    expect_eq(c.keys("$equence{*"), [], "KEYS $equence{*")
    expect_eq(c.dbsize(), len(keys), "DBSIZE")
    expect(all(c.randomkey() in keys for _ in range(30)), "RANDOMKEY a client's key")
    expect_eq(c.info("keyspace").get("db0", {}).get("keys"), len(keys), "INFO keyspace")
    for opt in ("--bigkeys", "--memkeys"):
        cli = subprocess.run([harness.ARGS.redis_cli, "-p", str(px.port), opt],
                             capture_output=True, text=True, timeout=30)
        expect(cli.returncode == 0 and "15 strings" in cli.stdout,
               "redis-cli %s: exit %d: %s" % (opt, cli.returncode,
                                              (cli.stdout + cli.stderr)[-200:]))
    c.delete(*keys[1:])
    expect(all(c.randomkey() == keys[0] for _ in range(10)),
           "RANDOMKEY: the one key among %d sequences" % sum(seqs))
    c.delete(keys[0])
    expect_eq((c.randomkey(), c.dbsize()), (None, 0), "RANDOMKEY and DBSIZE: only sequences")
    expect_eq(c.info("keyspace"), {}, "INFO keyspace: only sequences")
    t_exit_clean(px)
    for s in R:
        harness.stop(s.proc)
    return "%d sequences on the servers, none shown" % sum(seqs)


def body():
    check("own_keys_hidden_from_scan_keys_dbsize_randomkey_info", t_own_keys_hidden)
    R = [RedisServer("redis%d" % (i + 1)) for i in range(3)]
    pa = Shardis("a", R, idgen=IDGEN, timeout=2000)
    pb = Shardis("b", R, idgen=IDGEN, timeout=2000)
    check("genkey_replies", t_replies, pa)
    check("genkey_near_changetype_colocated", t_near_changetype, pa, R)
    check("keyinfo_fixedkey", t_keyinfo, pa)
    check("genkey_bad_input", t_errors, pa, R)
    check("genkey_noscript_fallback", t_noscript, pa, R)
    check("genkey_needs_hash_tag", t_no_tag, R)
    check("genkey_auth", t_auth)
    check("subkeys_minify_maxify_reload", t_subkeys, R)
    check("genkey_spread_fnv1a_64", t_spread, pa)
    M = [RedisServer("md5-%d" % (i + 1)) for i in range(3)]   # its ring: its servers
    md5 = Shardis("md5", M, idgen=IDGEN, hash="md5")
    check("genkey_spread_md5", t_spread, md5)
    for p in [md5.proc] + [m.proc for m in M]:
        harness.stop(p)
    check("genkey_two_proxies_concurrent_backend_restart", t_concurrent, pa, pb, R)
    ahead = Shardis("ahead", R, idgen=IDGEN, env={"SHARDIS_TEST_CLOCK_SKEW_MS": "1500"})
    check("genkey_restart_from_old_snapshot", t_restart_from_snapshot, pa, ahead, R)
    # A shard's first id is restart_guard_ms ahead; a short guard keeps the
    # state near the clock, so that a clock's step back is all that counts.
    pn = Shardis("near", R, idgen="{restart_guard_ms: 100}")
    behind = Shardis("behind", R, idgen=IDGEN, env={"SHARDIS_TEST_CLOCK_SKEW_MS": "-3000"})
    check("genkey_clock_back_within_max_ahead", t_clock_back_within, pn, behind)
    far = Shardis("far", R, idgen="{max_ahead_ms: 500, restart_guard_ms: 100}",
                  env={"SHARDIS_TEST_CLOCK_SKEW_MS": "-1500"})
    check("genkey_clock_back_beyond_max_ahead", t_clock_back_beyond, pn, far)
    for px in (pa, pb, ahead, pn, behind, far):
        check("exit_clean_" + px.name, t_exit_clean, px)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-idgen-"))
