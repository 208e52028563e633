#!/usr/bin/python3
"""Servers of several versions behind one pool: shardis learns each kind's
commands from its own COMMAND (proxy/core/cmdinfo.c) and routes a command only
to servers that have it.

- A pool of two Redis 7.0 servers and one Redis 8.0: HEXPIRE and HSETEX on
  a key of the 8.0 server answer as a direct 8.0 server does; on a key of a
  7.0 server shardis says which server lacks the command. HELLO says the
  lowest version, INFO each server's (servers_versions).
- A server restarted as another version (an upgrade) is read again: its
  keys take the new commands.
- CLIENT NO-TOUCH as a direct server keeps it (GET, MULTI, TOUCH, and
  another client's GET on the same shared connection after).
- Redis 8's vector sets (a module's commands) routed by their key specs.
- WAITAOF, SCRIPT SHOW, CLIENT CAPA, ZRANK ... WITHSCORE, and a Valkey-only
  subcommand on Redis 8, as a direct server of the pool's version answers.
- Users' command bits follow what the servers say: a user with +@blocking
  may run WAIT through a pool of Redis 8.0 servers (WAIT is @blocking
  there) but not through one of 7.0 servers (it is not), as the same user
  on a direct server of each version.
"""
import sys
import time

import redis

import harness as h
from harness import (RedisServer, Shardis, check, enc, expect, expect_eq, fresh_servers,
                     main, one_reply, until)


PXS = []    # every shardis started: each must exit clean (sanitizer builds)


def shardis(name, servers, **opts):
    px = Shardis(name, servers, **opts)
    PXS.append(px)
    return px


def commands_read(px):
    """Wait until shardis has merged its servers' COMMAND (its log says so:
    cmdinfo.c), so that what follows meets the servers' table."""
    until("%s read its servers' commands" % px.name,
          lambda: "commands and subcommands" in open(px.log).read())


def with_binary(binary, name, **kw):
    saved = h.ARGS.redis_server
    h.ARGS.redis_server = binary
    try:
        return RedisServer(name, **kw)
    finally:
        h.ARGS.redis_server = saved


def versions(px):
    """INFO's servers_versions, as a dict, or None."""
    v = px.client.info("server").get("servers_versions")
    return v if isinstance(v, dict) and "unknown" not in str(v) else None


def t_mixed(px, servers, direct8):
    want = {"redis1": "redis-7.0.15", "redis2": "redis-7.0.15", "redis3": "redis-8.0.2"}
    got = until("INFO servers_versions", lambda: versions(px) == want and versions(px))
    expect_eq(got, want, "servers_versions")
    hello = h.parse(one_reply(px.port, enc("HELLO", "2")))
    d = dict(zip(hello[::2], hello[1::2]))
    expect_eq((d.get(b"server"), d.get(b"version")), (b"redis", b"7.0.15"),
              "HELLO: the lowest version")
    on8 = px.keys_on("h8:", 2)[0]
    on7 = px.keys_on("h7:", 0)[0]
    for cmd in (["HSETEX", on8, "EX", "100", "FIELDS", "1", "f", "v"],
                ["HEXPIRE", on8, "200", "FIELDS", "1", "f"],
                ["HTTL", on8, "FIELDS", "1", "f"]):
        want_reply = one_reply(direct8.port, enc(*[c if c != on8 else "k" for c in cmd]))
        expect_eq(one_reply(px.port, enc(*cmd)), want_reply, " ".join(map(str, cmd)))
    expect_eq(servers[2].client.execute_command("HTTL", on8, "FIELDS", "1", "f"), [200],
              "HTTL on redis3 itself")
    got = one_reply(px.port, enc("HEXPIRE", on7, "100", "FIELDS", "1", "f"))
    expect_eq(got, b"-ERR unknown command 'hexpire' on server redis1 (redis 7.0.15), which "
              b"owns the key: the pool's servers are of different versions (INFO "
              b"servers_versions)\r\n", "HEXPIRE on a 7.0 server's key")
    return ""


def t_upgrade(px, servers, redis8):
    until("all 7.0", lambda: versions(px) is None and
          px.client.info("server").get("redis_version") == "7.0.15")
    key = px.keys_on("up:", 0)[0]
    refused = one_reply(px.port, enc("HSETEX", key, "EX", "100", "FIELDS", "1", "f", "v"))
    expect(refused.startswith(b"-ERR unknown command 'HSETEX'"),
           "HSETEX on 7.0: the server's own error: %r" % refused)
    old = servers[0]
    old.kill()
    old.proc = h.start([redis8, "--port", str(old.port), "--bind", h.HOST, "--save", "",
                        "--appendonly", "no", "--dir", old.dir], old.dir + "/log8")
    h.wait_port(old.port, old.proc, "redis-server 8 as redis1", [old.dir + "/log8"])
    until("redis1 read again as 8.0.2",
          lambda: (versions(px) or {}).get("redis1") == "redis-8.0.2")
    got = until("HSETEX on the upgraded server's key", lambda: one_reply(
        px.port, enc("HSETEX", key, "EX", "100", "FIELDS", "1", "f", "v")) == b":1\r\n")
    expect(got, "HSETEX after the upgrade")
    other = px.keys_on("up:", 1)[0]
    got = one_reply(px.port, enc("HSETEX", other, "EX", "100", "FIELDS", "1", "f", "v"))
    expect(got.startswith(b"-ERR unknown command 'hsetex' on server redis2 (redis 7.0.15)"),
           "HSETEX on a 7.0 server's key after redis1's upgrade: %r" % got)
    return ""


USER = "u on nopass ~* &* +@blocking +ping +hello +info"
# A line with blanks before the name (a quoted YAML scalar keeps them): its
# rules hold after the servers' commands are learned (acl_relearn once
# gave such a user every command).
BLANK = "  b on nopass ~* &* -@all +get +hello"


def wait_as_u(port):
    """WAIT 0 0 as user u: its reply, or its error (the start of its text)."""
    c = redis.Redis(h.HOST, port, username="u", password="x", socket_timeout=10)
    try:
        return c.execute_command("WAIT", "0", "0")
    except redis.ResponseError as e:
        return "error: " + str(e)[:60]
    finally:
        c.close()


def t_acl_follows(binary, version):
    """WAIT is @blocking in Redis 8.0, not in 7.0: a +@blocking user's
    WAIT through shardis is what it is on a direct server of the pool's
    version."""
    direct = with_binary(binary, "acl-direct-" + version)
    direct.client.execute_command("ACL", "SETUSER", *USER.split())
    want = wait_as_u(direct.port)
    servers = [with_binary(binary, "acl-%s-%d" % (version, i)) for i in range(2)]
    px = shardis("acl-" + version, servers, users="['%s', '%s']" % (USER, BLANK))
    commands_read(px)
    expect_eq(wait_as_u(px.port), want, "a +@blocking user's WAIT on %s" % version)
    b = redis.Redis(h.HOST, px.port, username="b", password="x", socket_timeout=10)
    try:
        b.execute_command("SET", "b:k", "v")
    except redis.ResponseError as e:
        expect("no permissions" in str(e), "SET as b: %s" % e)
    else:
        raise h.Fail("SET as b (-@all +get), after the servers were read: allowed")
    finally:
        b.close()
    return want


# What a newer server adds outside the keyed commands (test_commands.py has
# those), each answered as a direct server of that version answers it.
NEWER = [
    (["WAITAOF", "0", "0", "10"], "both"),    # every server's, the least of each count
    (["SCRIPT", "SHOW", "SHA"], "both"),      # Valkey 8: the first server's (SCRIPT
                                              # LOAD put it on every one); Redis 8: unknown
    (["CLIENT", "CAPA", "redirect"], "both"), # Valkey 8: shardis sends no -REDIRECT
    # Valkey 8 only (shardis's table has it from Valkey): unknown to Redis 8
    (["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "1"], "redis8"),
    (["ZRANK", "z", "m", "WITHSCORE"], "both"),   # 7.2's arity
]


def t_newer(binary, name):
    direct = with_binary(binary, "newer-direct-" + name)
    servers = [with_binary(binary, "newer-%s-%d" % (name, i)) for i in range(3)]
    px = shardis("newer-" + name, servers)
    commands_read(px)
    sha = direct.client.script_load("return 1")
    expect_eq(px.client.script_load("return 1"), sha, "SCRIPT LOAD")
    for c in (direct.client, px.client):
        c.zadd("z", {"m": 1})
    bad = []
    for cmd, where in NEWER:
        if where not in ("both", name):
            continue
        cmd = [sha if x == "SHA" else x for x in cmd]
        got, want = one_reply(px.port, enc(*cmd)), one_reply(direct.port, enc(*cmd))
        if got != want:
            bad.append("%s: got %r, want %r" % (" ".join(cmd), got[:80], want[:80]))
    expect(not bad, "; ".join(bad))
    return ""


def t_vector_sets(binary):
    """Redis 8's vector sets (the vectorset module's commands, which declare
    key specs) through shardis, keys on every server: replies as one
    server's, each key on the server SHARD.WHEREIS names."""
    direct = with_binary(binary, "vs-direct")
    servers = [with_binary(binary, "vs-%d" % i) for i in range(3)]
    px = shardis("vs", servers)
    commands_read(px)
    keys = [px.keys_on("vs%d:" % i, i)[0].decode() for i in range(3)]
    for k in keys:
        for cmd in (["VADD", k, "VALUES", "2", "1", "0", "a"],
                    ["VADD", k, "VALUES", "2", "0", "1", "b"],
                    ["VCARD", k], ["VDIM", k], ["VSIM", k, "ELE", "a", "COUNT", "1"],
                    ["VREM", k, "b"], ["VCARD", k]):
            expect_eq(one_reply(px.port, enc(*cmd)), one_reply(direct.port, enc(*cmd)),
                      " ".join(cmd[:1] + cmd[2:]))
    where = px.whereis([k.encode() for k in keys])
    expect_eq([[i for i, srv in enumerate(servers) if srv.client.exists(k)] for k in keys],
              [[where[k.encode()]] for k in keys], "each set on its owner only")
    return "%d sets on %d servers" % (len(keys), len(set(where.values())))


MINIFY = "{types: {user: 1, post: 2}, subkeys: {name: n, city: c}, minify: [user]}"


def t_minify_newer(binary):
    """Redis 7.4's hash-field commands name fields that idgen.minify would
    store short: on a minified key they are refused, not run on the long
    names (which act on no field); elsewhere they run."""
    servers = [with_binary(binary, "mini8-%d" % i) for i in range(2)]
    px = shardis("mini8", servers, idgen=MINIFY)
    commands_read(px)
    user = px.client.execute_command("SHARD.GENKEY", "user").decode()
    post = px.client.execute_command("SHARD.GENKEY", "post").decode()
    for key in (user, post):
        px.client.hset(key, mapping={"name": "a", "city": "b"})
    got = one_reply(px.port, enc("HEXPIRE", user, "100", "FIELDS", "1", "name"))
    expect_eq(got, b"-ERR command 'hexpire' is not mapped by idgen.minify: on this key it "
              b"would not see the stored field names\r\n", "HEXPIRE on a minified key")
    expect_eq(px.client.ttl(user), -1, "nothing changed")
    expect_eq(one_reply(px.port, enc("HLEN", user)), b":2\r\n", "HLEN on it: as it is")
    expect_eq(one_reply(px.port, enc("HEXPIRE", post, "100", "FIELDS", "1", "name")),
              b"*1\r\n:1\r\n", "HEXPIRE on a key of a type not minified")
    return ""


def notouch_story(port, keys):
    """CLIENT NO-TOUCH as one client (a) uses it while another (b) does not,
    on one server or through shardis (whose connections they share): each
    step's OBJECT IDLETIME of its key, as 'kept' (2 s or more: not
    touched) or 'touched'."""
    a = redis.Redis(h.HOST, port, socket_timeout=10)
    b = redis.Redis(h.HOST, port, socket_timeout=10)
    out = []
    try:
        for k in keys:
            a.set(k, "v")
        time.sleep(2.2)

        def idle(k):
            return "kept" if b.object("idletime", k) >= 2 else "touched"
        out.append(("no-touch", a.execute_command("CLIENT", "NO-TOUCH", "ON")))
        a.get(keys[0])
        out.append(("GET with NO-TOUCH", idle(keys[0])))
        pipe = a.pipeline(transaction=True)
        pipe.get(keys[0]).strlen(keys[0])
        pipe.execute()
        out.append(("MULTI GET with NO-TOUCH", idle(keys[0])))
        a.touch(keys[1])
        out.append(("TOUCH with NO-TOUCH", idle(keys[1])))
        b.get(keys[0])
        out.append(("another client's GET after", idle(keys[0])))
        a.set(keys[2], "w")
        out.append(("flags", "T" in a.execute_command("CLIENT", "INFO").decode().split(
            "flags=")[1].split()[0]))
    finally:
        a.close()
        b.close()
    return out


def t_notouch(binary, name):
    direct = with_binary(binary, "nt-direct-" + name)
    servers = [with_binary(binary, "nt-%s-%d" % (name, i)) for i in range(3)]
    px = shardis("nt-" + name, servers)
    commands_read(px)
    keys = [px.keys_on("nt%d:" % i, i)[0].decode() for i in range(3)]
    expect_eq(notouch_story(px.port, keys), notouch_story(direct.port, keys),
              "CLIENT NO-TOUCH through shardis vs one %s server" % name)
    return ""


def body():
    for binary, name in ((h.ARGS.redis8, "redis8"), (h.ARGS.valkey8, "valkey8")):
        check("client_no_touch_" + name, t_notouch, binary, name)
    check("minify_refuses_newer_hash_commands", t_minify_newer, h.ARGS.redis8)
    check("vector_sets_routed_by_their_key_specs", t_vector_sets, h.ARGS.redis8)
    for binary, name in ((h.ARGS.redis8, "redis8"), (h.ARGS.valkey8, "valkey8")):
        check("newer_commands_" + name, t_newer, binary, name)
    redis8 = h.ARGS.redis8
    direct8 = with_binary(redis8, "direct8")
    servers = fresh_servers(2) + [with_binary(redis8, "redis3")]
    px = shardis("mixed", servers)
    check("mixed_versions", t_mixed, px, servers, direct8)
    servers = fresh_servers(3)
    px = shardis("upgrade", servers)
    check("upgrade_read_again", t_upgrade, px, servers, redis8)
    check("acl_follows_7.0", t_acl_follows, h.ARGS.redis_server, "7.0")
    check("acl_follows_8.0", t_acl_follows, redis8, "8.0")
    for px in PXS:
        check("exit_clean_" + px.name, h.t_exit_clean, px)


if __name__ == "__main__":
    def args(ap):
        ap.add_argument("--redis8", required=True, help="a Redis 8.0.2 redis-server")
        ap.add_argument("--valkey8", required=True, help="a Valkey 8.0.1 valkey-server")
    sys.exit(main(body, add_args=args))
