#!/usr/bin/python3
"""test_ha.py -- following Redis Sentinel: 3 shards, each a master and a
replica, watched by 3 Sentinels (redis-server --sentinel, the program
Debian's redis-sentinel runs), all real processes on loopback ports:

- at start the masters are found by name wherever the file's first guess
  points (a replica, a dead port), and written to there;
- kill -9 of a master: shardis routes its keys to the promoted replica
  within a second of the Sentinels' +switch-master; every write that was
  acknowledged and replicated (WAIT 1) before the kill is on the new
  master; no key moves shard; writers on the other shards see no error;
- a manual SENTINEL FAILOVER (the old master alive and demoted) is
  followed; the old master, restarted and rejoined as a replica, gets no
  write from shardis (MONITOR);
- a Sentinel that lies (a minority naming another server) is outvoted;
- a master no Sentinel majority knows answers its keys with an error and
  the rest of the pool works;
- a source master killed while a reload's keys move off it: no key is
  left behind, every acknowledged and replicated write reads back;
- read_from: replica sends reads (GET, a split MGET, in RESP2 and 3) to
  the replicas and writes, transactions and WATCH to the masters; after
  the failovers reads follow the new replicas; a shard whose replica
  died answers reads with an error, or (prefer_replica) from its master.

Run: /usr/bin/python3 tests/integration/test_ha.py --shardis build/shardis
"""
import os
import re
import signal
import socket
import sys
import threading
import time

import redis

import harness
from harness import Fail, RedisServer, Shardis, check, expect, expect_eq, expect_refused, t_exit_clean, until

DOWN_AFTER = 300


class Sentinel:
    """A redis-server --sentinel of our own, watching masters {name: port}."""

    def __init__(self, name, masters, quorum=2, password=None):
        self.port = harness.free_port()
        self.dir = os.path.join(harness.TMP, name)
        os.mkdir(self.dir)
        conf = os.path.join(self.dir, "sentinel.conf")
        lines = ["port %d" % self.port, "bind %s" % harness.HOST, "dir %s" % self.dir]
        for m, port in masters.items():
            lines += ["sentinel monitor %s %s %d %d" % (m, harness.HOST, port, quorum),
                      "sentinel down-after-milliseconds %s %d" % (m, DOWN_AFTER),
                      "sentinel failover-timeout %s 3000" % m]
        if password is not None:
            lines.append("requirepass %s" % password)
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        log = os.path.join(self.dir, "log")
        self.proc = harness.start([harness.ARGS.redis_server, conf, "--sentinel"], log)
        harness.wait_port(self.port, self.proc, "sentinel " + name, [log])
        self.client = redis.Redis(harness.HOST, self.port, socket_timeout=5,
                                  password=password, decode_responses=True)

    def master(self, name):
        addr = self.client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
        return int(addr[1]) if addr else None


class Addr:
    def __init__(self, port):
        self.port = port


def shard_set(tag=""):
    """3 masters, a replica each; Sentinels that know all of them."""
    masters = [RedisServer("%sm%d" % (tag, i)) for i in range(3)]
    replicas = [RedisServer("%sr%d" % (tag, i), extra=["--replicaof", harness.HOST,
                                                        str(m.port)])
                for i, m in enumerate(masters)]
    for r in replicas:
        until("replica in sync", lambda: r.client.info("replication")
              .get("master_link_status") == "up")
    names = {"redis%d" % (i + 1): m.port for i, m in enumerate(masters)}
    sentinels = [Sentinel("%ss%d" % (tag, i), names) for i in range(3)]
    for s in sentinels:     # each knows the others and the replicas before any kill
        until("sentinels see each other", lambda: all(
            int(s.client.execute_command("SENTINEL", "MASTER", n)[
                s.client.execute_command("SENTINEL", "MASTER", n).index(
                    "num-other-sentinels") + 1]) == 2 for n in names), timeout=15)
    return masters, replicas, sentinels


def server_of(port, servers):
    return next(s for s in servers if s.port == port)


def sentinel_conf(sentinels):
    return "[%s]" % ", ".join("%s:%d" % (harness.HOST, s.port) for s in sentinels)


def t_start(px, masters, replicas):
    """The first guesses were a replica, a dead port and the master: each
    shard's keys are written on its master."""
    nodes = px.client.execute_command("SHARD.NODES")
    for i, node in enumerate(nodes):
        d = dict(zip(node[::2], node[1::2]))
        expect_eq(d[b"master"], ("%s:%d" % (harness.HOST, masters[i].port)).encode(),
                  "shard %d's master" % i)
    for i in range(3):
        k = px.keys_on("start", i)[0]
        px.client.set(k, "v")
        expect_eq(masters[i].client.get(k), b"v", "written on master %d" % i)


class Writers:
    """A writer per shard: SET then WAIT 1, recording what was acknowledged
    and replicated, and every error with its time."""

    def __init__(self, px, keys_by_shard):
        self.stop = False
        self.acked = {i: [] for i in keys_by_shard}
        self.errors = {i: [] for i in keys_by_shard}
        self.first_ok_after = {}
        self.mark = None
        self.threads = [threading.Thread(target=self.run, args=(px.port, i, keys))
                        for i, keys in keys_by_shard.items()]
        for t in self.threads:
            t.start()

    def run(self, port, shard, keys):
        c = redis.Redis(harness.HOST, port, socket_timeout=5)
        n = 0
        while not self.stop:
            k = keys[n % len(keys)]
            v = "%d" % n
            n += 1
            try:
                c.set(k, v)
                # (WAIT goes to every server: shard 0's writer alone asks.)
                if shard == 0 and c.execute_command("WAIT", 1, 200) >= 1:
                    self.acked[shard].append((time.monotonic(), k, v))
                if self.mark is not None and shard not in self.first_ok_after \
                        and time.monotonic() > self.mark:
                    self.first_ok_after[shard] = time.monotonic()
            except redis.RedisError as e:
                self.errors[shard].append((time.monotonic(), str(e)))
                time.sleep(0.02)
            time.sleep(0.005)

    def end(self):
        self.stop = True
        for t in self.threads:
            t.join()


def switch_seen(sentinel, name):
    """A thread that records when sentinel announces +switch-master for name."""
    seen = {}
    ps = redis.Redis(harness.HOST, sentinel.port, decode_responses=True).pubsub()
    ps.subscribe("+switch-master")

    def run():
        for m in ps.listen():
            if m["type"] == "message" and m["data"].split()[0] == name:
                seen["t"] = time.monotonic()
                seen["to"] = int(m["data"].split()[4])
                return
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return seen, ps


def t_kill(px, masters, replicas, sentinels):
    """kill -9 the master of shard 0 under three writers."""
    keys = {i: px.keys_on("kill%d-" % i, i, 20) for i in range(3)}
    where = px.whereis([k for ks in keys.values() for k in ks])
    # SHARD.GENKEY on a logical shard of shard 0: its sequence is on the
    # master, and replicated; the allocator's run_id guard must keep ids
    # unique and ascending across the failover.
    gen = [px.client.execute_command("SHARD.GENKEY").decode() for _ in range(60)]
    near = next(k for k, s in px.whereis(gen).items() if s == 0)
    ids_before = px.client.execute_command("SHARD.GENKEY", "COUNT", 100, "NEAR", near)
    w = Writers(px, keys)
    time.sleep(1.0)
    seen, ps = switch_seen(sentinels[0], "redis1")
    t_kill = time.monotonic()
    masters[0].kill()
    w.mark = t_kill
    try:
        until("the Sentinels' switch", lambda: "t" in seen, timeout=15)
        until("a write to shard 0 after the switch", lambda: 0 in w.first_ok_after and
              w.first_ok_after[0] > seen["t"], timeout=5)
    except Fail as e:
        w.end()
        raise Fail("%s; shard 0's last errors %r; log: %s" % (
            e, w.errors[0][-3:], "".join(open(px.log).readlines()[-15:])))
    time.sleep(0.5)
    w.end()
    ps.close()
    took = w.first_ok_after[0] - seen["t"]
    expect(took < 1.0, "shard 0 writable %.3f s after +switch-master" % took)
    new = server_of(seen["to"], replicas)
    expect(new is replicas[0], "the promoted one is shard 0's replica")
    # Every write acknowledged and replicated before the kill is there.
    last = {}
    for t, k, v in w.acked[0]:
        if t < t_kill:
            last[k] = v
    got = new.client.mget(list(last))
    lost = [k for k, g in zip(last, got) if g is None or int(g) < int(last[k])]
    expect(not lost, "acknowledged writes missing on the new master: %r" % lost[:5])
    # The promoted replica has this pool's clients' user (srvuser.c: made
    # on each connection shardis opens there; other checks' shardis, with
    # other rules, made theirs) and clients' connections signed in as it:
    # a script there is no more than a client.
    mine = re.search(r"clients_user=(shardis-clients-[0-9a-f]+)",
                     harness.Raw(px.port).cmd("INFO", "shardis").decode()).group(1)
    users = [l.split()[1] for l in new.client.acl_list() if "shardis-clients-" in l]
    expect(mine in users, "the clients' user %s on the new master: %r" % (mine, users))
    signed = {c["user"] for c in new.client.client_list()}
    expect(mine in signed, "connections signed in as %s on the new master: %r"
           % (mine, signed))
    # Keys never moved shard; the other shards never saw an error.
    expect_eq(px.whereis(list(where)), where, "placement")
    for i in (1, 2):
        expect_eq(w.errors[i], [], "errors on shard %d" % i)
    nodes = px.client.execute_command("SHARD.NODES")
    d = dict(zip(nodes[0][::2], nodes[0][1::2]))
    expect_eq(d[b"master"], ("%s:%d" % (harness.HOST, new.port)).encode(), "SHARD.NODES")
    expect_eq(d[b"switches"], 1, "switches")
    info = harness.Raw(px.port).cmd("INFO", "shardis").decode()
    expect(",master=%s:%d,config_epoch=" % (harness.HOST, new.port) in info and
           "switches=1" in info, "INFO shardis: %s" % info)
    ids_after = px.client.execute_command("SHARD.GENKEY", "COUNT", 100, "NEAR", near)
    expect_eq(len(set(ids_before) | set(ids_after)), 200, "ids unique across the failover")
    expect(max(ids_before) < min(ids_after), "ids ascending across the failover")
    expect_eq(px.whereis(ids_after[:1])[ids_after[0]], 0, "on shard 0")
    return "shard 0 writable %.0f ms after +switch-master (%.0f ms after the kill); " \
           "%d errors on it meanwhile, none elsewhere" % (
               took * 1000, (w.first_ok_after[0] - t_kill) * 1000, len(w.errors[0]))


def t_manual(px, masters, replicas, sentinels):
    """SENTINEL FAILOVER of shard 1: followed; a client that tracks keys
    (CLIENT TRACKING) and read one there is told to drop everything (the
    new master tracks nothing it read); the demoted old master, and the
    old master of shard 0 restarted as a replica, get no write."""
    old = masters[1]
    tk = px.keys_on("tracked", 1)[0]
    px.client.set(tk, "1")
    tracker = harness.Raw(px.port, timeout=15)
    tracker.cmd("HELLO", "3")
    expect_eq(tracker.cmd("CLIENT", "TRACKING", "ON"), b"+OK\r\n", "CLIENT TRACKING ON")
    expect_eq(tracker.cmd("GET", tk), b"$1\r\n1\r\n", "the tracked read")
    seen, ps = switch_seen(sentinels[1], "redis2")
    sentinels[1].client.execute_command("SENTINEL", "FAILOVER", "redis2")
    until("the switch", lambda: "t" in seen, timeout=15)
    ps.close()
    expect_eq(tracker.reply(), b">2\r\n$10\r\ninvalidate\r\n_\r\n",
              "the tracking client's push after the failover")
    tracker.close()
    new = server_of(seen["to"], replicas)
    k = px.keys_on("manual", 1)[0]

    def written():
        # A write sent before shardis heard of the switch went to the old
        # master, which the Sentinel pauses while it promotes: failed when
        # shardis moves (pool_server_move), as on any connection that goes.
        try:
            px.client.set(k, "after")
        except redis.ResponseError as e:
            if "unavailable: its master moved" in str(e):
                return False
            raise
        return new.client.get(k) == b"after"
    until("a write to the new master", written, timeout=3)
    # The proxy's group registration (its channel) follows to the new master.
    until("the group's channel on the new master", lambda: new.client.pubsub_channels(
        "__shardis:group:alpha:*"), timeout=5)
    # The old master of shard 0 comes back. The Sentinels make both
    # replicas, when they next look (their INFO period is 10 s).
    masters[0].launch()

    def demoted(srv):
        # (a Sentinel that demotes a master kills its normal clients,
        # CLIENT KILL TYPE normal: this test's own connection to it too)
        try:
            info = srv.client.info("replication")
        except redis.ConnectionError:
            return False
        return info["role"] == "slave" and info["master_link_status"] == "up"
    until("the old masters demoted", lambda: all(demoted(srv) for srv in (old, masters[0])),
          timeout=40)
    # Whatever reaches the old ones now comes from their masters' links.
    spies = []
    for srv in (old, masters[0]):
        m = redis.Redis(harness.HOST, srv.port, socket_timeout=5).monitor()
        m.__enter__()
        spies.append(m)
    for i in range(100):
        for shard in (0, 1):
            px.client.set(px.keys_on("spy%d-" % shard, shard)[0], i)
    links = {(srv, server_of(int(srv.client.info("replication")["master_port"]),
                            masters + replicas)) for srv in (old, masters[0])}
    links = {srv.port: m.port for srv, m in links}
    time.sleep(0.3)
    seen_cmds = 0
    for srv, spy in zip((old, masters[0]), spies):
        # (The stream never ends: Sentinels ping every second. 2 s of it.)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                cmd = spy.next_command()
            except redis.TimeoutError:
                break
            seen_cmds += cmd["command"].startswith("SET")
            if cmd["command"].startswith(("PING", "REPLCONF", "INFO", "SELECT", "SUBSCRIBE",
                                          "PUBLISH", "CLIENT", "ROLE", "HELLO")):
                continue
            if cmd.get("client_address") in (None, "", "lua"):
                continue
            expect(int(cmd["client_port"]) == links[srv.port],
                   "a command from a client on the old master %d: %r" % (srv.port, cmd))
        spy.__exit__(None, None, None)
    expect(seen_cmds > 0, "MONITOR showed the replicated writes")
    return "shard 1 moved to %d; %d replicated SETs seen on the old masters, none of a " \
           "client's" % (new.port, seen_cmds)


def t_liar(masters, replicas, sentinels):
    """A Sentinel that names another server for a master (it watches a
    server of its own under that name) is outvoted by the other two."""
    stale = RedisServer("stale")
    liar = Sentinel("liar", {"redis3": stale.port}, quorum=1)
    first = [Addr(p) for p in (masters[0].port, masters[1].port, stale.port)]
    px = Shardis("liar", first, sentinels=sentinel_conf([liar] + sentinels[:2]))
    nodes = px.client.execute_command("SHARD.NODES")
    d = dict(zip(nodes[2][::2], nodes[2][1::2]))
    expect_eq(d[b"master"], ("%s:%d" % (harness.HOST, masters[2].port)).encode(),
              "the majority's master")
    k = px.keys_on("liar", 2)[0]
    px.client.set(k, "x")
    expect_eq(masters[2].client.get(k), b"x", "on the true master")
    expect_eq(stale.client.get(k), None, "not on the liar's")
    t_exit_clean(px)
    for proc in (liar.proc, stale.proc):
        harness.stop(proc)


def t_unknown_master(masters, sentinels):
    """A server named as no Sentinel knows: its keys get an error, the
    others work."""
    lines = ["unknown:", "  listen: %s:%d" % (harness.HOST, harness.free_port()),
             '  hash_tag: "{}"', "  sentinels: %s" % sentinel_conf(sentinels),
             "  servers:"]
    port = int(lines[1].rsplit(":", 1)[1])
    names = ["redis1", "redis2", "nosuch"]
    lines += ["    - %s:%d:1 %s" % (harness.HOST, masters[i].port, n) for i, n in enumerate(names)]
    conf = os.path.join(harness.TMP, "unknown.yml")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    log = os.path.join(harness.TMP, "unknown.log")
    proc = harness.start([harness.ARGS.shardis, "-c", conf, "-v", "6", "-o", log], log + ".out")
    harness.wait_port(port, proc, "shardis unknown", [log])
    c = redis.Redis(harness.HOST, port, socket_timeout=5)
    where = {}
    for i in range(200):
        k = "u%d" % i
        where.setdefault(c.execute_command("SHARD.WHEREIS", k), k)
    expect_refused(lambda: c.set(where[b"nosuch"], "x"), "Sentinels have not agreed",
                   "a write to a master no Sentinel knows")
    expect(c.set(where[b"redis1"], "x"), "another shard works")
    nodes = c.execute_command("SHARD.NODES")
    d = dict(zip(nodes[2][::2], nodes[2][1::2]))
    expect_eq((d[b"state"], d[b"master"]), (b"unresolved", b"unknown"), "SHARD.NODES")
    harness.stop(proc)


def t_sentinel_auth():
    """Sentinels with a password: with sentinel_auth, shardis finds the
    master where the file's guess is a dead port (the start's question)
    and its link to each Sentinel signs in and stays up (HELLO 3 AUTH);
    with a wrong password, nothing is followed, the master stays
    unresolved, and the log says the Sentinel refused."""
    master = RedisServer("authm")
    sents = [Sentinel("auths%d" % i, {"redis1": master.port}, quorum=1, password="s3nt")
             for i in range(2)]
    conf = sentinel_conf(sents)
    good = Shardis("sauth", [Addr(harness.free_port())], sentinels=conf, sentinel_auth="s3nt")
    node = good.client.execute_command("SHARD.NODES")[0]
    d = dict(zip(node[::2], node[1::2]))
    expect_eq(d[b"master"], ("%s:%d" % (harness.HOST, master.port)).encode(),
              "the master, from Sentinels that want a password")
    k = good.keys_on("sauth", 0)[0]
    good.client.set(k, "v")
    expect_eq(master.client.get(k), b"v", "written on the master")

    def linked():
        with open(good.log) as f:
            text = f.read()
        return all(("Sentinel %s:%d linked" % (harness.HOST, s.port)) in text for s in sents)
    until("both links signed in", linked, timeout=10)
    # Signed in and subscribed: each Sentinel lists a client with a
    # subscription (shardis's link, on +switch-master).
    until("the links subscribed", lambda: all(
        any(int(c.get("sub", 0)) >= 1 for c in s.client.client_list()) for s in sents),
        timeout=10)
    t_exit_clean(good)
    bad = Shardis("sauthbad", [Addr(harness.free_port())], sentinels=conf,
                  sentinel_auth="wrong")
    node = bad.client.execute_command("SHARD.NODES")[0]
    d = dict(zip(node[::2], node[1::2]))
    expect_eq(d[b"state"], b"unresolved", "no master followed with a wrong password")

    def refused():
        with open(bad.log) as f:
            text = f.read()
        return "WRONGPASS" in text or "invalid password" in text
    until("the log says the Sentinel refused", refused, timeout=10)
    t_exit_clean(bad)
    for p in [master.proc] + [s.proc for s in sents]:
        harness.stop(p)


def sentinel_failures(px, sentinel):
    """How many times px's log says its link to sentinel failed."""
    with open(px.log) as f:
        text = f.read()
    return text.count("Sentinel %s:%d: " % (harness.HOST, sentinel.port))


def t_sentinel_stopped():
    """A Sentinel that stops answering (SIGSTOP: the kernel still takes
    new connections for it) fails its link by the questions' deadline,
    and again each time the link is made anew, since the new connection's
    HELLO is not answered either: the link is never held by a Sentinel
    that took the connection and went quiet."""
    master = RedisServer("stopm")
    sent = Sentinel("stops", {"redis1": master.port}, quorum=1)
    px = Shardis("sstop", [Addr(master.port)], sentinels=sentinel_conf([sent]))

    def linked():
        with open(px.log) as f:
            return ("Sentinel %s:%d linked" % (harness.HOST, sent.port)) in f.read()
    until("the link is made", linked, timeout=10)
    before = sentinel_failures(px, sent)
    os.kill(sent.proc.pid, signal.SIGSTOP)
    try:
        until("the link fails twice: its questions, then the next connection's HELLO",
              lambda: sentinel_failures(px, sent) >= before + 2, timeout=15)
        k = px.keys_on("sstop", 0)[0]
        expect(px.client.set(k, "v"), "the pool serves by the master it followed")
    finally:
        os.kill(sent.proc.pid, signal.SIGCONT)
    t_exit_clean(px)
    for p in (master.proc, sent.proc):
        harness.stop(p)


class FloodRelay:
    """A relay in front of a real Sentinel, for a fault no Sentinel makes:
    once flood() is called, what it sends shardis is one bulk string's
    header and then bytes without end (up to `cap`), as a broken or hostile
    Sentinel might. sent counts the flood's bytes that were taken."""

    def __init__(self, target, cap=48 << 20):
        self.target, self.cap, self.sent = target, cap, 0
        self.flooding = threading.Event()
        self.lsock = socket.socket()
        self.lsock.bind((harness.HOST, 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.conns = []
        self.gone = set()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            up = socket.create_connection((harness.HOST, self.target))
            self.conns.append(c)
            threading.Thread(target=self.pump, args=(c, up, False), daemon=True).start()
            threading.Thread(target=self.pump, args=(up, c, True), daemon=True).start()

    def pump(self, src, dst, to_shardis):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data and not to_shardis:
                self.gone.add(src)      # (shardis closed this one)
            if not data or (to_shardis and self.flooding.is_set()):
                return
            try:
                dst.sendall(data)
            except OSError:
                return

    def flood(self):
        self.flooding.set()
        chunk = b"x" * 65536
        # The newest connection shardis has not closed (a link that failed
        # under a slow build's load and came again leaves one behind it).
        for c in reversed(self.conns):
            if c in self.gone:
                continue
            try:
                c.sendall(b"$%d\r\n" % (self.cap * 2))
            except OSError:
                continue
            try:
                while self.sent < self.cap:
                    c.sendall(chunk)
                    self.sent += len(chunk)
            except OSError:
                pass    # shardis closed it
            return

    def close(self):
        self.lsock.close()
        for c in self.conns:
            c.close()


def t_sentinel_reply_too_long():
    """A Sentinel's link takes no reply longer than a Sentinel has reason
    to send (1 MiB): one that sends a bulk without end has its link
    failed ("a reply too long"), and shardis holds nothing of it."""
    master = RedisServer("floodm")
    sent = Sentinel("floods", {"redis1": master.port}, quorum=1)
    relay = FloodRelay(sent.port)
    px = Shardis("sflood", [Addr(master.port)],
                 sentinels="[%s:%d]" % (harness.HOST, relay.port))

    def linked():
        with open(px.log) as f:
            return ("Sentinel %s:%d linked" % (harness.HOST, relay.port)) in f.read()
    until("the link is made", linked, timeout=10)
    rss = harness.rss(px.pid)
    flooder = threading.Thread(target=relay.flood, daemon=True)
    flooder.start()
    flooder.join(timeout=30)
    with open(px.log) as f:
        text = f.read()
    expect("Sentinel %s:%d: a reply too long" % (harness.HOST, relay.port) in text,
           "the link failed for its reply's length (%d bytes taken)" % relay.sent)
    expect(relay.sent < 24 << 20, "shardis stopped taking the flood: %d bytes" % relay.sent)
    grew = harness.rss(px.pid) - rss
    expect(grew < 16 << 20, "RSS grew %d KiB" % (grew >> 10))
    t_exit_clean(px)
    relay.close()
    for p in (master.proc, sent.proc):
        harness.stop(p)


def t_replica_named():
    """A majority of Sentinels naming a replica (they watch it as a
    master): nothing of a client's is written there, though the replica
    would take writes (replica-read-only no)."""
    m = RedisServer("lone-m")
    r = RedisServer("lone-r", extra=["--replicaof", harness.HOST, str(m.port),
                                     "--replica-read-only", "no"])
    until("replica in sync", lambda: r.client.info("replication")
          .get("master_link_status") == "up")
    sx = [Sentinel("sx%d" % i, {"lone": r.port}) for i in range(2)]
    port = harness.free_port()
    conf = os.path.join(harness.TMP, "lone.yml")
    with open(conf, "w") as f:
        f.write("lone:\n  listen: %s:%d\n  sentinels: %s\n  servers:\n    - %s:%d:1 lone\n"
                % (harness.HOST, port, sentinel_conf(sx), harness.HOST, m.port))
    log = os.path.join(harness.TMP, "lone.log")
    proc = harness.start([harness.ARGS.shardis, "-c", conf, "-v", "6", "-o", log], log + ".out")
    harness.wait_port(port, proc, "shardis lone", [log])
    c = redis.Redis(harness.HOST, port, socket_timeout=5)
    until("the loop", lambda: c.execute_command("SHARD.NODES"))
    errors, oks = 0, []
    deadline = time.monotonic() + 3.0      # (the rounds resolve it again and again)
    i = 0
    while time.monotonic() < deadline:
        for cmd in (("SET", "k%d" % i, "v"), ("GET", "k%d" % i)):
            try:
                got = c.execute_command(*cmd)
                oks.append((cmd[0], got))
            except redis.ResponseError:
                errors += 1
        i += 1
        time.sleep(0.01)
    expect_eq(r.client.dbsize(), 0, "keys on the replica")
    expect_eq(m.client.dbsize(), 0, "keys on the master the Sentinels do not name")
    expect(errors == 2 * i, "every request refused: %d of %d, answered: %r" % (
        errors, 2 * i, oks[:4]))
    expect(any("does not say it is a master" in l for l in open(log)), "the log says why")
    for p in [proc] + [x.proc for x in sx] + [r.proc, m.proc]:
        harness.stop(p)
    return "%d requests, none written" % (2 * i)


def cmdstat(srv, cmd):
    return srv.client.info("commandstats").get("cmdstat_" + cmd, {}).get("calls", 0)


def reads_on(servers, cmd):
    return [cmdstat(srv, cmd) for srv in servers]


def t_replica_reads(px, masters, replicas):
    """read_from: replica: reads go to the replicas, everything else, and
    reads inside MULTI or under WATCH, to the masters."""
    keys = {i: px.keys_on("rr%d-" % i, i, 10) for i in range(3)}
    for i in range(3):
        for k in keys[i]:
            px.client.set(k, k)
    for i in range(3):
        until("replicated", lambda: replicas[i].client.exists(*keys[i]) == len(keys[i]))
    nodes = px.client.execute_command("SHARD.NODES")
    for i, node in enumerate(nodes):
        d = dict(zip(node[::2], node[1::2]))
        expect_eq(d[b"read-replicas"], ("%s:%d" % (harness.HOST, replicas[i].port)).encode(),
                  "shard %d's replica read from" % i)
    for srv in masters + replicas:
        srv.client.config_resetstat()
    for i in range(3):
        for k in keys[i]:
            expect_eq(px.client.get(k), k, "GET %r" % k)
    every = [k for i in range(3) for k in keys[i]]
    expect_eq(px.client.mget(every), every, "a split MGET")
    r3 = harness.Raw(px.port)
    r3.cmd("HELLO", "3")
    expect_eq(r3.cmd("GET", keys[1][0]), b"$%d\r\n%s\r\n" % (len(keys[1][0]), keys[1][0]),
              "GET in RESP3")
    expect_eq(reads_on(replicas, "get"), [10, 11, 10], "GETs on the replicas")
    expect_eq(reads_on(replicas, "mget"), [1, 1, 1], "MGET's parts on the replicas")
    expect_eq(reads_on(masters, "get") + reads_on(masters, "mget"), [0] * 6,
              "reads on the masters")
    px.client.set(keys[0][0], "w")
    expect_eq(cmdstat(masters[0], "set"), 1, "SET on the master")
    tx = px.client.pipeline(transaction=True)
    tx.get(keys[0][0])
    tx.set(keys[0][1], "t")
    expect_eq(tx.execute(), [b"w", True], "MULTI GET SET EXEC")
    with px.client.pipeline() as w:
        w.watch(keys[2][0])
        expect_eq(w.get(keys[2][0]), keys[2][0], "GET under WATCH")
        w.unwatch()
    expect_eq((cmdstat(masters[0], "get"), cmdstat(masters[2], "get")), (1, 1),
              "GETs in MULTI and under WATCH on the masters")
    expect_eq(reads_on(replicas, "get"), [10, 11, 10], "none more on the replicas")
    # TOUCH and OBJECT FREQ/IDLETIME are about the master's LRU: there.
    px.client.touch(keys[1][0])
    px.client.object("idletime", keys[1][0])
    expect_eq((cmdstat(masters[1], "touch"), cmdstat(replicas[1], "touch"),
               cmdstat(masters[1], "object|idletime")), (1, 0, 1), "TOUCH, OBJECT IDLETIME")
    # A read held at its client's gate (CLIENT PAUSE ALL) goes to the
    # replica when the pause ends, not to the master.
    px.client.execute_command("CLIENT", "PAUSE", 200, "ALL")
    expect_eq(redis.Redis(harness.HOST, px.port).get(keys[2][1]), keys[2][1], "a held GET")
    expect_eq((cmdstat(replicas[2], "get"), cmdstat(masters[2], "get")), (11, 1),
              "the held GET on the replica")
    return "30 GETs and 3 MGET parts on the replicas, none on the masters"


def t_replica_follow(px, masters, replicas):
    """After the failovers (shard 0 killed, shard 1 switched by hand) the
    old masters, rejoined as replicas, are where reads go."""
    want = [masters[0], masters[1], replicas[2]]

    def listed():
        nodes = px.client.execute_command("SHARD.NODES")
        return [dict(zip(n[::2], n[1::2]))[b"read-replicas"] for n in nodes]
    until("the new replicas listed", lambda: listed() == [
        ("%s:%d" % (harness.HOST, srv.port)).encode() for srv in want], timeout=30)
    before = reads_on(want, "get")
    k = px.keys_on("follow", 0)[0]
    px.client.set(k, "f")
    until("replicated", lambda: masters[0].client.exists(k))
    expect_eq(px.client.get(k), b"f", "read from the new replica")
    expect_eq([a - b for a, b in zip(reads_on(want, "get"), before)], [1, 0, 0],
              "the GET's server")


def t_replica_down(px_r, px_p, replicas):
    """Shard 2's replica dies: read_from: replica answers its reads with an
    error once the Sentinels drop it, prefer_replica reads its master
    without an error, the first read included; the other shards read on."""
    k2 = px_r.keys_on("down", 2)[0]
    k1 = px_r.keys_on("down", 1)[0]
    px_r.client.set(k2, "x")
    px_r.client.set(k1, "y")
    until("replicated", lambda: replicas[2].client.exists(k2))
    # prefer_replica's reads go on from the master: those in flight on the
    # replica as it dies get an error (as on any connection that fails;
    # asked again of the master, one could see a write the client sent
    # after it), every later one its value.
    got, errors, stop = [], [], []

    def reader():
        c = redis.Redis(harness.HOST, px_p.port, socket_timeout=5)
        while not stop:
            pipe = c.pipeline(transaction=False)
            for _ in range(100):
                pipe.get(k2)
            sent = time.monotonic()     # (when it was sent: not when a slow run read it)
            for g in pipe.execute(raise_on_error=False):
                (errors if isinstance(g, Exception) else got).append((sent, g))
    on_replica = cmdstat(replicas[2], "get")
    t = threading.Thread(target=reader)
    t.start()
    until("reads under way", lambda: len(got) > 1000)
    expect(cmdstat(replicas[2], "get") - on_replica >= 1000,
           "prefer_replica read from the replica while it was up")
    t_kill = time.monotonic()
    replicas[2].kill()
    time.sleep(1.0)
    stop.append(1)
    t.join()
    bad = [g for _, g in got if g != b"x"]
    late = [e for t_e, e in errors if t_e > t_kill + 0.5]
    expect(not bad and not late, "prefer_replica: %d wrong values, %d errors 0.5 s after the "
           "kill: %r" % (len(bad), len(late), (bad + late)[:2]))
    expect(len([1 for t_g, _ in got if t_g > t_kill + 0.5]) > 100, "reads after the kill")

    def refused():
        try:
            px_r.client.get(k2)
        except redis.ResponseError as e:
            return "no replica of master 'redis3'" in str(e)
        return False
    until("read_from: replica refuses shard 2's reads", refused, timeout=10)
    expect_eq(px_r.client.get(k1), b"y", "shard 1 reads on")
    got = [px_p.client.get(k2) for _ in range(20)]
    expect_eq(got, [b"x"] * 20, "prefer_replica's reads")
    return "%d of prefer_replica's reads in flight at the kill failed" % len(errors)


def t_replica_masterdown(px_p, masters, replicas):
    """A replica cut off from its master, with replica-serve-stale-data
    no, answers -MASTERDOWN while the Sentinels still list it: it is passed
    over for a second, so prefer_replica's reads go to the master."""
    rep = masters[0]                # shard 0's replica since the kill
    k = px_p.keys_on("stale", 0)[0]
    px_p.client.set(k, "v")
    until("replicated", lambda: rep.client.exists(k))
    before = cmdstat(rep, "get")
    expect_eq(px_p.client.get(k), b"v", "a read")
    expect_eq(cmdstat(rep, "get") - before, 1, "prefer_replica's read on the replica")
    rep.client.config_set("replica-serve-stale-data", "no")
    rep.client.execute_command("REPLICAOF", harness.HOST, harness.free_port())
    got = []
    for _ in range(20):
        try:
            got.append(px_p.client.get(k))
        except redis.ResponseError as e:
            got.append(str(e).split()[0])
        time.sleep(0.01)
    expect(1 <= got.count("MASTERDOWN") <= 2 and set(got) <= {b"v", "MASTERDOWN"},
           "reads while the replica says MASTERDOWN (one, then a second passed over): %r"
           % got)
    return "%d of 20 reads answered MASTERDOWN" % got.count("MASTERDOWN")


KEYS = 6000


def reshard_started(tag, rate):
    """A fresh shard set, shardis on its first two masters filled with KEYS
    keys (replicated), and a reload that adds the third: keys moving."""
    masters, replicas, sentinels = shard_set(tag + "-")
    px = Shardis(tag, [Addr(m.port) for m in masters[:2]], sentinels=sentinel_conf(sentinels),
                 timeout=2000, admin_commands="true", migration_rate=rate)
    c = px.client
    pipe = c.pipeline(transaction=False)
    for i in range(KEYS):
        pipe.set("k:%d" % i, "v%d" % i)
    pipe.execute()
    expect(c.execute_command("WAIT", 1, 2000) >= 1, "the fill replicated")
    with open(px.conf) as f:
        text = f.read()
    with open(px.conf, "w") as f:
        f.write(text.rstrip("\n") + "\n    - %s:%d:1 redis3\n" % (harness.HOST, masters[2].port))
    c.execute_command("SHARD.RELOAD")
    until("keys moving", lambda: b"state:moving" in c.execute_command("SHARD.MIGRATION", "STATUS"))
    return masters, replicas, sentinels, px


def reshard_over(px, procs):
    """Once the migration is over, every key reads back; then stop it all."""
    c = px.client
    until("the migration over", lambda: b"state:stable" in
          c.execute_command("SHARD.MIGRATION", "STATUS"), timeout=60)
    every = c.mget(["k:%d" % i for i in range(KEYS)])
    missing = [i for i, v in enumerate(every) if v is None]
    expect(not missing, "%d keys left behind, e.g. k:%r" % (len(missing), missing[:5]))
    t_exit_clean(px)
    for p in procs:
        harness.stop(p)


def t_reshard_failover():
    """A source master dies while a reload's keys move off it: the walk of
    it starts over on the new master (a SCAN cursor means nothing there),
    so no key is left behind and every acknowledged, replicated write is
    read back."""
    masters, replicas, sentinels, px = reshard_started("rsf", 1500)
    c = px.client
    acked, stop = {}, []

    def writer():
        w = redis.Redis(harness.HOST, px.port, socket_timeout=5)
        n = 0
        while not stop:
            k, v = "k:%d" % (n % KEYS), "w%d" % n
            n += 1
            try:
                w.set(k, v)
                if w.execute_command("WAIT", 1, 300) >= 1:
                    acked[k] = v
            except redis.RedisError:
                time.sleep(0.01)
    th = threading.Thread(target=writer)
    th.start()
    try:
        time.sleep(0.5)
        expect(b"state:moving" in c.execute_command("SHARD.MIGRATION", "STATUS"),
               "still moving at the kill")
        masters[0].kill()
        until("the migration over", lambda: b"state:stable" in
              c.execute_command("SHARD.MIGRATION", "STATUS"), timeout=60)
    finally:
        stop.append(True)
        th.join()
    got = c.mget(list(acked))
    wrong = [k for (k, v), g in zip(acked.items(), got) if g is None or g.decode() != v]
    expect(not wrong, "acknowledged writes not read back: %r" % wrong[:5])
    expect("walking it again from the start" in open(px.log).read(), "the walk restarted")
    reshard_over(px, [x.proc for x in masters[1:] + replicas + sentinels])
    return "%d acknowledged writes and %d keys read back" % (len(acked), KEYS)


def t_restart_failover():
    """shardis is down while a master fails over mid-migration: restarted,
    it takes up the migration record (replicated to the new master) but
    not its cursors, which mean nothing on the new master: every key is
    read back."""
    masters, replicas, sentinels, px = reshard_started("rst", 1000)
    c = px.client
    time.sleep(1.2)                     # (a record with cursors is written each second)
    expect(b"state:moving" in c.execute_command("SHARD.MIGRATION", "STATUS"), "still moving")
    os.kill(px.pid, harness.signal.SIGSTOP)     # down, as far as anyone can tell
    seen, ps = switch_seen(sentinels[0], "redis1")
    sentinels[0].client.execute_command("SENTINEL", "FAILOVER", "redis1")
    until("the switch", lambda: "t" in seen, timeout=15)
    ps.close()
    px.restart(kill=True)
    reshard_over(px, [x.proc for x in masters + replicas + sentinels])


def t_two_loops():
    """Two loops, 4 clients (2 on each) writing to every shard of a fresh
    shard set while the Sentinels fail shard 2 over: every loop follows (a
    client on loop 1 writes to the new master within 3 s, SHARD.NODES on
    loop 1 names it with the switch counted), errors only for shard 2's
    keys, every key's last write on its shard's master, none on another's."""
    import test_threads
    masters, replicas, sentinels = shard_set("loops-")
    try:
        return two_loops(masters, replicas, sentinels)
    finally:
        for p in [x.proc for x in masters + replicas + sentinels]:
            harness.stop(p)


def two_loops(masters, replicas, sentinels):
    import test_threads
    px = Shardis("loops", masters, sentinels=sentinel_conf(sentinels), timeout=2000,
                 hash="md5", env={"SHARDIS_THREADS": "2"}, admin_commands="true")
    cs = test_threads.spread(px, 4)         # c0, c2 on loop 0; c1, c3 on loop 1
    keys = {shard: px.keys_on("loops%d-" % shard, shard, 8) for shard in range(3)}
    stop = threading.Event()
    errors, acked, failed, sent = [], {}, [], []

    def load(i, c):
        j = 0
        try:
            while not stop.is_set():
                for shard in range(3):
                    k = keys[shard][i * 2 + j % 2]
                    v = b"%d-%d" % (i, j)
                    got = c.cmd("SET", k, v)
                    sent.append(1)
                    if got == b"+OK\r\n":
                        acked[k] = v
                    else:           # (its outcome unknown: not checked till acked again)
                        acked.pop(k, None)
                        errors.append((shard, got))
                j += 1
        except Exception as e:      # (a client closed is a failure)
            failed.append("client %d: %r" % (i, e))

    threads = [threading.Thread(target=load, args=(i, c), daemon=True) for i, c in enumerate(cs)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    seen, ps = switch_seen(sentinels[2], "redis3")
    sentinels[2].client.execute_command("SENTINEL", "FAILOVER", "redis3")
    until("the switch", lambda: "t" in seen, timeout=15)
    ps.close()
    new = server_of(seen["to"], masters + replicas)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(10)
    expect(not failed, "; ".join(failed))
    # Each client's write to shard 2 goes to the new master within 3 s.
    for i, c in enumerate(cs):
        k = keys[2][i * 2]
        def wrote():
            got = c.cmd("SET", k, b"final-%d" % i)
            if got == b"+OK\r\n":
                acked[k] = b"final-%d" % i
                return new.client.get(k) == acked[k]
            return False
        until("client %d (loop %d) writes to the new master" % (i, i % 2), wrote, timeout=3)
    other = [e for e in errors if e[0] != 2]
    expect(not other, "errors on other shards: %r" % other[:3])
    # Every loop's SHARD.NODES names the new master, the switch counted.
    want = ("%s:%d" % (harness.HOST, new.port)).encode()
    for i in (0, 1):
        nodes = harness.parse(cs[i].cmd("SHARD.NODES"))
        d = dict(zip(nodes[2][::2], nodes[2][1::2]))
        expect_eq((d[b"master"], d[b"switches"]), (want, 1), "loop %d's SHARD.NODES" % i)
    # Nothing lost, nothing misrouted.
    masters_now = {}
    for shard in range(3):
        nodes = harness.parse(cs[0].cmd("SHARD.NODES"))
        d = dict(zip(nodes[shard][::2], nodes[shard][1::2]))
        port = int(d[b"master"].rsplit(b":", 1)[1])
        masters_now[shard] = server_of(port, masters + replicas)
    for shard in range(3):
        for k in keys[shard]:
            if k not in acked:
                continue
            expect_eq(masters_now[shard].client.get(k), acked[k], "%r on shard %d" % (k, shard))
            for o in range(3):
                if o != shard:
                    expect(masters_now[o].client.get(k) is None,
                           "%r (shard %d) written on shard %d" % (k, shard, o))
    t_exit_clean(px)
    return "%d writes, %d on shard 2 failed during the switch; %d keys checked" % (
        len(sent), len(errors), len(acked))


def body():
    masters, replicas, sentinels = shard_set()
    # First guesses: shard 0's replica, a port nothing listens on, the master.
    first = [Addr(replicas[0].port), Addr(harness.free_port()), Addr(masters[2].port)]
    # (md5: every server owns some of the generated keys' {LL} tags.)
    px = Shardis("ha", first, sentinels=sentinel_conf(sentinels), timeout=2000, hash="md5")
    check("ha_start_finds_masters", t_start, px, masters, replicas)
    px_r = Shardis("reads", masters, sentinels=sentinel_conf(sentinels), read_from="replica",
                   admin_commands="true")      # (t_replica_reads's CLIENT PAUSE)
    px_p = Shardis("prefer", masters, sentinels=sentinel_conf(sentinels),
                   read_from="prefer_replica")
    # Their starts over (a PING is answered once the loop runs): what a
    # start reads of the servers (the migration record's GET) must not
    # land among the reads t_replica_reads counts.
    for x in (px_r, px_p):
        x.client.ping()
    check("ha_replica_reads", t_replica_reads, px_r, masters, replicas)
    check("ha_unknown_master_errors_others_work", t_unknown_master, masters, sentinels)
    check("ha_liar_outvoted", t_liar, masters, replicas, sentinels)
    check("ha_replica_named_nothing_written", t_replica_named)
    check("ha_sentinel_auth", t_sentinel_auth)
    check("ha_sentinel_stopped_link_fails_again", t_sentinel_stopped)
    check("ha_sentinel_reply_too_long", t_sentinel_reply_too_long)
    check("ha_kill_master", t_kill, px, masters, replicas, sentinels)
    check("ha_manual_failover_old_masters_unwritten", t_manual, px, masters, replicas,
          sentinels)
    check("ha_replica_reads_follow_failovers", t_replica_follow, px_r, masters, replicas)
    check("ha_replica_down_error_or_master", t_replica_down, px_r, px_p, replicas)
    check("ha_replica_masterdown_passed_over", t_replica_masterdown, px_p, masters, replicas)
    check("exit_clean", t_exit_clean, px)
    for x in (px_r, px_p):
        t_exit_clean(x)
    for p in [x.proc for x in masters + replicas + sentinels]:
        harness.stop(p)
    check("ha_failover_two_loops_under_load", t_two_loops)
    check("ha_failover_during_reshard_loses_nothing", t_reshard_failover)
    check("ha_failover_while_down_mid_reshard_loses_nothing", t_restart_failover)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-ha-"))
