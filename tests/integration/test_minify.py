#!/usr/bin/python3
"""test_minify.py -- idgen.minify: hash field names stored short on the
servers and long for the application, checked through shardis, on the
backends, and against a direct redis-server that holds the long names:

- every mapped command answers, byte for byte in RESP2 and RESP3, what the
  direct redis-server answers (HSET, HMSET, HSETNX, HGET, HMGET, HDEL,
  HEXISTS, HINCRBY, HINCRBYFLOAT, HSTRLEN, HKEYS, HGETALL, HSCAN with MATCH
  and its errors), while the backend holds the short names;
- HRANDFIELD's random replies hold long names, in both protocols' shapes;
- transactions: EXEC's array is mapped element by element (held PINGs,
  WATCH, pipelined transactions, DISCARD, EXECABORT);
- big hashes: HSCAN with MATCH across pages, and values spanning chunks;
- only generated and fixed keys of a minified type are mapped: other types,
  ordinary keys and fields outside the dictionary pass untouched;
- a field that is a short name is refused on minified keys;
- reload: adding a name maps it from then on, changing idgen.minify is
  refused;
- memory saved, by MEMORY USAGE and used_memory over 100,000 hashes.

Run: /usr/bin/python3 tests/integration/test_minify.py --shardis build/shardis
"""
import random
import sys

import redis

import harness
from harness import Fail, Raw, RedisServer, Shardis, check, expect, expect_eq, t_exit_clean

DICT = ("{name: n, city: c, password: p, zip: z, score: s, firstName: f, lastName: l, "
        "emailAddress: e, createdAt: t}")
IDGEN = "{types: {user: 1, post: 2}, fixed: {users: user}, subkeys: %s, minify: [user]}" % DICT
SHORT = {"name": "n", "city": "c", "password": "p", "zip": "z", "score": "s",
         "firstName": "f", "lastName": "l", "emailAddress": "e", "createdAt": "t"}
LONG = {v: k for k, v in SHORT.items()}


def parse3(raw, i=0):
    """A raw RESP2/3 reply as Python, (value, next index): maps as lists of
    pairs, so that order and shape both show."""
    j = raw.index(b"\r\n", i)
    t, line = raw[i:i + 1], raw[i + 1:j]
    if t in (b"+", b":", b",", b"#", b"("):
        return line, j + 2
    if t == b"-":
        return ("error", line), j + 2
    if t == b"_":
        return None, j + 2
    if t in (b"$", b"="):
        n = int(line)
        return (None, j + 2) if n < 0 else (raw[j + 2:j + 2 + n], j + 4 + n)
    n, i, out = int(line), j + 2, []
    if n < 0:
        return None, i
    for _ in range(2 * n if t == b"%" else n):
        v, i = parse3(raw, i)
        out.append(v)
    if t == b"%":
        return ("map", [(out[k], out[k + 1]) for k in range(0, len(out), 2)]), i
    return out, i


def value(raw):
    v, end = parse3(raw)
    expect_eq(end, len(raw), "the reply's end")
    return v


def pair(px, direct, proto):
    """Raw clients to shardis and to the direct server, in proto."""
    a, b = Raw(px.port), Raw(direct.port)
    if proto == 3:
        for c in (a, b):
            expect(c.cmd("HELLO", "3").startswith(b"%"), "HELLO 3")
    return a, b


def backend_of(px, R, key):
    return redis.Redis(harness.HOST, R[px.whereis([key])[key]].port)


def fresh(px, t="user", n=1):
    keys = px.client.execute_command("SHARD.GENKEY", t, "COUNT", n)
    return [k.decode() for k in keys]


def same_bytes(px, direct, key, seq, proto):
    a, b = pair(px, direct, proto)
    for cmd in seq:
        args = [key if x == "K" else x for x in cmd]
        got, want = a.cmd(*args), b.cmd(*args)
        expect_eq(got, want, "%s in RESP%d" % (" ".join(cmd), proto))
    a.close()
    b.close()


SEQ = [
    ("HSET", "K", "name", "Ann", "city", "Oslo", "other", "x"),
    ("HGETALL", "K"), ("HGET", "K", "name"), ("HGET", "K", "other"), ("HGET", "K", "nope"),
    ("HMGET", "K", "city", "nope", "name", "other"), ("HEXISTS", "K", "city"),
    ("HEXISTS", "K", "nope"), ("HSTRLEN", "K", "city"), ("HSETNX", "K", "zip", "1"),
    ("HSETNX", "K", "zip", "2"), ("HINCRBY", "K", "zip", "5"),
    ("HINCRBYFLOAT", "K", "score", "1.5"), ("HINCRBY", "K", "name", "1"),
    ("HMSET", "K", "password", "pw", "extra", "e"), ("HKEYS", "K"), ("HVALS", "K"),
    ("HLEN", "K"), ("HSCAN", "K", "0"), ("HSCAN", "K", "0", "MATCH", "*i*"),
    ("HSCAN", "K", "0", "COUNT", "5", "MATCH", "[cz]*"), ("HSCAN", "K", "0", "MATCH", "n"),
    ("HSCAN", "K", "0", "MATCH", "x*", "MATCH", "name"), ("HSCAN", "K", "0", "MATCH", "q*"),
    ("HSCAN", "K", "0", "COUNT", "match"), ("HSCAN", "K", "0", "MATCH"),
    ("HSCAN", "K", "0", "BOGUS", "1"), ("HSCAN", "K", "x"), ("HGET", "K"),
    ("HDEL", "K", "city", "nope", "other"), ("HGETALL", "K"), ("HKEYS", "K"),
    ("HRANDFIELD", "K", "0"), ("HDEL", "K", "name", "zip", "score", "password", "extra"),
    ("HGETALL", "K"), ("HKEYS", "K"), ("HRANDFIELD", "K"), ("HRANDFIELD", "K", "2"),
    ("HSCAN", "K", "0", "MATCH", "*"),
    # An empty field: "*" is every field to Redis's SCAN, "**" none of "".
    ("HSET", "K", "", "e", "city", "c"), ("HSCAN", "K", "0", "MATCH", "**"),
    ("HSCAN", "K", "0", "MATCH", "*"), ("HSCAN", "K", "0", "MATCH", "*?"), ("HGETALL", "K"),
]


def t_conformance(px, direct, R):
    """Each command's reply, byte for byte, as a direct redis-server holding
    the long names gives it, in RESP2 and RESP3; the backend holds short."""
    for proto in (2, 3):
        key = fresh(px)[0]
        same_bytes(px, direct, key, SEQ[:17], proto)
        stored = backend_of(px, R, key).hgetall(key)
        expect_eq(sorted(stored), sorted([b"n", b"c", b"other", b"z", b"s", b"p", b"extra"]),
                  "the fields on the backend")
        same_bytes(px, direct, key, SEQ[17:], proto)
    return "%d commands, both protocols" % len(SEQ)


def t_random(px, R):
    """HRANDFIELD: one field, n fields, n pairs (flat in RESP2, [field,
    value] arrays in RESP3), all long names."""
    key = fresh(px)[0]
    fields = {"name": "Ann", "city": "Oslo", "other": "x", "zip": "7"}
    px.client.hset(key, mapping=fields)
    want_f = {k.encode() for k in fields}
    want_p = {(k.encode(), v.encode()) for k, v in fields.items()}
    for proto in (2, 3):
        a, _ = pair(px, px, proto)
        for _ in range(20):
            expect(value(a.cmd("HRANDFIELD", key)) in want_f, "HRANDFIELD key")
            got = value(a.cmd("HRANDFIELD", key, "-6"))
            expect(len(got) == 6 and set(got) <= want_f, "HRANDFIELD key -6: %r" % got)
            expect_eq(set(value(a.cmd("HRANDFIELD", key, "9"))), want_f, "HRANDFIELD key 9")
            got = value(a.cmd("HRANDFIELD", key, "-5", "WITHVALUES"))
            if proto == 2:
                got = [tuple(got[i:i + 2]) for i in range(0, len(got), 2)]
            else:
                expect(all(isinstance(p, list) and len(p) == 2 for p in got),
                       "RESP3: [field, value] arrays: %r" % got)
                got = [tuple(p) for p in got]
            expect(len(got) == 5 and set(got) <= want_p, "WITHVALUES: %r" % got)
        a.close()
    expect_eq(value(Raw(px.port).cmd("HRANDFIELD", fresh(px)[0])), None, "no such key")


TX = [
    ("MULTI",), ("PING",), ("HSET", "K", "name", "Bo", "lastName", "Li", "q", "1"),
    ("HGETALL", "K"), ("ECHO", "e"), ("HKEYS", "K"), ("HSCAN", "K", "0", "MATCH", "*ame"),
    ("HRANDFIELD", "K", "-1"), ("HGET", "K", "name"), ("HINCRBY", "K", "name", "1"),
    ("HGETALL", "K"), ("EXEC",),
]


def t_transactions(px, direct, R):
    """EXEC's array, element by element, as the direct server's: PING held
    before the first key, WATCH before MULTI, two transactions pipelined,
    DISCARD and EXECABORT leaving nothing behind for the next one."""
    for proto in (2, 3):
        key = fresh(px)[0]
        seq = [c for c in TX if c[0] != "HRANDFIELD"]
        same_bytes(px, direct, key, seq, proto)
        key = fresh(px)[0]
        same_bytes(px, direct, key, [("WATCH", "K")] + seq, proto)
        # A DISCARDed and an aborted transaction, then one that maps.
        key = fresh(px)[0]
        same_bytes(px, direct, key, [("MULTI",), ("HSET", "K", "city", "x"), ("HGETALL", "K"),
                                     ("DISCARD",), ("MULTI",), ("HGETALL", "K"),
                                     ("NOSUCHCMD",), ("EXEC",)] + seq, proto)
        # Two pipelined: the second is queued before the first's EXEC is answered.
        a, b = pair(px, direct, proto)
        k1, k2 = fresh(px, n=2)
        data = b"".join(harness.enc(*[k if x == "K" else x for x in c])
                        for k in (k1, k2) for c in seq)
        a.send(data)
        b.send(data)
        for c in seq * 2:
            expect_eq(a.reply(), b.reply(), "pipelined %s in RESP%d" % (c[0], proto))
        a.close()
        b.close()
    # A short name inside MULTI: refused, and EXEC aborts.
    a = Raw(px.port)
    key = fresh(px)[0]
    a.cmd("MULTI")
    expect(a.cmd("HGET", key, "n").startswith(b"-ERR field 'n' is a short name"), "in MULTI")
    expect(a.cmd("EXEC").startswith(b"-EXECABORT"), "EXEC after it")
    # HRANDFIELD's element, in RESP3's shape.
    a.cmd("HELLO", "3")
    a.cmd("HSET", key, "name", "x")
    for c in (("MULTI",), ("HRANDFIELD", key, "1", "WITHVALUES")):
        a.cmd(*c)
    expect_eq(a.cmd("EXEC"), b"*1\r\n*1\r\n*2\r\n$4\r\nname\r\n$1\r\nx\r\n", "EXEC, RESP3")
    a.close()


def t_big(px, direct, R):
    """A hash table (300 fields) walked by HSCAN with MATCH over many
    pages, and a value of 200 KiB among mapped fields."""
    key = fresh(px)[0]
    names = list(SHORT) + ["extra%03d" % i for i in range(291)]
    vals = {n: ("v%d" % i) * 20 for i, n in enumerate(names)}
    px.client.hset(key, mapping=vals)
    direct.client.delete(key)
    direct.client.hset(key, mapping=vals)
    for pattern, count in (("*a*", 10), ("*Name", 7), ("[ce]*", 50), ("*", 3)):
        got, want = {}, {}
        for c, out in ((px.client, got), (direct.client, want)):
            cur = 0
            while True:
                cur, page = c.hscan(key, cur, match=pattern, count=count)
                out.update(page)
                if cur == 0:
                    break
        expect_eq(got, want, "HSCAN MATCH %s COUNT %d" % (pattern, count))
    stored = backend_of(px, R, key).hkeys(key)
    expect(b"n" in stored and b"name" not in stored, "short on the backend")
    big = fresh(px)[0]
    blob = bytes(random.Random(1).getrandbits(8) for _ in range(200 * 1024))
    m = {"name": blob, "city": "Oslo", "other": blob[:70000], "zip": "1"}
    px.client.hset(big, mapping=m)
    direct.client.delete(big)
    direct.client.hset(big, mapping=m)
    # (A hash table's order is its fields' hashes': short and long differ.)
    for proto in (2, 3):
        a, b = pair(px, direct, proto)
        for cmd in (("HGETALL", big), ("HSCAN", big, "0"), ("HSCAN", big, "0", "MATCH", "?i*"),
                    ("HKEYS", big)):
            got, want = value(a.cmd(*cmd)), value(b.cmd(*cmd))
            if cmd[0] == "HSCAN":
                expect_eq(got[0], want[0], "HSCAN's cursor")
                got, want = got[1], want[1]
                got, want = [got[i:i + 2] for i in range(0, len(got), 2)], \
                            [want[i:i + 2] for i in range(0, len(want), 2)]
            elif got and got[0] == "map":
                expect_eq(want[0], "map", "RESP3's map")
                got, want = got[1], want[1]
            elif cmd[0] == "HGETALL":
                got, want = [got[i:i + 2] for i in range(0, len(got), 2)], \
                            [want[i:i + 2] for i in range(0, len(want), 2)]
            expect_eq(sorted(map(repr, got)), sorted(map(repr, want)),
                      "%s in RESP%d" % (" ".join(cmd[:1] + cmd[2:]), proto))
        a.close()
        b.close()


def t_untouched(px, R):
    """Only generated and fixed keys of a minified type are mapped."""
    fixed = px.client.execute_command("SHARD.FIXEDKEY", "alice", "user").decode()
    post = fresh(px, "post")[0]
    default = px.client.execute_command("SHARD.GENKEY").decode()
    for key, short in ((fixed, True), (post, False), (default, False), ("plainhash", False),
                       ("8HMGHtK{85}00001x", False)):
        px.client.hset(key, mapping={"name": "a", "city": "b", "n2": "c"})
        stored = set(backend_of(px, R, key).hkeys(key))
        want = {b"n", b"c", b"n2"} if short else {b"name", b"city", b"n2"}
        expect_eq(stored, want, "fields of %s on the backend" % key)
        expect_eq(px.client.hgetall(key), {b"name": b"a", b"city": b"b", b"n2": b"c"},
                  "HGETALL %s" % key)
    # A short name as a field: refused on a minified key only.
    key = fresh(px)[0]
    for cmd in (("HSET", key, "name", "1", "c", "2"), ("HGET", key, "n"), ("HDEL", key, "z"),
                ("HMGET", key, "name", "p"), ("HINCRBY", key, "s", "1")):
        try:
            px.client.execute_command(*cmd)
        except redis.ResponseError as e:
            expect("is a short name of idgen.subkeys" in str(e), "%s: %s" % (cmd[0], e))
        else:
            raise Fail("%s with a short name was not refused" % cmd[0])
    expect_eq(px.client.exists(key), 0, "nothing written")
    expect_eq(px.client.execute_command("HSET", post, "n", "1"), 1, "another type: as it is")


def t_reload(px, R):
    """A reload that adds a name maps it from then on; one that changes
    idgen.minify is refused."""
    c = px.client
    text = open(px.conf).read()

    def reload_with(new):
        with open(px.conf, "w") as f:
            f.write(new)
        try:
            return c.execute_command("SHARD.RELOAD").decode()
        except redis.ResponseError as e:
            return "refused: %s" % e

    key = fresh(px)[0]
    c.hset(key, "phone", "1")
    text = text.replace("createdAt: t}", "createdAt: t, country: co}")
    got = reload_with(text)
    expect(not got.startswith("refused"), "a reload that adds a name: %s" % got)
    c.hset(key, "country", "SE")           # now stored as "co"
    expect_eq(set(backend_of(px, R, key).hkeys(key)), {b"phone", b"co"}, "on the backend")
    expect_eq(Raw(px.port).cmd("HGETALL", key),
              b"*4\r\n$5\r\nphone\r\n$1\r\n1\r\n$7\r\ncountry\r\n$2\r\nSE\r\n",
              "the added name")
    for changed in ("minify: [user, post]", "minify: [post]", "minify: []"):
        got = reload_with(text.replace("minify: [user]", changed))
        expect("idgen.minify changed" in got, "a reload to %s: %s" % (changed, got))
    reload_with(text)
    expect_eq(c.hgetall(key), {b"phone": b"1", b"country": b"SE"}, "after the refused reloads")


def t_record_swap():
    """A restart that takes up another pool's migration record swaps every
    pool's config for the record's, and frees the file's: the dictionary
    of a pool with subkeys stays good (a sanitizer build caught it reading
    the freed config)."""
    S = [RedisServer("swap%d" % i) for i in range(3)]
    port_a, port_b = harness.free_port(), harness.free_port()
    pool = """alpha:
  listen: %s:%d
  hash_tag: "{}"
  servers:
%%s
beta:
  listen: %s:%d
  hash_tag: "{}"
  idgen: {types: {user: 1}, subkeys: {name: n, city: c}, minify: [user]}
  servers:
    - %s:%d:1 redis1
""" % (harness.HOST, port_a, harness.HOST, port_b, harness.HOST, S[2].port)
    both = "    - %s:%d:1 redis1\n    - %s:%d:1 redis2" % (harness.HOST, S[0].port, harness.HOST,
                                                       S[1].port)
    one = "    - %s:%d:1 redis1" % (harness.HOST, S[0].port)
    ftext = (pool % both).encode()
    rtext = (pool % one).encode()
    conf = harness.os.path.join(harness.TMP, "swap.yml")
    with open(conf, "wb") as f:
        f.write(ftext)
    # Two earlier rings: the file's reload, after the record is taken up,
    # is refused (a reshard in progress), so nothing rebuilds the pools.
    S[0].client.set("__shardis:ctl:alpha", b"shardis-migration 1\nepoch 5\nconf %d\n%s\n"
                    b"prior %d\n%s\nprior %d\n%s\n" % (len(rtext), rtext, len(ftext), ftext,
                                                     len(ftext), ftext))
    log = harness.os.path.join(harness.TMP, "swap.log")
    proc = harness.start([harness.ARGS.shardis, "-c", conf, "-v", "6", "-o", log], log + ".out")
    harness.wait_port(port_b, proc, "shardis swap", [log])
    c = redis.Redis(harness.HOST, port_b, socket_timeout=5)
    harness.until("the loop", lambda: c.ping())
    expect_eq(c.execute_command("SHARD.MINIFY", "name", "city"), [b"n", b"c"], "SHARD.MINIFY")
    k = c.execute_command("SHARD.GENKEY", "user").decode()
    c.hset(k, mapping={"name": "a", "city": "b"})
    expect_eq(c.hgetall(k), {b"name": b"a", b"city": b"b"}, "HGETALL")
    expect_eq(set(S[2].client.hkeys(k)), {b"n", b"c"}, "on the server")
    proc.send_signal(harness.signal.SIGTERM)
    expect_eq(proc.wait(10), 0, "exit code")
    with open(log + ".out", errors="replace") as f:
        bad = [l for l in f if "AddressSanitizer" in l or "runtime error" in l]
    expect(not bad, "stderr: %s" % "".join(bad[:3]))
    for s in S:
        harness.stop(s.proc)


def t_memory(px, R):
    """100,000 hashes of five fields, minified and not: what the servers
    hold for them (MEMORY USAGE, and used_memory's growth)."""
    n = 100000
    fields = {"firstName": "Ann", "lastName": "Lee", "emailAddress": "ann@example.org",
              "city": "Oslo", "createdAt": "1700000000"}
    used = {}
    sample = {}
    backends = [redis.Redis(harness.HOST, s.port) for s in R]
    for t in ("post", "user"):
        for b in backends:
            b.flushall()
        before = sum(b.info("memory")["used_memory"] for b in backends)
        keys = []
        for _ in range(n // 10000):
            keys += fresh(px, t, 10000)
        pipe = px.client.pipeline(transaction=False)
        for i, k in enumerate(keys):
            pipe.hset(k, mapping=fields)
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        used[t] = sum(b.info("memory")["used_memory"] for b in backends) - before
        pipe = px.client.pipeline(transaction=False)
        for k in keys[:1000]:
            pipe.memory_usage(k, samples=0)
        sample[t] = sum(pipe.execute()) / 1000.0
        expect_eq(px.client.hgetall(keys[-1]), {k.encode(): v.encode()
                                                 for k, v in fields.items()}, "read back")
    for b in backends:
        b.flushall()
    expect(sample["user"] < sample["post"], "minified hashes are smaller: %r" % sample)
    return ("MEMORY USAGE per hash %.0f B minified, %.0f B not (%.0f%% saved); used_memory "
            "for %d hashes %.1f MiB vs %.1f MiB (%.0f%% saved)" % (
                sample["user"], sample["post"], 100 * (1 - sample["user"] / sample["post"]),
                n, used["user"] / 2**20, used["post"] / 2**20,
                100 * (1 - used["user"] / used["post"])))


def body():
    R = [RedisServer("redis%d" % (i + 1)) for i in range(2)]
    direct = RedisServer("direct")
    direct.client = redis.Redis(harness.HOST, direct.port)
    px = Shardis("mini", R, idgen=IDGEN, admin_commands="true")
    check("minify_conformance_resp2_resp3", t_conformance, px, direct, R)
    check("minify_hrandfield", t_random, px, R)
    check("minify_transactions", t_transactions, px, direct, R)
    check("minify_big_hashes", t_big, px, direct, R)
    check("minify_only_its_keys", t_untouched, px, R)
    check("minify_reload", t_reload, px, R)
    check("minify_record_swap_keeps_dictionary", t_record_swap)
    check("minify_memory_100k", t_memory, px, R)
    check("exit_clean", t_exit_clean, px)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-minify-"))
