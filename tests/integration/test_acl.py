#!/usr/bin/python3
"""test_acl.py -- client users and what each may do, against real
redis-servers, compared byte for byte with a redis-server that has the
same users (ACL SETUSER with the same lines):

- AUTH user pass, AUTH pass, HELLO 3 AUTH, ACL WHOAMI, WRONGPASS,
  NOAUTH, a #sha256 password, a user that is off; RESET signs out to the
  default user;
- NOPERM for a command, a subcommand, a key (direct, split over servers,
  a script's declared keys, inside MULTI, WATCH) and a channel (PUBLISH,
  SUBSCRIBE, PSUBSCRIBE only for a pattern of the user's own); SORT BY
  patterns for a user without every key; SHARD.* by name and category;
- a reload that removes a user or turns it off closes its connections
  (a subscriber stops getting messages), one that changes a password
  keeps them; a reload with a bad line is refused and changes nothing;
- shardis -t names the line and column of a bad users line;
- ACL LIST, GETUSER, DRYRUN, GENPASS and HELP as redis-server answers them
  for the same users: LIST's lines and GETUSER's fields are redis-server's
  (a password as its #sha256, never in clear), the same tokens where
  redis-server describes the same rules alike, and for every user the
  commands LIST describes, set on the direct server, allow exactly what
  the user may (ACL DRYRUN of every command there); DRYRUN through shardis
  answers every command as the direct server does for that user, and keys
  and channels in its words; GENPASS's lengths and errors; LIST, GETUSER
  and DRYRUN are NOPERM for a user without @dangerous, and need
  admin_commands; SETUSER and the like stay refused, naming the config;
- backend_user / internal_user: scripts run as a least-privileged server
  user (an operator's own, as `shardis acl` prints), so EVAL ... FLUSHALL, MIGRATE to a foreign
  port and writes to __shardis:* or $equence{..} get the server's refusal,
  while shardis's own work (the group of two proxies, a reload that moves
  keys, SHARD.GENKEY, WAIT, admin commands) runs as its internal user; the
  start check warns of a backend_user that may do too much.

Run: /usr/bin/python3 tests/integration/test_acl.py --shardis build/shardis
"""
import hashlib
import os
import subprocess
import sys
import time

import redis

import harness
from harness import Fail, Raw, RedisServer, Shardis, array, bulk, expect, expect_eq, parse, until


def reload(px):
    """SHARD.RELOAD as the default user: its summary, or its error's text."""
    try:
        return px.client.execute_command("SHARD.RELOAD")
    except redis.ResponseError as e:
        return str(e).encode()

HOST = "127.0.0.1"
USERS = [
    "app on >apppw ~app:* ~{app}* &app.* +@all -@dangerous",
    "reader on >rpw ~* &* +@read +@connection -shard.keyinfo",
    "hashed on #%s allkeys +get +set +acl|whoami" % hashlib.sha256(b"hpw").hexdigest(),
    "gone off >gpw allkeys +@all",
]
NOPERM_KEYS = (b"-NOPERM this user has no permissions to access one of the keys used as "
               b"arguments\r\n")
NOPERM_CHANS = (b"-NOPERM this user has no permissions to access one of the channels used "
                b"as arguments\r\n")


def noperm(cmd):
    return b"-NOPERM this user has no permissions to run the '%s' command\r\n" % cmd


def users_yaml(users):
    return "[" + ", ".join('"%s"' % u for u in users) + "]"


def direct_server():
    """A redis-server with USERS, the reference."""
    d = RedisServer("direct%d" % harness.free_port())
    for u in USERS:
        name, *rules = u.split()
        rules = [r for r in rules if "shard." not in r]    # shardis's own commands
        d.client.execute_command("ACL", "SETUSER", name, *rules)
    return d


def both(px, d, script, what):
    """Send script (a list of commands) on a fresh connection to shardis and to
    the direct server; the replies must be the same bytes."""
    got = []
    for port in (px.port, d.port):
        c = Raw(port)
        out = []
        for cmd in script:
            out.append(c.cmd(*cmd))
        c.close()
        got.append(out)
    for cmd, a, b in zip(script, got[0], got[1]):
        expect_eq(a, b, "%s: %s (shardis vs redis-server)" % (what, " ".join(map(str, cmd))))


def t_sign_in(rs):
    px = Shardis("signin", rs, users=users_yaml(USERS))
    d = direct_server()
    both(px, d, [("ACL", "WHOAMI"), ("AUTH", "app", "bad"), ("ACL", "WHOAMI"),
                 ("AUTH", "app", "apppw"), ("ACL", "WHOAMI"), ("AUTH", "gone", "gpw"),
                 ("AUTH", "nobody", "x"), ("AUTH", "hashed", "hpw"), ("ACL", "WHOAMI"),
                 ("AUTH", "pw"), ("AUTH", "a", "b", "c"), ("RESET",), ("ACL", "WHOAMI")],
         "sign in")
    # HELLO 3 AUTH: the id differs, the rest is the same.
    for port in (px.port, d.port):
        c = Raw(port)
        expect_eq(c.cmd("HELLO", "3", "AUTH", "app", "nope"),
                  b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
                  "HELLO AUTH with a wrong password")
        r = c.cmd("HELLO", "3", "AUTH", "app", "apppw")
        expect(r.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis"), "HELLO 3 AUTH: %r" % r[:40])
        expect_eq(c.cmd("ACL", "WHOAMI"), b"$3\r\napp\r\n", "WHOAMI after HELLO AUTH")
        c.close()
    # A pool whose default user is off: nothing before AUTH.
    px2 = Shardis("signin2", rs, users=users_yaml(USERS + ["default off"]))
    c = Raw(px2.port)
    expect_eq(c.cmd("GET", "x"), b"-NOAUTH Authentication required.\r\n", "GET before AUTH")
    expect_eq(c.cmd("AUTH", "anything"),
              b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
              "AUTH pass with the default user off")
    expect_eq(c.cmd("AUTH", "reader", "rpw"), b"+OK\r\n", "AUTH reader")
    expect(b" user=reader " in c.cmd("CLIENT", "INFO"), "CLIENT INFO user=")
    expect_eq(c.cmd("RESET"), b"+RESET\r\n", "RESET")
    expect_eq(c.cmd("GET", "x"), b"-NOAUTH Authentication required.\r\n",
              "signed out to a default user that is off")
    c.close()
    # redis_auth alone keeps meaning the default user's password.
    px3 = Shardis("signin3", rs, redis_auth="s3cret")
    c = Raw(px3.port)
    expect_eq(c.cmd("AUTH", "default", "s3cre"),
              b"-WRONGPASS invalid username-password pair or user is disabled.\r\n", "prefix")
    expect_eq(c.cmd("AUTH", "s3cret"), b"+OK\r\n", "AUTH redis_auth")
    c.close()
    for p in (px, px2, px3):
        harness.t_exit_clean(p)


def t_permissions(rs):
    px = Shardis("perm", rs, users=users_yaml(USERS))
    d = direct_server()
    a = px.keys_on("app:", 0)[0]
    b = px.keys_on("app:", 1)[0]
    both(px, d, [
        ("AUTH", "app", "apppw"),
        ("SET", a, "1"), ("SET", "other", "1"), ("GET", "other"),
        ("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("KEYS", "*"),
        ("MSET", a, "x", b, "y"), ("MGET", a, b), ("MSET", a, "x", "other", "y"),
        ("DEL", b, "other"), ("EXISTS", a, b),
        ("EVAL", "return 1", "1", "other"), ("EVAL", "return KEYS[1]", "1", a),
        ("MULTI",), ("SET", "other", "1"), ("SET", a, "2"), ("EXEC",),
        ("WATCH", "other"), ("WATCH", a), ("UNWATCH",),
        ("PUBLISH", "other", "m"), ("PUBLISH", "app.x", "m"),
        ("RPUSH", "{app}l", "1", "2"), ("SORT", "{app}l", "BY", "{app}w_*"),
        ("SORT", "{app}l", "GET", "{app}o_*"), ("SORT", "{app}l"),
    ], "the app user")
    both(px, d, [
        ("AUTH", "reader", "rpw"), ("GET", "other"), ("SET", "other", "1"),
        ("MSET", a, "1", b, "2"), ("CONFIG", "SET", "maxmemory", "1"), ("ACL", "WHOAMI"), ("LPUSH", "l", "x"),
        ("SORT", a, "BY", "w_*"), ("EVAL", "return 1", "0"),
    ], "the reader")
    # Channels: SUBSCRIBE by glob, PSUBSCRIBE only a pattern the user has.
    for port in (px.port, d.port):
        c = Raw(port)
        c.cmd("AUTH", "app", "apppw")
        expect_eq(c.cmd("SUBSCRIBE", "other"), NOPERM_CHANS, "SUBSCRIBE other")
        expect_eq(c.cmd("PSUBSCRIBE", "app.x*"), NOPERM_CHANS, "PSUBSCRIBE app.x*")
        expect_eq(c.cmd("PSUBSCRIBE", "app.*"), array([bulk(b"psubscribe"), bulk(b"app.*"),
                                                       b":1\r\n"]), "PSUBSCRIBE app.*")
        c.close()
    # SHARD.* by name and by category.
    c = Raw(px.port)
    c.cmd("AUTH", "reader", "rpw")
    expect_eq(c.cmd("SHARD.GENKEY"), noperm(b"shard.genkey"), "GENKEY is @write")
    expect_eq(c.cmd("SHARD.KEYINFO", "x"), noperm(b"shard.keyinfo"), "-shard.keyinfo")
    expect(c.cmd("SHARD.WHEREIS", "x").startswith(b"$"), "WHEREIS is @connection")
    c.cmd("AUTH", "app", "apppw")
    expect_eq(c.cmd("SHARD.RELOAD"), noperm(b"shard.reload"), "SHARD.RELOAD is @dangerous")
    expect_eq(c.cmd("HOTKEYS", "GET"), noperm(b"hotkeys"), "HOTKEYS is @dangerous")
    expect(c.cmd("SHARD.GENKEY").startswith(b"$"), "GENKEY for app")
    c.close()
    # HOTKEYS by its own name, not SLOWLOG's.
    hk = Shardis("hotkeys", rs, users=users_yaml(["hk on >hk +hotkeys", "sl on >sl +slowlog"]))
    c = Raw(hk.port)
    c.cmd("AUTH", "sl", "sl")
    expect_eq(c.cmd("HOTKEYS", "GET"), noperm(b"hotkeys"), "+slowlog is not +hotkeys")
    c.cmd("AUTH", "hk", "hk")
    expect(c.cmd("HOTKEYS", "GET").startswith((b"*", b"_", b"$-1")), "HOTKEYS for +hotkeys")
    c.close()
    harness.t_exit_clean(hk)
    # Nothing refused reached a server.
    for s in rs:
        expect_eq(s.client.exists("other"), 0, "'other' on %s" % s.name)
    harness.t_exit_clean(px)


def t_reload(rs):
    px = Shardis("reload", rs, users=users_yaml(USERS), admin_commands="true")
    app, sub, rd = Raw(px.port), Raw(px.port), Raw(px.port)
    expect_eq(app.cmd("AUTH", "app", "apppw"), b"+OK\r\n", "AUTH app")
    expect_eq(rd.cmd("AUTH", "reader", "rpw"), b"+OK\r\n", "AUTH reader")
    sub.cmd("AUTH", "app", "apppw")
    expect_eq(sub.cmd("SUBSCRIBE", "app.news"), array([bulk(b"subscribe"), bulk(b"app.news"),
                                                       b":1\r\n"]), "SUBSCRIBE")
    # A bad line: refused whole, nobody closed.
    text = open(px.conf).read()
    with open(px.conf, "w") as f:
        f.write(text.replace("users: [", 'users: ["bad on +nosuchcmd", '))
    out = reload(px)
    expect(b"unknown command 'nosuchcmd'" in out, "reload with a bad line: %r" % out[:200])
    expect_eq(app.cmd("ACL", "WHOAMI"), b"$3\r\napp\r\n", "app after a refused reload")
    # app removed, reader's password changed.
    users = [u for u in USERS if not u.startswith("app ")]
    users = [u.replace(">rpw", ">newpw") for u in users]
    users.append("admin on >adminpw allkeys allchannels +@all")
    with open(px.conf, "w") as f:
        f.write(text.replace(users_yaml(USERS), users_yaml(users)))
    admin = Raw(px.port)
    admin.cmd("AUTH", "app", "apppw")
    out = admin.cmd("SHARD.RELOAD")
    expect(out.startswith(b"-NOPERM"), "app may not reload: %r" % out)
    out = reload(px)
    for c, what in ((app, "app's connection"), (sub, "app's subscriber"),
                    (admin, "app's other connection")):
        try:
            r = c.cmd("PING")
        except (EOFError, ConnectionError, OSError):
            continue
        raise Fail("%s still open after app was removed: %r" % (what, r))
    expect(b" user=reader " in rd.cmd("CLIENT", "INFO"), "the reader stays signed in")
    n = Raw(px.port)
    expect_eq(n.cmd("AUTH", "reader", "rpw"),
              b"-WRONGPASS invalid username-password pair or user is disabled.\r\n", "old password")
    expect_eq(n.cmd("AUTH", "reader", "newpw"), b"+OK\r\n", "new password")
    expect_eq(n.cmd("AUTH", "app", "apppw"),
              b"-WRONGPASS invalid username-password pair or user is disabled.\r\n", "app gone")
    # Turning a user off closes it too.
    with open(px.conf, "w") as f:
        f.write(text.replace(users_yaml(USERS), users_yaml(
            [u.replace("reader on", "reader off") for u in users])))
    reload(px)
    for c in (rd, n):
        try:
            r = c.cmd("PING")
        except (EOFError, ConnectionError, OSError):
            continue
        raise Fail("a reader's connection is open after reader was turned off: %r" % r)
    harness.t_exit_clean(px)


ACL_READ_USERS = USERS + [
    "alice on >pw ~foo* &ch* +@read -get +set +client|id -@admin +get",
    "bob off nopass allkeys allchannels +@all -flushall",
    "carol",
    "mixed on nopass ~k* resetchannels +@read -@string +shard.whereis",
]


def every_command(c):
    """(name, args) for each command and subcommand of the direct server,
    with as many arguments as its arity needs ("k" for each), one more if
    it takes more (redis-server checks no key of a PFMERGE with no source)."""
    names = parse(c.cmd("COMMAND", "LIST"))
    infos = parse(c.cmd("COMMAND", "INFO", *names))
    out = []
    for info in infos:
        name, arity = info[0].decode(), info[1]
        argv = name.split("|")
        need = abs(arity) - len(argv) + (arity < 0)
        out.append(argv + ["k"] * max(need, 0))
    return out


def dryruns(c, user, commands):
    c.send(b"".join(harness.enc("ACL", "DRYRUN", user, *a) for a in commands))
    return [c.reply() for _ in commands]


def t_acl_read(rs):
    px = Shardis("aclread", rs, users=users_yaml(ACL_READ_USERS), admin_commands="true")
    d = RedisServer("aclreaddirect")
    for u in ACL_READ_USERS:
        name, *rules = u.split()
        d.client.execute_command("ACL", "SETUSER", name,
                                 *[r for r in rules if "shard." not in r])
    c, dc = Raw(px.port), Raw(d.port)
    # LIST: per user the same line, up to the order of single commands,
    # where redis-server describes the same rules alike.
    got = parse(c.cmd("ACL", "LIST"))
    want = parse(dc.cmd("ACL", "LIST"))
    expect(isinstance(got, list), "ACL LIST: %r" % got)
    expect_eq([l.split()[1] for l in got], [l.split()[1] for l in want], "ACL LIST's users")
    for g, w in zip(got, want):
        expect(b">" not in g and b"pw" not in g, "a clear password in %r" % g)
        if g.split()[1] in (b"app", b"mixed"):
            continue                # (described in other rules: below)
        g = g.replace(b" +shard.whereis", b"")
        expect_eq(sorted(g.split()), sorted(w.split()), "ACL LIST %s" % g.split()[1].decode())
        expect_eq(g.split()[:3], w.split()[:3], "ACL LIST's order")
    # GETUSER: the same map; commands as LIST's.
    for name in ("alice", "bob", "carol", "default", "reader", "hashed", "nobody"):
        g, w = parse(c.cmd("ACL", "GETUSER", name)), parse(dc.cmd("ACL", "GETUSER", name))
        if w is not None:
            g[5] = b" ".join(sorted(g[5].split()))
            w[5] = b" ".join(sorted(w[5].split()))
        expect_eq(g, w, "ACL GETUSER %s" % name)
    c.cmd("HELLO", "3")
    dc.cmd("HELLO", "3")
    expect_eq(c.cmd("ACL", "GETUSER", "bob"), dc.cmd("ACL", "GETUSER", "bob"),
              "ACL GETUSER bob in RESP3")
    expect_eq(c.cmd("ACL", "GETUSER", "nobody"), dc.cmd("ACL", "GETUSER", "nobody"),
              "ACL GETUSER of no user in RESP3")
    c.cmd("HELLO", "2")
    dc.cmd("HELLO", "2")
    # DRYRUN of every command, through shardis as on the direct server; and
    # the commands LIST describes, set on the direct server as a copy of
    # the user, allow exactly those.
    commands = every_command(dc)
    for line in got:
        name = line.split()[1].decode()
        rules = [t.decode() for t in line.split()[2:] if b"shard." not in t]
        d.client.execute_command("ACL", "SETUSER", "copy_" + name, *rules)
        want = dryruns(dc, name, commands)
        for a, g, w in zip(commands, dryruns(c, name, commands), want):
            expect_eq(g, w, "DRYRUN %s %s" % (name, " ".join(a)))
        copy = [w.replace(b"copy_", b"") for w in dryruns(dc, "copy_" + name, commands)]
        expect_eq(copy, want, "what ACL LIST says of %s, set on redis-server" % name)
    both(px, d, [("ACL", "DRYRUN", "alice", "set", "foo1", "v"),
                 ("ACL", "DRYRUN", "alice", "get", "bar"),
                 ("ACL", "DRYRUN", "alice", "mget", "foo1", "bar"),
                 ("ACL", "DRYRUN", "app", "eval", "return 1", "2", "app:1", "other"),
                 ("ACL", "DRYRUN", "app", "eval", "return 1", "0"),
                 ("ACL", "DRYRUN", "app", "zunionstore", "app:d", "2", "app:1", "bad"),
                 ("ACL", "DRYRUN", "app", "publish", "app.x", "m"),
                 ("ACL", "DRYRUN", "app", "publish", "other", "m"),
                 ("ACL", "DRYRUN", "app", "subscribe", "app.x", "other"),
                 ("ACL", "DRYRUN", "app", "psubscribe", "app.*"),
                 ("ACL", "DRYRUN", "app", "flushall"),
                 ("ACL", "DRYRUN", "alice", "client", "kill", "1"),
                 ("ACL", "DRYRUN", "alice", "client", "nosuch"),
                 ("ACL", "DRYRUN", "alice", "client"), ("ACL", "DRYRUN", "alice", "get"),
                 ("ACL", "DRYRUN", "alice", "nosuch"), ("ACL", "DRYRUN", "nobody", "get", "x"),
                 ("ACL", "GENPASS", "0"), ("ACL", "GENPASS", "4097"), ("ACL", "GENPASS", "x"),
                 ("ACL", "GENPASS", "8", "9"), ("ACL", "GETUSER"), ("ACL", "LIST", "x"),
                 ("AUTH", "app", "apppw"), ("ACL", "LIST"), ("ACL", "GETUSER", "app"),
                 ("ACL", "DRYRUN", "app", "get", "x")], "DRYRUN, errors, NOPERM")
    for bits, n in ((None, 64), ("1", 1), ("5", 2), ("128", 32), ("4096", 1024)):
        p = parse(c.cmd("ACL", "GENPASS", *([bits] if bits else [])))
        expect(len(p) == n and all(ch in b"0123456789abcdef" for ch in p),
               "ACL GENPASS %s: %r" % (bits, p[:80]))
    expect(parse(c.cmd("ACL", "GENPASS")) != parse(c.cmd("ACL", "GENPASS")), "GENPASS repeats")
    h, dh = parse(c.cmd("ACL", "HELP")), parse(dc.cmd("ACL", "HELP"))
    expect_eq([l.split()[0] for l in h if not l.startswith(b" ")],
              [l.split()[0] for l in dh if not l.startswith(b" ")], "ACL HELP's subcommands")
    for sub in ("SETUSER", "DELUSER", "LOAD", "SAVE", "LOG"):
        r = c.cmd("ACL", sub, "x") if sub in ("SETUSER", "DELUSER") else c.cmd("ACL", sub)
        expect(r.startswith(b"-ERR") and b"config file" in r, "ACL %s: %r" % (sub, r))
    c.close()
    dc.close()
    # Without admin_commands they show nothing, even to a user that may.
    px2 = Shardis("aclread2", rs, users=users_yaml(ACL_READ_USERS))
    c = Raw(px2.port)
    for ask in (("LIST",), ("GETUSER", "alice"), ("DRYRUN", "alice", "get", "x")):
        r = c.cmd("ACL", *ask)
        expect(r.startswith(b"-ERR") and b"admin_commands: true" in r, "ACL %s: %r" % (ask, r))
    expect_eq(len(parse(c.cmd("ACL", "GENPASS"))), 64, "GENPASS without admin_commands")
    c.close()
    for p in (px, px2):
        harness.t_exit_clean(p)
    return "%d commands dry-run for %d users" % (len(commands), len(got))


def t_conf_errors(rs):
    bad = [
        ("x on +nosuchcmd", "unknown command 'nosuchcmd'"),
        ("x on +@nosuchcat", "unknown command category 'nosuchcat'"),
        ("x on %R~app:*", "does not take %R~ or %W~"),
        ("x on (+get ~a)", "does not take selectors"),
        ("x on #abc", "SHA-256 of 64 hex digits"),
        ("x on frobnicate", "unknown ACL rule 'frobnicate'"),
        ("x on +config|nosuch", "unknown subcommand 'config|nosuch'"),
    ]
    for line, want in bad + [("x on", None)]:
        path = os.path.join(harness.TMP, "bad.yml")
        with open(path, "w") as f:
            f.write("alpha:\n  listen: 127.0.0.1:1\n  users:\n    - ok on >p\n    - \"%s\"\n"
                    "  servers:\n    - 127.0.0.1:%d:1\n" % (line, rs[0].port))
        p = subprocess.run([harness.ARGS.shardis, "-c", path, "-t"], capture_output=True,
                           text=True)
        if want is None:
            expect_eq(p.returncode, 0, "shardis -t of a good line: " + p.stderr)
            continue
        expect(p.returncode != 0 and want in p.stderr and ":5:7:" in p.stderr,
               "%r: %r" % (line, p.stderr))
    with open(path, "w") as f:
        f.write("alpha:\n  listen: 127.0.0.1:1\n  users: [\"a on\", \"a off\"]\n"
                "  servers:\n    - 127.0.0.1:%d:1\n" % rs[0].port)
    p = subprocess.run([harness.ARGS.shardis, "-c", path, "-t"], capture_output=True, text=True)
    expect(p.returncode != 0 and "listed twice" in p.stderr, p.stderr)


def t_preauth(rs):
    """Before AUTH nothing big is buffered: the header is refused, as
    redis-server refuses it, and the connection closed."""
    px = Shardis("preauth", rs, users=users_yaml(["default on >pw allkeys allchannels +@all"]))
    d = RedisServer("preauthdirect", password="pw")
    # (what the start reads, the servers' commands, is in before: the
    # loop runs the start's last steps after the port listens)
    until("the servers' commands read",
          lambda: "commands and subcommands" in open(px.log).read())
    before = harness.rss(px.pid)
    for data in (b"*1\r\n$104857600\r\n", b"*11\r\n", b"*2\r\n$3\r\nGET\r\n$16385\r\n"):
        got = []
        for port in (px.port, d.port, px.port, px.port):
            c = Raw(port)
            c.send(data)
            got.append(c.reply())
            try:
                more = c.reply()
            except EOFError:
                more = None
            expect(more is None, "the connection stays open after %r: %r" % (data, more))
            c.close()
        expect(got[0].startswith(b"-ERR Protocol error: unauthenticated"), "%r: %r" % (data, got[0]))
        expect_eq(got[0], got[1], "%r: shardis vs redis-server" % data)
    grew = harness.rss(px.pid) - before
    expect(grew < 1 << 20, "RSS grew %d bytes for refused unauthenticated headers" % grew)
    # At the limits, and after AUTH, requests are as big as they like.
    c = Raw(px.port)
    expect_eq(c.cmd("AUTH", "x" * 16384), b"-WRONGPASS invalid username-password pair or user "
              b"is disabled.\r\n", "a 16 KiB password before AUTH")
    expect_eq(c.cmd("AUTH", "pw"), b"+OK\r\n", "AUTH")
    expect_eq(c.cmd("SET", "big", "v" * 100000), b"+OK\r\n", "a 100 KB SET after AUTH")
    expect_eq(c.cmd("DEL", *["k%d" % i for i in range(20)]), b":0\r\n", "20 keys after AUTH")
    c.close()
    harness.t_exit_clean(px)


def plant(server, pool_text, target_text, epoch=5):
    rec = b"shardis-migration 1\nepoch %d\nconf %d\n%s\nprior %d\n%s\n" % (
        epoch, len(target_text), target_text, len(pool_text), pool_text)
    server.client.set("__shardis:ctl:alpha", rec)


def t_record_trust(rs):
    """A migration record planted on a server: followed only as far as the
    config file agrees. Else it is not followed, nor does it stop the start:
    shardis serves by its file and says why."""
    px = Shardis("record", rs[:2])
    text = open(px.conf, "rb").read()
    foreign = b"    - %s:%d:1 redis9\n" % (HOST.encode(), rs[2].port)
    cases = [
        (text.replace(b"  servers:", b"  admin_commands: true\n  servers:"),
         "sets admin_commands otherwise than the config file does"),
        (text.replace(b"  servers:", b"  users: [\"evil on >x allkeys +@all\"]\n  servers:"),
         "sets users otherwise"),
        (text.replace(b"  servers:", b"  idgen: {subkeys: {name: x}}\n  servers:"),
         "sets idgen otherwise"),
        (text.replace(b"  servers:", b"  idgen: {epoch_ms: 1}\n  servers:"),
         "sets idgen otherwise"),
        (text + foreign, "moves keys to %s:%d that neither" % (HOST, rs[2].port)),
    ]
    for target, want in cases:
        plant(rs[0], text, target)
        px.restart(kill=False)
        info = px.client.info("shardis")        # (answered once the start is done)
        why = info.get("migration_record_ignored_0_0", {}).get("reason", "")
        expect(want in why, "%s: INFO says %r" % (want, why))
        expect(any(" W " in l and want in l for l in open(px.log)), "no warning: " + want)
        expect_eq(px.client.set("x", "1"), True, "SET after a planted record (%s)" % want)
    expect("a migration was under way" not in open(px.log).read(), "a planted record followed")
    expect_eq(rs[2].client.dbsize(), 0, "keys on the foreign server")
    harness.t_exit_clean(px)
    # Another proxy's record (its listen, the same servers and settings) is
    # followed, but this proxy listens, says it listens, and reloads, as
    # its own file says.
    plant(rs[0], text, text)
    px2 = Shardis("record2", rs[:2])
    expect_eq(px2.client.set("x", "1"), True, "starts on another proxy's record")
    info = str(px2.client.info("shardis"))
    expect("%s:%d" % (HOST, px2.port) in info and "%s:%d" % (HOST, px.port) not in info,
           "listen in INFO after taking another proxy's record: %s" % info)
    expect("not applied" not in open(px2.log).read(), "the file not applied at start")
    harness.t_exit_clean(px2)
    # A record written before a reload that added a subkey (a reload that
    # keeps the servers does not rewrite it) is followed by a file that
    # kept its names, and the file's added one applies.
    older = text.replace(b"  servers:", b"  idgen: {subkeys: {name: n}}\n  servers:")
    plant(rs[0], older, older)
    px3 = Shardis("record3", rs[:2], idgen="{subkeys: {name: n, zip: z}}")
    until("the record taken up", lambda: "a migration was under way" in open(px3.log).read())
    until("the file applied", lambda: px3.client.execute_command("SHARD.MINIFY", "zip")
          == [b"z"])
    harness.t_exit_clean(px3)


def excluding(sigil, prefix):
    """ACL patterns for every name that starts with prefix[:i] but not
    prefix[:i+1]: with "[^_$]*"-style first characters, every name that
    does not start with prefix (as `shardis acl` prints them, srvuser.c)."""
    out = []
    for i in range(1, len(prefix)):
        out += [sigil + prefix[:i], "%s%s[^%s]*" % (sigil, prefix[:i], prefix[i])]
    return out


APP_KEYS = ["~[^_$]*"] + excluding("~", "__shardis:") + excluding("~", "$equence{")
APP_CHANNELS = ["&[^_]*"] + excluding("&", "__shardis:")
BACKEND_USERS = [
    ["shardis", "on", ">intpw", "~*", "&*", "+@all"],
    ["app", "on", ">apppw"] + APP_KEYS + APP_CHANNELS +
    ["+@all", "-@dangerous", "-select", "-move", "-copy"],
    ["wide", "on", ">widepw", "~*", "&*", "+@all"],
]
CREDS = dict(backend_user="app", backend_password="apppw", internal_user="shardis",
             internal_password="intpw")


def acl_servers(n):
    extra = []
    for u in BACKEND_USERS:
        extra += ["--user"] + u
    return [RedisServer("acl%d" % i, extra=extra)
            for i in range(n)]


def eval_error(c, script, *keys):
    try:
        c.eval(script, len(keys), *keys)
    except redis.ResponseError as e:
        return str(e)
    return "no error"


def t_backend_user(rs):
    """Scripts run as the least-privileged backend_user; shardis's own work
    as its internal_user, through a group of two proxies and a reload."""
    rs = acl_servers(3)
    try:
        backend_user_checks(rs)
    finally:
        for s in rs:
            s.kill()


def backend_user_checks(rs):
    p1 = Shardis("bu1", rs[:2], admin_commands="true", **CREDS)
    p2 = Shardis("bu2", rs[:2], admin_commands="true", **CREDS)
    # (The check runs after shardis listens: its last line ends it.)
    until("the start check ran", lambda: "clients' user 'app' cannot touch shardis's keys"
          in open(p1.log).read())
    log = open(p1.log).read()
    expect("clients' user 'app' cannot touch shardis's keys" in log and
           "clients' user on the servers" not in log and "internal user 'shardis'" not in log,
           "the start check passed quietly: %s" % log[-600:])
    c = p1.client
    denied_cmd = "can't run this command or subcommand"
    denied_key = "can't access at least one of the keys"
    for script, keys, want in [
            ("return redis.call('FLUSHALL')", ("k",), denied_cmd),
            ("return redis.call('KEYS', '*')", ("k",), denied_cmd),
            ("return redis.call('SELECT', '1')", ("k",), denied_cmd),
            ("return redis.call('MIGRATE', '127.0.0.1', '%d', 'k', '0', '100')"
             % harness.free_port(), ("k",), denied_cmd),
            ("return redis.call('FLUSHDB')", ("k",), denied_cmd),
            ("return redis.call('SET', '__shardis:ctl:alpha', 'x')", ("k",), denied_key),
            ("return redis.call('INCR', '$equence{00}')", ("k",), denied_key),
            ("return redis.call('PUBLISH', '__shardis:group:alpha:x', 'x')", ("k",),
             "can't publish to the channel")]:
        err = eval_error(c, script, *keys)
        expect(want in err, "%s: %r" % (script, err))
    for s in rs[:2]:
        expect_eq(s.client.exists("__shardis:ctl:alpha"), 0, "a record planted")
    # What clients do still works, and shardis's own work does.
    expect_eq(c.eval("return redis.call('SET', KEYS[1], 'v')", 1, "k"), b"OK", "a script")
    for i in range(300):
        c.set("key:%d" % i, i)
    ids = c.execute_command("SHARD.GENKEY", "COUNT", "3")
    expect(len(ids) == 3, "GENKEY: %r" % ids)
    expect_eq(c.execute_command("WAIT", "0", "0"), 0, "WAIT")
    expect(c.dbsize() >= 301, "DBSIZE (a fan-out) %r" % c.dbsize())
    expect(len(c.keys("key:*")) == 300, "KEYS (@dangerous: as the internal user)")
    r3 = Raw(p1.port)
    r3.cmd("HELLO", "3")
    got = r3.cmd("SHARD.GENKEY", "COUNT", "2")
    expect(got.startswith(b"*2\r\n"), "GENKEY in RESP3: %r" % got)
    r3.sock.close()
    # A GENKEY waiting at the gate while the client's pin is given back
    # (a transaction, then WATCH on another server) goes on shardis's own
    # connection, never on the pin, which signs in as the backend_user.
    c.set("big", "x" * (4 << 20))
    ka = next("k%d" % i for i in range(100) if c.execute_command("SHARD.WHEREIS", "k%d" % i)
              == c.execute_command("SHARD.WHEREIS", "big"))
    kb = next("k%d" % i for i in range(100) if c.execute_command("SHARD.WHEREIS", "k%d" % i)
              != c.execute_command("SHARD.WHEREIS", "big"))
    raw = Raw(p1.port, timeout=20)
    step = b"".join(harness.enc(*a) for a in (
        ("GET", "big"), ("MULTI",), ("SET", ka, "1"), ("EXEC",), ("SHARD.GENKEY",),
        ("WATCH", kb), ("UNWATCH",)))
    raw.send(step * 40)
    replies = [raw.reply() for _ in range(7 * 40)]
    bad = [x for x in replies if x.startswith(b"-")]
    expect(not bad, "errors in the pipeline (GENKEY on the pin?): %r" % bad[:2])
    c.delete("big")
    # The users shardis signs in as change only with a restart.
    text = open(p1.conf).read()
    with open(p1.conf, "w") as f:
        f.write(text.replace("backend_user: app", "backend_user: wide")
                .replace("backend_password: apppw", "backend_password: widepw"))
    err = reload(p1)
    expect(b"restart shardis to change them" in err, "a reload changing backend_user: %r" % err)
    with open(p1.conf, "w") as f:
        f.write(text)
    expect("no error" != eval_error(c, "return redis.call('FLUSHALL')", "k"),
           "FLUSHALL from a script after the refused reload")
    expect(c.config_get("maxmemory") == {"maxmemory": "0"}, "CONFIG GET (admin)")
    harness.until("the two proxies see each other (the group's channels)", lambda: all(
        b"group_proxies:2" in px.client.execute_command("SHARD.MIGRATION", "STATUS")
        for px in (p1, p2)))
    # A reload onto a third server: both proxies agree, keys move (the
    # record, MIGRATE with AUTH2, the mover as the internal user).
    for px in (p1, p2):
        text = open(px.conf).read().replace(
            "  servers:\n", "  servers:\n    - %s:%d:1 redis3\n" % (HOST, rs[2].port))
        with open(px.conf, "w") as f:
            f.write(text)
        px.client.execute_command("SHARD.RELOAD")
    harness.until("the migration finished", lambda: all(
        b"state:stable" in px.client.execute_command("SHARD.MIGRATION", "STATUS")
        for px in (p1, p2)), 30)
    expect(rs[2].client.dbsize() > 30, "keys moved to the new server: %d"
           % rs[2].client.dbsize())
    got = [c.get("key:%d" % i) for i in range(300)]
    expect(got == [str(i).encode() for i in range(300)], "values after the move")
    expect_eq(c.flushall(), True, "FLUSHALL (admin, as the internal user)")
    expect_eq(sum(s.client.dbsize() for s in rs), 0, "keys left after FLUSHALL")
    for px in (p1, p2):
        harness.t_exit_clean(px)
    # A backend_user that may do everything: the start check says so.
    p3 = Shardis("bu3", rs[:1], **dict(CREDS, backend_user="wide", backend_password="widepw"))
    until("the start check ran", lambda: "may send keys to any host (MIGRATE)"
          in open(p3.log).read())
    log = open(p3.log).read()
    for what in ("may write shardis's migration record (SET)", "may empty a server (FLUSHALL)",
                 "may send keys to any host (MIGRATE)"):
        expect("clients' user on the servers, 'wide', " + what in log,
               "start check: %r missing in %s" % (what, log[-800:]))
    p3.client.info("server")        # (the loop answers once the start's checks are done)
    harness.t_exit_clean(p3)
    # Each server has users of its own: one where 'app' may do too much is
    # named, whichever place it has in the ring.
    rs[1].client.execute_command("ACL", "SETUSER", "app", "allkeys", "allchannels", "+@all")
    p4 = Shardis("bu4", rs[:2], **CREDS)
    until("the start check ran on the second server", lambda: "may empty a server (FLUSHALL) "
          "on redis2" in open(p4.log).read())
    p4.client.info("server")        # (the checks are over)
    log = open(p4.log).read()
    expect("on redis1" not in log and "cannot touch shardis's keys" not in log,
           "the first server's check or a clean notice: %s" % log[-800:])
    harness.t_exit_clean(p4)


def t_refused_subscription(rs):
    """A subscription a server refuses (-NOPERM for the backend_user) is
    answered, not left on its way: a PUBLISH to that server, which waits
    for subscriptions on their way, went on waiting its whole second."""
    user = ["--user", "narrow", "on", ">narrowpw", "~*", "resetchannels", "&ok*", "+@all"]
    rs = [RedisServer("narrow%d" % i, extra=user) for i in range(2)]
    px = harness.Shardis("refusedsub", rs, backend_user="narrow", backend_password="narrowpw")
    sub = harness.Raw(px.port)
    sub.send(harness.enc("SUBSCRIBE", "nope"))      # narrow's channels: ok*
    sub.reply()
    harness.until("the servers' refusals logged",
                  lambda: "refused a subscription change" in open(px.log).read())
    t = time.monotonic()
    for i in range(5):
        px.client.publish("ok%d" % i, "m")
    took = time.monotonic() - t
    expect(took < 1.0, "5 PUBLISHes took %.2f s" % took)
    sub.close()
    harness.t_exit_clean(px)
    return "5 PUBLISHes in %.3f s" % took


def t_relearn_keeps_reloaded_users(rs):
    """A reload that changes the users and adds a server: the users change
    at once, the servers only once every proxy has them (here a second
    proxy that never agrees holds the switch). A server met for the first
    time in between (it starts only now: its COMMAND reply extends the
    command table) has the users built again against the grown table:
    from the reload's lines, so the user it added stays signed in and the
    one it removed stays out."""
    first, added = rs
    first.kill()
    added.kill()
    px = Shardis("relearn", [first], admin_commands="true",
                 users=users_yaml(["default on nopass ~* &* +@all", "old on >oldpw ~* &* +@all"]))
    text = open(px.conf).read()
    text = text.replace('"old on >oldpw ~* &* +@all"', '"newu on >newpw ~* &* +@all"')
    line = "    - %s:%d:1 redis1\n" % (HOST, first.port)
    text = text.replace(line, line + "    - %s:%d:1 redis2\n" % (HOST, added.port))
    with open(px.conf, "w") as f:
        f.write(text)
    out = reload(px)
    expect(b"servers_added:1" in out, "the reload adds a server: %r" % out)
    until("the servers wait for the group",
          lambda: "switching once every proxy has them" in open(px.log).read())
    newu = Raw(px.port)
    expect_eq(newu.cmd("AUTH", "newu", "newpw"), b"+OK\r\n", "the reload's new user signs in")
    first.launch()
    # A proxy of the group that has not got the new servers: the switch waits.
    fake = first.client.pubsub()
    fake.subscribe("__shardis:group:alpha:fake:S:0:0")
    until("shardis reads the first server's commands",
          lambda: (px.client.get("k"), "commands and subcommands" in open(px.log).read())[1],
          timeout=15)
    expect_eq(newu.cmd("ACL", "WHOAMI"), b"$4\r\nnewu\r\n",
              "the reload's user still signed in after the users were built again")
    again = Raw(px.port)
    expect_eq(again.cmd("AUTH", "newu", "newpw"), b"+OK\r\n", "and it signs in anew")
    old = Raw(px.port)
    expect(old.cmd("AUTH", "old", "oldpw").startswith(b"-WRONGPASS"),
           "the user the reload removed stays out")
    expect("its user 'newu' is gone" not in open(px.log).read(), "no client closed")
    fake.close()
    harness.t_exit_clean(px)


def body():
    run = harness.run_with_servers
    run("a subscription a server refuses holds no PUBLISH", t_refused_subscription, 0)
    run("AUTH user pass, AUTH pass, HELLO AUTH, WHOAMI, WRONGPASS, NOAUTH, #sha256, off, "
        "RESET: as redis-server", t_sign_in, 2)
    run("NOPERM for commands, keys (direct, split, scripts, MULTI, WATCH), channels, SORT "
        "patterns, SHARD.*: as redis-server", t_permissions, 2)
    run("a reload removes a user or turns it off: its connections close; a new password "
        "keeps them; a bad line changes nothing", t_reload, 2)
    run("ACL LIST, GETUSER, DRYRUN, GENPASS, HELP as redis-server for the same users; "
        "NOPERM and admin_commands for LIST, GETUSER, DRYRUN", t_acl_read, 2)
    run("users built again for a grown command table keep a reload's lines while its "
        "servers wait for the group", t_relearn_keeps_reloaded_users, 2)
    run("shardis -t names a bad users line", t_conf_errors, 1)
    run("before AUTH: a multibulk over 10 or a bulk over 16 KiB is refused at its header "
        "(redis-server's text), RSS stays flat", t_preauth, 1)
    run("a planted migration record that changes settings or sends keys to an unnamed "
        "host is not followed and does not stop the start", t_record_trust, 3)
    run("backend_user: scripts get the servers' NOPERM for FLUSHALL, MIGRATE, shardis's keys; "
        "migration, the group, GENKEY, WAIT, admin run as internal_user", t_backend_user, 0)


if __name__ == "__main__":
    sys.exit(harness.main(body))
