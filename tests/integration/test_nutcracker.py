#!/usr/bin/python3
"""test_nutcracker.py -- shardis locate places every key where twemproxy does.

shardis promises that a nutcracker.yml means the same thing to it as to
twemproxy: the same key lands on the same redis-server. This test proves it
against the real thing instead of against golden values copied from it.
It starts 4 redis-servers and, for each variant (hash x distribution x
weights x named/unnamed servers x hash_tag), a real nutcracker on a fresh
yml; it SETs ~5,000 keys through nutcracker (ascii, UTF-8, random binary
with high and control bytes, hash-tag corner cases, long keys), asks every
redis-server which keys it holds, and checks that `shardis locate --hex`
with the same yml names that server for every key.

--self-check proves the test can fail: for the named variants it gives
shardis a yml where two servers trade names (nutcracker gets the real one)
and passes only if the disagreement is caught.

Run: /usr/bin/python3 tests/integration/test_nutcracker.py --shardis BINARY
Only processes it started are stopped (by PID); all traffic is loopback.
"""
import argparse
import atexit
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback

import redis

from harness import HOST, free_port, start, stop, stop_all, wait_port


# (hash, distribution, hash_tag, servers); a server is (backend, weight, name).
MIXED = [(0, 1, "alpha1"), (1, 1, None), (2, 2, "alpha3"), (3, 1, None)]
VARIANTS = [
    ("fnv1a_64", "ketama", None, [(0, 1, None), (1, 1, None), (2, 1, None)]),
    ("md5", "ketama", "{}", [(0, 1, "alpha1"), (1, 1, "alpha2"), (2, 1, "alpha3")]),
    ("murmur", "ketama", None, [(0, 1, None), (1, 2, None), (2, 5, None), (3, 3, None)]),
] + [(h, "ketama", "{}", MIXED) for h in (
    "one_at_a_time", "crc16", "crc32", "crc32a", "fnv1_64", "fnv1_32",
    "fnv1a_32", "hsieh", "jenkins")] + [
    # modula indexes servers in nutcracker's order: sorted by name (shorter
    # first, then bytes; "host:port" if unnamed), not as listed. Backends
    # are numbered in that order, so both lists below are out of order.
    ("fnv1a_64", "modula", "{}", [(2, 1, None), (1, 2, None), (0, 1, None)]),
    ("fnv1a_64", "modula", "{}", [(0, 1, "zeta"), (1, 2, "alpha"), (2, 1, "beta")]),
    ("fnv1a_64", "ketama", "{}", [(0, 10, None), (1, 7, None), (2, 5, None), (3, 2, None)]),
]


def make_keys():
    """Distinct, non-empty bytes keys, the same on every run (seeded)."""
    rnd = random.Random(20240601)
    keys = [b"key:%d" % i for i in range(2000)]
    keys += [("ключ:%d" % i).encode() for i in range(300)]
    keys += [("键%d" % i).encode() for i in range(300)]
    keys += [("🔑%d🗝️" % i).encode() for i in range(200)]
    # Random binary: high, control, CR/LF and NUL bytes (nutcracker passes
    # NUL through: every such key lands on exactly one backend).
    for i in range(1500):
        keys.append(bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 40))))
    for i in range(200):  # tags: tagged pairs live together; empty/unclosed tags
        keys += [b"{user:%d}.following" % i, b"{user:%d}.followers" % i]
    for form in (b"a{}b", b"{}{x}", b"x{y", b"{{a}}", b"}{", b"{", b"}", b"a}b{c}",
                 b"{\xff\x00%d}", b"a{b}c{d}"):
        keys.append(form)
        keys += [form + b":%d" % i for i in range(40)]
        keys += [b"%d:" % i + form for i in range(40)]
    for i in range(200):  # ~200 bytes
        keys.append(b"long:%d:" % i + bytes(rnd.randrange(256) for _ in range(190)))
    keys = [k for k in dict.fromkeys(keys) if k]
    assert len(keys) >= 5000, len(keys)
    return keys


def kind(k):
    """Which class of key: for telling what a failing ring gets wrong."""
    try:
        text = k.decode()
    except UnicodeDecodeError:
        return "binary"
    if any(c < " " or c == "\x7f" for c in text):
        return "binary"
    if b"{" in k or b"}" in k:
        return "tagged"
    return "ascii" if k.isascii() else "utf8"


def conf_text(variant, listen, servers, ports):
    hash_, dist, tag, _ = variant
    lines = ["alpha:", "  listen: %s:%d" % (HOST, listen), "  hash: " + hash_,
             "  distribution: " + dist, "  redis: true"]
    if tag:
        lines.append('  hash_tag: "%s"' % tag)
    lines.append("  servers:")
    for b, w, name in servers:
        lines.append("    - %s:%d:%d%s" % (HOST, ports[b], w, " " + name if name else ""))
    return "\n".join(lines) + "\n"


def describe(variant):
    hash_, dist, tag, servers = variant
    names = {n is not None for _, _, n in servers}
    kind = "mixed" if len(names) == 2 else "named" if True in names else "unnamed"
    return "%s %s %s w=%s%s" % (hash_, dist, kind, ",".join(str(w) for _, w, _ in servers),
                                ' tag="%s"' % tag if tag else "")


def set_all(port, keys):
    r = redis.Redis(HOST, port, socket_timeout=30)
    bad = []
    for i in range(0, len(keys), 1000):
        pipe = r.pipeline(transaction=False)
        batch = keys[i:i + 1000]
        for k in batch:
            pipe.set(k, b"v")
        bad += [(k, res) for k, res in zip(batch, pipe.execute(raise_on_error=False))
                if res is not True]
    r.close()
    return bad


def where_nutcracker_put(backends, keys):
    """key -> backend index, from SCAN on every backend; errors listed."""
    placed, errors = {}, []
    for b, r in enumerate(backends):
        for k in r.scan_iter(count=1000):
            if k in placed:
                errors.append("key %r on backends %d and %d" % (k, placed[k], b))
            placed[k] = b
    errors += ["key %r set but on no backend" % k for k in keys if k not in placed]
    extra = set(placed) - set(keys)
    errors += ["key %r on a backend but never set" % k for k in sorted(extra)[:5]]
    return placed, errors


def shardis_locate(shardis, conf, keys, servers, ports):
    """key -> backend index as shardis locate says, mapping each server
    label (name, else host:port as written) back to its backend."""
    label = {(n if n else "%s:%d" % (HOST, ports[b])).encode(): b for b, _, n in servers}
    stdin = b"".join(k.hex().encode() + b"\n" for k in keys)
    p = subprocess.run([shardis, "locate", "-c", conf, "--hex"], input=stdin,
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("shardis locate exit %d: %s" % (p.returncode, p.stderr.decode()))
    lines = p.stdout.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != len(keys):
        raise RuntimeError("shardis locate printed %d lines for %d keys"
                           % (len(lines), len(keys)))
    out = {}
    for k, line in zip(keys, lines):
        given, _, srv = line.rpartition(b"\t")
        if given != k.hex().encode():
            raise RuntimeError("shardis locate echoed %r for key %s" % (given, k.hex()))
        out[k] = (label.get(srv), srv.decode(errors="replace"))
    return out


def run_variant(args, tmp, ports, backends, variant, keys, shardis_servers=None):
    """Returns the keys shardis places elsewhere than nutcracker did."""
    servers = variant[3]
    for r in backends:
        r.flushall()
    log = os.path.join(tmp, "nutcracker.log")
    # A free port can be taken by another process between the probe and
    # nutcracker's bind: then try another (and say so if all are lost).
    for attempt in range(3):
        listen, stats = free_port(), free_port()
        conf = os.path.join(tmp, "nutcracker.yml")
        with open(conf, "w") as f:
            f.write(conf_text(variant, listen, servers, ports))
        shardis_conf = conf
        if shardis_servers is not None:  # --self-check: shardis gets a wrong yml
            shardis_conf = os.path.join(tmp, "shardis.yml")
            with open(shardis_conf, "w") as f:
                f.write(conf_text(variant, listen, shardis_servers, ports))
        if attempt == 0:
            for c in {conf, shardis_conf}:
                p = subprocess.run([args.shardis, "-c", c, "-t"], capture_output=True,
                                   timeout=30)
                if p.returncode != 0:
                    raise RuntimeError("shardis -t rejects %s: %s" % (c, p.stderr.decode()))
        open(log, "w").close()
        nc = start([args.nutcracker, "-c", conf, "-s", str(stats), "-a", HOST,
                    "-o", log, "-v", "4"], log)
        try:
            wait_port(listen, nc, "nutcracker", [log])
            break
        except RuntimeError:
            stop(nc)
            with open(log, errors="replace") as f:
                if attempt == 2 or "Address already in use" not in f.read():
                    raise
    try:
        bad = set_all(listen, keys)
        if bad:
            raise RuntimeError("nutcracker refused %d SETs, e.g. %r" % (len(bad), bad[:3]))
    finally:
        stop(nc)
    placed, errors = where_nutcracker_put(backends, keys)
    if errors:
        raise RuntimeError("nutcracker placement: " + "; ".join(errors[:5]))
    got = shardis_locate(args.shardis, shardis_conf, keys, shardis_servers or servers, ports)
    label = {b: n or "%s:%d" % (HOST, ports[b]) for b, _, n in servers}
    return [(k, label[placed[k]], got[k][1]) for k in keys if got[k][0] != placed[k]]


def swapped(servers):
    """The first two (named) servers trade names: the same lines, but keys
    move between their backends. (Swapping lines would mean nothing: order
    does not count in twemproxy, names and addresses do.)"""
    (b0, w0, n0), (b1, w1, n1) = servers[:2]
    assert n0 and n1
    return [(b0, w0, n1), (b1, w1, n0)] + servers[2:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardis", default=os.environ.get("SHARDIS"))
    ap.add_argument("--nutcracker", default=shutil.which("nutcracker") or "/usr/sbin/nutcracker")
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--self-check", action="store_true",
                    help="feed shardis a yml with two servers swapped; pass if caught")
    args = ap.parse_args()
    if not args.shardis:
        ap.error("--shardis (or env SHARDIS) is required")
    args.shardis = os.path.abspath(args.shardis)
    keys = make_keys()
    failed = passed = 0
    with tempfile.TemporaryDirectory(prefix="shardis-nc-") as tmp:
        # Backend i is the i-th in nutcracker's order for "host:port" names.
        ports = sorted((free_port() for _ in range(4)), key=lambda p: (len(str(p)), p))
        backends = []
        for i, port in enumerate(ports):
            d = os.path.join(tmp, "redis%d" % i)
            os.mkdir(d)
            log = os.path.join(d, "log")
            p = start([args.redis_server, "--save", "", "--appendonly", "no", "--port",
                       str(port), "--bind", HOST, "--dir", d], log)
            wait_port(port, p, "redis-server", [log])
            backends.append(redis.Redis(HOST, port, socket_timeout=30))
        if args.self_check:
            for v in [v for v in VARIANTS if all(n for _, _, n in v[3])]:
                diff = run_variant(args, tmp, ports, backends, v, keys, swapped(v[3]))
                ok = len(diff) > 0
                failed += not ok
                passed += ok
                print("%s self-check %s: %d of %d keys disagree with servers swapped%s"
                      % ("ok  " if ok else "FAIL", describe(v), len(diff), len(keys),
                         "" if ok else " -- the test cannot catch a wrong ring"))
        else:
            total = collections.Counter(map(kind, keys))
            for v in VARIANTS:
                try:
                    diff = run_variant(args, tmp, ports, backends, v, keys)
                except RuntimeError as e:  # this variant could not be compared
                    failed += 1
                    print("FAIL %s: %s" % (describe(v), e))
                    continue
                if not diff:
                    passed += 1
                    print("ok   %s: %d keys agree" % (describe(v), len(keys)))
                    continue
                failed += 1
                print("FAIL %s: %d of %d keys disagree" % (describe(v), len(diff), len(keys)))
                bad = collections.Counter(kind(k) for k, _, _ in diff)
                print("     by kind: " + ", ".join("%s %d/%d" % (c, bad[c], total[c])
                                                    for c in sorted(total)))
                for k, nc, sh in diff[:8]:
                    print("     key %r (hex %s): nutcracker %s, shardis %s" % (k, k.hex(), nc, sh))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    atexit.register(stop_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        rc = main()
    except RuntimeError as e:  # a failed check that stops the run
        print("FAIL %s" % e)
        rc = 1
    except Exception:  # anything else: show where, exit 1
        traceback.print_exc()
        rc = 1
    finally:
        stop_all()
    sys.exit(rc)
