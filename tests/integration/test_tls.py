#!/usr/bin/python3
"""test_tls.py -- TLS on both sides, against real redis-servers on
--tls-port, with a CA and certificates this test makes with the openssl
CLI:

- clients over TLS (redis-cli --tls, python3-redis ssl=True) and in the
  clear, side by side, to servers that speak only TLS: pipelines, a
  value of megabytes, MULTI/EXEC and a blocking pop (dedicated
  connections), pub/sub, a split MGET;
- client certificates: required (none and another CA's are refused, the
  CA's is taken), optional;
- the servers' certificates: another CA, backend_tls_server_name that
  does or does not match, servers that ask for shardis's certificate;
- SIGHUP takes up a rotated certificate for new connections while a
  pipelined client goes on over its old one, and a broken key file is
  refused with the old certificate kept;
- handshakes that never finish are closed at tls_handshake_timeout, and
  plain RESP or garbage to the TLS port gets nothing; a finished one is
  not closed;
- a reload that moves keys between TLS servers (MIGRATE over TLS,
  tls-cluster yes), and a restart that reads the migration record over
  TLS;
- a certificate that cannot be read stops the start with its key named;
  an encrypted key is refused at start and at a reload, never asked for;
- without backend_tls_server_name each server's address is checked;
  backend_tls to a server in the clear fails at tls_handshake_timeout;
- after QUIT over TLS, what the client goes on sending is dropped;
- a migration record written by another proxy never brings its TLS
  listener or server name.

Run: /usr/bin/python3 tests/integration/test_tls.py --shardis build/shardis
"""
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

import redis

import harness
from harness import Fail, Shardis, expect, expect_eq, until
from test_reshard import reload as reload_switch
from test_reshard import status, write_servers

HOST = "127.0.0.1"


# ---- certificates ----------------------------------------------------------------------

def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


class Certs:
    """A CA, certificates it signs (servers', clients'), and a rogue CA
    with a client certificate of its own, under TMP/certs."""

    def __init__(self):
        self.dir = os.path.join(harness.TMP, "certs")
        os.mkdir(self.dir)
        self.ca = self.make_ca("ca")
        self.rogue = self.make_ca("rogue")
        self.server = self.make("server", self.ca, "server")
        self.rotated = self.make("rotated", self.ca, "rotated")
        self.client = self.make("client", self.ca, "client")
        self.rogue_client = self.make("rogue-client", self.rogue, "client")
        self.named = self.make("named", self.ca, "named", san="DNS:localhost")
        self.encrypted = self.path("encrypted.key")
        openssl("pkey", "-in", self.server[1], "-aes256", "-passout", "pass:secret",
                "-out", self.encrypted)

    def path(self, name):
        return os.path.join(self.dir, name)

    def make_ca(self, name):
        crt, key = self.path(name + ".crt"), self.path(name + ".key")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
                "-days", "2", "-subj", "/CN=shardis test %s" % name)
        return crt, key

    def make(self, name, ca, cn, san="IP:127.0.0.1,DNS:localhost"):
        crt, key, csr = (self.path(name + x) for x in (".crt", ".key", ".csr"))
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\n" % san)
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                "-subj", "/CN=%s" % cn)
        openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
                "-out", crt, "-days", "2", "-extfile", ext)
        return crt, key


class TLSRedis:
    """A redis-server that speaks TLS on .port (what shardis is given) and
    the clear on .plain (for the test to look at it)."""

    def __init__(self, certs, name, auth_clients="no", extra=(), cert=None):
        self.name = name
        self.port = harness.free_port()
        self.plain = harness.free_port()
        self.dir = os.path.join(harness.TMP, "%s-%d" % (name, self.port))
        os.mkdir(self.dir)
        log = os.path.join(self.dir, "log")
        argv = [harness.ARGS.redis_server, "--port", str(self.plain), "--bind", HOST,
                "--tls-port", str(self.port), "--tls-cert-file", (cert or certs.server)[0],
                "--tls-key-file", (cert or certs.server)[1], "--tls-ca-cert-file", certs.ca[0],
                "--tls-auth-clients", auth_clients, "--save", "", "--appendonly", "no",
                "--dir", self.dir] + list(extra)
        self.proc = harness.start(argv, log)
        harness.wait_port(self.plain, self.proc, "redis-server " + name, [log])
        self.client = redis.Redis(HOST, self.plain, socket_timeout=10)

    @property
    def pid(self):
        return self.proc.pid

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        harness.PROCS.remove(self.proc)


def tls_client(port, certs, cert=None, **kw):
    """python3-redis over TLS, checking shardis's certificate by the CA."""
    extra = {"ssl_certfile": cert[0], "ssl_keyfile": cert[1]} if cert else {}
    return redis.Redis(HOST, port, ssl=True, ssl_ca_certs=certs.ca[0], socket_timeout=10,
                       **extra, **kw)


def peer_cn(port, certs):
    """The CN of the certificate a new TLS connection to port is shown."""
    ctx = ssl.create_default_context(cafile=certs.ca[0])
    ctx.check_hostname = False
    with socket.create_connection((HOST, port), 5) as s:
        with ctx.wrap_socket(s) as t:
            subject = dict(x[0] for x in t.getpeercert()["subject"])
            return subject["commonName"]


def tls_px(name, servers, certs, backend=True, **opts):
    """A shardis with a TLS listener (.tls_port) beside its plain one."""
    tls_port = harness.free_port()
    kw = {"tls_listen": "%s:%d" % (HOST, tls_port), "tls_cert_file": certs.server[0],
          "tls_key_file": certs.server[1]}
    if backend:
        kw.update(backend_tls="true", backend_tls_ca_cert_file=certs.ca[0])
    kw.update(opts)
    px = Shardis(name, servers, **kw)
    px.tls_port = tls_port
    harness.wait_port(tls_port, px.proc, "shardis TLS " + name, [px.out, px.log])
    return px


def refused(fn):
    """fn raises a connection or TLS error: its text; else Fail."""
    try:
        got = fn()
    except (redis.ConnectionError, ssl.SSLError, OSError) as e:
        return str(e)
    raise Fail("not refused: got %r" % (got,))


def backend_refused(px, why):
    """A GET through px fails, its error saying why: the error."""
    whys = why if isinstance(why, tuple) else (why,)
    try:
        px.client.get("x")
    except redis.ResponseError as e:
        expect(any(w in str(e) for w in whys), "the error says %r: %s" % (why, e))
        return str(e)
    raise Fail("a server's connection was used: want %r" % why)


def start_refused(server, cert, key):
    """shardis started on a TLS listener with cert and key, in front of
    server: its completed run (the caller checks it was refused)."""
    conf = os.path.join(harness.TMP, "refused-%d.yml" % harness.free_port())
    with open(conf, "w") as f:
        f.write("alpha:\n  listen: %s:%d\n  tls_listen: %s:%d\n  tls_cert_file: %s\n"
                "  tls_key_file: %s\n  servers:\n    - %s:%d:1 r\n"
                % (HOST, harness.free_port(), HOST, harness.free_port(), cert, key, HOST,
                   server.port))
    return subprocess.run([harness.ARGS.shardis, "-c", conf], capture_output=True, text=True,
                          timeout=10, stdin=subprocess.DEVNULL)


def log_has(px, text):
    with open(px.log, errors="replace") as f:
        return text in f.read()


# ---- clients and servers ---------------------------------------------------------------

def t_both_sides(certs, rs):
    px = tls_px("both", rs, certs)
    out = subprocess.run([harness.ARGS.redis_cli, "--tls", "--cacert", certs.ca[0], "-h", HOST,
                          "-p", str(px.tls_port), "SET", "cli", "over tls"],
                         capture_output=True, text=True, timeout=10)
    expect_eq(out.stdout.strip(), "OK", "redis-cli --tls SET")
    expect_eq(px.client.get("cli"), b"over tls", "the plain listener reads it")

    c = tls_client(px.tls_port, certs)
    pipe = c.pipeline(transaction=False)
    for i in range(3000):
        pipe.set("k%d" % i, i)
    expect(all(pipe.execute()), "3000 pipelined SETs over TLS")
    keys = ["k%d" % i for i in range(3000)]
    expect_eq(px.client.mget(keys), [b"%d" % i for i in range(3000)], "MGET in the clear")
    expect_eq(c.mget(keys[:500]), [b"%d" % i for i in range(500)], "a split MGET over TLS")
    big = os.urandom(3 << 20)
    c.set("big", big)
    expect_eq(c.get("big"), big, "a 3 MiB value back over TLS")
    # What a TLS client holds once its reply is written: nothing of it.
    base = harness.rss(px.pid)
    readers = [tls_client(px.tls_port, certs) for _ in range(16)]
    for r in readers:
        expect_eq(r.get("big"), big, "a 3 MiB value to each of 16 TLS clients")
    time.sleep(1)
    held = (harness.rss(px.pid) - base) >> 20
    expect(harness.ARGS.sanitized or held < 16, "16 idle TLS clients hold %d MiB after "
           "3 MiB replies" % held)
    for r in readers:
        r.close()
    # Many TLS clients' big replies written at once, each partly, through
    # the one staging buffer: every byte to its own client, in order.
    vals = {"big%d" % i: os.urandom((1 << 20) + i) for i in range(8)}
    c.mset(vals)
    bad = []

    def fetch(i):
        r = tls_client(px.tls_port, certs)
        for _ in range(3):
            got = r.mget(list(vals))
            if got != list(vals.values()):
                bad.append(i)
        r.close()

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    expect_eq(bad, [], "clients that got wrong bytes from 8 MiB MGETs at once")
    on = [s.client.dbsize() for s in rs]
    expect(all(n > 1000 for n in on), "the keys are spread over both TLS servers: %r" % on)
    expect_eq(sum(on), 3010, "keys on the servers")

    tx = c.pipeline(transaction=True)
    tx.incr("{t}n").incr("{t}n")
    expect_eq(tx.execute(), [1, 2], "MULTI/EXEC over TLS to a TLS server")
    got = []
    t = threading.Thread(target=lambda: got.append(c.blpop("q", 5)))
    t.start()
    time.sleep(0.3)
    px.client.rpush("q", "v")
    t.join()
    expect_eq(got, [(b"q", b"v")], "BLPOP woken by an RPUSH in the clear")

    sub = tls_client(px.tls_port, certs).pubsub()
    sub.subscribe("news")
    until("subscribed", lambda: (sub.get_message(timeout=0.1) or {}).get("type") == "subscribe")
    px.client.publish("news", "hello")
    msg = until("the message", lambda: sub.get_message(timeout=0.2))
    expect_eq(msg["data"], b"hello", "a message published in the clear, got over TLS")
    sub.close()

    c.close()
    # TLS 1.3 by default, and 1.2 for a client that offers no more.
    versions = []
    for top in (None, ssl.TLSVersion.TLSv1_2):
        ctx = ssl.create_default_context(cafile=certs.ca[0])
        if top is not None:
            ctx.maximum_version = top
        with ctx.wrap_socket(socket.create_connection((HOST, px.tls_port), 5),
                             server_hostname="localhost") as t:
            t.sendall(harness.enc("GET", "cli"))
            expect_eq(t.recv(64), b"$8\r\nover tls\r\n", "a GET over %s" % t.version())
            versions.append(t.version())
    expect_eq(versions, ["TLSv1.3", "TLSv1.2"], "the versions spoken")
    ctx = ssl.create_default_context(cafile=certs.ca[0])
    with ctx.wrap_socket(socket.create_connection((HOST, px.tls_port), 5),
                         server_hostname="localhost") as t:
        t.sendall(harness.enc("HELLO", "3") + harness.enc("SET", "r3", "x") +
                  harness.enc("GET", "r3"))
        got = b""
        while not got.endswith(b"+OK\r\n$1\r\nx\r\n"):
            d = t.recv(4096)
            expect(d, "closed after %r" % got)
            got += d
        expect(got.startswith(b"%7\r\n"), "HELLO 3 over TLS: a RESP3 map: %r" % got[:20])
    harness.t_exit_clean(px)
    return "3000 pipelined, 3 MiB values (%d MiB held after), MULTI, BLPOP, pub/sub over " \
           "TLS; keys %r" % (held, on)


def t_client_certs(certs, rs):
    px = tls_px("auth", rs, certs, backend=True, tls_ca_cert_file=certs.ca[0])
    why = refused(lambda: tls_client(px.tls_port, certs).ping())
    why_rogue = refused(lambda: tls_client(px.tls_port, certs, certs.rogue_client).ping())
    expect_eq(tls_client(px.tls_port, certs, certs.client).ping(), True,
              "PING with the CA's client certificate")
    until("the log says why", lambda: log_has(px, "peer did not return a certificate"))
    expect(log_has(px, "certificate verify failed"), "the log names the rogue's failure")
    harness.t_exit_clean(px)

    opt = tls_px("optional", rs, certs, tls_ca_cert_file=certs.ca[0],
                 tls_auth_clients="optional")
    expect_eq(tls_client(opt.tls_port, certs).ping(), True, "optional: no certificate")
    refused(lambda: tls_client(opt.tls_port, certs, certs.rogue_client).ping())
    expect_eq(tls_client(opt.tls_port, certs, certs.client).ping(), True,
              "optional: the CA's certificate")
    harness.t_exit_clean(opt)
    return "none: %s | rogue: %s" % (why[:60], why_rogue[:60])


def t_server_certs(certs, rs):
    rogue = tls_px("rogue-ca", rs, certs, backend_tls_ca_cert_file=certs.rogue[0])
    why = [backend_refused(rogue, "certificate verify failed (self-signed certificate in "
                                  "certificate chain)")]
    expect_eq(rogue.client.info("server")["tcp_port"], rogue.port, "shardis itself goes on")
    harness.t_exit_clean(rogue)

    wrong = tls_px("wrong-name", rs, certs, backend_tls_server_name="wrong.example")
    why.append(backend_refused(wrong, "certificate verify failed (hostname mismatch)"))
    harness.t_exit_clean(wrong)
    # Without backend_tls_server_name, each server's address as written is
    # checked: a certificate for a name only does not do for 127.0.0.1.
    named = [TLSRedis(certs, "named", cert=certs.named)]
    try:
        by_ip = tls_px("by-ip", named, certs)
        why.append(backend_refused(by_ip, "certificate verify failed (IP address mismatch)"))
        harness.t_exit_clean(by_ip)
        right = tls_px("right-name", named, certs, backend_tls_server_name="localhost")
        right.client.set("named", "1")
        expect_eq(right.client.get("named"), b"1", "backend_tls_server_name localhost")
        harness.t_exit_clean(right)
    finally:
        named[0].kill()

    asks = [TLSRedis(certs, "asks%d" % i, auth_clients="yes") for i in range(2)]
    try:
        without = tls_px("no-cert", asks, certs)
        # The server's alert, or (when it closed before reading what
        # shardis sent after its handshake) a reset.
        why.append(backend_refused(without, ("certificate required", "connection reset")))
        harness.t_exit_clean(without)
        cert = tls_px("with-cert", asks, certs, backend_tls_cert_file=certs.client[0],
                      backend_tls_key_file=certs.client[1])
        cert.client.mset({"a%d" % i: i for i in range(50)})
        expect_eq(sum(s.client.dbsize() for s in asks), 50, "keys on servers that ask")
        harness.t_exit_clean(cert)
    finally:
        for s in asks:
            s.kill()
    return " | ".join(why)


def t_plain_server(certs, rs):
    plain = harness.RedisServer("plain%d" % harness.free_port())
    try:
        px = tls_px("to-plain", [plain], certs, tls_handshake_timeout=500)
        # The start's checks take 1 s each here: a SIGHUP meanwhile is a
        # reload once the loop runs, not the end of the process.
        os.kill(px.pid, signal.SIGHUP)
        px.client.info("server")    # (answered once those checks are over)
        until("the early SIGHUP's reload", lambda: log_has(px, "reload applied"))
        t0 = time.monotonic()
        why = backend_refused(px, "TLS handshake timed out")
        took = time.monotonic() - t0
        expect(took < 2, "the handshake failed after %.1f s" % took)
        harness.t_exit_clean(px)
    finally:
        plain.kill()
    return "%s, after %.1f s" % (why, took)


def t_encrypted_key(certs, rs):
    out = start_refused(rs[0], certs.server[0], certs.encrypted)
    expect(out.returncode != 0 and "the key is encrypted" in out.stderr,
           "start with an encrypted key: %r" % out.stderr[-300:])
    key = os.path.join(harness.TMP, "enc-live.key")
    shutil.copy(certs.server[1], key)
    px = tls_px("enc", rs, certs, tls_key_file=key)
    px.client.info("server")
    shutil.copy(certs.encrypted, key)
    os.kill(px.pid, signal.SIGHUP)
    until("the reload refused", lambda: log_has(px, "reload refused"))
    expect(log_has(px, "the key is encrypted"), "the refusal says why")
    expect_eq(px.client.info("server")["tcp_port"], px.port, "shardis goes on")
    expect_eq(peer_cn(px.tls_port, certs), "server", "the old key and certificate kept")
    harness.t_exit_clean(px)
    return out.stderr.strip().splitlines()[-1]


def t_quit_then_data(certs, rs):
    """A TLS client that sends QUIT behind a BLPOP, then keeps sending: what
    it sends is read and dropped, as in the clear, never kept."""
    px = tls_px("quit", rs, certs)
    ctx = ssl.create_default_context(cafile=certs.ca[0])
    t = ctx.wrap_socket(socket.create_connection((HOST, px.tls_port), 5),
                        server_hostname="localhost")
    t.sendall(harness.enc("BLPOP", "q", "0") + harness.enc("QUIT"))
    time.sleep(0.2)
    base = harness.rss(px.pid)
    junk = b"x" * (1 << 16)
    for _ in range(1024):                       # 64 MiB
        t.sendall(junk)
    time.sleep(0.5)
    grew = (harness.rss(px.pid) - base) >> 20
    expect(harness.ARGS.sanitized or grew < 16, "RSS grew %d MiB" % grew)
    px.client.rpush("q", "v")
    got = b""
    t.settimeout(5)
    while True:
        d = t.recv(4096)
        if not d:
            break
        got += d
    expect_eq(got, b"*2\r\n$1\r\nq\r\n$1\r\nv\r\n+OK\r\n", "BLPOP's reply, QUIT's, then EOF")
    harness.t_exit_clean(px)
    return "64 MiB after QUIT: RSS %+d MiB" % grew


def t_record_keeps_own_tls(certs, rs):
    """Another proxy's migration record, naming its own TLS listener and
    server name: this proxy follows the record, but listens and checks
    the servers as its own file says."""
    px = tls_px("own", rs, certs)
    text = open(px.conf, "rb").read()
    px.proc.terminate()
    px.proc.wait()
    harness.PROCS.remove(px.proc)
    theirs = text.replace(b"tls_listen: %s:%d" % (HOST.encode(), px.tls_port),
                          b"tls_listen: %s:%d" % (HOST.encode(), harness.free_port()))
    theirs = theirs.replace(b"  servers:", b"  backend_tls_server_name: wrong.example\n"
                            b"  servers:")
    rec = b"shardis-migration 1\nepoch 5\nconf %d\n%s\nprior %d\n%s\n" % (
        len(theirs), theirs, len(theirs), theirs)
    rs[0].client.set("__shardis:ctl:alpha", rec)
    px2 = tls_px("own2", rs, certs)
    until("the record taken up", lambda: log_has(px2, "a migration was under way"))
    px2.client.set("x", "1")
    expect_eq(tls_client(px2.tls_port, certs).get("x"), b"1",
              "its own TLS listener, and its servers checked by their addresses")
    os.kill(px2.pid, signal.SIGHUP)
    until("a reload of its own file applied", lambda: log_has(px2, "reload applied"))
    expect(not log_has(px2, "reload refused"), "a reload refused")
    harness.t_exit_clean(px2)
    rs[0].client.delete("__shardis:ctl:alpha")
    return ""


# ---- reload ----------------------------------------------------------------------------

def t_reload_cert(certs, rs):
    crt, key = os.path.join(harness.TMP, "live.crt"), os.path.join(harness.TMP, "live.key")
    shutil.copy(certs.server[0], crt)
    shutil.copy(certs.server[1], key)
    px = tls_px("rotate", rs, certs, tls_cert_file=crt, tls_key_file=key)
    expect_eq(peer_cn(px.tls_port, certs), "server", "the first certificate")

    done, stop, errors = [0], threading.Event(), []

    def load():
        c = tls_client(px.tls_port, certs)
        try:
            while not stop.is_set():
                pipe = c.pipeline(transaction=False)
                for i in range(100):
                    pipe.set("load%d" % i, i).get("load%d" % i)
                got = pipe.execute()
                if got[1::2] != [b"%d" % i for i in range(100)]:
                    errors.append(got[:4])
                    return
                done[0] += 1
        except Exception as e:              # the thread's failure is the check's
            errors.append(e)

    t = threading.Thread(target=load)
    t.start()
    try:
        until("load running", lambda: done[0] > 5)
        shutil.copy(certs.rotated[0], crt)
        shutil.copy(certs.rotated[1], key)
        os.kill(px.pid, signal.SIGHUP)
        until("new connections get the rotated certificate",
              lambda: peer_cn(px.tls_port, certs) == "rotated")
        at = done[0]
        until("the old connection goes on", lambda: done[0] > at + 5)
        shutil.copy(certs.server[0], crt)   # a certificate whose key is not that file's
        os.kill(px.pid, signal.SIGHUP)
        until("the broken pair refused", lambda: log_has(px, "reload refused"))
        expect(log_has(px, "tls_key_file '%s'" % key), "the refusal names tls_key_file")
        expect_eq(peer_cn(px.tls_port, certs), "rotated", "the last good certificate kept")
    finally:
        stop.set()
        t.join()
    expect_eq(errors, [], "errors under load")
    harness.t_exit_clean(px)
    return "%d pipelines of 200 over one TLS connection across two reloads" % done[0]


# ---- handshakes ------------------------------------------------------------------------

def closed_by_peer(s, timeout):
    """What s got before shardis closed it (None: not closed in time)."""
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                return got
            got += d
    except socket.timeout:
        return None
    except ConnectionResetError:
        return got


def t_handshakes(certs, rs):
    px = tls_px("hs", rs, certs, tls_handshake_timeout=300)
    idle = [socket.create_connection((HOST, px.tls_port)) for _ in range(40)]
    clear = socket.create_connection((HOST, px.tls_port))
    clear.sendall(harness.enc("PING"))
    junk = socket.create_connection((HOST, px.tls_port))
    junk.sendall(os.urandom(2000))
    expect_eq(px.client.set("x", "1"), True, "a SET: a server connection made now")
    ctx = ssl.create_default_context(cafile=certs.ca[0])
    done = ctx.wrap_socket(socket.create_connection((HOST, px.tls_port), 5),
                           server_hostname="localhost")
    done.sendall(harness.enc("PING"))
    expect_eq(done.recv(64), b"+PONG\r\n", "a finished handshake")
    t0 = time.monotonic()
    got = [closed_by_peer(s, 5) for s in idle]
    expect(all(g == b"" for g in got), "silent handshakes closed, and sent nothing: %r"
           % [g for g in got if g != b""][:3])
    took = time.monotonic() - t0
    for s, what in ((clear, "plain RESP"), (junk, "garbage")):
        g = closed_by_peer(s, 5)
        expect(g is not None, "%s to the TLS port: closed" % what)
        expect(b"PONG" not in g and b"ERR" not in g, "%s: no RESP reply: %r" % (what, g))
    # Handshakes that stop half way through a 16 KiB record: what each
    # costs until it is timed out, next to what it costs redis-server.
    per = {}
    for who, pid, port in (("redis-server", rs[0].pid, rs[0].port),
                           ("shardis", px.pid, px.tls_port)):
        hwm = harness.rss(pid, "VmHWM")
        half = []
        for _ in range(200):
            s = socket.create_connection((HOST, port))
            s.sendall(b"\x16\x03\x01\x40\x00" + os.urandom(8192))
            half.append(s)
        if who == "shardis":
            got = [closed_by_peer(s, 5) for s in half]
            expect(all(g is not None for g in got), "half handshakes closed")
        else:
            time.sleep(0.5)
        per[who] = (harness.rss(pid, "VmHWM") - hwm) / len(half)
        for s in half:
            s.close()
    expect(harness.ARGS.sanitized or per["shardis"] < 1.25 * per["redis-server"] + (4 << 10),
           "a half handshake cost shardis %.0f KiB at the peak, redis-server %.0f KiB"
           % (per["shardis"] / 1024, per["redis-server"] / 1024))
    time.sleep(0.5)
    done.sendall(harness.enc("PING"))
    expect_eq(done.recv(64), b"+PONG\r\n", "the finished handshake outlives the timeout")
    # So does a finished handshake to a server: made before, used after.
    expect_eq(px.client.get("x"), b"1", "a key over a server connection older than the "
              "timeout")
    expect(not log_has(px, "failed: TLS handshake timed out"),
           "a server connection whose handshake had finished was timed out")
    clients = px.client.info("clients")["connected_clients"]
    expect_eq(clients, 2, "connected_clients (this one and the TLS one)")
    for s in idle + [clear, junk]:
        s.close()
    done.close()
    harness.t_exit_clean(px)
    return "40 silent handshakes closed %.2f s after the last began; a half one costs " \
           "%.1f KiB at the peak (redis-server: %.1f KiB)" % (
               took, per["shardis"] / 1024, per["redis-server"] / 1024)


# ---- moving keys, restarts, start ------------------------------------------------------

def t_reshard(certs, rs):
    a, b, c = rs
    for s in rs:        # MIGRATE between them speaks TLS too
        s.name = {a: "redis1", b: "redis2", c: "redis3"}[s]
    px = tls_px("move", [a, b], certs, admin_commands="true", migration_rate=300)
    keys = ["m%d" % i for i in range(2000)]
    px.client.mset({k: k for k in keys})
    write_servers(px, [a, b, c])
    reload_switch(px, 1)
    until("the migration finished", lambda: status(px)["state"] == "stable", 30)
    expect_eq(px.client.mget(keys), [k.encode() for k in keys], "every key after the move")
    moved = c.client.dbsize()
    expect(moved > 300, "keys moved to the new TLS server: %d" % moved)
    expect_eq(sum(s.client.dbsize() for s in rs), 2000, "no key left behind or doubled")

    # A restart mid-migration reads the record over TLS (backend_sync).
    write_servers(px, [a, b])
    reload_switch(px, 2)
    px.restart()
    harness.wait_port(px.tls_port, px.proc, "shardis TLS", [px.out, px.log])
    until("the restart took the record up", lambda: log_has(px, "a migration was under way"))
    until("the migration finished after the restart",
          lambda: status(px)["state"] == "stable", 30)
    c_left = c.client.dbsize()
    expect_eq(c_left, 0, "keys left on the server that left")
    expect_eq(tls_client(px.tls_port, certs).mget(keys), [k.encode() for k in keys],
              "every key, over TLS, after a restart mid-migration")
    harness.t_exit_clean(px)
    return "%d keys moved over TLS and back" % moved


def t_bad_files(certs, rs):
    out = start_refused(rs[0], "/nonexistent.crt", certs.server[1])
    expect(out.returncode != 0, "shardis started with a certificate it cannot read")
    expect("tls_cert_file '/nonexistent.crt'" in out.stderr, "stderr: %r" % out.stderr)
    return out.stderr.strip().splitlines()[-1]


def body():
    certs = Certs()

    def with_servers(name, fn, n, extra=()):
        servers = [TLSRedis(certs, "redis%d" % (i + 1), extra=extra) for i in range(n)]
        try:
            harness.check(name, fn, certs, servers)
        finally:
            for s in servers:
                if s.proc.poll() is None:
                    s.kill()

    with_servers("clients over TLS and in the clear, to servers over TLS", t_both_sides, 2)
    with_servers("client certificates: required, optional", t_client_certs, 1)
    with_servers("servers' certificates: CA, name, shardis's own", t_server_certs, 1)
    with_servers("SIGHUP rotates the certificate under load", t_reload_cert, 1)
    with_servers("handshakes that do not finish are closed", t_handshakes, 1)
    with_servers("backend_tls to a server in the clear: the handshake times out",
                 t_plain_server, 1)
    with_servers("an encrypted key: refused at start and at a reload", t_encrypted_key, 1)
    with_servers("after QUIT over TLS, what a client sends is dropped", t_quit_then_data, 1)
    with_servers("a migration record never brings another proxy's TLS settings",
                 t_record_keeps_own_tls, 2)
    with_servers("keys move between TLS servers; a restart reads the record over TLS",
                 t_reshard, 3, extra=("--tls-cluster", "yes", "--tls-replication", "yes"))
    with_servers("a certificate that cannot be read stops the start", t_bad_files, 1)


if __name__ == "__main__":
    sys.exit(harness.main(body))
