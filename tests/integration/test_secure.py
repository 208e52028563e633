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

Run: /usr/bin/python3 tests/integration/test_secure.py --shardis build/shardis
"""
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


def body():
    run = harness.run_with_servers
    run("a reload that takes a channel, pattern or command away from a user: its "
        "subscribers to them closed, its next command refused, as by redis-server",
        t_reload_narrows, 3)
    run("a reload without users closes no subscriber", t_reload_default, 3)


if __name__ == "__main__":
    sys.exit(harness.main(body))
