#!/usr/bin/python3
"""test_commands.py -- every keyed command of the server's own command table,
through shardis on three servers, against one server holding all keys.

The command list is not kept by hand: it is the reference redis-server's
`COMMAND` (key specs, flags, ACL categories) and `COMMAND DOCS` (argument
trees), so the same test runs against whatever --redis-server is given
(7.0.15 today, Valkey 8 and Redis 8 later). For every command and
subcommand with key specs:

- an invocation is generated from its argument tree: required arguments
  only (`multiple` once, a `oneof` its first choice that the reference
  answers without an error, blocks recursively, pure tokens as such),
  values by the argument's name and type (VALUE_BY_NAME, VALUE_BY_TYPE,
  and a few per-command rules in VALUE_FOR); a command whose required
  arguments hold no key gets its first optional argument that does;
- which arguments are keys is what the reference's `COMMAND GETKEYS` says,
  never a guess; its `COMMAND GETKEYSANDFLAGS` says which keys the command
  reads (those are created first, as the type its ACL categories name, on
  the reference and through shardis alike);
- a command with one key runs once, with its key on the server the command
  is assigned to (the command list spread over the three, checked by
  SHARD.WHEREIS); a command with several keys (or a `multiple` one given
  twice) runs twice: every key under one hash tag (reply as the
  reference's), and keys on different servers (the split commands answer
  as the reference, every other one `-CROSSSLOT` and changes nothing);
- each run compares the reply with the reference's (NORMALIZE names the
  few nondeterministic ones), then reads every key on the three servers
  directly: it is on the server SHARD.WHEREIS names and no other, holds
  what the reference holds (in databases 0 and 1: MOVE), and `COMMAND
  GETKEYS` through shardis answers as the reference's.

Then hand-written checks of known hard cases of key extraction (SORT,
GEORADIUS(BYMEMBER), XREAD(GROUP), MIGRATE and COPY with options in every
order, tokens used as names, COPY ... DB under redis_db: 2).

Run: /usr/bin/python3 tests/integration/test_commands.py --shardis build/shardis \
         [--redis-server /path/to/redis-server] [--only CMD,CMD]
"""
import hashlib
import itertools
import random
import re
import sys
import time

import redis

import harness
from harness import Err, Fail, RedisServer, Shardis, check, expect, expect_eq, short

CROSS = Err(b"CROSSSLOT Keys in request don't hash to the same node")
OWN_KEY = b"ERR keys under '__shardis:' or '$equence{' are shardis's own"

# doc/commands.md "Split commands": these are split into one request per server and
# their replies merged; every other command with keys on several servers
# gets -CROSSSLOT.
SPLIT = {"mget", "mset", "del", "exists", "unlink", "touch"}

# Commands shardis refuses by design, with the refusal doc/commands.md's
# command table gives them. They are sent anyway: the reply must be that refusal,
# and no server may have changed.
REFUSED = {
    # MIGRATE would move keys to a server outside the ring behind shardis's
    # back (doc/commands.md: "refused ... migrate").
    "migrate": b"ERR command 'migrate' is not supported by shardis",
}
# Commands not run at all (printed, with the reason, in `coverage`):
# - module commands (COMMAND DOCS names a module): their arguments are the
#   module's own; Redis 8's vector sets are checked in test_servers.py;
# - commands whose key specs all carry `not_key` (SPUBLISH, SSUBSCRIBE,
#   SUNSUBSCRIBE name shard channels, not keys): routed as channels
#   (doc/commands.md "Pub/sub"), tested in test_multikey.py.

SCRIPT = ("local r = {} for i, k in ipairs(KEYS) do r[i] = redis.call('TYPE', k)['ok'] end "
          "return r")
SCRIPT_SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
LIBRARY = ("#!lua name=cmdlib\nredis.register_function{function_name='tf', flags={'no-writes'}, "
           "callback=function(keys, args) local r = {} for i, k in ipairs(keys) do "
           "r[i] = redis.call('TYPE', k)['ok'] end return r end}")
NOW = int(time.time())
DUMPED = "<DUMP of the string 10>"     # replaced by the reference's DUMP payload

# ---- values of generated arguments -----------------------------------------------------
# What the pre-created keys hold (populate) and what arguments name agree:
# members and elements "1" "2" "3", hash fields f1 f2, stream entries 1-1
# and 1-2 with group g1, whose consumer c1 holds 1-1 pending.

VALUE_BY_NAME = {
    "member": "1", "member1": "1", "member2": "2", "element": "1", "pivot": "1",
    "field": "f1", "value": "1", "increment": "1", "decrement": "1", "score": "1",
    "count": "1", "offset": "0", "index": "0", "start": "0", "end": "-1", "stop": "-1",
    "bit": "1", "seconds": "100", "milliseconds": "100000", "ttl": "0",
    "unix-time-seconds": str(NOW + 10000), "unix-time-milliseconds": str((NOW + 10000) * 1000),
    "timeout": "0.01",              # blocking commands: never wait long
    "db": "1", "destination-db": "0", "host": "127.0.0.1", "port": "1",
    "min": "-inf", "max": "+inf", "longitude": "13.361389", "latitude": "38.115556",
    "radius": "200", "width": "400", "height": "400",
    "group": "g1", "groupname": "g1", "consumer": "c1", "consumername": "c1", "id": "1-1",
    "min-idle-time": "0", "threshold": "1",
    "last-id": "9-9", "operation": "AND", "subcommand": "GETREG",
    "script": SCRIPT, "sha1": SCRIPT_SHA, "function": "tf", "pattern": "*",
    "numkeys": "REP", "numfields": "REP",   # the count of the `multiple` after them
}
VALUE_BY_TYPE = {"string": "1", "integer": "1", "double": "1", "pattern": "*",
                 "unix-time": str(NOW + 10000)}
VALUE_FOR = {       # (command, argument name): value, where the name's value is wrong
    ("zrangebylex", "min"): "-", ("zrangebylex", "max"): "+",
    ("zrevrangebylex", "min"): "-", ("zrevrangebylex", "max"): "+",
    ("zlexcount", "min"): "-", ("zlexcount", "max"): "+",
    ("zremrangebylex", "min"): "-", ("zremrangebylex", "max"): "+",
    ("zrangestore", "min"): "0", ("zrangestore", "max"): "-1",
    ("xrange", "start"): "-", ("xrange", "end"): "+",
    ("xrevrange", "start"): "-", ("xrevrange", "end"): "+",
    ("xread", "id"): "0", ("xreadgroup", "id"): ">", ("xautoclaim", "start"): "0",
    ("xgroup|create", "groupname"): "g2", ("xgroup|create", "group"): "g2",  # (Redis, Valkey)
    ("xgroup|create", "id"): "0", ("xgroup|setid", "id"): "0",
    ("xgroup|createconsumer", "consumername"): "c2", ("xgroup|createconsumer", "consumer"): "c2",
    ("migrate", "timeout"): "1000",
    ("restore", "serialized-value"): DUMPED, ("restore-asking", "serialized-value"): DUMPED,
}

# ACL category -> the type of value a key the command reads is created as;
# the first category in this order wins (SORT: @list; GEORADIUS: @geo).
KIND_BY_CATEGORY = [("@stream", "stream"), ("@geo", "geo"), ("@hyperloglog", "hll"),
                    ("@hash", "hash"), ("@list", "list"), ("@sortedset", "zset"),
                    ("@set", "set"), ("@bitmap", "string"), ("@string", "string")]


def populate(pipe, kind, key):
    """Create key as kind (the same commands on the reference and shardis)."""
    x = pipe.execute_command
    if kind == "string":
        x("SET", key, "10")
    elif kind == "hash":
        x("HSET", key, "f1", "1", "f2", "2")
    elif kind == "list":
        x("RPUSH", key, "3", "1", "2")
    elif kind == "set":
        x("SADD", key, "1", "2", "3")
    elif kind == "zset":
        x("ZADD", key, "1", "1", "2", "2", "3", "3")
    elif kind == "geo":
        x("GEOADD", key, "13.361389", "38.115556", "1", "15.087269", "37.502669", "2")
    elif kind == "hll":
        x("PFADD", key, "1", "2", "3")
    elif kind == "stream":
        x("XADD", key, "1-1", "f1", "1")
        x("XADD", key, "1-2", "f2", "2")
        x("XGROUP", "CREATE", key, "g1", "0")
        x("XREADGROUP", "GROUP", "g1", "c1", "COUNT", "1", "STREAMS", key, ">")
    else:
        raise ValueError(kind)


# ---- normalization: what may legitimately differ between two servers -------------------

# RANDOM: the member(s) these pick are random: compare the reply's shape
# (types and lengths), and afterwards the keys' sizes, not their contents.
RANDOM = {"srandmember", "spop", "hrandfield", "zrandmember"}
# UNORDERED: replies that are sets: compare sorted (SSCAN: its page).
UNORDERED = {"smembers", "sinter", "sunion", "sdiff", "sscan"}
# COUNTDOWN: remaining times count down between the two requests: equal
# within 1 s (TTL) or 1000 ms (PTTL).
COUNTDOWN = {"ttl": 1, "pttl": 1000}
# CLOCK: how long ago a key was touched (OBJECT IDLETIME) is the server's
# clock: only the reply's type counts.
CLOCK = {"object|idletime"}
# TIME_ID: a stream ID made by `*` holds the server's clock: its shape
# counts ("<ms>-<seq>"), anywhere in a reply or a key's contents.
TIME_ID = re.compile(rb"\d{13,}-\d+")
# IDLE_FIELDS: XINFO's milliseconds since a consumer was last seen.
IDLE_FIELDS = {b"idle", b"inactive", b"seen-time", b"active-time"}


def shape(v):
    if isinstance(v, list):
        return ["list", len(v)] + [shape(x) for x in v[:1]]
    return type(v).__name__


def scrub(v):
    """TIME_ID and IDLE_FIELDS, recursively."""
    if isinstance(v, Err):
        return v
    if isinstance(v, bytes):
        return b"<time-id>" if TIME_ID.fullmatch(v) else v
    if isinstance(v, (list, tuple)):
        out = [scrub(x) for x in v]
        for i in range(len(out) - 1):
            if isinstance(out[i], bytes) and out[i] in IDLE_FIELDS and isinstance(out[i + 1], int):
                out[i + 1] = "<ms>"
        return out
    if isinstance(v, dict):
        return {k: ("<ms>" if k in IDLE_FIELDS else scrub(x)) for k, x in v.items()}
    return v


def normalize(cmd, v):
    if isinstance(v, Err):
        return v
    if cmd in RANDOM:
        return shape(v)
    if cmd in CLOCK:
        return type(v).__name__
    if cmd in UNORDERED and isinstance(v, list):
        if cmd == "sscan" and len(v) == 2 and isinstance(v[1], list):
            return [v[0], sorted(v[1])]
        return sorted(v, key=repr)
    return scrub(v)


def same_reply(cmd, got, want):
    if cmd in COUNTDOWN and isinstance(got, int) and isinstance(want, int) and min(got, want) >= 0:
        return abs(got - want) <= COUNTDOWN[cmd]
    return normalize(cmd, got) == normalize(cmd, want)


def snapshot(c, key, cmd):
    """What a key holds, read directly from a server: None if it is not there."""
    t = c.type(key)
    if t == b"none":
        return None
    x = c.execute_command
    if t == b"string":
        v = x("GET", key)
    elif t == b"list":
        v = x("LRANGE", key, 0, -1)
    elif t == b"set":
        v = sorted(x("SMEMBERS", key))
    elif t == b"zset":
        v = x("ZRANGE", key, 0, -1, "WITHSCORES")
    elif t == b"hash":
        v = sorted(c.hgetall(key).items())
    elif t == b"stream":
        v = [x("XRANGE", key, "-", "+"), x("XINFO", "GROUPS", key)]
    else:
        v = t
    if cmd in RANDOM:                   # RANDOM: which member went is random
        v = len(v)
    pttl = c.pttl(key)
    return [t, scrub(v), "expires" if pttl >= 0 else pttl]


# ---- the command table ---------------------------------------------------------------

def fmap(lst):
    """A RESP2 flat map (name, value, ...) as a dict, names as str."""
    return {lst[i].decode(): lst[i + 1] for i in range(0, len(lst) - 1, 2)}


def arg_tree(raw):
    """COMMAND DOCS arguments as dicts (name, type, token, flags, arguments)."""
    out = []
    for a in raw:
        d = fmap(a)
        arg = {"name": d["name"].decode(), "type": d["type"].decode(),
               "token": d["token"].decode() if "token" in d else None,
               "flags": [f.decode() for f in d.get("flags", [])],
               "arguments": arg_tree(d.get("arguments", []))}
        out.append(arg)
    return out


class Command:
    def __init__(self, info, docs):
        self.name = info[0].decode().lower()
        self.argv0 = [w.upper() for w in self.name.split("|")]
        self.flags = [f.decode() for f in info[2]]
        self.cats = [f.decode() for f in info[6]]
        self.specs = [fmap(s) for s in info[8]]
        d = fmap(docs) if docs else {}
        self.module = d.get("module")
        self.args = arg_tree(d.get("arguments", []))
        self.kind = next((k for cat, k in KIND_BY_CATEGORY if cat in self.cats), "string")


def read_table(direct):
    raw = harness.Raw(direct.port, timeout=10)
    try:
        infos = harness.parse(raw.cmd("COMMAND"))
        docs = harness.parse(raw.cmd("COMMAND", "DOCS"))
    finally:
        raw.close()
    doc_of = {}

    def add_docs(flat):
        for i in range(0, len(flat), 2):
            name = flat[i].decode().lower()
            d = flat[i + 1]
            doc_of[name] = d
            add_docs(fmap(d).get("subcommands", []))
    add_docs(docs)
    cmds = []

    def walk(info):
        name = info[0].decode().lower()
        if info[8]:
            cmds.append(Command(info, doc_of.get(name)))
        for sub in info[9] if len(info) > 9 else []:
            walk(sub)
    for info in infos:
        walk(info)
    return sorted(cmds, key=lambda c: c.name)


# ---- generating an invocation ----------------------------------------------------------

class Gen:
    """One invocation of cmd from its argument tree. rep: how often a
    `multiple` argument is given; choice: the alternative each `oneof`
    met takes, in order (0 past its end); opt_key: "first" takes the first
    optional argument that holds a key, "all" every one."""

    def __init__(self, cmd, rep, choice=(), opt_key=False):
        self.cmd, self.rep, self.choice, self.opt_key = cmd, rep, list(choice), opt_key
        self.oneofs = []        # alternatives of each oneof met
        self.nkeys = 0
        self.took_opt = False
        self.argv = list(cmd.argv0)
        self.args(cmd.args)

    def key(self):
        self.nkeys += 1
        return "key:%d" % (self.nkeys - 1)

    def args(self, args):
        for a in args:
            if "optional" in a["flags"]:
                if not (has_key(a) and (self.opt_key == "all" or (
                        self.opt_key == "first" and not self.took_opt))):
                    continue
                self.took_opt = True
            n = self.rep if "multiple" in a["flags"] else 1
            for i in range(n):
                if a["token"] is not None and a["type"] != "pure-token" and (
                        i == 0 or "multiple_token" in a["flags"]):
                    self.argv.append(a["token"])
                self.one(a)

    def one(self, a):
        t = a["type"]
        if t == "pure-token":
            self.argv.append(a["token"])
        elif t == "block":
            self.args(a["arguments"])
        elif t == "oneof":
            k = len(self.oneofs)
            self.oneofs.append(len(a["arguments"]))
            pick = self.choice[k] if k < len(self.choice) else 0
            alt = a["arguments"][pick if pick < len(a["arguments"]) else 0]
            if alt["token"] is not None and alt["type"] != "pure-token":
                self.argv.append(alt["token"])
            self.one(alt)
        elif t == "key":
            self.argv.append(self.key())
        else:
            v = VALUE_FOR.get((self.cmd.name, a["name"]),
                              VALUE_BY_NAME.get(a["name"], VALUE_BY_TYPE.get(t, "1")))
            self.argv.append(str(self.rep) if v == "REP" else v)


def has_key(a):
    return a["type"] == "key" or any(has_key(x) for x in a["arguments"])


def choices(counts, limit=24):
    """Choice vectors over oneofs with these many alternatives: all first
    choices, then the others, fewest changes first."""
    vecs = sorted(itertools.product(*[range(n) for n in counts]), key=lambda v: (sum(v), v))
    return vecs[:limit]


# ---- one run of one command ----------------------------------------------------------

class Env:
    """The servers, the shardis, and the clients the runs read them with."""

    def __init__(self, direct, backends, px):
        self.direct, self.backends, self.px = direct, backends, px
        self.dbs = (0, 1)               # MOVE's db argument is 1
        self.ref = {db: redis.Redis(harness.HOST, direct.port, db=db, socket_timeout=10)
                    for db in self.dbs}
        self.back = [{db: redis.Redis(harness.HOST, b.port, db=db, socket_timeout=10)
                      for db in self.dbs} for b in backends]
        self.dump = None


def raw_cmd(port, argv, db=None):
    c = harness.Raw(port, timeout=10)
    try:
        if db is not None:
            c.cmd("SELECT", db)
        return harness.parse(c.cmd(*argv))
    finally:
        c.close()


def words(argv, n=100):
    """A command line for the log: bytes shown, long ones cut."""
    out = " ".join(a if isinstance(a, str) else repr(a)[:30] for a in argv)
    return out if len(out) <= n else out[:n] + "..."


def subst(argv, env):
    return [env.dump if a == DUMPED else a for a in argv]


def key_flags(port, argv):
    """COMMAND GETKEYSANDFLAGS: [(key, flags)], or the error."""
    r = raw_cmd(port, ["COMMAND", "GETKEYSANDFLAGS"] + argv)
    if isinstance(r, Err):
        return r
    return [(k, [f.decode() for f in fl]) for k, fl in r]


def reads(flags):
    return "RO" in flags or "RW" in flags


def choose_invocation(cmd, env, rep, opt_key):
    """The first candidate invocation the reference answers without an
    error, tried in its database 9 with its keys created; else the first.
    (argv with placeholder keys, the key positions, and that first error)"""
    g = Gen(cmd, rep, (), opt_key)
    first = None
    for vec in choices(g.oneofs) if g.oneofs else [()]:
        g = Gen(cmd, rep, vec, opt_key)
        argv = subst(g.argv, env)
        kf = key_flags(env.direct.port, argv)
        if isinstance(kf, Err) or not kf:
            continue
        pos = [i for i, a in enumerate(argv) if a in {k.decode() for k, _ in kf}]
        scratch = redis.Redis(harness.HOST, env.direct.port, db=9)
        scratch.flushdb()
        pipe = scratch.pipeline(transaction=False)
        for k, fl in kf:
            if reads(fl):
                populate(pipe, cmd.kind, k)
        pipe.execute()
        reply = raw_cmd(env.direct.port, argv, db=9)
        scratch.flushall()
        scratch.close()
        if first is None:
            first = (g.argv, pos, reply if isinstance(reply, Err) else None)
        if not isinstance(reply, Err):
            return g.argv, pos, None
    return first or (Gen(cmd, rep, (), opt_key).argv, [], None)


def pick_names(env, targets, prefix):
    """One key name per target server index, checked by SHARD.WHEREIS."""
    out = []
    rnd = random.Random(prefix)     # fnv1a_64 keeps names that differ in their
    for i, t in enumerate(targets):  # last bytes together: random suffixes
        cands = ["%s:%d:%08x" % (prefix, i, rnd.getrandbits(32)) for n in range(60)]
        where = env.px.whereis([c.encode() for c in cands])
        got = [c for c in cands if where[c.encode()] == t]
        expect(got, "no name with prefix %s on redis%d" % (prefix, t + 1))
        out.append(got[0])
    return out


def backend_state(env, keys, cmd):
    return [[[snapshot(b[db], k, cmd) for db in env.dbs] for b in env.back] for k in keys]


def run_one(env, cmd, argv, pos, mode, names):
    """Run argv (placeholder keys at pos replaced by names) on the reference
    and through shardis and compare. mode: 'single', 'tagged', 'spread'."""
    real = subst(argv, env)
    for p, n in zip(pos, names):
        real[p] = n
    problems = []
    where = env.px.whereis([n.encode() for n in names])
    servers = sorted({where[n.encode()] for n in names})
    if mode == "spread":
        expect(len(servers) > 1, "keys all on redis%d" % (servers[0] + 1))
    elif mode == "tagged":
        expect(len(servers) == 1, "tagged keys on %s" % servers)
    want_keys = raw_cmd(env.direct.port, ["COMMAND", "GETKEYS"] + real)
    got_keys = raw_cmd(env.px.port, ["COMMAND", "GETKEYS"] + real)
    if got_keys != want_keys:
        problems.append("COMMAND GETKEYS: got %s, want %s" % (short(got_keys), short(want_keys)))
    expect(isinstance(want_keys, list) and sorted(want_keys) == sorted(n.encode() for n in names),
           "test bug: the reference's keys %s, not the names %s" % (short(want_keys), names))
    kf = key_flags(env.direct.port, real)
    for side in (env.ref[0], env.px.client):
        for k, fl in kf:        # a pipeline per key: shardis runs a client's
            if reads(fl):       # XREADGROUPs one server at a time (doc/commands.md)
                pipe = side.pipeline(transaction=False)
                populate(pipe, cmd.kind, k)
                pipe.execute()
    refused = REFUSED.get(cmd.name)
    crossslot = mode == "spread" and cmd.name not in SPLIT
    before = backend_state(env, names, cmd.name) if refused or crossslot else None
    want = raw_cmd(env.direct.port, real)
    got = raw_cmd(env.px.port, real)
    if refused or crossslot:
        expected = Err(refused) if refused else CROSS
        if got != expected:
            problems.append("reply: got %s, want %s (reference: %s)"
                            % (short(got), short(expected), short(want)))
        after = backend_state(env, names, cmd.name)
        for k, b, a in zip(names, before, after):
            if b != a:
                problems.append("%s changed on the servers: %s -> %s" % (k, short(b), short(a)))
    else:
        if not same_reply(cmd.name, got, want):
            problems.append("reply: got %s, want %s" % (short(normalize(cmd.name, got)),
                                                       short(normalize(cmd.name, want))))
        for k in names:
            owner = where[k.encode()]
            for db in env.dbs:
                held = [i for i, b in enumerate(env.back) if b[db].exists(k)]
                ref_has = bool(env.ref[db].exists(k))
                stray = [i for i in held if i != owner]
                if stray:
                    problems.append("%s (db %d) on %s, but SHARD.WHEREIS names redis%d" % (
                        k, db, ",".join("redis%d" % (i + 1) for i in stray), owner + 1))
                if (owner in held) != ref_has:
                    problems.append("%s (db %d) %s on its server redis%d, %s on the reference" % (
                        k, db, "exists" if owner in held else "missing", owner + 1,
                        "exists" if ref_has else "missing"))
                elif ref_has:
                    mine = snapshot(env.back[owner][db], k, cmd.name)
                    theirs = snapshot(env.ref[db], k, cmd.name)
                    if mine != theirs:
                        problems.append("%s (db %d) holds %s, the reference %s" % (
                            k, db, short(mine), short(theirs)))
    if problems:
        raise Fail("%s -> %s" % (words(real), "; ".join(problems)))
    return "%s -> %s" % (words(real), short(normalize(cmd.name, got), 80))


# ---- the table-driven check ------------------------------------------------------------

def plan(cmd, env):
    """The runs of a command: [(label, mode, argv, positions, note)]."""
    opt_key = False
    argv1, pos1, err1 = choose_invocation(cmd, env, 1, opt_key)
    if not pos1:                        # its required arguments hold no key
        opt_key = "first"
        argv1, pos1, err1 = choose_invocation(cmd, env, 1, opt_key)
    argv2, pos2, err2 = choose_invocation(cmd, env, 2, opt_key)
    note = lambda err: ("the reference answers an error: %s" % short(err, 70)) if err else ""
    if len(pos1) >= 2:
        runs = [("tagged", "tagged", argv1, pos1, note(err1)),
                ("spread", "spread", argv1, pos1, "")]
    elif len(pos2) >= 2:
        runs = [("", "single", argv1, pos1, note(err1)),
                ("tagged", "tagged", argv2, pos2, note(err2)),
                ("spread", "spread", argv2, pos2, "")]
    else:
        runs = [("", "single", argv1, pos1, note(err1))]
    # Optional arguments that name keys (SORT's STORE, GEORADIUS's STORE and
    # STOREDIST): once more with all of them, as another multi-key command.
    argv3, pos3, err3 = choose_invocation(cmd, env, 1, "all")
    if len(pos3) > max(len(pos1), 1) and argv3 not in (argv1, argv2):
        runs += [("tagged +optional keys", "tagged", argv3, pos3, note(err3)),
                 ("spread +optional keys", "spread", argv3, pos3, "")]
    return runs


def t_table(env, cmds, only):
    """Build the plan of every command, then run it; one check per run."""
    covered, skipped = [], []
    per_server = [0, 0, 0]
    for j, cmd in enumerate(cmds):
        if cmd.module:
            skipped.append("%s (module %s)" % (cmd.name, cmd.module.decode()))
            continue
        if all("not_key" in [f.decode() for f in s.get("flags", [])] for s in cmd.specs):
            skipped.append("%s (channels)" % cmd.name)
            continue
        if only and cmd.name not in only:
            continue
        runs = plan(cmd, env)
        env.ref[0].flushall()
        covered.append(cmd.name)
        for r, (label, mode, argv, pos, note) in enumerate(runs):
            tag = "%s.%d" % (cmd.name.replace("|", "."), r)
            if mode == "single":
                names = pick_names(env, [j % 3], "c:" + tag)
                per_server[j % 3] += 1
            elif mode == "tagged":
                names = ["{c:%s}%d" % (tag, i) for i in range(len(pos))]
            else:
                names = pick_names(env, [(j + i) % 3 for i in range(len(pos))], "s:" + tag)
            check("cmd %s%s%s" % (cmd.name, " " + label if label else "",
                                  " (%s)" % note if note else ""),
                  run_one, env, cmd, argv, pos, mode, names)
    return covered, skipped, per_server


def t_coverage(env, covered, skipped, per_server):
    """Every server got single-key commands' keys, as SHARD.WHEREIS said."""
    held = [len(b[0].keys("c:*")) for b in env.back]
    expect(all(held), "keys of single-key commands per server: %s" % held)
    expect(len(covered) >= 100, "only %d commands covered" % len(covered))
    return "%d commands and subcommands covered (%d, %d, %d single-key ones on redis1..3; " \
           "keys held there now %s); not run: %s" % (
               len(covered), per_server[0], per_server[1], per_server[2], held,
               ", ".join(skipped) or "none")


# ---- known hard cases of key extraction ----------------------------------------------

def session(port, cmds):
    c = harness.Raw(port, timeout=10)
    try:
        c.send(b"".join(harness.enc(*cmd) for cmd in cmds))
        return [harness.parse(c.reply()) for _ in cmds]
    finally:
        c.close()


def compare_getkeys(env, family, argvs):
    """COMMAND GETKEYS of each argv, through shardis and on the reference."""
    cmds = [["COMMAND", "GETKEYS"] + a for a in argvs]
    want = session(env.direct.port, cmds)
    got = session(env.px.port, cmds)
    bad = [(a, g, w) for a, g, w in zip(argvs, got, want) if g != w]
    if bad:
        raise Fail("%d of %d differ, e.g. %s" % (len(bad), len(argvs), "; ".join(
            "%s: got %s, want %s" % (" ".join(a), short(g, 80), short(w, 80))
            for a, g, w in bad[:3])))
    return "%d orders of %s's options: as the reference" % (len(argvs), family)


def orders(groups, fixed_tail=()):
    """Every order of every subset of the option groups (each a list of words)."""
    out = []
    for n in range(len(groups) + 1):
        for sub in itertools.permutations(groups, n):
            out.append([w for g in sub for w in g] + list(fixed_tail))
    return out


def t_getkeys_sort(env):
    argvs = []
    for store in (["STORE", "dst"], ["STORE", "store"]):
        for opts in itertools.permutations([["BY", "nosort"], ["LIMIT", "0", "1"],
                                            ["GET", "#", "GET", "store"], ["DESC"], ["ALPHA"],
                                            store]):
            argvs.append(["SORT", "src"] + [w for g in opts for w in g])
    argvs += [["SORT_RO", "src"] + o for o in orders([["BY", "store"], ["LIMIT", "0", "1"],
                                                      ["GET", "store"], ["ASC"], ["ALPHA"]])]
    return compare_getkeys(env, "SORT", argvs)


def t_getkeys_georadius(env):
    read = [["WITHCOORD"], ["WITHDIST"], ["WITHHASH"], ["COUNT", "1"], ["ASC"]]
    store = [["COUNT", "1", "ANY"], ["DESC"], ["STORE", "d1"], ["STOREDIST", "d2"]]
    argvs = []
    for head in (["GEORADIUS", "geo", "13", "38", "10", "km"],
                 ["GEORADIUSBYMEMBER", "geo", "m", "10", "km"],
                 ["GEORADIUSBYMEMBER", "geo", "store", "10", "km"],
                 ["GEORADIUSBYMEMBER", "geo", "storedist", "10", "km"]):
        for opts in itertools.permutations(read):
            argvs.append(head + [w for g in opts for w in g])
        for opts in itertools.permutations(store):
            argvs.append(head + [w for g in opts for w in g])
    return compare_getkeys(env, "GEORADIUS(BYMEMBER)", argvs)


def t_getkeys_xread(env):
    argvs = []
    for opts in orders([["COUNT", "1"], ["BLOCK", "10"]]):
        for keys in (["s1", "0"], ["s1", "s2", "0", "0"], ["streams", "0"],
                     ["streams", "STREAMS", "0", "0"]):
            argvs.append(["XREAD"] + opts + ["STREAMS"] + keys)
    for opts in orders([["COUNT", "1"], ["BLOCK", "10"], ["NOACK"]]):
        for group, consumer in (("g", "c"), ("g", "streams"), ("streams", "c"),
                                ("STREAMS", "STREAMS"), ("count", "block")):
            for keys in (["s1", ">"], ["s1", "s2", ">", ">"]):
                argvs.append(["XREADGROUP", "GROUP", group, consumer] + opts + ["STREAMS"] + keys)
    return compare_getkeys(env, "XREAD(GROUP)", argvs)


def t_getkeys_migrate(env):
    argvs = []
    for auth in (["AUTH", "pw"], ["AUTH", "keys"], ["AUTH2", "u", "pw"], ["AUTH2", "keys", "keys"]):
        for opts in orders([["COPY"], ["REPLACE"], auth]):
            argvs.append(["MIGRATE", "127.0.0.1", "1", "k", "0", "1000"] + opts)
            argvs.append(["MIGRATE", "127.0.0.1", "1", "", "0", "1000"] + opts +
                         ["KEYS", "k1", "k2"])
    return compare_getkeys(env, "MIGRATE", argvs)


def t_getkeys_copy(env):
    argvs = []
    for src, dst in (("a", "b"), ("db", "replace"), ("REPLACE", "DB")):
        for opts in orders([["DB", "0"], ["REPLACE"]]):
            argvs.append(["COPY", src, dst] + opts)
    return compare_getkeys(env, "COPY", argvs)


def t_getkeys_long_keys(env):
    """COMMAND GETKEYS with more long keys than args_get keeps copies of
    (each spans the proxy's read chunks): the keys come back whole, as the
    reference's. (It once listed views of copies freed by later ones.)"""
    keys = ["%02d:" % i + "k" * 20000 for i in range(10)]
    return compare_getkeys(env, "DEL", [["DEL"] + keys, ["MSET"] + [x for k in keys
                                                                    for x in (k, "v")]])


def whereis1(px, key):
    return px.whereis([key.encode() if isinstance(key, str) else key])[
        key.encode() if isinstance(key, str) else key]


def held_by(env, key, dbs=(0,)):
    return [(i, db) for i, b in enumerate(env.backends) for db in dbs
            if redis.Redis(harness.HOST, b.port, db=db).exists(key)]


def t_sort_store_get_store(env):
    """SORT list0 STORE dst0 GET store ALPHA: GET's pattern "store" is not
    the STORE option (a reader that takes it for one names ALPHA as the
    destination). Every placement: list0 on each server with dst0 on each
    other one (doc/commands.md: SORT's keys must share a server: -CROSSSLOT with
    nothing written, or the reference's reply with dst0 on its owner), and
    list0 and dst0 under one tag on each server (the reference's reply)."""
    at = lambda held: ",".join("redis%d" % (i + 1) for i, _ in held) or "no server"
    alpha = whereis1(env.px, "ALPHA")
    cases = [(env.px.keys_on("sortlist%d:" % a, a)[0].decode(),
              env.px.keys_on("sortdst%d.%d:" % (a, d), d)[0].decode())
             for a in range(3) for d in range(3) if a != d]
    for i in range(3):          # "{t}x" lives where "t" does
        tag = env.px.keys_on("sorttag%d:" % i, i)[0].decode()
        cases.append(("{%s}list0" % tag, "{%s}dst0" % tag))
    problems, outcomes = [], []
    for list0, dst0 in cases:
        where = env.px.whereis([list0.encode(), dst0.encode()])
        src, owner = where[list0.encode()], where[dst0.encode()]
        case = "list0 on redis%d%s, dst0 on redis%d" % (
            src + 1, " (as ALPHA)" if src == alpha else "", owner + 1)
        argv = ["SORT", list0, "STORE", dst0, "GET", "store", "ALPHA"]
        for c in (env.ref[0], env.px.client):
            c.rpush(list0, "b", "a", "c")
        want = raw_cmd(env.direct.port, argv)
        got = raw_cmd(env.px.port, argv)
        held_dst, held_alpha = held_by(env, dst0), held_by(env, "ALPHA")
        if got == CROSS and src != owner:
            outcomes.append("-CROSSSLOT")
            if held_dst or held_alpha:
                problems.append("%s: -CROSSSLOT, yet dst0 is on %s, ALPHA on %s"
                                % (case, at(held_dst), at(held_alpha)))
            continue
        outcomes.append("as the reference" if got == want else "other")
        bad = []
        if got != want:
            bad.append("reply: got %s, want %s" % (short(got, 70), short(want, 70)))
        exists = env.px.client.exists(dst0)
        if exists != 1:
            bad.append("EXISTS dst0 through shardis: got %d, want 1" % exists)
        if held_dst != [(owner, 0)]:
            bad.append("dst0 on %s" % at(held_dst))
        if held_alpha:
            bad.append("a key ALPHA written on %s" % at(held_alpha))
        if bad:
            problems.append("%s: %s" % (case, ", ".join(bad)))
    expect(not problems, "%d of %d placements: %s" % (len(problems), len(cases),
                                                      "; ".join(problems)))
    return "%d placements: %s" % (len(cases), ", ".join(outcomes))


def t_sort_store_own_key(env):
    """SORT list0 STORE __shardis:ctl:x names shardis's own key: refused."""
    list0 = env.px.keys_on("sortown:", 0)[0].decode()
    env.px.client.rpush(list0, "2", "1")
    for argv in (["SORT", list0, "STORE", "__shardis:ctl:x"],
                 ["SORT", list0, "ALPHA", "STORE", "$equence{00}"],
                 ["SORT", list0, "GET", "#", "STORE", "__shardis:ctl:x", "ALPHA"]):
        got = raw_cmd(env.px.port, argv)
        expect_eq(got, Err(OWN_KEY), " ".join(argv))
    expect_eq(held_by(env, "__shardis:ctl:x") + held_by(env, "$equence{00}"), [],
              "servers holding __shardis:ctl:x or $equence{00}")
    return "refused, nothing written"


def t_georadiusbymember_store_member(env):
    """GEORADIUSBYMEMBER geo0 store 10 km: a member named "store" is not the
    STORE option: the reference's reply, not -CROSSSLOT, with geo0 on each
    server in turn (a reader that takes "10" for a key shows only where
    geo0 and "10" are apart)."""
    problems, n = [], 0
    for i in range(3):
        geo0 = env.px.keys_on("geo0.%d:" % i, i)[0].decode()
        for c in (env.ref[0], env.px.client):
            c.execute_command("GEOADD", geo0, "13.361389", "38.115556", "store",
                              "13.37", "38.12", "other", "15.087269", "37.502669", "far")
        for argv in (["GEORADIUSBYMEMBER", geo0, "store", "10", "km"],
                     ["GEORADIUSBYMEMBER", geo0, "store", "10", "km", "ASC"],
                     ["GEORADIUSBYMEMBER", geo0, "storedist", "10", "km"],
                     ["GEORADIUSBYMEMBER_RO", geo0, "store", "10", "km"],
                     ["GEORADIUSBYMEMBER", geo0, "store", "10", "km", "STORE", geo0]):
            want = raw_cmd(env.direct.port, argv)
            got = raw_cmd(env.px.port, argv)
            n += 1
            if got != want:
                problems.append("%s (geo0 on redis%d): got %s, want %s" % (
                    " ".join(argv[:1] + ["geo0"] + argv[2:]), i + 1, short(got, 60),
                    short(want, 60)))
    expect(not problems, "%d of %d: %s" % (len(problems), n, "; ".join(problems)))
    return "%d commands, geo0 on each server: as the reference" % n


def t_xreadgroup_named_streams(env):
    """XREADGROUP with a consumer, then a group, named "streams" (and both
    named STREAMS), the stream on each server in turn: the reference's
    replies, and the same groups on the stream's server afterwards."""
    problems, n = [], 0
    for i in range(3):
        s0 = env.px.keys_on("xs0.%d:" % i, i)[0].decode()
        n += 1
        for c in (env.ref[0], env.px.client):
            c.execute_command("XADD", s0, "1-1", "f", "v")
            c.execute_command("XADD", s0, "1-2", "f", "w")
            c.execute_command("XGROUP", "CREATE", s0, "g", "0")
            c.execute_command("XGROUP", "CREATE", s0, "streams", "0")
            c.execute_command("XGROUP", "CREATE", s0, "STREAMS", "0")
        for argv in (["XREADGROUP", "GROUP", "g", "streams", "COUNT", "1", "STREAMS", s0, ">"],
                     ["XREADGROUP", "GROUP", "streams", "c", "STREAMS", s0, ">"],
                     ["XREADGROUP", "GROUP", "STREAMS", "STREAMS", "STREAMS", s0, ">"]):
            want = raw_cmd(env.direct.port, argv)
            got = raw_cmd(env.px.port, argv)
            n += 1
            if got != want:
                problems.append("%s (s0 on redis%d): got %s, want %s" % (
                    " ".join(argv[:-2] + ["s0", ">"]), i + 1, short(got, 60), short(want, 60)))
        st = env.back[whereis1(env.px, s0)][0]
        mine = scrub(st.execute_command("XINFO", "GROUPS", s0))
        theirs = scrub(env.ref[0].execute_command("XINFO", "GROUPS", s0))
        if mine != theirs:
            problems.append("groups of s0 on redis%d: %s, the reference %s"
                            % (i + 1, short(mine, 80), short(theirs, 80)))
    expect(not problems, "%d of %d checks: %s" % (len(problems), n, "; ".join(problems)))
    return "%d commands and the groups after, s0 on each server: as the reference" % n


def t_copy_db_redis_db2(env):
    """COPY a b DB 0 REPLACE from a pool with redis_db: 2 (clients start in
    database 2): redis-server copies into database 0. shardis must do that
    on the keys' server, or refuse; with a and b on two servers,
    -CROSSSLOT (doc/commands.md: COPY's keys share a server)."""
    px2 = Shardis("db2", env.backends, timeout=5000, redis_db="2")
    try:
        ref2 = redis.Redis(harness.HOST, env.direct.port, db=2)
        a, b = "{cp}a", "{cp}b"
        ref2.set(a, "x")
        px2.client.set(a, "x")
        owner = whereis1(px2, a)
        refc = harness.Raw(env.direct.port)
        refc.cmd("SELECT", "2")
        want = harness.parse(refc.cmd("COPY", a, b, "DB", "0", "REPLACE"))
        refc.close()
        got = raw_cmd(px2.port, ["COPY", a, b, "DB", "0", "REPLACE"])
        held_b = held_by(env, b, dbs=(0, 1, 2))
        held_a = held_by(env, a, dbs=(0, 1, 2))
        ref_b = [db for db in (0, 1, 2) if redis.Redis(harness.HOST, env.direct.port, db=db)
                 .exists(b)]
        what = "reply %s (reference %s); b in %s (reference: db %s); a in %s" % (
            short(got), short(want), held_b, ref_b, held_a)
        if isinstance(got, Err):
            expect_eq(held_b, [], "b after a refused COPY")
            return "refused: " + what
        expect_eq(got, want, "reply")
        expect_eq(held_b, [(owner, db) for db in ref_b], "b's servers and databases")
        expect_eq(held_a, [(owner, 2)], "a's server and database")
        # keys on two servers
        a2 = px2.keys_on("cpa:", 0)[0].decode()
        b2 = px2.keys_on("cpb:", 1)[0].decode()
        px2.client.set(a2, "x")
        got2 = raw_cmd(px2.port, ["COPY", a2, b2, "DB", "0", "REPLACE"])
        expect_eq(got2, CROSS, "COPY DB 0 with a and b on two servers")
        return "as redis-server: " + what
    finally:
        harness.stop(px2.proc)


def body():
    ap_only = set(filter(None, (harness.ARGS.only or "").lower().split(",")))
    R = [RedisServer("redis%d" % (i + 1)) for i in range(3)]
    direct = RedisServer("direct")
    px = Shardis("cmds", R, timeout=5000, admin_commands="true")
    env = Env(direct, R, px)
    version = direct.client.info("server")
    print("reference: %s %s" % (version.get("server_name", "redis"),
                                version.get("valkey_version", version.get("redis_version"))))
    direct.client.set("dumpme", "10")
    env.dump = direct.client.dump("dumpme")
    direct.client.delete("dumpme")
    for c in (direct.client, px.client):
        c.execute_command("SCRIPT", "LOAD", SCRIPT)
        c.execute_command("FUNCTION", "LOAD", "REPLACE", LIBRARY)
    cmds = read_table(direct)
    t0 = time.monotonic()
    covered, skipped, per_server = t_table(env, cmds, ap_only)
    print("table: %d commands in %.1f s" % (len(covered), time.monotonic() - t0))
    if not ap_only:
        check("coverage", t_coverage, env, covered, skipped, per_server)
    check("getkeys_sort_every_order", t_getkeys_sort, env)
    check("getkeys_georadius_every_order", t_getkeys_georadius, env)
    check("getkeys_xread_every_order", t_getkeys_xread, env)
    check("getkeys_migrate_every_order", t_getkeys_migrate, env)
    check("getkeys_copy_every_order", t_getkeys_copy, env)
    check("getkeys_long_keys", t_getkeys_long_keys, env)
    check("sort_store_get_store_alpha", t_sort_store_get_store, env)
    check("sort_store_own_key_refused", t_sort_store_own_key, env)
    check("georadiusbymember_member_named_store", t_georadiusbymember_store_member, env)
    check("xreadgroup_named_streams", t_xreadgroup_named_streams, env)
    check("copy_db0_from_redis_db2", t_copy_db_redis_db2, env)
    check("exit_clean", harness.t_exit_clean, px)


if __name__ == "__main__":
    sys.exit(harness.main(body, add_args=lambda ap: ap.add_argument(
        "--only", help="comma-separated command names (as 'object|encoding') to run alone"),
        tmp_prefix="shardis-commands-"))
