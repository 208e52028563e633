#!/usr/bin/python3
"""test_compat.py -- commands Redis's own suite drives that name no key, or
whose meaning spans servers, against real redis-servers and one direct
redis-server for reference:

- a script that declares no key (EVAL/EVALSHA/FCALL ... 0) computes what
  it computes on one redis-server, but whatever it writes is refused by
  redis-server (it runs as EVAL_RO/EVALSHA_RO/FCALL_RO): no server gets
  the key, which would otherwise land on a server that may not own it;
  in a transaction it runs on the transaction's server;
- PING is the first server's: BUSY while a script runs too long there,
  PONG once SCRIPT KILL (every server) ended it;
- with a keyless_user (an ACL user with no key access) it runs as sent,
  as that user: functions that may write run, keys are refused (NOPERM),
  a pipeline keeps its order on one connection, and a user that may write
  keys or a wrong password never lets the script run (as anyone); a
  reload to another user stops using the old one's connections;
- a script returning a table that holds itself (redis-server nests it
  ~8,000 deep) is relayed byte for byte, in both protocols, and its server
  is not taken for failed (the framer's 64 levels once cut it);
- DEBUG needs admin_commands; DEBUG DIGEST over three servers equals a
  direct server's digest of the same keys (and all zeros when empty);
  DEBUG OBJECT/DIGEST-VALUE go to their key's server; CHANGE-REPL-ID
  reaches every server; POPULATE is refused and creates nothing; DEBUG
  PROTOCOL answers in the client's protocol, as the direct server does;
- COMMAND, COMMAND DOCS/INFO/GETKEYS/GETKEYSANDFLAGS/HELP/COUNT answer
  what the direct server answers, byte for byte, in RESP2 and RESP3 (DOCS
  was an empty map: redis-cli showed no hints, `help get` nothing);
- PING and ECHO queued in MULTI before any key (they were refused, which
  left Redis's suite in MULTI) answer as redis-server does, whichever
  server the transaction's keys then pick, or none;
- SAVE and BGSAVE reach every server (admin commands), LASTSAVE is the
  oldest server's; PFDEBUG goes to its key's server;
- CLIENT REPLY OFF/SKIP/ON drop exactly the replies redis-server drops, in
  a pipeline that spans servers; subscribe confirmations and messages are
  written whatever the mode, as in Redis 7;
- RESET from a transaction, WATCH, subscriber mode, RESP3, CLIENT REPLY
  OFF, a name or a signed-in password: redis-server's replies, before and
  after, and no server connection left in MULTI;
- transactions and WATCH pipelined one after another on different servers
  (the next was -CROSSSLOT while the last one's connection was busy);
- LOLWUT is the first server's; MODULE LIST is empty, as HELLO's modules
  (MODULE LOAD, MEMORY STATS stay refused);
- CLIENT UNBLOCK <shardis client id> [TIMEOUT|ERROR] ends a BLPOP waiting
  on that client's own server connection as redis-server's does (:1, then
  nil or -UNBLOCKED; :0 for a client not blocked or unknown; its argument
  errors), and the unblocked client's next BLPOP waits and pops as before.

Run: /usr/bin/python3 tests/integration/test_compat.py --shardis build/shardis
"""
import os
import signal
import sys
import time

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


def t_deep_reply(servers, direct):
    px = Shardis("deep", servers)
    script = b"local a = {}; local b = {a}; a[1] = b; return a"
    c, d = Raw(px.port), Raw(direct.port)
    for proto in (b"2", b"3"):
        c.cmd("HELLO", proto)
        d.cmd("HELLO", proto)
        got = c.cmd("EVAL", script, "0")
        want = d.cmd("EVAL", script, "0")
        expect(want.count(b"*1\r\n") > 1000, "the direct server nests it: %d levels"
               % want.count(b"*1\r\n"))
        expect_eq(got, want, "a reply %d levels deep, RESP%s" % (want.count(b"*1\r\n"),
                                                                  proto.decode()))
        expect_eq(c.cmd("PING"), b"+PONG\r\n", "PING after it")
    # Its server is not taken for failed: other clients' keys there still answer.
    for i in range(len(servers)):
        k = px.keys_on("deep", i)[0]
        expect_eq(Raw(px.port).cmd("SET", k, "v"), b"+OK\r\n", "SET on server %d" % i)
    harness.t_exit_clean(px)


# ---- SAVE, BGSAVE, LASTSAVE; PFDEBUG --------------------------------------------------------

def t_persistence(servers, direct):
    plain = Shardis("save-plain", servers)
    got = parse(Raw(plain.port).cmd("SAVE"))
    expect(isinstance(got, harness.Err) and b"admin command" in got, "SAVE without admin: %r"
           % got)
    harness.t_exit_clean(plain)
    px = Shardis("save", servers, admin_commands="true")
    c = Raw(px.port)
    for i in range(len(servers)):
        c.cmd("SET", px.keys_on("sv", i)[0], "v")
    expect(all(s.client.info("persistence")["rdb_changes_since_last_save"] > 0
               for s in servers), "unsaved changes on every server")
    expect_eq(c.cmd("SAVE"), b"+OK\r\n", "SAVE")
    expect_eq([s.client.info("persistence")["rdb_changes_since_last_save"] for s in servers],
              [0, 0, 0], "changes unsaved after SAVE, per server")
    time.sleep(1.1)                 # LASTSAVE has a second's resolution
    servers[1].client.save()
    times = [s.client.lastsave() for s in servers]
    expect(len(set(times)) > 1, "the servers' LASTSAVE differ: %r" % times)
    expect_eq(parse(c.cmd("LASTSAVE")), int(min(times).timestamp()), "LASTSAVE: the oldest")
    for i in range(len(servers)):
        c.cmd("SET", px.keys_on("sv", i)[0], "w")
    expect_eq(c.cmd("BGSAVE"), b"+Background saving started\r\n", "BGSAVE")
    harness.until("every server saved in the background", lambda: all(
        s.client.info("persistence")["rdb_changes_since_last_save"] == 0 and
        s.client.info("persistence")["rdb_bgsave_in_progress"] == 0 for s in servers))
    # PFDEBUG goes to its key's server.
    d = Raw(direct.port)
    for i in range(len(servers)):
        k = px.keys_on("hll", i)[0]
        for cl in (c, d):
            cl.cmd("DEL", k)
            cl.cmd("PFADD", k, "a", "b", "c")
        expect_eq(c.cmd("PFDEBUG", "GETREG", k), d.cmd("PFDEBUG", "GETREG", k),
                  "PFDEBUG GETREG of a key on server %d" % i)
    d.close()
    harness.t_exit_clean(px)


# ---- COMMAND ---------------------------------------------------------------------------

def t_command(servers, direct):
    px = Shardis("command", servers)
    c, d = Raw(px.port), Raw(direct.port)
    asks = [["COMMAND"], ["COMMAND", "DOCS"], ["COMMAND", "DOCS", "get", "client", "nosuch"],
            ["COMMAND", "INFO", "get", "eval", "client|kill", "nosuch"], ["COMMAND", "INFO"],
            ["COMMAND", "GETKEYS", "SET", "k", "v"], ["COMMAND", "GETKEYS", "EVAL", "s", "2", "a", "b"],
            ["COMMAND", "GETKEYS", "PING"], ["COMMAND", "GETKEYS", "NOSUCH", "x"],
            ["COMMAND", "GETKEYSANDFLAGS", "LMOVE", "a", "b", "LEFT", "RIGHT"],
            ["COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "0", "x"], ["COMMAND", "HELP"],
            ["COMMAND", "COUNT"], ["COMMAND", "NOSUCH"]]
    for proto in (b"2", b"3"):
        c.cmd("HELLO", proto)
        d.cmd("HELLO", proto)
        for a in asks:
            got, want = c.cmd(*a), d.cmd(*a)
            if len(a) == 1 or a[1] in ("DOCS", "INFO"):
                # Every command (and subcommand), in the order of each
                # server's hash tables: the same lines, in another order.
                got, want = sorted(got.split(b"\r\n")), sorted(want.split(b"\r\n"))
            expect_eq(got, want, "%s in RESP%s" % (" ".join(a), proto.decode()))
    expect(len(d.cmd("COMMAND", "DOCS")) > 100000, "COMMAND DOCS has every command's docs")
    harness.t_exit_clean(px)


# ---- keyless informational commands, CLIENT UNBLOCK ----------------------------------

def t_informational(servers, direct):
    px = Shardis("inform", servers)
    c, d = Raw(px.port), Raw(direct.port)
    for proto in (b"2", b"3"):
        c.cmd("HELLO", proto)
        d.cmd("HELLO", proto)
        expect_eq(c.cmd("MODULE", "LIST"), d.cmd("MODULE", "LIST"), "MODULE LIST, RESP%s"
                  % proto.decode())
        # The art is drawn at random; its last line is the server's version.
        for ask in (["LOLWUT"], ["LOLWUT", "VERSION", "5", "1", "1", "1"]):
            got, want = c.cmd(*ask), d.cmd(*ask)
            version = direct.client.info("server")["redis_version"].encode()
            expect(want.rstrip().endswith(b"Redis ver. " + version),
                   "direct %s: %r" % (ask, want[-40:]))
            expect_eq(got.rstrip().splitlines()[-1], want.rstrip().splitlines()[-1],
                      "%s's last line, RESP%s" % (" ".join(ask), proto.decode()))
            expect_eq(got[:1], want[:1], "%s's type" % " ".join(ask))
    expect(b"is not supported by shardis" in c.cmd("MODULE", "LOAD", "/nonexistent.so"),
           "MODULE LOAD refused")
    expect(b"is not supported by shardis" in c.cmd("MEMORY", "STATS"), "MEMORY STATS refused")
    c.close()
    d.close()
    harness.t_exit_clean(px)


def unblock_script(port, key, blocked_on):
    """CLIENT UNBLOCK as a client library's suite drives it, on port: the
    replies, to compare with redis-server's. blocked_on() is how many
    clients wait there (a BLPOP just sent may not have arrived)."""
    c, b = Raw(port), Raw(port)
    bid = parse(b.cmd("CLIENT", "ID"))
    # WATCH keeps b on its one server connection throughout (through
    # shardis): what it sends after an UNBLOCK goes where the UNBLOCK went.
    out = [b.cmd("WATCH", "{ub}w"), c.cmd("CLIENT", "UNBLOCK", bid)]   # not blocked
    for mode in ((), ("TIMEOUT",), ("ERROR",)):
        b.send(harness.enc("BLPOP", key, "20"))
        harness.until("BLPOP waits", lambda: blocked_on() == 1)
        out += [c.cmd("CLIENT", "UNBLOCK", bid, *mode), b.reply()]
    out.append(b.cmd("PING"))
    # Its next BLPOP waits and pops: nothing left held by the unblocking.
    b.send(harness.enc("BLPOP", key, "20"))
    harness.until("BLPOP waits again", lambda: blocked_on() == 1)
    out += [c.cmd("RPUSH", key, "v"), b.reply()]
    out += [c.cmd("CLIENT", "UNBLOCK", "999999"), c.cmd("CLIENT", "UNBLOCK", "x"),
            c.cmd("CLIENT", "UNBLOCK", bid, "maybe"), c.cmd("CLIENT", "UNBLOCK", bid, "error", "x"),
            c.cmd("CLIENT", "UNBLOCK", "-1"), c.cmd("CLIENT", "UNBLOCK", "18446744073709551615"),
            c.cmd("CLIENT", "UNBLOCK", "+1"), c.cmd("CLIENT", "UNBLOCK", "01")]
    c.close()
    b.close()
    return out


def t_client_unblock(servers, direct):
    px = Shardis("unblock", servers, admin_commands="true")    # (it acts on another client)

    def blocked(s):
        return s.client.info("clients")["blocked_clients"]
    key = "{ub}list"
    owner = servers[px.whereis([key.encode()])[key.encode()]]
    got = unblock_script(px.port, key, lambda: blocked(owner))
    want = unblock_script(direct.port, key, lambda: blocked(direct))
    expect_eq(got, want, "CLIENT UNBLOCK's replies (shardis vs redis-server)")
    expect_eq(got[2:4], [b":1\r\n", b"*-1\r\n"], "UNBLOCK, then BLPOP's nil")
    harness.t_exit_clean(px)
    return "%d replies as redis-server's" % len(got)


# ---- DEBUG ---------------------------------------------------------------------------

def digest(port):
    return parse(Raw(port).cmd("DEBUG", "DIGEST"))


def t_debug(servers, direct):
    plain = Shardis("debug-plain", servers)
    got = parse(Raw(plain.port).cmd("DEBUG", "DIGEST"))
    expect(isinstance(got, harness.Err) and b"admin command" in got, "without admin: %r" % got)
    c = Raw(plain.port)
    out = [c.cmd(*a) for a in (["MULTI"], ["DEBUG", "SLEEP", "0"], ["EXEC"])]
    expect(out[1].startswith(b"-ERR 'debug' is an admin command") and
           out[2].startswith(b"-EXECABORT"), "DEBUG SLEEP in MULTI without admin: %r" % out)
    c.close()
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
    for sub in (["LOADAOF"], ["REPLICATE", "SET", "x", "1"]):
        got = parse(c.cmd("DEBUG", *sub))
        expect(isinstance(got, harness.Err) and b"not supported" in got, "DEBUG %s: %r"
               % (sub[0], got))
    expect(all(s.proc.poll() is None for s in servers), "every server still runs")
    k0 = px.keys_on("dm", 0)[0]
    out = [c.cmd(*a) for a in (["MULTI"], ["SET", k0, "1"], ["DEBUG", "OBJECT", k0], ["EXEC"])]
    expect(out[2].startswith(b"-ERR") and out[3].startswith(b"-EXECABORT"),
           "DEBUG inside MULTI: %r" % out[2:])
    # DEBUG SLEEP in MULTI sleeps the transaction's server (as its
    # clients' user: srvuser.c), before or after its first key; every
    # server in one that flushes.
    def debug_calls():
        return [s.client.info("commandstats").get("cmdstat_debug", {}).get("calls", 0)
                for s in servers]
    for i in range(len(servers)):
        k = px.keys_on("dsl", i)[0]
        for seq in ([["MULTI"], ["SET", k, "1"], ["DEBUG", "SLEEP", "0"], ["GET", k], ["EXEC"]],
                    [["MULTI"], ["DEBUG", "SLEEP", "0"], ["INCR", k], ["EXEC"]]):
            before = debug_calls()
            got = [c.cmd(*a) for a in seq]
            want = [d.cmd(*a) for a in seq]
            expect_eq(got, want, "%s on server %d" % (seq[1:-1], i))
            slept = [x - y for x, y in zip(debug_calls(), before)]
            expect_eq(slept, [1 if j == i else 0 for j in range(len(servers))],
                      "DEBUG SLEEP in MULTI run on the transaction's server %d" % i)
    before = debug_calls()
    seq = [["MULTI"], ["DEBUG", "SLEEP", "0"], ["FLUSHDB"], ["EXEC"]]
    expect_eq([c.cmd(*a) for a in seq], [d.cmd(*a) for a in seq], "DEBUG SLEEP and FLUSHDB")
    expect_eq([x - y for x, y in zip(debug_calls(), before)], [1] * len(servers),
              "DEBUG SLEEP in a transaction that flushes: on every server")
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


# ---- PING and ECHO in MULTI before any key ------------------------------------------------

def t_multi_keyless(servers, direct):
    px = Shardis("multi-ping", servers)
    for i in range(len(servers)):
        k = px.keys_on("mp", i)[0]
        seqs = [
            [["MULTI"], ["PING"], ["ECHO", "x"], ["EXEC"]],
            [["MULTI"], ["PING"], ["PING", "hi"], ["SET", k, "1"], ["INCR", k], ["ECHO", "y"],
             ["EXEC"]],
            [["MULTI"], ["PING"], ["DISCARD"], ["PING"]],
            [["MULTI"], ["ECHO", "z"], ["NOSUCH"], ["EXEC"], ["PING"]],
            [["WATCH", k], ["MULTI"], ["PING"], ["GET", k], ["EXEC"]],
            [["MULTI"], ["EXEC"]],
            [["MULTI"], ["PUBLISH", "mp-ch", "m"], ["SET", k, "1"], ["PUBLISH", "mp-ch", "n"],
             ["EXEC"]],
            [["MULTI"], ["PUBLISH", "mp-ch", "m"], ["EXEC"]],
        ]
        for seq in seqs:
            got, want = [], []
            for port, out in ((px.port, got), (direct.port, want)):
                c = Raw(port)
                c.cmd("DEL", k)
                c.send(b"".join(harness.enc(*a) for a in seq))
                out += [c.reply() for _ in seq]
                c.close()
            expect_eq(got, want, "%s with the key on server %d"
                      % (" ".join(" ".join(map(str, a)) for a in seq), i))
    # At most 1,024 held: the next is refused and EXEC aborts.
    c = Raw(px.port)
    c.send(harness.enc("MULTI") + harness.enc("PING") * 1025 + harness.enc("EXEC")
           + harness.enc("PING"))
    out = [c.reply() for _ in range(1028)]
    expect_eq(out[1024], b"+QUEUED\r\n", "the 1,024th PING")
    expect(out[1025].startswith(b"-ERR more than 1024"), "the 1,025th: %r" % out[1025])
    expect_eq(out[1026:], [b"-EXECABORT Transaction discarded because of previous errors.\r\n",
                           b"+PONG\r\n"], "EXEC, then PING")
    harness.t_exit_clean(px)


def t_multi_flush(servers, direct):
    """FLUSHALL and FLUSHDB in MULTI before any key: the transaction runs
    on every server, EXEC's reply as redis-server's and every server
    emptied (the Tcl suite's tracking unit and its "flushdb ... not
    interleaved with transaction response" needs it). After a key, with a
    key after it, or with PUBLISH, refused, the transaction aborted and
    nothing flushed; without admin_commands refused, as FLUSHALL is."""
    px = Shardis("multi-flush", servers, admin_commands="true")
    keys = [px.keys_on("mf", i)[0] for i in range(len(servers))]

    def fill(port):
        c = Raw(port)
        for k in keys:
            c.cmd("SET", k, "v")
        c.close()

    def left(port=None):
        if port == direct.port:
            return sorted(direct.client.keys("mf*"))
        return sorted(k for s in servers for k in s.client.keys("mf*"))

    def run(port, seq, proto):
        c = Raw(port)
        c.cmd("HELLO", proto)
        c.send(b"".join(harness.enc(*a) for a in seq))
        out = [c.reply() for _ in seq]
        c.close()
        return out

    def text(seq):
        return " ".join(" ".join(x if isinstance(x, str) else x.decode() for x in a)
                        for a in seq)

    seqs = [
        [["MULTI"], ["FLUSHDB"], ["EXEC"]],
        [["MULTI"], ["PING"], ["FLUSHALL"], ["ECHO", "x"], ["FLUSHDB", "ASYNC"], ["EXEC"]],
        [["MULTI"], ["FLUSHALL", "SYNC"], ["EXEC"], ["GET", keys[0]]],
        [["MULTI"], ["FLUSHALL"], ["DISCARD"], ["GET", keys[1]]],
        [["MULTI"], ["FLUSHDB"], ["NOSUCH"], ["EXEC"]],
        [["MULTI"], ["FLUSHDB", "NOSUCH"], ["EXEC"]],
        [["SET", "mfx", "1"], ["MULTI"], ["FLUSHDB"], ["EXEC"], ["SET", "mfy", "2"],
         ["MGET", "mfx", "mfy"]],
    ]
    for proto in ("2", "3"):
        for seq in seqs:
            got, want = {}, {}
            for port, out in ((px.port, got), (direct.port, want)):
                fill(port)
                out["replies"] = run(port, seq, proto)
                out["left"] = left(port)
            expect_eq(got, want, "RESP%s %s" % (proto, text(seq)))
            for s in servers + [direct]:
                s.client.flushall()
    # After the client's earlier requests, on every server: a script
    # busy 0.5 s on server 0, a key another client sets meanwhile on
    # server 1 is flushed by the transaction.
    busy = "local t = redis.call('TIME') repeat local n = redis.call('TIME') " \
           "until (n[1] - t[1]) * 1000000 + n[2] - t[2] > 500000 return 1"
    z = px.keys_on("mfz", 1)[0]
    c = Raw(px.port)
    c.send(b"".join(harness.enc(*a) for a in (["EVAL", busy, "1", keys[0]], ["MULTI"],
                                               ["FLUSHDB"], ["EXEC"])))
    time.sleep(0.2)
    Raw(px.port).cmd("SET", z, "1")
    out = [c.reply() for _ in range(4)]
    expect_eq(out[3], b"*1\r\n+OK\r\n", "EXEC after a busy script")
    expect_eq(left(), [], "what was set on another server while the script ran")
    c.close()
    # Refused, the transaction aborted, nothing flushed.
    for seq in ([["MULTI"], ["SET", keys[1], "w"], ["FLUSHALL"], ["EXEC"]],
                [["MULTI"], ["FLUSHALL"], ["SET", keys[1], "w"], ["EXEC"]],
                [["MULTI"], ["FLUSHALL"], ["GET", keys[2]], ["EXEC"]],
                [["MULTI"], ["FLUSHDB"], ["PUBLISH", "ch", "m"], ["EXEC"]],
                [["MULTI"], ["PUBLISH", "ch", "m"], ["FLUSHDB"], ["EXEC"]]):
        fill(px.port)
        out = run(px.port, seq, "2")
        what = text(seq)
        expect_eq(out[:2], [b"+OK\r\n", b"+QUEUED\r\n"], what)
        expect(out[2].startswith(b"-ERR ") and b"not supported by shardis" in out[2],
               "%s: %r" % (what, out[2]))
        expect(out[3].startswith(b"-EXECABORT"), "%s: EXEC %r" % (what, out[3]))
        expect_eq(left(), sorted(keys), "%s: nothing flushed" % what)
    for s in servers:
        s.client.delete(*keys)
    harness.t_exit_clean(px)
    # Without admin_commands, FLUSHALL is refused inside MULTI as outside.
    px = Shardis("multi-flush-noadmin", servers)
    fill(px.port)
    out = run(px.port, [["MULTI"], ["FLUSHALL"], ["EXEC"]], "2")
    expect(out[1].startswith(b"-ERR 'flushall' is an admin command") and
           out[2].startswith(b"-EXECABORT"), "without admin_commands: %r" % out)
    expect_eq(left(), sorted(keys), "without admin_commands: nothing flushed")
    for s in servers:
        s.client.delete(*keys)
    harness.t_exit_clean(px)


def t_celery_result(servers, direct):
    """Celery's Redis result backend stores a result and announces it in
    one transaction: MULTI, SETEX celery-task-meta-<id>, PUBLISH on that
    name, EXEC. A subscriber on another connection gets the message, and
    every reply is the direct server's (PUBLISH in MULTI was refused, EXEC
    then -EXECABORT, and AsyncResult.get() waited for ever)."""
    px = Shardis("celery", servers)
    body = b'{"status": "SUCCESS", "result": 42, "task_id": "%s"}'
    for n in range(len(servers)):       # the key on each server in turn
        key = px.keys_on("celery-task-meta-7c5e-", n)[0].decode()
        tid = key[len("celery-task-meta-"):]
        seq = [["MULTI"], ["SETEX", key, "86400", body % tid.encode()],
               ["PUBLISH", key, body % tid.encode()], ["EXEC"]]
        got = {}
        for name, port in (("shardis", px.port), ("direct", direct.port)):
            sub = Raw(port)
            sub.send(harness.enc("SUBSCRIBE", key))
            expect_eq(parse(sub.reply())[0], b"subscribe", "%s: SUBSCRIBE" % name)
            c = Raw(port)
            c.send(b"".join(harness.enc(*a) for a in seq))
            got[name] = [c.reply() for _ in seq] + [sub.reply(), c.cmd("GET", key)]
            c.cmd("DEL", key)
            c.close()
            sub.close()
        expect_eq(got["shardis"], got["direct"], "the transaction on server %d" % n)
        expect_eq(parse(got["shardis"][-2]), [b"message", key.encode(), body % tid.encode()],
                  "the subscriber's message")
    # shardis's own channels stay its own inside a transaction too.
    c = Raw(px.port)
    c.send(harness.enc("MULTI") + harness.enc("PUBLISH", "__shardis:x", "m") + harness.enc("EXEC"))
    got = [c.reply() for _ in range(3)]
    expect(got[1].startswith(b"-ERR channels under '__shardis:'") and
           got[2].startswith(b"-EXECABORT"), "PUBLISH __shardis:x in MULTI: %r" % got)
    c.close()
    harness.t_exit_clean(px)


def t_first_down(servers):
    """With the first server down, what 'the first server' answers comes
    from the next one up."""
    px = Shardis("first-down", servers, server_retry_timeout=60000)
    k0 = px.keys_on("fd", 0)[0]
    servers[0].kill()
    c = Raw(px.port)
    harness.until("the first server's connection failed",
                  lambda: c.cmd("GET", k0).startswith(b"-ERR"))
    expect(c.cmd("COMMAND", "INFO", "get").startswith(b"*1\r\n*10\r\n$3\r\nget"),
           "COMMAND INFO with the first server down")
    expect_eq(c.cmd("EVAL", "return 7", "0"), b":7\r\n", "a keyless EVAL")
    expect_eq(c.cmd("MULTI"), b"+OK\r\n", "MULTI")
    c.cmd("PING")
    expect_eq(c.cmd("EXEC"), b"*1\r\n+PONG\r\n", "MULTI PING EXEC")
    expect_eq(c.cmd("PING"), b"+PONG\r\n", "PING: the next server up")
    # No server up: PING says so, as a client of a dead redis-server learns.
    for s in servers[1:]:
        s.kill()
    harness.until("every server's connection failed",
                  lambda: all(c.cmd("GET", px.keys_on("fd", i)[0]).startswith(b"-ERR")
                              for i in (1, 2)))
    got = c.cmd("PING")
    expect(got.startswith(b"-ERR"), "PING with no server up: %r" % got)
    harness.t_exit_clean(px)


# ---- CLIENT REPLY ---------------------------------------------------------------------

def replies_until(c, marker):
    """Every reply up to and including marker's, as one byte string."""
    out = b""
    while True:
        r = c.reply()
        out += r
        if r == marker:
            return out


def t_client_reply(servers, direct):
    px = Shardis("reply", servers, admin_commands="true")      # (CLIENT NO-EVICT's)
    k0, k1 = px.keys_on("rk", 0)[0], px.keys_on("rk", 1)[0]
    end = [b"ECHO", b"end"]
    script = [
        [b"CLIENT", b"REPLY", b"OFF"], [b"SET", k0, b"1"], [b"GET", k1], [b"NOSUCH"],
        [b"MGET", k0, k1], [b"CLIENT", b"REPLY", b"SKIP"], [b"CLIENT", b"REPLY", b"ON"],
        [b"GET", k0], [b"CLIENT", b"REPLY", b"SKIP"], [b"GET", k0], [b"INCR", k0],
        [b"CLIENT", b"REPLY", b"BAD"], [b"CLIENT", b"REPLY", b"OFF"],
        [b"CLIENT", b"REPLY", b"BAD"], [b"CLIENT", b"REPLY", b"SKIP"], [b"PING"],
        [b"CLIENT", b"REPLY", b"ON"], [b"CLIENT", b"REPLY"], [b"CLIENT", b"NO-EVICT", b"on"],
        [b"CLIENT", b"NO-EVICT", b"maybe"], [b"CLIENT", b"NO-EVICT", b"off"], end,
    ]
    got = {}
    for name, port in (("shardis", px.port), ("redis", direct.port)):
        Raw(port).cmd("DEL", k0, k1)
        c = Raw(port)
        c.send(b"".join(harness.enc(*a) for a in script))
        got[name] = replies_until(c, b"$3\r\nend\r\n")
        c.close()
    expect_eq(got["shardis"], got["redis"], "a pipeline through CLIENT REPLY OFF/SKIP/ON")
    expect_eq(got["shardis"], b"+OK\r\n$1\r\n1\r\n:2\r\n-ERR syntax error\r\n+OK\r\n"
              b"-ERR wrong number of arguments for 'client|reply' command\r\n+OK\r\n"
              b"-ERR syntax error\r\n+OK\r\n$3\r\nend\r\n", "the replies written")
    # (Un)subscribe confirmations and messages are written whatever the mode.
    for proto in (b"2", b"3"):
        sub = {}
        for name, port in (("shardis", px.port), ("redis", direct.port)):
            c = Raw(port)
            c.cmd("HELLO", proto)
            c.send(harness.enc("CLIENT", "REPLY", "OFF") + harness.enc("SUBSCRIBE", "ch")
                   + harness.enc("PSUBSCRIBE", "c*"))
            first = c.reply() + c.reply()
            Raw(port).cmd("PUBLISH", "ch", "hi")
            sub[name] = first + c.reply() + c.reply()
            c.close()
        expect_eq(sub["shardis"], sub["redis"], "subscribed with CLIENT REPLY OFF, RESP" +
                  proto.decode())
    harness.t_exit_clean(px)


# ---- scripts that declare no key, as the keyless_user ----------------------------------

KL_ACL = ["on", ">klpw", "resetkeys", "resetchannels", "+@all"]

KL_LIB = (b"#!lua name=kl\n"
          b"redis.register_function('rw', function(k, a) return {1, 'two', 3.5} end)\n"
          b"redis.register_function('rwmap', function(k, a) "
          b"return {map={a=1}, double=2.5} end)\n"
          b"redis.register_function('rwkey', function(k, a) "
          b"return redis.call('set', 'z', 1) end)")


def keyless_conns(server):
    return sum(1 for c in server.client.client_list() if c.get("user") == "kl")


def t_keyless_user(servers, direct):
    for s in servers + [direct]:
        s.client.flushall()
        s.client.function_flush()
        s.client.acl_setuser("kl", reset=True)
        s.client.execute_command("ACL", "SETUSER", "kl", *KL_ACL)
    px = Shardis("keyless-user", servers, admin_commands="true", keyless_user="kl",
                 keyless_password="klpw")
    c, d = Raw(px.port), Raw(direct.port)
    d.cmd("AUTH", "kl", "klpw")           # the direct server runs them as kl too
    expect_eq(parse(c.cmd("FUNCTION", "LOAD", KL_LIB)), b"kl", "FUNCTION LOAD")
    d.cmd("FUNCTION", "LOAD", KL_LIB)
    shebang = b"#!lua\nreturn redis.setresp and 'shebang ran'"
    for proto in (b"2", b"3"):
        c.cmd("HELLO", proto)
        d.cmd("HELLO", proto)
        for args in (["FCALL", "rw", "0"], ["FCALL", "rwmap", "0"], ["EVAL", shebang, "0"],
                     ["EVAL", "return redis.call('ping')", "0"]):
            want = d.cmd(*args)
            expect(not want.startswith(b"-"), "direct %r: %r" % (args, want))
            expect_eq(c.cmd(*args), want, "%r in RESP%s" % (args, proto.decode()))
        # One that touches a key, read or write, is refused by the server.
        for args in (["FCALL", "rwkey", "0"], ["EVAL", "return redis.call('get', 'k')", "0"],
                     ["EVAL", "return redis.call('set', 'k', 1)", "0"]):
            got = parse(c.cmd(*args))
            expect(isinstance(got, harness.Err) and b"can't access" in got,
                   "%r: %r" % (args, got))
    c.cmd("HELLO", "2")
    expect_eq(servers_dbsize(servers), [0, 0, 0], "keys on the servers after keyless scripts")
    # A pipeline: each script runs after what the client sent before it and
    # before what it sent after, as on one server; one connection, not one
    # per script.
    pipe, want = b"", []
    for i in range(40):
        k = px.keys_on("kp", i % 3)[0] if i < 3 else b"kp%d" % i
        name = b"f%d" % i
        lib = b"#!lua name=l%d\nredis.register_function('f%d', function(k, a) return %d end)" % (
            i, i, i)
        for args in (["SET", k, str(i)], ["FUNCTION", "LOAD", "REPLACE", lib],
                     ["FCALL", name, "0"], ["EVAL", "return ARGV[1]", "0", k], ["GET", k]):
            pipe += harness.enc(*args)
        want += [b"+OK\r\n", b"$%d\r\nl%d\r\n" % (len(b"l%d" % i), i), b":%d\r\n" % i,
                 b"$%d\r\n%s\r\n" % (len(k), k), b"$%d\r\n%d\r\n" % (len(str(i)), i)]
    c.send(pipe)
    got = [c.reply() for _ in want]
    expect_eq(got, want, "a pipeline of writes, FUNCTION LOAD, FCALL 0 and EVAL 0")
    expect(max(keyless_conns(s) for s in servers) <= 2,
           "keyless connections: %r" % [keyless_conns(s) for s in servers])
    # Behind a slow request elsewhere, a script waits for it on a new
    # connection, which stays its own meanwhile: the proxy idles past its
    # 500 ms and closes spare connections then, but not this one.
    c.close()
    c = Raw(px.port)
    time.sleep(0.8)                 # idle: the spares are closed, the script's is new
    slow = (b"local s = redis.call('TIME') while true do local n = redis.call('TIME') "
            b"if (n[1] - s[1]) * 1000000 + n[2] - s[2] > 1200000 then return 'slow' end end")
    c.send(harness.enc("EVAL", slow, "1", px.keys_on("slow", 1)[0]) +
           harness.enc("EVAL", "return 'after'", "0"))
    expect_eq([c.reply() for _ in range(2)], [b"$4\r\nslow\r\n", b"$5\r\nafter\r\n"],
              "a keyless script behind a slow one")
    # EVAL_RO and FCALL_RO are read-only already: as the client's user,
    # redis-server's own refusal of a write.
    dd = Raw(direct.port)
    for args in (["EVAL_RO", "return redis.call('set', 'k', 1)", "0"],
                 ["EVAL_RO", "return redis.call('ping')", "0"]):
        expect_eq(c.cmd(*args), dd.cmd(*args), "%r" % args)
    dd.close()
    # A script that runs too long: PING says BUSY, as the server does, and
    # SCRIPT KILL (every server) ends it.
    for s in servers:
        s.client.config_set("busy-reply-threshold", 50)
    busy = Raw(px.port)
    busy.send(harness.enc("EVAL", "while true do end", "0"))
    time.sleep(0.3)
    got = parse(c.cmd("PING"))
    expect(isinstance(got, harness.Err) and got.startswith(b"BUSY"), "PING while busy: %r" % got)
    expect_eq(c.cmd("SCRIPT", "KILL"), b"+OK\r\n", "SCRIPT KILL")
    got = parse(busy.reply())
    expect(isinstance(got, harness.Err) and b"killed" in got, "the killed script: %r" % got)
    expect_eq(c.cmd("PING"), b"+PONG\r\n", "PING after SCRIPT KILL")
    expect_eq(c.cmd("PING", "x"), d.cmd("PING", "x"), "PING x")
    expect_eq(c.cmd("PING", "x", "y"), d.cmd("PING", "x", "y"), "PING x y")
    busy.close()
    # In MULTI it stays read-only, on the transaction's server.
    out = [c.cmd(*a) for a in (["MULTI"], ["FCALL", "rw", "0"], ["EXEC"])]
    expect(b"write flag" in out[-1], "FCALL rw 0 in MULTI: %r" % out[-1])
    # A reload naming another user: connections of the old one (spares now)
    # are not used again. kl2 may not call functions.
    for s in servers:
        s.client.execute_command("ACL", "SETUSER", "kl2", "on", ">kl2pw", "resetkeys",
                                 "resetchannels", "+@all", "-fcall")
    expect_eq(c.cmd("FCALL", "rw", "0"), d.cmd("FCALL", "rw", "0"), "FCALL rw 0 as kl")
    with open(px.conf) as f:
        text = f.read()
    with open(px.conf, "w") as f:
        f.write(text.replace("keyless_user: kl", "keyless_user: kl2")
                    .replace("keyless_password: klpw", "keyless_password: kl2pw"))
    px.client.execute_command("SHARD.RELOAD")
    got = parse(c.cmd("FCALL", "rw", "0"))
    expect(isinstance(got, harness.Err) and b"NOPERM" in got, "FCALL rw 0 as kl2: %r" % got)
    c.close()
    d.close()
    harness.t_exit_clean(px)


def t_keyless_user_wrong(servers):
    """A keyless_user that may use keys or channels (any pattern, or keys
    with DEL alone denied), a missing user or a wrong password: the script
    never runs (not as anyone: it must not go behind a failed check or
    AUTH), the client is told why. Without admin_commands a keyless script
    stays read-only (no key pattern stops FLUSHALL)."""
    cases = (("somekeys", ["~app:*"], "klpw", b"may use keys or channels"),
             ("nodel", ["~*", "-del"], "klpw", b"may use keys or channels"),
             ("channels", ["allchannels"], "klpw", b"may use keys or channels"),
             ("readkeys", ["%R~*"], "klpw", b"may use keys or channels"),
             ("nouser", None, "klpw", b"no ACL user"),
             ("wrongpass", [], "nope", b"WRONGPASS"))
    for name, extra, pw, why in cases:
        for s in servers:
            s.client.flushall()
            s.client.execute_command("ACL", "SETUSER", "kl", "reset", *KL_ACL)
        if extra is None:
            servers[0].client.execute_command("ACL", "DELUSER", "kl")
        else:
            servers[0].client.execute_command("ACL", "SETUSER", "kl", *extra)
        px = Shardis("keyless-" + name, servers, admin_commands="true", keyless_user="kl",
                     keyless_password=pw)
        c = Raw(px.port)
        # The first server is where keyless scripts go.
        got = parse(c.cmd("EVAL", "redis.call('set', 'app:planted', 1) return 1", "0"))
        expect(isinstance(got, harness.Err) and why in got, "%s: %r" % (name, got))
        expect_eq(servers_dbsize(servers), [0, 0, 0], "%s: keys after the script" % name)
        expect_eq(c.cmd("PING"), b"+PONG\r\n", "%s: the client goes on" % name)
        c.close()
        harness.t_exit_clean(px)
    for s in servers:
        s.client.execute_command("ACL", "SETUSER", "kl", "reset", *KL_ACL)
        s.client.set("{a}%d" % s.port, "kept")
    px = Shardis("keyless-noadmin", servers, keyless_user="kl", keyless_password="klpw")
    got = parse(Raw(px.port).cmd("EVAL", "redis.call('flushall') return 1", "0"))
    # (read-only, and run as the clients' user shardis makes, which may not
    # FLUSHALL: the server's ACL refusal comes first)
    expect(isinstance(got, harness.Err) and
           (b"read-only" in got or b"user executing the script can't run" in got),
           "FLUSHALL in a script: %r" % got)
    expect_eq(servers_dbsize(servers), [1, 1, 1], "keys after it")
    harness.t_exit_clean(px)


# ---- PUBSUB CHANNELS / NUMSUB / NUMPAT -------------------------------------------------

def t_pubsub_introspection(servers, direct):
    px = Shardis("pubsub-intro", servers)
    subs = {}
    for side, port in (("shardis", px.port), ("redis", direct.port)):
        a, b, s = Raw(port), Raw(port), Raw(port)
        a.cmd("SUBSCRIBE", "news", "sport", "{t}x")
        b.cmd("SUBSCRIBE", "news")
        b.send(harness.enc("PSUBSCRIBE", "n*", "s*"))
        b.reply()
        b.reply()
        s.cmd("SSUBSCRIBE", "shard1")
        subs[side] = (a, b, s)
    for proto in (b"2", b"3"):
        c, d = Raw(px.port), Raw(direct.port)
        c.cmd("HELLO", proto)
        d.cmd("HELLO", proto)
        for args in (["PUBSUB", "CHANNELS"], ["PUBSUB", "CHANNELS", "s*"],
                     ["PUBSUB", "SHARDCHANNELS"]):
            got, want = parse(c.cmd(*args)), parse(d.cmd(*args))
            expect_eq(sorted(got), sorted(want), "%r in RESP%s" % (args, proto.decode()))
        for args in (["PUBSUB", "NUMSUB", "news", "sport", "none", "{t}x"], ["PUBSUB", "NUMPAT"],
                     ["PUBSUB", "SHARDNUMSUB", "shard1", "shard2"], ["PUBSUB", "NUMSUB"],
                     ["PUBSUB", "HELP"], ["PUBSUB", "NOPE"]):
            expect_eq(c.cmd(*args), d.cmd(*args), "%r in RESP%s" % (args, proto.decode()))
        # shardis's own channels are neither listed nor counted.
        got = parse(c.cmd("PUBSUB", "CHANNELS", "__shardis:*"))
        expect_eq(got, [], "PUBSUB CHANNELS __shardis:*")
        c.close()
        d.close()
    expect(any(ch.startswith(b"__shardis:") for s in servers
               for ch in s.client.pubsub_channels()), "a group channel on the servers")
    # A RESP2 subscriber may not ask (redis-server's error).
    a = subs["shardis"][0]
    expect_eq(a.cmd("PUBSUB", "NUMPAT"), subs["redis"][0].cmd("PUBSUB", "NUMPAT"),
              "PUBSUB NUMPAT from a RESP2 subscriber")
    for conns in subs.values():
        for x in conns:
            x.close()
    harness.t_exit_clean(px)


def t_select(servers, direct):
    """SELECT answers as a redis-server with 16 databases (databases: 16,
    the default); a pool with databases: 1 as one with one."""
    one = RedisServer("onedb", extra=["--databases", "1"])
    px = Shardis("select", servers)
    px1 = Shardis("select1", servers, databases="1")
    for ours, theirs in ((px, direct), (px1, one)):
        c, d = Raw(ours.port), Raw(theirs.port)
        for db in ("0", "1", "15", "16", "1000000", "-1", "2147483648", "x", "1.5", "01",
                   "+1", " 1", "1 ", "-0", "18446744073709551615", "9223372036854775807",
                   "9223372036854775808", "-9223372036854775808"):
            expect_eq(c.cmd("SELECT", db), d.cmd("SELECT", db), "SELECT %s" % db)
        c.close()
        d.close()
    one.kill()
    harness.t_exit_clean(px1)
    harness.t_exit_clean(px)


def t_databases(servers):
    """A client in database 3 beside one in database 0, keys on every
    server: each sees its own database only, on the server the ring names
    (redis-py's redis://host:port/3 sends SELECT 3 on connect); DBSIZE,
    KEYS, SCAN, RANDOMKEY and FLUSHDB are the database's; MOVE and COPY
    ... DB stay on the key's server; SWAPDB swaps on every server; INFO
    keyspace and CLIENT LIST show the databases."""
    for s in servers:
        s.client.flushall()             # (what earlier checks left)
    px = Shardis("dbs", servers, admin_commands="true")
    keys = [k for i in range(len(servers)) for k in px.keys_on("db:", i, 4)]
    where = px.whereis(keys)
    expect(len(set(where.values())) == len(servers), "keys on every server: %r" % where)
    c0 = redis.Redis.from_url("redis://%s:%d/0" % (harness.HOST, px.port))
    c3 = redis.Redis.from_url("redis://%s:%d/3" % (harness.HOST, px.port))
    for k in keys:
        c0.set(k, b"zero")
        c3.set(k, b"three")
    expect_eq(c0.mget(keys), [b"zero"] * len(keys), "database 0's values")
    expect_eq(c3.mget(keys), [b"three"] * len(keys), "database 3's values")
    for k in keys:      # each in database 3 of its own server, and nowhere else
        for i, s in enumerate(servers):
            got = redis.Redis(harness.HOST, s.port, db=3).get(k)
            expect_eq(got, b"three" if i == where[k] else None, "%r in db 3 of server %d" % (k, i))
    # One key in database 0 only: each view below must tell the two apart.
    c0.set(b"only0", b"x")
    expect_eq((c0.dbsize(), c3.dbsize()), (len(keys) + 1, len(keys)), "DBSIZE of each")
    expect_eq(sorted(c3.keys("*")), sorted(keys), "KEYS in database 3")
    expect_eq(sorted(c0.keys("*")), sorted(keys + [b"only0"]), "KEYS in database 0")
    expect_eq(sorted(c3.scan_iter(count=3)), sorted(keys), "SCAN in database 3")
    expect_eq(sorted(c0.scan_iter(count=3)), sorted(keys + [b"only0"]), "SCAN in database 0")
    expect(all(c3.randomkey() in keys for _ in range(20)), "RANDOMKEY in database 3")
    c0.delete(b"only0")
    # MOVE and COPY ... DB: the key's own server, in the database named
    k0, k1 = keys[0], keys[-1]
    expect_eq(c3.move(k0, 5), True, "MOVE to database 5")
    c5 = redis.Redis.from_url("redis://%s:%d/5" % (harness.HOST, px.port))
    expect_eq((c3.get(k0), c5.get(k0)), (None, b"three"), "moved")
    expect_eq(redis.Redis(harness.HOST, servers[where[k0]].port, db=5).get(k0), b"three",
              "in database 5 of its server")
    expect_eq(harness.expect_refused(lambda: c0.execute_command("MOVE", k1, "16"), "",
                                     "MOVE 16"), "DB index is out of range", "MOVE 16")
    src, dst = b"{cp}a", b"{cp}b"
    c0.set(src, b"v")
    expect_eq(c0.execute_command("COPY", src, dst, "DB", "4"), 1, "COPY ... DB 4")
    c4 = redis.Redis.from_url("redis://%s:%d/4" % (harness.HOST, px.port))
    expect_eq((c4.get(dst), c0.get(dst)), (b"v", None), "copied into database 4")
    # SWAPDB: every server's share of both; never redis_db (shardis's own keys)
    harness.expect_refused(lambda: c0.swapdb(0, 3),
                           "SWAPDB of database 0 (redis_db) is not supported", "SWAPDB 0 3")
    for args, want in ((("3", "x"), "invalid second DB index"),
                       (("x", "0"), "invalid first DB index")):
        expect_eq(harness.expect_refused(lambda: c0.execute_command("SWAPDB", *args), "",
                                         "SWAPDB %s %s" % args),
                  want, "SWAPDB %s %s (redis-server's words)" % args)
    expect_eq(c0.swapdb(3, 4), True, "SWAPDB 3 4")
    expect_eq((c4.mget(keys[1:]), c4.get(dst), c3.get(dst)),
              ([b"three"] * (len(keys) - 1), None, b"v"), "swapped on every server")
    # FLUSHDB empties its own database only
    expect_eq(c4.flushdb(), True, "FLUSHDB in database 4")
    expect_eq((c4.dbsize(), c0.dbsize()), (0, len(keys) + 1), "database 0 untouched")
    lines = [l for l in c4.client_list() if l.get("db") == "4"]
    expect(len(lines) >= 1, "CLIENT LIST shows db=4: %r" % c4.client_list())
    info = c0.info("keyspace")
    expect_eq([info.get("db%d" % d, {}).get("keys") for d in (0, 3, 4, 5)],
              [len(keys) + 1, 1, None, 1], "INFO keyspace: %r" % info)
    for x in (c0, c3, c4, c5):
        x.close()
    harness.t_exit_clean(px)


def t_info_keyspace_now(servers):
    """INFO keyspace right after writes, on a shardis just started: the
    servers are asked when INFO is, not answered from a cache that is
    empty or a second old; with one server stopped, INFO still answers,
    within INFO_WAIT_MS, the others' keys."""
    for s in servers:
        s.client.flushall()
    px = Shardis("infonow", servers)
    keys = [k for i in range(len(servers)) for k in px.keys_on("in:", i, 3)]
    c = px.client
    for n in range(1, 4):
        for k in keys:
            c.set(b"%s:%d" % (k, n), b"v")
        expect_eq(c.info("keyspace").get("db0", {}).get("keys"), n * len(keys),
                  "INFO keyspace right after the writes, round %d" % n)
    stopped = servers[0]
    os.kill(stopped.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        info = c.info()
        took = time.monotonic() - t0
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
    expect(took < 3, "INFO with a server stopped took %.1f s" % took)
    expect_eq(info.get("db0", {}).get("keys"), 3 * len(keys), "the last figures kept")
    harness.t_exit_clean(px)


def t_database_order(servers):
    """SELECT keeps a pipeline's order as one connection does: a MOVE
    queued behind a large write on database 0's connection, then SELECT
    and a GET of the key on database 5's: the GET sees the key moved."""
    px = Shardis("dborder", servers)
    k = px.keys_on("ord:", 0, 2)
    big = b"x" * (24 << 20)
    warm = redis.Redis.from_url("redis://%s:%d/5" % (harness.HOST, px.port))
    warm.get(k[1])                      # database 5's connection is up
    lost = 0
    for i in range(3):
        c = Raw(px.port, timeout=30)
        c.cmd("DEL", k[0])
        seq = [["SET", k[1], big], ["SET", k[0], "v%d" % i], ["MOVE", k[0], "5"],
               ["SELECT", "5"], ["GET", k[0]], ["DEL", k[0]]]
        c.send(b"".join(harness.enc(*a) for a in seq))
        got = [c.reply() for _ in seq]
        expect_eq(got[:3], [b"+OK\r\n", b"+OK\r\n", b":1\r\n"], "SET, SET, MOVE")
        lost += got[4] != harness.bulk(b"v%d" % i)
        c.close()
    expect_eq(lost, 0, "GETs that ran before the MOVE")
    warm.close()
    harness.t_exit_clean(px)


# ---- RESET ---------------------------------------------------------------------------

def pipelined(ports, proto, keys, seq, n=None, then=None):
    """On a new connection to each port: keys deleted, HELLO proto, seq sent
    as one pipeline; its n replies (all by default) and then's, per port."""
    outs = []
    for port in ports:
        c = Raw(port)
        c.cmd("DEL", *keys)
        c.cmd("HELLO", proto)
        c.send(b"".join(harness.enc(*a) for a in seq))
        out = [c.reply() for _ in range(len(seq) if n is None else n)]
        if then is not None:
            out.append(c.cmd(*then))
        c.close()
        outs.append(out)
    return outs


def t_reset(servers, direct):
    """RESET from every state a connection can be in answers as redis-server
    does, and leaves nothing behind on the servers."""
    px = Shardis("reset", servers)
    for i in range(len(servers)):
        k = px.keys_on("rs", i)[0].decode()
        h = px.keys_on("rsh", (i + 1) % len(servers))[0].decode()
        seqs = [
            [["MULTI"], ["SET", k, "1"], ["RESET"], ["EXEC"], ["GET", k]],
            [["MULTI"], ["PING"], ["RESET"], ["EXEC"]],
            [["MULTI"], ["RESET"], ["SET", k, "2"], ["GET", k]],
            [["WATCH", k], ["RESET"], ["EXEC"], ["MULTI"], ["INCR", k], ["EXEC"]],
            [["WATCH", k], ["MULTI"], ["SET", k, "3"], ["RESET"], ["GET", k]],
            [["SUBSCRIBE", "rs-ch"], ["RESET"], ["SET", k, "4"], ["PUBSUB", "NUMSUB", "rs-ch"]],
            [["PSUBSCRIBE", "rs-*"], ["SSUBSCRIBE", "rs-sc"], ["RESET"], ["PING"],
             ["PUBSUB", "NUMPAT"]],
            [["CLIENT", "REPLY", "OFF"], ["SET", k, "5"], ["RESET"], ["GET", k]],
            [["CLIENT", "SETNAME", "n1"], ["RESET"], ["CLIENT", "GETNAME"]],
            [["RESET", "x"], ["RESET"]],
        ]
        for proto in ("2", "3"):
            resp3 = [["HSET", h, "f", "v"], ["HGETALL", h], ["ZADD", h + "z", "1.5", "m"],
                     ["ZSCORE", h + "z", "m"]]
            t = "{%s}" % k            # keys on k's server
            for seq in seqs + [
                    # RESP3 until RESET, RESP2 after: a map before, an array after.
                    [["MULTI"], ["SET", k, "1"], ["RESET"]] + resp3,
                    [["WATCH", k], ["RESET"]] + resp3,
                    [["BLPOP", k + "l", "0.01"], ["RESET"]] + resp3,
                    # ... and on the transaction's connection: not the RESP3 one
                    # still busy with the last EXEC or UNWATCH.
                    [["MULTI"], ["SET", k, "1"], ["EXEC"], ["RESET"], ["MULTI"], ["GET", t + "n"],
                     ["HGETALL", t + "h"], ["EXEC"]],
                    [["WATCH", k], ["RESET"], ["WATCH", k], ["MULTI"], ["GET", t + "n"],
                     ["EXEC"]],
                    # After RESET the pin is no obstacle to SUBSCRIBE.
                    [["MULTI"], ["SET", k, "1"], ["RESET"], ["EXEC"], ["SUBSCRIBE", "rs-c"],
                     ["PSUBSCRIBE", "rs-*"], ["RESET"], ["PING"]]]:
                # CLIENT REPLY OFF and SET get no reply
                n = len(seq) - (2 if seq[0][:2] == ["CLIENT", "REPLY"] else 0)
                got, want = pipelined((px.port, direct.port), proto, [k, h, h + "z"], seq, n,
                                      ["CLIENT", "GETNAME"])
                expect_eq(got, want, "RESP%s, %s with the key on server %d"
                          % (proto, " ".join(" ".join(map(str, a)) for a in seq), i))
    # After RESET a RESP3 client's pin does not stop HELLO 3 (it was refused
    # as a protocol change "inside a transaction").
    for i in range(len(servers)):
        k = px.keys_on("rs", i)[0].decode()
        c = Raw(px.port)
        c.cmd("HELLO", "3")
        c.send(b"".join(harness.enc(*a) for a in [["MULTI"], ["SET", k, "1"], ["EXEC"],
                                                  ["RESET"], ["HELLO", "3"],
                                                  ["HGETALL", "{%s}h" % k]]))
        out = [c.reply() for _ in range(6)]
        expect(out[4].startswith(b"%7\r\n"), "HELLO 3 after RESET: %r" % out[4])
        expect_eq(out[5], b"%0\r\n", "HGETALL in RESP3 again")
        c.close()
    # The pin's transaction and WATCH were discarded before it was given
    # back: no server connection is left in MULTI.
    c = Raw(px.port)
    for i in range(len(servers)):
        k = px.keys_on("rs", i)[0]
        c.send(harness.enc("WATCH", k) + harness.enc("MULTI") + harness.enc("SET", k, "x")
               + harness.enc("RESET"))
        expect_eq([c.reply() for _ in range(4)], [b"+OK\r\n", b"+OK\r\n", b"+QUEUED\r\n",
                                                  b"+RESET\r\n"], "RESET in MULTI on server %d" % i)
    for i, s in enumerate(servers):
        left = [line for line in s.client.client_list() if line.get("multi") != "-1"]
        expect_eq(left, [], "server %d's connections in MULTI after RESET" % i)
        expect(s.client.get(px.keys_on("rs", i)[0]) != b"x", "the discarded SET ran")
    c.close()
    harness.t_exit_clean(px)
    # With a password: RESET signs the client out, as redis-server with requirepass.
    locked_servers = [RedisServer("reset-pw%d" % i, password="pw") for i in (1, 2, 3)]
    px = Shardis("reset-auth", locked_servers, redis_auth="pw")
    locked = RedisServer("reset-pw", password="pw")
    for port in (px.port, locked.port):
        c = Raw(port)
        seq = [["GET", "a"], ["AUTH", "pw"], ["GET", "a"], ["RESET"], ["GET", "a"],
               ["HELLO", "3", "AUTH", "default", "pw"], ["RESET"], ["PING"], ["AUTH", "pw"],
               ["PING"]]
        c.send(b"".join(harness.enc(*a) for a in seq))
        out = [c.reply() for _ in seq]
        if port == px.port:
            got = out
        else:
            want = out
        c.close()
    # HELLO's map holds the connection's id: compare all but it.
    expect_eq(got[:5] + got[6:], want[:5] + want[6:], "RESET with a password")
    harness.t_exit_clean(px)
    for s in locked_servers + [locked]:
        s.kill()


def t_pipelined_pins(servers, direct):
    """A transaction, WATCH or RESET ended and, in the same pipeline, the
    next one on another server: redis-server's replies (the next one got
    -CROSSSLOT while the last one's connection was still busy)."""
    px = Shardis("pins", servers)
    n = len(servers)
    for i in range(n):
        a = px.keys_on("pa", i)[0].decode()
        b = px.keys_on("pb", (i + 1) % n)[0].decode()
        seqs = [
            [["MULTI"], ["INCR", a], ["EXEC"], ["MULTI"], ["INCR", b], ["EXEC"],
             ["GET", a], ["GET", b]],
            [["WATCH", a], ["MULTI"], ["SET", a, "1"], ["DISCARD"], ["WATCH", b], ["MULTI"],
             ["SET", b, "2"], ["EXEC"], ["GET", a], ["GET", b]],
            [["WATCH", a], ["UNWATCH"], ["WATCH", b], ["UNWATCH"], ["WATCH", a], ["RESET"],
             ["WATCH", b], ["MULTI"], ["INCR", b], ["EXEC"]],
            [["MULTI"], ["PING"], ["INCR", a], ["EXEC"], ["MULTI"], ["PING"], ["EXEC"],
             ["MULTI"], ["INCR", b], ["EXEC"], ["INCR", a]],
            [["WATCH", a], ["MULTI"], ["INCR", a], ["EXEC"], ["LPUSH", b + "l", "x"],
             ["LPOP", b + "l"], ["MULTI"], ["INCR", a], ["EXEC"]],
        ]
        for proto in ("2", "3"):
            for seq in seqs:
                got, want = pipelined((px.port, direct.port), proto, [a, b, b + "l"], seq)
                expect_eq(got, want, "RESP%s, %s with the keys on servers %d, %d"
                          % (proto, " ".join(" ".join(x) for x in seq), i, (i + 1) % n))
    for i, s in enumerate(servers):
        harness.until("server %d's connections out of MULTI" % i,
                      lambda: all(x.get("multi") == "-1" for x in s.client.client_list()))
    harness.t_exit_clean(px)


# ---- INFO commandstats, errorstats, cpu ---------------------------------------------

def info_section(c, section):
    """INFO section's fields, as {name: value} (the header and blank lines skipped)."""
    text = parse(c.cmd("INFO", section))
    out = {}
    for line in text.decode().split("\r\n"):
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def calls(stats):
    """cmdstat_* values without the times, which are the proxy's own."""
    return {k: ",".join(f for f in v.split(",") if not f.startswith("usec"))
            for k, v in stats.items()}


def t_info_stats(servers, direct):
    """INFO commandstats, errorstats and total_error_replies count what
    redis-server counts for the same requests; CPU is the proxy's own."""
    px = Shardis("stats", servers, admin_commands="true")
    k = [px.keys_on("st", i)[0] for i in range(len(servers))]
    seq = [["SUBSCRIBE", "st-ch"], ["GET", k[0]], ["RESET"], ["SET", k[0], "1"], ["GET", k[0]],
           ["GET"], ["LPUSH", k[1], "x"], ["GET", k[1]],
           ["EVAL", "return redis.error_reply('MY_ERR_CODE custom msg')", "0"],
           ["EVAL", "return redis.error_reply('')", "0"], ["NOSUCH", "x"],
           ["MGET", k[0], k[1], k[2]], ["EXEC"], ["SELECT", "20"], ["INCR", k[1]],
           ["XREADGROUP", "GROUP", "g", "c", "STREAMS", k[2], ">"], ["CONFIG", "GET", "x", "y"]]
    got = {}
    for name, port in (("shardis", px.port), ("direct", direct.port)):
        c = Raw(port)
        c.cmd("DEL", *k)
        c.cmd("CONFIG", "RESETSTAT")
        c.send(b"".join(harness.enc(*a) for a in seq))
        for _ in seq:
            c.reply()
        got[name] = (calls(info_section(c, "commandstats")), info_section(c, "errorstats"),
                     info_section(c, "stats")["total_error_replies"])
        c.close()
    for part, what in enumerate(("commandstats", "errorstats", "total_error_replies")):
        ours, theirs = got["shardis"][part], got["direct"][part]
        if isinstance(ours, dict):          # only the lines that differ
            ours, theirs = ({k: v for k, v in x.items() if ours.get(k) != theirs.get(k)}
                            for x in (ours, theirs))
        expect_eq(ours, theirs, what)
    c = Raw(px.port)
    everything = parse(c.cmd("INFO", "everything"))
    for section in ("cpu", "commandstats", "errorstats"):
        expect(b"# " + section.capitalize().encode() in everything
               or b"# CPU" in everything, "INFO everything has %s" % section)
    default = parse(c.cmd("INFO"))
    expect(b"rejected_calls" not in default and b"used_cpu_user:" in default
           and b"# Errorstats" in default, "INFO's default sections are redis-server's")
    expect_eq(set(info_section(c, "cpu")), set(info_section(Raw(direct.port), "cpu")),
              "INFO cpu's fields")
    before = float(info_section(c, "cpu")["used_cpu_user"]) + \
        float(info_section(c, "cpu")["used_cpu_sys"])
    c.send(harness.enc("PING") * 20000)
    for _ in range(20000):
        c.reply()
    after = float(info_section(c, "cpu")["used_cpu_user"]) + \
        float(info_section(c, "cpu")["used_cpu_sys"])
    expect(after > before, "the proxy's CPU time grows with its work: %s, then %s"
           % (before, after))
    # CONFIG RESETSTAT clears shardis's counts too.
    c.cmd("CONFIG", "RESETSTAT")
    expect_eq(calls(info_section(c, "commandstats")),
              {"cmdstat_config|resetstat": "calls=1,rejected_calls=0,failed_calls=0"},
              "commandstats after RESETSTAT (itself counted after, as redis-server does)")
    expect_eq(info_section(c, "errorstats"), {}, "errorstats after RESETSTAT")
    # A script choosing its own codes cannot grow the table without end.
    for i in range(200):
        c.cmd("EVAL", "return redis.error_reply(ARGV[1] .. ' x')", "0", "E%d" % i)
    expect_eq(len(info_section(c, "errorstats")), 128, "error codes kept")
    expect_eq(info_section(c, "stats")["total_error_replies"], "200", "errors counted")
    c.close()
    harness.t_exit_clean(px)


def body():
    direct = RedisServer("direct", extra=DEBUG)
    servers = [RedisServer("b%d" % i, extra=DEBUG) for i in (1, 2, 3)]
    check("keyless scripts compute, run read-only and write nowhere; in MULTI on its server",
          t_keyless_scripts, servers, direct)
    check("a script's reply nested ~8,000 deep (a table holding itself) is relayed whole, "
          "its server still up", t_deep_reply, servers, direct)
    check("SAVE, BGSAVE on every server, LASTSAVE the oldest (admin commands); PFDEBUG by key",
          t_persistence, servers, direct)
    check("COMMAND, COMMAND DOCS, INFO, GETKEYS(ANDFLAGS), HELP, COUNT: redis-server's bytes, "
          "both protocols", t_command, servers, direct)
    check("Celery's result transaction (SETEX and PUBLISH in MULTI) as on one server, the "
          "subscriber told", t_celery_result, servers, direct)
    check("PING and ECHO in MULTI before any key: held, then on the transaction's server "
          "(or the first); replies as redis-server", t_multi_keyless, servers, direct)
    check("FLUSHALL and FLUSHDB in MULTI before any key: on every server, EXEC's reply as "
          "redis-server's; after or before a key, or with PUBLISH, refused and nothing flushed",
          t_multi_flush, servers, direct)
    check("COMMAND INFO, a keyless script and a keyless MULTI with the first server down: "
          "the next server up answers", t_first_down, [RedisServer("fd%d" % i) for i in (1, 2, 3)])
    check("CLIENT REPLY OFF, SKIP and ON as redis-server, (un)subscribe confirmations and "
          "messages still written", t_client_reply, servers, direct)
    check("a keyless script as the keyless_user: functions that may write run, keys are "
          "refused, pipelines keep their order on one connection", t_keyless_user, servers,
          direct)
    check("a keyless_user that may use keys or channels, none, or a wrong password: the "
          "script never runs; without admin_commands it is read-only",
          t_keyless_user_wrong, [RedisServer("kw%d" % i) for i in (1, 2, 3)])
    check("SELECT as a redis-server with 16 databases, or one (databases: 1)", t_select,
          servers, direct)
    check("databases: a client in db 3 beside one in db 0, keys on every server; DBSIZE, "
          "KEYS, SCAN, MOVE, COPY DB, SWAPDB, FLUSHDB, INFO keyspace, CLIENT LIST",
          t_databases, servers)
    check("SELECT keeps a pipeline's order across databases' connections", t_database_order,
          servers)
    check("INFO keyspace right on the first call, and with a server stopped",
          t_info_keyspace_now, servers)
    check("transactions, WATCH and RESET pipelined across servers: each on its own "
          "server's connection, as redis-server answers", t_pipelined_pins, servers, direct)
    check("INFO commandstats, errorstats, total_error_replies as redis-server counts the "
          "same requests; INFO cpu the proxy's own; CONFIG RESETSTAT", t_info_stats, servers,
          direct)
    check("RESET in MULTI, WATCH, subscribed, RESP3, CLIENT REPLY OFF, named, signed in: "
          "as redis-server; the pin given back without its transaction", t_reset, servers,
          direct)
    check("PUBSUB CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB, HELP merged over the "
          "servers as one redis-server answers; shardis's channels hidden",
          t_pubsub_introspection, servers, direct)
    check("LOLWUT the first server's, MODULE LIST empty, MODULE LOAD and MEMORY STATS refused",
          t_informational, servers, direct)
    check("CLIENT UNBLOCK [TIMEOUT|ERROR] of a shardis client blocked in BLPOP: redis-server's "
          "replies, and its next BLPOP pops", t_client_unblock, servers, direct)
    for s in servers:
        s.client.flushall()
        s.client.function_flush()
    check("DEBUG by subcommand: DIGEST merged as one server's, keys to their server, "
          "every server, POPULATE refused, PROTOCOL in both protocols", t_debug, servers, direct)


if __name__ == "__main__":
    sys.exit(harness.main(body))
