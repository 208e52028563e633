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

- what shows or steers other clients (SLOWLOG, LATENCY, CLIENT LIST/KILL/
  PAUSE/UNPAUSE/NO-EVICT/UNBLOCK, MONITOR, HOTKEYS) is refused without
  admin_commands, or with client users for a user not allowed it
  (redis-server's NOPERM); what a client asks of itself stays open;
- no password a client sends (AUTH, HELLO AUTH, MIGRATE AUTH/AUTH2, CONFIG
  SET masterauth/masteruser, ACL SETUSER) shows in MONITOR, SLOWLOG, the
  log or /metrics, pipelined, in MULTI, refused or run; MONITOR and
  SLOWLOG show "(redacted)" where redis-server does;

Run: /usr/bin/python3 tests/integration/test_secure.py --shardis build/shardis
"""
import os
import random
import re
import signal
import sys
import time
import urllib.request

import redis

import harness
from harness import Fail, Raw, RedisServer, Shardis, check, enc, expect, expect_eq, parse, until

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
    # (Planted once the first run is over: a proxy running may write its
    # own record there meanwhile, and the forged one would not be read.)
    px.proc.terminate()
    px.proc.wait(10)
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


# ---- views of other clients ----------------------------------------------------------

def admin_err(words):
    return (b"-ERR '%s' is an admin command: shardis runs it only with admin_commands: true "
            b"in pool 'alpha', or for a client user allowed it\r\n" % words.encode())


def views(victim_id):
    """Every command that shows or steers other clients, with the words
    shardis's admin error names it by."""
    return [
        (("SLOWLOG", "GET"), "slowlog get"), (("SLOWLOG", "LEN"), "slowlog len"),
        (("SLOWLOG", "RESET"), "slowlog reset"),
        (("LATENCY", "LATEST"), "latency latest"), (("LATENCY", "RESET"), "latency reset"),
        (("LATENCY", "HISTORY", "command"), "latency history"),
        (("LATENCY", "DOCTOR"), "latency doctor"), (("LATENCY", "HISTOGRAM"), "latency histogram"),
        (("CLIENT", "LIST"), "client list"), (("CLIENT", "KILL", "ID", victim_id), "client kill"),
        (("CLIENT", "KILL", "TYPE", "normal"), "client kill"),
        (("CLIENT", "PAUSE", 2000, "ALL"), "client pause"), (("CLIENT", "UNPAUSE"), "client unpause"),
        (("CLIENT", "NO-EVICT", "on"), "client no-evict"),
        (("CLIENT", "UNBLOCK", victim_id), "client unblock"),
        (("HOTKEYS", "GET"), "hotkeys"), (("MONITOR",), "monitor"),
    ]


def victim_session(px):
    """Another client's session: a SET of a token (slow by
    slowlog_log_slower_than 0), keys on every server, a name."""
    v = Raw(px.port)
    expect_eq(v.cmd("CLIENT", "SETNAME", "victim"), b"+OK\r\n", "the victim's name")
    keys = [px.keys_on("session:", i)[0] for i in range(len(px.servers))]
    for k in keys:
        expect_eq(v.cmd("SET", k, "tok-SECRET-42"), b"+OK\r\n", "the victim's SET")
    return v, parse(v.cmd("CLIENT", "ID")), keys


def t_views_default(servers):
    """Default config: every view of other clients is the admin error; the
    victim stays connected, unpaused, its session unlisted; a client's own
    CLIENT INFO/ID/SETNAME/GETNAME/SETINFO/REPLY and SLOWLOG/LATENCY HELP
    still answer."""
    px = Shardis("views", servers, slowlog_log_slower_than=0)
    v, vid, keys = victim_session(px)
    a = Raw(px.port)
    for cmd, words in views(vid):
        got = a.cmd(*cmd)
        expect_eq(got, admin_err(words), " ".join(map(str, cmd)))
        expect(b"SECRET" not in got, "%s shows the victim's token" % (cmd,))
    t = time.monotonic()
    expect_eq((v.cmd("SET", keys[0], "again"), v.cmd("PING")), (b"+OK\r\n", b"+PONG\r\n"),
              "the victim, not killed")
    expect(time.monotonic() - t < 1.0, "the victim was paused")
    own = [("CLIENT", "SETNAME", "me"), ("CLIENT", "GETNAME"), ("CLIENT", "ID"),
           ("CLIENT", "SETINFO", "lib-name", "x"), ("CLIENT", "REPLY", "ON"),
           ("CLIENT", "INFO"), ("SLOWLOG", "HELP"), ("LATENCY", "HELP")]
    for cmd in own:
        got = a.cmd(*cmd)
        expect(not got.startswith(b"-"), "%s: %r" % (cmd, got))
    info = a.cmd("CLIENT", "INFO")
    expect(b"name=me " in info and b"victim" not in info, "CLIENT INFO is its own: %r" % info)
    # With admin_commands: true the same views answer.
    adm = Shardis("views_admin", servers, slowlog_log_slower_than=0, admin_commands="true")
    v2, vid2, keys2 = victim_session(adm)
    b = Raw(adm.port)
    log = parse(b.cmd("SLOWLOG", "GET", -1))
    expect(any(e[3][:2] == [b"SET", keys2[0]] and e[5] == b"victim" for e in log),
           "SLOWLOG GET shows the victim's SET: %r" % log[:3])
    expect(b"name=victim " in b.cmd("CLIENT", "LIST"), "CLIENT LIST lists the victim")
    for cmd in (("LATENCY", "LATEST"), ("LATENCY", "RESET"), ("HOTKEYS", "GET"),
                ("CLIENT", "NO-EVICT", "on"), ("CLIENT", "UNBLOCK", vid2),
                ("CLIENT", "PAUSE", 10), ("CLIENT", "UNPAUSE"), ("SLOWLOG", "RESET")):
        got = b.cmd(*cmd)
        expect(not got.startswith(b"-"), "%s with admin_commands: %r" % (cmd, got))
    expect_eq(b.cmd("CLIENT", "KILL", "ID", vid2), b":1\r\n", "CLIENT KILL ID with admin_commands")
    expect_eq(b.cmd("MONITOR"), b"+OK\r\n", "MONITOR with admin_commands")
    for x in (px, adm):
        harness.t_exit_clean(x)
    return "%d views refused, %d of a client's own answered" % (len(views(vid)), len(own))


USERS = ["app on >apppw ~* &* +@all -@dangerous", "boss on >bosspw ~* &* +@all",
         "default off"]


def t_views_users(servers):
    """With client users and no admin_commands: a user +@all -@dangerous
    gets redis-server's NOPERM for each view; +@all runs them."""
    px = Shardis("viewusers", servers, users="[%s]" % ", ".join('"%s"' % u for u in USERS))
    direct = RedisServer("viewsdirect")
    for u in USERS:
        name, *rules = u.split()
        direct.client.execute_command("ACL", "SETUSER", name, *rules)
    v = Raw(px.port)
    v.cmd("AUTH", "app", "apppw")
    vid = parse(v.cmd("CLIENT", "ID"))
    app, ref = Raw(px.port), Raw(direct.port)
    expect_eq(app.cmd("AUTH", "app", "apppw"), b"+OK\r\n", "AUTH app")
    ref.cmd("AUTH", "app", "apppw")
    for cmd, words in views(vid):
        got = app.cmd(*cmd)
        if cmd[0] == "HOTKEYS":         # (not in redis-server 7.0)
            want = b"-NOPERM this user has no permissions to run the 'hotkeys' command\r\n"
        else:
            want = ref.cmd(*cmd)
            expect(want.startswith(b"-NOPERM"), "redis-server: %s: %r" % (cmd, want))
        expect_eq(got, want, "%s for app (shardis vs redis-server)" % " ".join(map(str, cmd)))
    expect(not app.cmd("CLIENT", "INFO").startswith(b"-"), "CLIENT INFO for app")
    boss = Raw(px.port)
    expect_eq(boss.cmd("AUTH", "boss", "bosspw"), b"+OK\r\n", "AUTH boss")
    for cmd in (("SLOWLOG", "GET"), ("SLOWLOG", "RESET"), ("LATENCY", "LATEST"),
                ("LATENCY", "RESET"), ("HOTKEYS", "GET"), ("CLIENT", "PAUSE", 10),
                ("CLIENT", "UNPAUSE"), ("CLIENT", "NO-EVICT", "off")):
        got = boss.cmd(*cmd)
        expect(not got.startswith(b"-"), "%s for boss: %r" % (cmd, got))
    expect(b"id=%d " % vid in boss.cmd("CLIENT", "LIST"), "CLIENT LIST for boss")
    expect_eq(boss.cmd("CLIENT", "KILL", "ID", vid), b":1\r\n", "CLIENT KILL ID for boss")
    expect_eq(boss.cmd("MONITOR"), b"+OK\r\n", "MONITOR for boss")
    harness.t_exit_clean(px)
    return "%d NOPERMs as redis-server's" % len(views(vid))


# ---- secrets ----------------------------------------------------------------------------

SECRETS = [b"pw-%d-SECRET" % i for i in range(1, 10)]


def secret_script(closed_port):
    """Requests naming a secret, sent as one pipeline: no SECRETS[i] may
    show. The common ones go to a redis-server too, for reference; own is
    a MULTI, which redis-server shows at EXEC and shardis as it comes."""
    s = SECRETS
    mig = ["MIGRATE", harness.HOST, closed_port, "", 0, 1000]
    common = [
        mig + ["AUTH", s[0], "KEYS", "mk1"],
        mig + ["COPY", "AUTH2", "someone", s[1], "KEYS", "mk1"],
        ["AUTH", "someone", s[2]],
        ["AUTH", s[3]],
        ["HELLO", "3", "AUTH", "someone", s[4], "SETNAME", "nm"],
        ["CONFIG", "SET", "masterauth", s[5]],
        ["CONFIG", "SET", "maxmemory-policy", "noeviction", "masteruser", s[6]],
        ["ACL", "SETUSER", "someone", ">" + s[7].decode()],
    ]
    own = [["MULTI"], mig + ["AUTH", s[8], "KEYS", "mk1"], ["DISCARD"]]
    return common, own


def monitor_lines(mon, until_text):
    """MONITOR's lines, less their time and client, up to one naming until_text."""
    lines = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        text = bytes(mon.buf[mon.pos:])
        if until_text in text:
            break
        mon._fill()
    text = bytes(mon.buf[mon.pos:])
    for line in text.split(b"\r\n"):
        m = re.match(rb"\+\d+\.\d{6} \[\d+ [^\]]+\] (.*)", line)
        if m:
            lines.append(m.group(1))
    return text, lines


def t_secrets(servers):
    """The secrets of a pipeline of AUTH, HELLO AUTH, MIGRATE AUTH/AUTH2,
    CONFIG SET masterauth/masteruser and ACL SETUSER, one in MULTI: in no
    MONITOR line, SLOWLOG entry, log line or /metrics; MONITOR's lines and
    SLOWLOG's arguments as redis-server 7.0's for the same requests."""
    mport = harness.free_port()
    px = Shardis("secrets", servers, admin_commands="true", slowlog_log_slower_than=0,
                 stats_listen="%s:%d" % (harness.HOST, mport))
    direct = RedisServer("secretsdirect", extra=["--slowlog-log-slower-than", "0"])
    common, own = secret_script(harness.free_port())
    seen = {}
    for name, port, script in (("shardis", px.port, common + own), ("redis", direct.port, common)):
        mon = Raw(port)
        expect_eq(mon.cmd("MONITOR"), b"+OK\r\n", "MONITOR on %s" % name)
        adm = Raw(port)
        if name == "shardis":
            adm.cmd("HOTKEYS", "START", "METRICS", 1, "NET")
        adm.cmd("SLOWLOG", "RESET")
        c = Raw(port)
        c.send(b"".join(enc(*cmd) for cmd in script) + enc("ECHO", "end-of-script"))
        for _ in range(len(script) + 1):
            c.reply()
        text, lines = monitor_lines(mon, b"end-of-script")
        slow = parse(adm.cmd("SLOWLOG", "GET", -1))
        seen[name] = (text, lines, slow)
        for sec in SECRETS:
            expect(sec not in text, "%s's MONITOR shows %r: %r" % (name, sec, text))
            expect(sec not in repr(slow).encode(), "%s's SLOWLOG shows %r" % (name, sec))
    metrics = urllib.request.urlopen("http://%s:%d/metrics" % (harness.HOST, mport),
                                     timeout=5).read()
    with open(px.log, "rb") as f:
        log = f.read()
    for sec in SECRETS:
        expect(sec not in metrics, "/metrics shows %r" % sec)
        expect(sec not in log, "the log shows %r" % sec)
    # The same lines as redis-server's for the requests both show (MONITOR
    # leaves out the admin commands: CONFIG, ACL).
    px_lines, ref = seen["shardis"][1], seen["redis"][1]
    expect_eq(px_lines[:len(ref) - 1] + px_lines[-1:], ref,
              "MONITOR's lines (shardis vs redis-server)")
    expect_eq(px_lines[len(ref) - 1:-1], [b'"MULTI"', ref[0], b'"DISCARD"'],
              "MONITOR's lines of a MULTI")
    # SLOWLOG: each request shardis kept whole (its first 55 bytes) as redis-server's.
    want = {tuple(e[3]) for e in seen["redis"][2]}
    whole = [tuple(e[3]) for e in seen["shardis"][2]
             if not any(b"more bytes)" in a or b"more arguments)" in a for a in e[3])]
    mine = [w for w in whole if w[0].upper() in (b"AUTH", b"HELLO", b"CONFIG", b"ACL")]
    expect(len(mine) >= 4, "SLOWLOG kept whole: %r" % whole)
    for w in mine:
        expect(w in want, "SLOWLOG entry %r is not redis-server's: %r" % (w, want))
    harness.t_exit_clean(px)
    return "%d MONITOR lines, %d SLOWLOG entries as redis-server's" % (len(px_lines), len(mine))


# ---- scripts as the clients' user shardis makes ------------------------------------

def script_err(px, body, *keys_args, numkeys=None):
    """EVAL body through px: the error's text ('' if it ran)."""
    n = len(keys_args) if numkeys is None else numkeys
    try:
        px.client.execute_command("EVAL", body, n, *keys_args)
        return ""
    except redis.ResponseError as e:
        return str(e)


def spread(px, servers, n=300):
    """n keys through px, on every server: their count on each."""
    pipe = px.client.pipeline(transaction=False)
    rnd = random.Random(7)      # fnv1a_64 on ketama keeps "sp:0".."sp:299" off a server
    for i in range(n):
        pipe.set("sp:%08x" % rnd.getrandbits(32), i)
    pipe.execute()
    counts = [s.client.dbsize() for s in servers]
    expect(all(c > 0 for c in counts), "keys on every server: %r" % counts)
    return counts


class Listener:
    """A TCP listener on a free loopback port that counts connections."""

    def __init__(self):
        import socket
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def accepted(self):
        n = 0
        while True:
            try:
                c, _ = self.sock.accept()
                c.close()
                n += 1
            except BlockingIOError:
                return n


def attacks(px, servers, key_on, label):
    """Each attack of the issue in a script through px: the server's ACL
    refusal (commands flagged noscript, CONFIG, DEBUG, SHUTDOWN, ACL, are
    refused in scripts whoever runs them: not tried), and its effect
    absent on the servers themselves."""
    counts = [s.client.dbsize() for s in servers]
    k = key_on
    for body, what in (("return redis.call('KEYS','*')", "KEYS"),
                       ("return redis.call('FLUSHALL')", "FLUSHALL"),
                       ("return redis.call('FLUSHDB')", "FLUSHDB"),
                       ("return redis.call('SWAPDB',0,1)", "SWAPDB"),
                       ("return redis.call('LASTSAVE')", "LASTSAVE"),
                       ("return redis.call('INFO')", "INFO"),
                       ("return redis.call('SET','__shardis:ctl:alpha','forged')",
                        "a write of the migration record"),
                       ("return redis.call('GET','__shardis:ctl:alpha')",
                        "a read of the migration record"),
                       ("return redis.call('INCR','$equence{00}')", "a write of a sequence"),
                       ("return redis.call('GET','$equence{00}')", "a read of a sequence"),
                       ("return redis.call('PUBLISH','__shardis:group:alpha:x','1')",
                        "a message on shardis's channels")):
        err = script_err(px, body, k)
        expect(err != "", "%s: %s in a script ran" % (label, what))
        expect("user executing the script" in err or "ACL failure" in err or
               "NOPERM" in err or "no permissions" in err,
               "%s: %s: not the server's ACL refusal: %r" % (label, what, err))
    expect_eq([s.client.dbsize() for s in servers], counts, "%s: keys on each server" % label)
    for s in servers:
        expect_eq(s.client.keys("__shardis:*"), [], "%s: shardis's keys on %s" % (label, s.name))
        expect_eq(s.client.ping(), True, "%s: %s still up" % (label, s.name))
    lis = Listener()
    err = script_err(px, "return redis.call('MIGRATE','127.0.0.1',ARGV[1],KEYS[1],0,1000)",
                     k, lis.port, numkeys=1)
    time.sleep(0.2)
    expect(err != "", "%s: MIGRATE to a port of the client's choosing ran" % label)
    expect_eq(lis.accepted(), 0, "%s: connections the server opened to the listener" % label)
    lis.sock.close()


def t_scripts_default(servers):
    """Default config: every attack of the issue is the server's refusal,
    and what clients do through shardis still works as the clients' user:
    keyed @dangerous commands (SORT, RESTORE), PSUBSCRIBE of any pattern,
    SELECT of a served database, MOVE, transactions, blocking pops, WAIT,
    SHARD.GENKEY, DBSIZE, a declared key's script."""
    px = Shardis("scripts", servers)
    spread(px, servers)
    k = px.keys_on("atk:", 1)[0]
    attacks(px, servers, k, "default config")
    c = px.client
    # what clients do still runs, as the clients' user
    c.rpush("{l}list", 3, 1, 2)
    expect_eq(c.sort("{l}list"), [b"1", b"2", b"3"], "SORT")
    expect_eq(c.sort("{l}list", store="{l}dst"), 3, "SORT ... STORE")
    expect_eq(c.execute_command("SORT_RO", "{l}list"), [b"1", b"2", b"3"], "SORT_RO")
    c.set("dumped", "v")
    payload = c.dump("dumped")
    expect_eq(c.restore("restored", 0, payload), b"OK", "RESTORE")
    expect_eq(c.get("restored"), b"v", "GET of the restored key")
    expect_eq(c.eval("return redis.call('SET',KEYS[1],'s')", 1, "scripted"), b"OK",
              "a script writing its declared key")
    expect_eq(script_err(px, "return redis.call('SELECT',3) and redis.call('SET',KEYS[1],'x')",
                         "indb3"), "", "a script's SELECT of a served database")
    expect_eq(c.move("scripted", 2), True, "MOVE into a served database")
    d2 = redis.Redis(HOST, px.port, db=2)
    expect_eq(d2.get("scripted"), b"s", "GET in database 2")
    # SORT's BY and GET patterns need every key (redis-server): shardis
    # runs them as its own user, in order with the client's requests
    c.mset({"{l}w_1": 3, "{l}w_2": 2, "{l}w_3": 1, "{l}o_1": "a", "{l}o_2": "b", "{l}o_3": "c"})
    expect_eq(c.sort("{l}list", by="{l}w_*", get="{l}o_*"), [b"c", b"b", b"a"], "SORT BY GET")
    expect_eq(c.execute_command("SORT_RO", "{l}list", "BY", "{l}w_*"), [b"3", b"2", b"1"],
              "SORT_RO BY")
    expect_eq(c.sort("{l}list", by="{l}w_*", store="{l}sorted"), 3, "SORT BY STORE")
    expect_eq(c.lrange("{l}sorted", 0, -1), [b"3", b"2", b"1"], "the stored list")
    pipe = c.pipeline(transaction=False)
    pipe.set("{l}w_1", 9).sort("{l}list", by="{l}w_*").set("{l}w_1", 0).sort("{l}list", by="{l}w_*")
    out = pipe.execute()
    expect_eq((out[1], out[3]), ([b"3", b"2", b"1"], [b"1", b"3", b"2"]),
              "pipelined SORT BY in order with the SETs around it")
    tx = c.pipeline(transaction=True)
    tx.sort("{l}list", by="{l}w_*")
    try:
        tx.execute()
        raise Fail("SORT BY inside MULTI ran")
    except redis.ResponseError as e:
        expect("EXECABORT" in str(e) or "inside MULTI" in str(e), "SORT BY in MULTI: %s" % e)
    p = c.pubsub()
    p.psubscribe("news.*")
    first = p.get_message(timeout=2)
    expect(first is not None and first["type"] == "psubscribe", "PSUBSCRIBE news.*: %r" % first)
    until("the pattern on every server", lambda: c.publish("news.a", "x") >= 1)
    p.get_message(timeout=1)
    expect_eq(c.publish("news.a", "hi") >= 1, True, "PUBLISH reaches the pattern")
    got = None
    for _ in range(30):
        m = p.get_message(timeout=0.1)
        if m and m["type"] == "pmessage":
            got = m["data"]
            break
    expect_eq(got, b"hi", "PSUBSCRIBE news.* message")
    p.close()
    tx = c.pipeline(transaction=True)
    tx.set("{t}a", 1).incr("{t}a")
    expect_eq(tx.execute(), [True, 2], "MULTI/EXEC")
    c.rpush("bl", "x")
    expect_eq(c.blpop("bl", 1), (b"bl", b"x"), "BLPOP")
    expect_eq(c.execute_command("WAIT", 0, 100), 0, "WAIT")
    expect_eq(c.dbsize() > 300, True, "DBSIZE")
    expect_eq(isinstance(c.execute_command("SHARD.GENKEY"), bytes), True, "SHARD.GENKEY")
    # the connections sign in as the clients' user, not as the default one
    names = {l.split()[1] for s in servers for l in
             s.client.acl_list() if "shardis-clients-" in l}
    expect_eq(len(names), 1, "one clients' user on the servers: %r" % names)
    user = names.pop()
    for s in servers:
        users = [l.split("user=")[1].split()[0] for l in s.client.client_list()
                 for l in [" ".join("%s=%s" % kv for kv in l.items())]]
        expect(user in users, "%s: no connection signed in as %s: %r" % (s.name, user, users))
    # a server that restarts (no users kept) gets the user again before
    # the first client command: scripts there are still refused
    servers[1].restart()
    def back():
        try:
            return c.set(k, "after") and c.get(k) == b"after"
        except redis.ResponseError:
            return False
    until("shardis reconnects to the restarted server", back, timeout=10)
    expect(script_err(px, "return redis.call('FLUSHALL')", k) != "",
           "FLUSHALL in a script after the server restarted")
    expect_eq(redis.Redis(HOST, servers[1].port).exists(k), 1, "the key after the refused FLUSHALL")
    harness.t_exit_clean(px)
    return "user %s" % user


def t_scripts_users(servers):
    """With client users: a user with +@all still runs its scripts as the
    clients' user (the same refusals); FCALL of a function loaded on the
    servers is refused FLUSHALL too."""
    px = Shardis("scripts_users", servers, users='["app on >apppw ~* &* +@all", "default off"]')
    app = redis.Redis(HOST, px.port, username="app", password="apppw")
    px.client = app
    spread(px, servers)
    k = px.keys_on("atk:", 2)[0]
    attacks(px, servers, k, "user app +@all")
    lib = ("#!lua name=evil\n"
           "redis.register_function('wipe', function(keys, args) return redis.call('FLUSHALL') end)")
    for s in servers:
        s.client.function_load(lib, replace=True)
    try:
        app.fcall("wipe", 1, k)
        raise Fail("FCALL of a function calling FLUSHALL ran")
    except redis.ResponseError as e:
        expect("user executing the script" in str(e) or "ACL" in str(e) or "NOPERM" in str(e),
               "FCALL's error: %s" % e)
    expect(all(s.client.dbsize() > 0 for s in servers), "keys left after the refused FCALL")
    for s in servers:
        s.client.function_delete("evil")
    harness.t_exit_clean(px)


def t_scripts_one_db(servers):
    """databases: 1: a script may not SELECT 5 (then write there) nor MOVE
    a key out; two shardis with other rules in front of the same servers
    each keep a user of their own, and neither undoes the other."""
    one = Shardis("onedb", servers, databases=1)
    many = Shardis("manydb", servers)
    k = one.keys_on("one:", 0)[0]
    one.client.set(k, "v")
    err = script_err(one, "redis.call('SELECT',5) return redis.call('SET',KEYS[1],'x')", k)
    expect(err != "", "SELECT 5 in a script with databases: 1")
    expect_eq(redis.Redis(HOST, servers[0].port, db=5).dbsize(), 0, "keys in database 5")
    err = script_err(one, "return redis.call('MOVE',KEYS[1],5)", k)
    expect(err != "", "MOVE in a script with databases: 1")
    expect_eq(one.client.get(k), b"v", "the key after the refused MOVE")
    # the other shardis, other rules: its script may SELECT 5 (it serves it)
    expect_eq(script_err(many, "redis.call('SELECT',5) return redis.call('SET',KEYS[1],'x')",
                         k), "", "SELECT 5 in a script with databases: 16")
    users = {l.split()[1] for l in servers[0].client.acl_list()
             if "shardis-clients-" in l}
    expect_eq(len(users), 2, "two clients' users, one per set of rules: %r" % users)
    for _ in range(3):              # new connections of each, alternately
        for px in (one, many):
            c = redis.Redis(HOST, px.port)
            expect_eq(c.set(k, "again"), True, "%s: SET" % px.name)
            expect(script_err(px, "return redis.call('FLUSHALL')", k) != "",
                   "%s: FLUSHALL in a script" % px.name)
    # a restart of one makes the same user again: no third
    one.restart()
    expect_eq(one.client.get(k), b"again", "GET after the restart")
    users2 = {l.split()[1] for l in servers[0].client.acl_list()
              if "shardis-clients-" in l}
    expect_eq(users2, users, "the users after a restart")
    for px in (one, many):
        harness.t_exit_clean(px)


def t_user_refused(servers):
    """A server whose default user may not ACL SETUSER: shardis starts and
    serves, and says so loudly, naming the server and the one command to
    run; that command, run by an admin, is accepted as it is, and then
    scripts there are refused."""
    acl = os.path.join(harness.TMP, "noacl.acl")
    with open(acl, "w") as f:
        f.write("user default on nopass ~* &* +@all -acl\nuser admin on >adminpw ~* &* +@all\n")
    locked = RedisServer("noacl", extra=["--aclfile", acl])
    px = Shardis("refused", [servers[0], locked])
    warning = "has no clients' user shardis-clients-"
    until("the warning", lambda: warning in open(px.log).read())
    log = open(px.log).read()
    line = [l for l in log.splitlines() if warning in l]
    expect_eq(len(line), 1, "one warning (the start's): %r" % line)
    expect("noacl" in line[0] or str(locked.port) in line[0], "the warning names the server")
    cmd = line[0].split("run on that server: ", 1)[1]
    expect(cmd.startswith("ACL SETUSER shardis-clients-"), "the command: %r" % cmd[:80])
    info = Raw(px.port).cmd("INFO", "shardis").decode()
    expect(re.search(r"backend_0_1:name=redis2,[^\r]*,clients_user=missing", info) and
           not re.search(r"backend_0_0:[^\r]*clients_user=missing", info) and
           re.search(r"pool_0:[^\r]*,clients_user=shardis-clients-", info),
           "INFO marks the server without the user: %s" % info)
    k = px.keys_on("ref:", 1)[0]
    expect_eq(px.client.set(k, "v"), True, "SET on the server that refused")
    expect_eq(px.client.get(k), b"v", "GET on the server that refused")
    admin = redis.Redis(HOST, locked.port, username="admin", password="adminpw")
    import shlex
    expect_eq(admin.execute_command(*shlex.split(cmd)), b"OK", "the printed command, run")
    px.restart()
    expect_eq(px.client.get(k), b"v", "GET after the restart")
    expect(script_err(px, "return redis.call('FLUSHALL')", k) != "",
           "FLUSHALL in a script once the user is there")
    expect_eq(redis.Redis(HOST, locked.port).exists(k), 1, "the key after the refused FLUSHALL")
    harness.t_exit_clean(px)
    locked.kill()


def t_acl_cli(servers):
    """shardis acl prints the lines; --check says 1 where a server lacks
    them and 0 once they are there (made by a running shardis, or run by
    the operator from the printed lines, backend_user's too)."""
    import subprocess
    px = Shardis("aclcli", servers[:1], databases=2)
    conf = px.conf
    expect_eq(px.client.ping(), True, "PING")   # (the loop runs: SIGTERM is handled)
    harness.t_exit_clean(px)
    fresh = RedisServer("aclfresh")
    with open(conf) as f:
        text = f.read()
    conf2 = conf + ".2"
    with open(conf2, "w") as f:
        f.write(text.replace("redis1", "redis1\n    - %s:%d:1 redis2" % (HOST, fresh.port)))
    run = lambda *a: subprocess.run([harness.ARGS.shardis, "acl", "-c", conf2] + list(a),
                                    capture_output=True, text=True, timeout=30)
    out = run()
    expect_eq(out.returncode, 0, "shardis acl: %s" % out.stderr)
    lines = [l for l in out.stdout.splitlines() if l.startswith("ACL SETUSER")]
    expect_eq(len(lines), 1, "the lines: %r" % out.stdout)
    user = lines[0].split()[2]
    users = [l.split()[1] for l in servers[0].client.acl_list()]
    expect(user in users, "the printed user %s is the one shardis made: %r" % (user, users))
    chk = run("--check")
    expect_eq(chk.returncode, 1, "--check with one server lacking the user: %s" % chk.stdout)
    expect("# redis1 (%s:%d): ok" % (HOST, servers[0].port) in chk.stdout and
           "# redis2 (%s:%d): not as printed" % (HOST, fresh.port) in chk.stdout,
           "--check's verdicts: %r" % chk.stdout)
    import shlex
    expect_eq(fresh.client.execute_command(*shlex.split(lines[0])), b"OK", "the line, run")
    chk = run("--check")
    expect_eq(chk.returncode, 0, "--check once it is there: %s %s" % (chk.stdout, chk.stderr))
    # an operator's own backend_user: its line, run, passes the check
    conf3 = conf + ".3"
    with open(conf3, "w") as f:
        f.write(text.replace("  servers:", "  backend_user: app\n  backend_password: apppw\n"
                             "  servers:"))
    out = subprocess.run([harness.ARGS.shardis, "acl", "-c", conf3, "--check"],
                         capture_output=True, text=True, timeout=30)
    expect_eq(out.returncode, 1, "--check before the backend_user is made")
    line = [l for l in out.stdout.splitlines() if l.startswith("ACL SETUSER app on #")]
    expect_eq(len(line), 1, "the backend_user's line: %r" % out.stdout)
    servers[0].client.execute_command(*shlex.split(line[0]))
    out = subprocess.run([harness.ARGS.shardis, "acl", "-c", conf3, "--check"],
                         capture_output=True, text=True, timeout=30)
    expect_eq(out.returncode, 0, "--check of the backend_user: %s %s" % (out.stdout, out.stderr))
    app = Shardis("aclapp", servers[:1], backend_user="app", backend_password="apppw")
    k = b"anykey"
    app.client.set(k, "v")
    expect(script_err(app, "return redis.call('FLUSHALL')", k) != "",
           "FLUSHALL in a script as the backend_user the line made")
    harness.t_exit_clean(app)
    fresh.kill()


def t_acl_check_quiet_server(servers):
    """A server that took the connection and went quiet (SIGSTOP: the
    kernel still accepts for it) costs a blocking call a second, as the
    start counts on (the same calls read INFO and the migration record
    there): shardis acl --check says it cannot tell about it, and ok about
    the other, within 2.5 s (3 s would be the replies' bound, not a
    step's)."""
    import subprocess
    px = Shardis("aclquiet", servers[:2])
    expect_eq(px.client.ping(), True, "PING")
    harness.t_exit_clean(px)
    subprocess.run([harness.ARGS.shardis, "acl", "-c", px.conf, "--check"],
                   capture_output=True, text=True, timeout=30)   # (the users made)
    os.kill(servers[1].proc.pid, signal.SIGSTOP)
    try:
        t = time.monotonic()
        out = subprocess.run([harness.ARGS.shardis, "acl", "-c", px.conf, "--check"],
                             capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t
    finally:
        os.kill(servers[1].proc.pid, signal.SIGCONT)
    expect("# redis2 (%s:%d): cannot tell" % (HOST, servers[1].port) in out.stdout,
           "--check of the stopped server: %r" % out.stdout)
    expect("# redis1 (%s:%d): ok" % (HOST, servers[0].port) in out.stdout,
           "--check of the other: %r" % out.stdout)
    expect(took < 2.5, "--check with a stopped server took %.2f s" % took)
    return "%.2f s" % took


def t_move_unserved(servers):
    """databases: 4 on servers with 16: a client's MOVE is judged by shardis
    (db 10 refused, db 3 moved) and a script's MOVE into database 10 is the
    server's refusal: no key lands in a database the pool does not serve."""
    px = Shardis("moves", servers, databases=4)
    k = px.keys_on("mv:", 1)[0]
    c = px.client
    c.set(k, "v")
    err = script_err(px, "return redis.call('MOVE',KEYS[1],'10')", k)
    expect(err != "", "MOVE into database 10 in a script ran")
    expect_eq(redis.Redis(HOST, servers[1].port, db=10).dbsize(), 0, "keys in database 10")
    try:
        c.move(k, 10)
        raise Fail("MOVE into database 10 through shardis ran")
    except redis.ResponseError as e:
        expect("out of range" in str(e), "MOVE 10: %s" % e)
    expect_eq(c.move(k, 3), True, "MOVE into database 3")
    expect_eq(redis.Redis(HOST, px.port, db=3).get(k), b"v", "the key in database 3")
    expect_eq(redis.Redis(HOST, servers[1].port, db=3).get(k), b"v", "... on its server")
    harness.t_exit_clean(px)


def t_fallback_identity(servers):
    """internal_user named, and a server where it may not ACL SETUSER:
    clients' connections there go on as they did before (redis_auth's
    default user, which may not FLUSHALL here), never as shardis's own."""
    acl = os.path.join(harness.TMP, "fallback.acl")
    with open(acl, "w") as f:
        f.write("user shardis on >ipw ~* &* +@all -acl|setuser\n"
                "user default on >apw ~* &* +@all -@admin -@dangerous +sort\n")
    s = RedisServer("fallback", extra=["--aclfile", acl])
    s.client = redis.Redis(HOST, s.port, username="shardis", password="ipw")
    px = Shardis("fallback", [s], redis_auth="apw", internal_user="shardis",
                 internal_password="ipw")
    until("the warning", lambda: "has no clients' user" in open(px.log).read())
    px.client.set("k1", "v")
    err = script_err(px, "return redis.call('FLUSHALL')", "k1")
    expect(err != "", "FLUSHALL in a script on the fallback connection ran")
    expect_eq(s.client.dbsize(), 1, "keys left")
    users = {c["user"] for c in s.client.client_list() if c.get("cmd", "").startswith("eval")}
    expect_eq(users, {"default"}, "the user the script's connection signed in as")
    harness.t_exit_clean(px)
    s.kill()


def t_rotation(servers):
    """The clients' user's password is PBKDF2-HMAC-SHA256 of shardis's own
    (redis_auth) with the user's name as salt, 20000 rounds; a reload that
    rotates redis_auth makes the next connection reset it, so the one
    derived from the old password stops working on the server."""
    import hashlib
    import signal
    acl = os.path.join(harness.TMP, "rotation.acl")
    with open(acl, "w") as f:
        f.write("user default on >p1 >p2 ~* &* +@all\n")
    s = RedisServer("rotation", extra=["--aclfile", acl])
    s.client = redis.Redis(HOST, s.port, password="p1")
    px = Shardis("rotation", [s], redis_auth="p1")
    expect_eq(px.client.set("k", "v"), True, "SET")
    info = Raw(px.port)
    info.cmd("AUTH", "p1")
    name = re.search(r"clients_user=(shardis-clients-[0-9a-f]+)",
                     info.cmd("INFO", "shardis").decode()).group(1)
    derived = lambda pw: hashlib.pbkdf2_hmac("sha256", pw, name.encode(), 20000).hex()
    auth = lambda pw: Raw(s.port).cmd("AUTH", name, derived(pw))
    expect_eq(auth(b"p1"), b"+OK\r\n", "AUTH with the password derived from p1")
    with open(px.conf) as f:
        text = f.read()
    with open(px.conf, "w") as f:
        f.write(text.replace("redis_auth: p1", "redis_auth: p2"))
    os.kill(px.pid, signal.SIGHUP)
    until("the reload", lambda: "reload applied" in open(px.log).read())
    s.client.execute_command("CLIENT", "KILL", "USER", name)   # (its connections: anew)
    px.client = redis.Redis(HOST, px.port, password="p2", socket_timeout=10)

    def served():
        try:
            return px.client.get("k") == b"v"
        except redis.ResponseError:
            return False
    until("served again, on new connections", served)
    expect_eq(auth(b"p2"), b"+OK\r\n", "AUTH with the password derived from p2")
    expect(auth(b"p1").startswith(b"-WRONGPASS"), "the password derived from p1 still works")
    harness.t_exit_clean(px)
    s.kill()


def body():
    run = harness.run_with_servers
    run("default config: scripts are refused KEYS, FLUSHALL, SELECT, MIGRATE, shardis's keys "
        "and channels by the server; what clients do through shardis still runs",
        t_scripts_default, 3)
    run("client users: a +@all user's scripts and functions meet the same refusals",
        t_scripts_users, 3)
    run("databases: 1 refuses SELECT 5 and MOVE in scripts; two shardis with other rules "
        "keep a user each", t_scripts_one_db, 3)
    run("databases: 4: MOVE into database 10 refused, in a script too", t_move_unserved, 3)
    run("a refused clients' user with internal_user named: clients' connections are "
        "redis_auth's, never shardis's own", t_fallback_identity, 1)
    run("a rotated redis_auth: the clients' user's old derived password stops working",
        t_rotation, 1)
    run("shardis acl prints the users; --check tells which server lacks them", t_acl_cli, 1)
    run("a server that went quiet costs a blocking call a second", t_acl_check_quiet_server, 2)
    run("a server that refuses ACL SETUSER: served, said loudly with the command that mends "
        "it", t_user_refused, 1)
    run("a reload that takes a channel, pattern or command away from a user: its "
        "subscribers to them closed, its next command refused, as by redis-server",
        t_reload_narrows, 3)
    run("a reload without users closes no subscriber", t_reload_default, 3)
    run("forged migration records (garbage, a list, an unnamed host, another hash): "
        "shardis starts, routes by its file, warns, shows them in INFO; a reshard replaces "
        "them", t_forged_records, 5)
    run("a forged record with a higher epoch does not hide one that checks out",
        t_forged_over_real, 2)
    servers = [RedisServer("s%d" % i) for i in (1, 2, 3)]
    check("views of other clients: the admin error without admin_commands; a client's own "
          "CLIENT INFO/ID/SETNAME/GETNAME answer; with admin_commands they run",
          t_views_default, servers)
    check("views of other clients with client users: redis-server's NOPERM for +@all "
          "-@dangerous, run for +@all, without admin_commands", t_views_users, servers)
    check("no password in MONITOR, SLOWLOG, the log or /metrics; (redacted) as redis-server",
          t_secrets, servers)


if __name__ == "__main__":
    sys.exit(harness.main(body))
