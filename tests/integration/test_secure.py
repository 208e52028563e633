#!/usr/bin/python3
"""test_secure.py -- secure by default: what a client can never reach
through shardis, with the default configuration (no backend_user, no
admin_commands) and with client users, each an attack that worked before:

- scripts run as a restricted server user shardis makes itself
  (ACL SETUSER on every server): KEYS, FLUSHALL, SELECT outside the served
  databases, MIGRATE to any host, shardis's own keys and channels are the
  server's refusal inside EVAL and FCALL;
- a reload that takes a channel or pattern away from a user closes that
  user's clients subscribed to it (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE), as
  redis-server does after ACL SETUSER, so they stop getting its messages;
  one that takes a command away refuses the user's very next one;
- a migration record written on the servers by anyone (garbage, a list
  under the key, one moving keys to a host the file does not name, one
  with another hash) is not followed and does not stop the start: the
  pool serves by its file's ring, the log and INFO say which server and
  why, and a reshard afterwards replaces and deletes it; a forged record
  with a higher epoch does not hide one that checks out;

Run: /usr/bin/python3 tests/integration/test_secure.py --shardis build/shardis
"""
import random
import re
import sys

import redis

import harness
from harness import Fail, Raw, RedisServer, Shardis, expect, expect_eq, until

HOST = "127.0.0.1"


def t_reload_narrows(rs):
    """The same users on shardis (3 servers) and on one redis-server, the
    same subscribers, then the same change: a reload there, ACL SETUSER
    here. The same clients must be closed, and the rest get the same
    messages published afterwards."""
    before = ["alice on >apw ~* &news.* &other.* &other.x* +@all",
              "bob on >bpw ~* &news.* +@all",
              "carol on >cpw ~* &news.* +@all"]
    after = ["alice on >apw ~* &other.* +@all -get",       # lost news.*, other.x*, GET
             "bob on >bpw ~* &news.* +@all",               # unchanged
             "carol on >cpw ~* &news.* &more.* +@all"]     # only gained
    users = "[" + ", ".join('"%s"' % u for u in before) + "]"
    px = Shardis("narrows", rs, users=users, admin_commands="true")
    d = RedisServer("narrowsdirect%d" % harness.free_port())
    for u in before:
        name, *rules = u.split()
        d.client.execute_command("ACL", "SETUSER", name, *rules)
    # Channels on different servers: each message comes from another one.
    news, news2 = (k.decode() for k in px.keys_on("news.", 0, 2))
    other = px.keys_on("other.x", 1)[0].decode()
    news_s, other_s = px.keys_on("news.s", 2)[0].decode(), px.keys_on("other.s", 0)[0].decode()
    clients = [         # user, subscription, closed by the change
        ("alice", ("SUBSCRIBE", news), True),
        ("alice", ("PSUBSCRIBE", "news.*"), True),
        ("alice", ("PSUBSCRIBE", "other.x*"), True),       # a pattern literally
        ("alice", ("SUBSCRIBE", other, news2), True),      # one lost is enough
        ("alice", ("SSUBSCRIBE", news_s), True),
        ("alice", ("SUBSCRIBE", other), False),            # other.* still allows it
        ("alice", ("PSUBSCRIBE", "other.*"), False),
        ("alice", ("SSUBSCRIBE", other_s), False),
        ("bob", ("SUBSCRIBE", news), False),
        ("carol", ("PSUBSCRIBE", "news.*"), False),
        ("default", ("SUBSCRIBE", news), False),
    ]
    pw = {"alice": "apw", "bob": "bpw", "carol": "cpw"}
    conns = []          # [(shardis's, direct's)] for each of clients
    for user, sub, _ in clients:
        pair = []
        for port in (px.port, d.port):
            c = Raw(port)
            if user != "default":
                expect_eq(c.cmd("AUTH", user, pw[user]), b"+OK\r\n", "AUTH " + user)
            c.send(harness.enc(*sub))
            for _ in sub[1:]:
                c.reply()                   # the confirmations
            pair.append(c)
        conns.append(pair)
    cmds = []           # alice's plain connection: GET allowed, then not
    for port in (px.port, d.port):
        c = Raw(port)
        c.cmd("AUTH", "alice", "apw")
        cmds.append(c)
    expect_eq(cmds[0].cmd("GET", "k"), cmds[1].cmd("GET", "k"), "GET before the change")

    text = open(px.conf).read()
    with open(px.conf, "w") as f:
        f.write(text.replace(users, "[" + ", ".join('"%s"' % u for u in after) + "]"))
    px.client.execute_command("SHARD.RELOAD")
    d.client.execute_command("ACL", "SETUSER", "alice", "resetchannels", "&other.*", "-get")
    d.client.execute_command("ACL", "SETUSER", "carol", "&more.*")

    for i in (0, 1):
        expect_eq(cmds[i].cmd("GET", "k"),
                  b"-NOPERM this user has no permissions to run the 'get' command\r\n",
                  "alice's next GET after the change (%s)" % ("shardis", "redis-server")[i])
        expect_eq(cmds[i].cmd("SET", "k", "v"), b"+OK\r\n", "alice's SET still runs")
    for (user, sub, closed), (s, r) in zip(clients, conns):
        what = "%s's %s" % (user, " ".join(sub))
        for c, where in ((r, "redis-server"), (s, "shardis")):
            if closed:
                out, eof = c.rest_until_eof(2.0)
                expect(eof, "%s: open on %s after the change (%r)" % (what, where, out[:80]))
    for c in (px.client, d.client):
        c.publish(news, "n")
        c.publish(other, "o")
        c.execute_command("SPUBLISH", news_s, "ns")
        c.execute_command("SPUBLISH", other_s, "os")
    for (user, sub, closed), (s, r) in zip(clients, conns):
        if closed:
            continue
        what = "%s's %s" % (user, " ".join(sub))
        want, got = r.reply(), s.reply()        # one message each
        expect_eq(got, want, "%s: the message after the change" % what)
        expect_eq(s.cmd("PING"), r.cmd("PING"), "%s: PING after the message" % what)
    log = open(px.log).read()
    for why in ("channel \"%s\"" % news, "pattern \"news.*\"", "pattern \"other.x*\"",
                "shard channel \"%s\"" % news_s):
        expect("its user 'alice' may no longer use its %s" % why in log,
               "no log line for alice's %s" % why)
    expect_eq(log.count("may no longer use"), 5, "clients closed for a channel (log)")
    for c in cmds + [c for pair in conns for c in pair]:
        c.close()
    harness.t_exit_clean(px)
    return "5 of 11 subscribers closed, as by redis-server"


def t_reload_default(rs):
    """Without users, the default user may use every channel: a reload
    closes no subscriber."""
    px = Shardis("narrowsdefault", rs, admin_commands="true")
    sub, psub = Raw(px.port), Raw(px.port)
    sub.cmd("SUBSCRIBE", "news.a")
    psub.cmd("PSUBSCRIBE", "*")
    px.client.execute_command("SHARD.RELOAD")
    px.client.publish("news.a", "m")
    expect_eq(sub.reply(), harness.array([harness.bulk(b"message"), harness.bulk(b"news.a"),
                                          harness.bulk(b"m")]), "SUBSCRIBE's message")
    expect_eq(psub.reply(), harness.array([harness.bulk(b"pmessage"), harness.bulk(b"*"),
                                           harness.bulk(b"news.a"), harness.bulk(b"m")]),
              "PSUBSCRIBE's message")
    sub.close()
    psub.close()
    harness.t_exit_clean(px)


KEY = "__shardis:ctl:alpha"


def record(conf, prior, epoch=5):
    """A migration record as mig_record.c writes one (no cursors)."""
    return b"shardis-migration 1\nepoch %d\nconf %d\n%s\nprior %d\n%s\n" % (
        epoch, len(conf), conf, len(prior), prior)


def info_ignored(px):
    """INFO shardis's migration_record_ignored_* fields: server label -> reason.
    Read raw: the reason may hold commas, which redis-py's INFO parser splits."""
    text = harness.parse(harness.one_reply(px.port, harness.enc("INFO", "shardis"))).decode()
    return dict(m.groups() for m in re.finditer(
        r"^migration_record_ignored_0_\d+:name=([^,]+),reason=(.*?)\r$", text, re.M))


def warnings(px):
    return [l for l in open(px.log, errors="replace") if " W " in l and KEY in l]


def status(px):
    text = px.client.execute_command("SHARD.MIGRATION", "STATUS").decode()
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


def t_forged_records(rs):
    """Four servers, each with a record that does not check out; a fifth that
    the file does not name. shardis starts, routes by its file, says why."""
    px = Shardis("forged", rs[:4], admin_commands="true")
    text = open(px.conf, "rb").read()
    foreign = b"    - %s:%d:1 redis9\n" % (HOST.encode(), rs[4].port)
    garbage = b"\x00\xff shardis-migration 2\r\nepoch x\nconf 99999\n"
    rs[0].client.set(KEY, garbage)
    rs[1].client.rpush(KEY, "shardis-migration 1")
    rs[2].client.set(KEY, record(text + foreign, text))
    rs[3].client.set(KEY, record(text.replace(b"  servers:", b"  hash: md5\n  servers:"),
                                 text, epoch=7))
    px.restart(kill=False)          # (it used to exit: "refused, not followed")
    # (INFO first: the port takes connections before the record is read,
    # and the loop answers once the start is done.)
    want = {"redis1": "not a migration record", "redis2": "GET answered WRONGTYPE",
            "redis3": "moves keys to %s:%d that neither" % (HOST, rs[4].port),
            "redis4": "sets hash otherwise than the config file does"}
    got = info_ignored(px)
    expect(set(got) == set(want) and all(want[n] in got[n] for n in want),
           "INFO's migration_record_ignored: %r" % got)
    logged = warnings(px)
    for name, why in want.items():
        expect(any("on %s (%s)" % (name, KEY) in l and why in l and "delete the key" in l
                   for l in logged), "no warning for %s (%s): %r" % (name, why, logged))
    expect("a migration was under way" not in open(px.log).read(), "a forged record followed")
    st = status(px)
    expect(st["state"] == "stable" and st["epoch"] == "0", "STATUS: %r" % st)
    parsed = px.client.info("shardis")        # (a client's parser splits at ',' and '=')
    expect_eq(parsed["migration_record_ignored_0_2"]["name"], "redis3", "INFO as parsed")
    pool = parsed["pool_0"]
    expect(pool["servers"] == 4 and pool["hash"] != "md5", "the ring: %r" % pool)
    # Keys land where the file's ring says, on the four servers it names.
    rnd = random.Random(33)         # (fnv1a_64 keeps keys that differ at the end together)
    keys = ["fk:%08x" % rnd.getrandbits(32) for i in range(64)]
    pipe = px.client.pipeline(transaction=False)
    for k in keys:
        pipe.set(k, "v" + k)
    pipe.execute()
    where = px.whereis(keys)
    expect_eq(set(where.values()), {0, 1, 2, 3}, "the servers keys live on")
    for k in keys:
        expect_eq(rs[where[k]].client.get(k), b"v" + k.encode(), "%s on its owner" % k)
        expect_eq(sum(rs[i].client.exists(k) for i in range(5)), 1, "copies of " + k)
    expect_eq(rs[4].client.dbsize(), 0, "keys on the host the file does not name")
    # Left as found: another proxy may be writing the key.
    expect_eq(rs[0].client.get(KEY), garbage, "the garbage record")
    expect_eq(rs[1].client.type(KEY), b"list", "the list under the key")
    # A reshard (a server removed) writes its own record over each, then
    # deletes it: nothing is left to warn about.
    text = open(px.conf).read()
    with open(px.conf, "w") as f:
        f.write(text[:text.index("    - %s:%d:1 redis4" % (HOST, rs[3].port))])
    px.client.execute_command("SHARD.RELOAD")
    until("the reshard switched", lambda: int(status(px)["epoch"]) >= 1)
    until("the reshard finished", lambda: status(px)["state"] == "stable", 20)
    until("the records deleted", lambda: not any(s.client.exists(KEY) for s in rs[:4]))
    expect_eq(info_ignored(px), {}, "INFO's migration_record_ignored after the reshard")
    expect_eq(rs[3].client.dbsize(), 0, "keys left on the removed server")
    expect_eq(px.client.mget(keys), [b"v" + k.encode() for k in keys], "values after")
    where = px.whereis(keys)
    expect(all(rs[where[k]].client.exists(k) for k in keys), "keys on their new owners")
    n = len(warnings(px))
    px.restart(kill=False)          # (INFO first: it answers once the start is done)
    expect_eq(info_ignored(px), {}, "INFO's migration_record_ignored after a restart")
    expect_eq(len(warnings(px)), n, "warnings at a start after the reshard")
    harness.t_exit_clean(px)


def t_forged_over_real(rs):
    """A forged record with a higher epoch on one server does not hide a
    record that checks out on another: that one is taken up."""
    px = Shardis("overreal", rs[:2])
    text = open(px.conf, "rb").read()
    rs[0].client.set(KEY, record(text, text, epoch=5))
    rs[1].client.set(KEY, record(text.replace(b"  servers:", b"  admin_commands: true\n"
                                              b"  servers:"), text, epoch=9))
    px.restart(kill=False)
    until("the record taken up",
          lambda: "under way (epoch 5, 1 earlier ring)" in open(px.log).read())
    expect(any("on redis2 (%s)" % KEY in l and "sets admin_commands otherwise" in l
               for l in warnings(px)), "no warning for redis2: %r" % warnings(px))
    expect_eq(px.client.set("x", "1"), True, "SET")
    until("the taken-up migration finished", lambda: status(px)["state"] == "stable")
    harness.t_exit_clean(px)
    for s in rs[:2]:
        s.client.delete(KEY)


def body():
    run = harness.run_with_servers
    run("a reload that takes a channel, pattern or command away from a user: its "
        "subscribers to them closed, its next command refused, as by redis-server",
        t_reload_narrows, 3)
    run("a reload without users closes no subscriber", t_reload_default, 3)
    run("forged migration records (garbage, a list, an unnamed host, another hash): "
        "shardis starts, routes by its file, warns, shows them in INFO; a reshard replaces "
        "them", t_forged_records, 5)
    run("a forged record with a higher epoch does not hide one that checks out",
        t_forged_over_real, 2)


if __name__ == "__main__":
    sys.exit(harness.main(body))
