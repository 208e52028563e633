#!/usr/bin/python3
"""harness.py -- what every integration test of shardis shares.

Real processes on free loopback ports (redis-servers without persistence,
shardis processes on a generated config), stopped by PID whatever happens;
named checks that print `ok   <name>` or `FAIL <name>: <detail>` and are
counted; and raw RESP: exact request bytes, exact reply bytes, a parser.
A test script calls main() with its own body; the run ends with
`N passed, N failed` and exits non-zero if anything failed.
"""
import argparse
import atexit
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import redis

HOST = "127.0.0.1"
PROCS = []          # every Popen we started, stopped by stop_all()
ARGS = None
TMP = None
COUNT = {"passed": 0, "failed": 0}


# ---- processes ---------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start(argv, log, env=None):
    with open(log, "ab") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env)
    PROCS.append(p)
    return p


def stop(p):
    if p.poll() is None:
        try:
            os.kill(p.pid, signal.SIGCONT)   # a SIGSTOPped server must wake to die
        except OSError:
            pass
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p in PROCS:
        PROCS.remove(p)


def stop_all():
    for p in list(PROCS):
        stop(p)


def wait_port(port, proc, what, logs, timeout=10.0):
    """Poll until port accepts connections; fail with the logs if proc dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            socket.create_connection((HOST, port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    text = ""
    for log in logs:
        if os.path.exists(log):
            with open(log, errors="replace") as f:
                text += f.read()
    raise RuntimeError("%s did not listen on %d (exit %s); log:\n%s"
                       % (what, port, proc.poll(), text))


def rss(pid, field="VmRSS"):
    """Resident set size in bytes (VmHWM: its peak), from /proc/PID/status."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no %s for pid %d" % (field, pid))


class RedisServer:
    """A redis-server of our own on a free loopback port. It saves nothing by
    itself, but SAVE writes its directory's dump.rdb, which restart() loads."""

    def __init__(self, name, password=None, extra=()):
        self.name = name
        self.port = free_port()
        self.password = password
        self.extra = list(extra)        # more redis-server arguments
        self.dir = os.path.join(TMP, name)
        os.mkdir(self.dir)
        self.launch()

    def launch(self):
        """Start it (again), on its port and directory."""
        log = os.path.join(self.dir, "log")
        argv = [ARGS.redis_server, "--port", str(self.port), "--bind", HOST,
                "--save", "", "--appendonly", "no", "--dir", self.dir]
        if self.password:
            argv += ["--requirepass", self.password]
        self.proc = start(argv + self.extra, log)
        wait_port(self.port, self.proc, "redis-server " + self.name, [log])
        self.client = redis.Redis(HOST, self.port, password=self.password, socket_timeout=10)

    def kill(self):
        """kill -9, as a crash would."""
        self.proc.kill()
        self.proc.wait()
        PROCS.remove(self.proc)

    def restart(self):
        """kill -9 and start again: it comes back with its last SAVE, if any."""
        self.kill()
        self.launch()

    @property
    def pid(self):
        return self.proc.pid


class Shardis:
    """A shardis on a free port in front of servers (named redis1, redis2...)."""

    def __init__(self, name, servers, env=None, hash_tag='"{}"', **opts):
        """opts are pool keys, written as "key: value" (value is YAML, so
        idgen='{types: {user: 1}}' works); env is added to the environment."""
        self.name = name
        self.port = free_port()
        self.servers = servers
        self.conf = os.path.join(TMP, name + ".yml")
        self.log = os.path.join(TMP, name + ".log")
        self.out = out = os.path.join(TMP, name + ".out")
        lines = ["alpha:", "  listen: %s:%d" % (HOST, self.port)]
        if hash_tag:
            lines.append("  hash_tag: %s" % hash_tag)
        lines += ["  %s: %s" % kv for kv in opts.items()]
        lines.append("  servers:")
        lines += ["    - %s:%d:1 redis%d" % (HOST, s.port, i + 1) for i, s in enumerate(servers)]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc = start([ARGS.shardis, "-c", self.conf, "-v", "6", "-o", self.log], out,
                          env=dict(os.environ, **(env or {})))
        wait_port(self.port, self.proc, "shardis " + name, [out, self.log])
        self.client = redis.Redis(HOST, self.port, password=opts.get("redis_auth"),
                                  socket_timeout=10)

    @property
    def pid(self):
        return self.proc.pid

    def restart(self, kill=True):
        """kill -9 (or SIGTERM) and start again on the same config file and port."""
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        self.proc.wait()
        PROCS.remove(self.proc)
        self.proc = start([ARGS.shardis, "-c", self.conf, "-v", "6", "-o", self.log], self.out)
        wait_port(self.port, self.proc, "shardis " + self.name, [self.out, self.log])
        self.client = redis.Redis(HOST, self.port, password=self.client.connection_pool
                                  .connection_kwargs.get("password"), socket_timeout=10)

    def whereis(self, keys):
        """key -> server index (0-based), by SHARD.WHEREIS."""
        pipe = self.client.pipeline(transaction=False)
        for k in keys:
            pipe.execute_command("SHARD.WHEREIS", k)
        names = pipe.execute()
        out = {}
        for k, n in zip(keys, names):
            m = re.fullmatch(rb"redis(\d+)", n)
            if not m:
                raise Fail("SHARD.WHEREIS %r answered %r" % (k, n))
            out[k] = int(m.group(1)) - 1
        return out

    def keys_on(self, prefix, server, n=1):
        """n keys ('prefix<i>') that live on server index."""
        rnd = random.Random(prefix)     # twemproxy's fnv1a_64 keeps keys that differ
        cands = [("%s%08x" % (prefix, rnd.getrandbits(32))).encode()   # in the last
                 for i in range(60 * n + 60)]                          # byte together
        where = self.whereis(cands)
        got = [k for k in cands if where[k] == server][:n]
        if len(got) < n:
            raise Fail("could not find %d keys on server %d" % (n, server))
        return got


def fresh_servers(n, extra=()):
    """n new redis-servers, named redis1..redisN as Shardis configs call them
    (extra: more of redis-server's arguments)."""
    out = []
    for i in range(n):
        s = RedisServer("r%d-%d" % (len(os.listdir(TMP)), i), extra=list(extra))
        s.name = "redis%d" % (i + 1)
        out.append(s)
    return out


def run_with_servers(name, fn, n):
    """check(name, fn, servers) on n fresh redis-servers, killed after."""
    servers = fresh_servers(n)
    try:
        check(name, fn, servers)
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.kill()


# ---- checks ------------------------------------------------------------------------

class Fail(Exception):
    pass


def short(x, n=160):
    r = repr(x)
    return r if len(r) <= n else r[:n] + "...(%d bytes)" % len(x)


def expect(cond, msg):
    if not cond:
        raise Fail(msg)


def expect_eq(got, want, what="reply"):
    if got != want:
        raise Fail("%s: got %s, want %s" % (what, short(got), short(want)))


def expect_refused(fn, part, what):
    """fn() must fail with a Redis error reply that contains part."""
    try:
        got = fn()
    except redis.ResponseError as e:
        expect(part in str(e), "%s: the error %r lacks %r" % (what, str(e), part))
        return str(e)
    raise Fail("%s: answered %s, want an error" % (what, short(got)))


def one_line(x):
    return re.sub(r"\s*[\r\n]+\s*", " | ", str(x).strip())


def check(name, fn, *a, **kw):
    try:
        detail = fn(*a, **kw)
    except Fail as e:
        COUNT["failed"] += 1
        print("FAIL %s: %s" % (name, one_line(e)))
    except Exception as e:  # a crash of the check is a failure, with where
        COUNT["failed"] += 1
        tb = traceback.extract_tb(e.__traceback__)
        here = [f for f in tb if f.filename != __file__][-1]
        print("FAIL %s: %s: %s (at line %d, in %s:%d)" % (
            name, type(e).__name__, e, here.lineno, os.path.basename(tb[-1].filename),
            tb[-1].lineno))
    else:
        COUNT["passed"] += 1
        print("ok   %s%s" % (name, ": " + one_line(detail) if detail else ""))
    sys.stdout.flush()


def one_loop(fn):
    """fn, with every shardis it starts on one loop (SHARDIS_THREADS=1),
    whatever the suite runs with: for what one loop alone promises (two
    clients' commands in the order they came: a PUBLISH right after
    another client's SUBSCRIBE; two clients sharing a spare connection)."""
    def run(*a, **kw):
        was = os.environ.get("SHARDIS_THREADS")
        os.environ["SHARDIS_THREADS"] = "1"
        try:
            return fn(*a, **kw)
        finally:
            if was is None:
                del os.environ["SHARDIS_THREADS"]
            else:
                os.environ["SHARDIS_THREADS"] = was
    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


def t_exit_clean(px, repeat=False):
    """SIGTERM: exit 0 within 7 s, nothing on stderr about memory errors
    (meaningful with a sanitizer build: --shardis build-asan/shardis).
    repeat: SIGTERM again and again until it has gone (a repeated
    stop request never ends the process by the signal)."""
    if px.proc.poll() is None:
        px.proc.send_signal(signal.SIGTERM)
    try:
        if repeat:
            deadline = time.monotonic() + 7
            while px.proc.poll() is None and time.monotonic() < deadline:
                try:
                    px.proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    break
        rc = px.proc.wait(7)
    except subprocess.TimeoutExpired:
        raise Fail("still running 7 s after SIGTERM")
    with open(px.out, errors="replace") as f:
        text = f.read()
    bad = re.findall(r".*(?:AddressSanitizer|LeakSanitizer|ThreadSanitizer|runtime error|"
                     r"Assertion).*", text)
    expect(not bad, "stderr: %s" % "; ".join(bad[:3]))
    expect_eq(rc, 0, "exit code")
    return ""


def until(what, fn, timeout=6.0):
    """Poll fn until it returns true; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            expect(v, "%s: not within %.0f s" % (what, timeout))
            return v
        time.sleep(0.05)


# ---- raw RESP ----------------------------------------------------------------------

def enc(*args):
    """One request as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = b"%d" % a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def bulk(v):
    return b"$-1\r\n" if v is None else b"$%d\r\n%s\r\n" % (len(v), v)


def array(items):
    return b"*%d\r\n" % len(items) + b"".join(items)


class Err(bytes):
    pass


def parse(raw):
    """A raw RESP2 reply as Python: bytes, Err, int, None or list."""
    def value(i):
        j = raw.index(b"\r\n", i)
        t, line = raw[i:i + 1], raw[i + 1:j]
        if t == b"+":
            return line, j + 2
        if t == b"-":
            return Err(line), j + 2
        if t == b":":
            return int(line), j + 2
        n = int(line)
        if t == b"$":
            return (None, j + 2) if n < 0 else (raw[j + 2:j + 2 + n], j + 4 + n)
        if t == b"*":
            if n < 0:
                return None, j + 2
            out, i = [], j + 2
            for _ in range(n):
                v, i = value(i)
                out.append(v)
            return out, i
        raise ValueError("bad reply %r" % raw[:50])
    v, end = value(0)
    if end != len(raw):
        raise ValueError("trailing bytes after reply")
    return v


class Raw:
    """A client on a plain socket: exact bytes out, exact replies back."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = bytearray()
        self.pos = 0

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        try:
            d = self.sock.recv(1 << 20)
        except socket.timeout:
            raise Fail("no reply within %.1f s (have %d bytes: %s)"
                       % (self.sock.gettimeout(), len(self.buf) - self.pos,
                          short(bytes(self.buf[self.pos:self.pos + 80]))))
        if not d:
            raise EOFError("connection closed")
        if self.pos > (4 << 20):
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += d

    def _end(self, i):
        """End of the RESP value at buf[i], or -1 if it is not all here."""
        b, left = self.buf, 1
        while left:
            j = b.find(b"\r\n", i)
            if j < 0:
                return -1
            t = b[i]
            left -= 1
            if t in b"+-:_,#(":                 # RESP2's lines, RESP3's too
                i = j + 2
            elif t in b"$!=":
                n = int(b[i + 1:j])
                i = j + 2 if n < 0 else j + 4 + n
                if i > len(b):
                    return -1
            elif t in b"*~>":
                n = int(b[i + 1:j])
                i = j + 2
                left += max(n, 0)
            elif t in b"%|":                    # n pairs; an attribute goes with
                n = int(b[i + 1:j])             # the value after it
                i = j + 2
                left += 2 * n + (t == ord("|"))
            else:
                raise Fail("bad reply byte %r at %s" % (chr(t), short(bytes(b[i:i + 40]))))
        return i

    def reply(self):
        """The next reply, as its exact bytes."""
        while True:
            e = self._end(self.pos) if self.pos < len(self.buf) else -1
            if e >= 0:
                out = bytes(self.buf[self.pos:e])
                self.pos = e
                return out
            self._fill()

    def cmd(self, *args):
        self.send(enc(*args))
        return self.reply()

    def rest_until_eof(self, timeout=3.0):
        """Everything not yet consumed, up to EOF; (bytes, True if EOF came)."""
        self.sock.settimeout(timeout)
        out = bytes(self.buf[self.pos:])
        self.pos = len(self.buf)
        try:
            while True:
                d = self.sock.recv(1 << 16)
                if not d:
                    return out, True
                out += d
        except socket.timeout:
            return out, False
        except ConnectionResetError:
            return out, True

    def close(self):
        self.sock.close()


def one_reply(port, data):
    c = Raw(port)
    try:
        c.send(data)
        return c.reply()
    finally:
        c.close()


def reply_then_eof(port, data, timeout=3.0):
    """Send data on a fresh connection; everything until EOF, and whether EOF came."""
    c = Raw(port)
    try:
        c.send(data)
        return c.rest_until_eof(timeout)
    finally:
        c.close()


def silent_open(port, data, wait=0.4):
    """Send data; True if the connection stays open and silent for wait s."""
    out, eof = reply_then_eof(port, data, wait)
    return out == b"" and not eof, out, eof




# ---- the run -------------------------------------------------------------------------

def main(body, add_args=None, tmp_prefix="shardis-test-"):
    """Parse the common options (and add_args's), run body() in a temporary
    directory, stop every process, print the count and return the exit code."""
    global ARGS, TMP
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardis", default=os.environ.get("SHARDIS"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--redis-cli", default=shutil.which("redis-cli") or "redis-cli")
    ap.add_argument("--redis-benchmark", default=shutil.which("redis-benchmark") or "redis-benchmark")
    ap.add_argument("--sanitized", action="store_true",
                    help="shardis is a sanitizer build: report RSS, assert only chunk counts")
    if add_args:
        add_args(ap)
    ARGS = ap.parse_args()
    if not ARGS.shardis:
        ap.error("--shardis (or env SHARDIS) is required")
    ARGS.shardis = os.path.abspath(ARGS.shardis)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 and hard > soft:   # 1,000 clients: both ends are ours and shardis's
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    t_start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix=tmp_prefix) as tmp:
            TMP = tmp
            try:
                body()
            finally:
                stop_all()
    except RuntimeError as e:  # could not set up (a process did not start)
        print("FAIL setup: %s" % e)
        COUNT["failed"] += 1
    except Exception:
        traceback.print_exc()
        COUNT["failed"] += 1
    print("run took %.1f s" % (time.monotonic() - t_start))
    print("%d passed, %d failed" % (COUNT["passed"], COUNT["failed"]))
    return 1 if COUNT["failed"] or not COUNT["passed"] else 0
