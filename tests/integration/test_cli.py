#!/usr/bin/python3
"""test_cli.py -- the shardis command line as an operator uses it.

Drives the built binary: -t (ok and every kind of bad file), locate (plain
and --hex keys, pool selection, the golden twemproxy placement), diff (the
table, shares that add up, refusals), --help, --version and the exit codes
0/1/2. Run: /usr/bin/python3 tests/integration/test_cli.py --shardis BINARY
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

FAILURES = []
PASSED = 0


def check(cond, what):
    global PASSED
    if cond:
        PASSED += 1
    else:
        FAILURES.append(what)
        print("FAIL", what)


def run(args, stdin=b""):
    p = subprocess.run([SHARDIS] + args, input=stdin, capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


GOLDEN = """alpha:
  listen: 127.0.0.1:22121
  servers:
   - 127.0.0.1:6379:1
   - 127.0.0.1:6380:1
   - 127.0.0.1:6381:1
beta:
  listen: 127.0.0.1:22122
  hash_tag: "{}"
  servers:
   - 127.0.0.1:6379:1 one
   - 127.0.0.1:6380:1 two
   - 127.0.0.1:6381:1 three
"""

FOUR = GOLDEN.replace("   - 127.0.0.1:6381:1 three\n",
                      "   - 127.0.0.1:6381:1 three\n   - 127.0.0.1:6382:1 four\n")


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_test_conf(tmp):
    good = write(tmp, "good.yml", GOLDEN)
    rc, out, err = run(["-c", good, "-t"])
    check(rc == 0 and out == "shardis: configuration file '%s' syntax is ok\n" % good,
          "-t accepts a good file: rc=%d out=%r err=%r" % (rc, out, err))
    rc, out, _ = run(["--conf-file", good, "--test-conf"])
    check(rc == 0, "long options --conf-file/--test-conf work")

    bad = write(tmp, "bad.yml", GOLDEN.replace("listen: 127.0.0.1:22122", "lisen: x"))
    rc, out, err = run(["-c", bad, "-t"])
    check(rc == 1 and re.search(r"bad\.yml:8:3: unknown key 'lisen' in pool 'beta'; "
                                r"expected one of: listen,", err)
          and "syntax is invalid" in err,
          "-t reports file:line:col and exits 1: rc=%d err=%r" % (rc, err))

    rc, _, err = run(["-c", os.path.join(tmp, "missing.yml"), "-t"])
    check(rc == 1 and "cannot open" in err, "-t on a missing file: %r" % err)

    memcached = write(tmp, "mc.yml", GOLDEN.replace("hash_tag", "redis: false\n  hash_tag"))
    rc, _, err = run(["-c", memcached, "-t"])
    check(rc == 1 and "memcached pools are not supported" in err, "redis: false refused")

    binary = write(tmp, "bin.yml", "\x00\xff\xfe garbage: [")
    rc, _, err = run(["-c", binary, "-t"])
    check(rc == 1 and "bin.yml:" in err, "garbage is an error, not a crash: rc=%d" % rc)


def test_usage():
    rc, out, _ = run(["--help"])
    for opt in ["-c, --conf-file", "-t, --test-conf", "-p, --pool", "--hex",
                "-V, --version", "-h, --help", "locate", "diff"]:
        check(rc == 0 and opt in out, "--help lists %s" % opt)
    rc, out, _ = run(["-V"])
    check(rc == 0 and re.match(r"shardis \d+\.\d+\.\d+\n$", out), "-V prints the version")
    for args in (["--bogus"], ["-c"], [], ["diff", "a.yml"], ["locate"], ["-t"],
                 ["extra"], ["locate", "-c", "x", "-t"]):
        rc, _, err = run(args)
        check(rc == 2 and "shardis --help" in err, "usage error exits 2: %r -> %d" % (args, rc))


def test_locate(tmp):
    conf = write(tmp, "golden.yml", GOLDEN)
    rc, out, err = run(["locate", "-c", conf], b"foo\nbar\nuser:1000\nhello\n")
    check(rc == 0 and out == ("foo\t127.0.0.1:6381\nbar\t127.0.0.1:6379\n"
                              "user:1000\t127.0.0.1:6381\nhello\t127.0.0.1:6379\n"),
          "locate gives twemproxy's golden placement: %r %r" % (out, err))

    # Named servers in pool beta, with hash tags: a tagged key goes where
    # its tag goes.
    rc, out, _ = run(["locate", "-c", conf, "-p", "beta"],
                     b"user1000\n{user1000}.following\n{user1000}.followers\n")
    lines = [l.split("\t") for l in out.splitlines()]
    check(rc == 0 and len(lines) == 3 and lines[0][1] in ("one", "two", "three")
          and lines[0][1] == lines[1][1] == lines[2][1],
          "locate -p picks the pool and applies the hash tag: %r" % out)

    # --hex: the same keys hex-encoded land on the same servers, and keys
    # with newlines or high bytes are expressible.
    keys = [b"foo", b"bar", b"a\nb", b"\xff\x80abc", b"\x00"]
    hexin = b"".join(k.hex().encode() + b"\n" for k in keys)
    rc, out, _ = run(["locate", "-c", conf, "--hex"], hexin)
    got = [l.split("\t") for l in out.splitlines()]
    check(rc == 0 and [g[0] for g in got] == [k.hex() for k in keys],
          "--hex echoes the key as given: %r" % out)
    check(rc == 0 and got[0][1] == "127.0.0.1:6381" and got[1][1] == "127.0.0.1:6379",
          "--hex places like plain keys: %r" % out)

    rc, _, err = run(["locate", "-c", conf, "--hex"], b"abc\n")
    check(rc == 1 and "stdin:1" in err and "not hex" in err, "bad hex is an error: %r" % err)
    rc, _, err = run(["locate", "-c", conf, "-p", "gamma"], b"x\n")
    check(rc == 1 and "no pool named 'gamma'" in err, "unknown pool: %r" % err)

    rnd = write(tmp, "rnd.yml", GOLDEN.replace("  listen: 127.0.0.1:22121",
                                               "  listen: 127.0.0.1:22121\n"
                                               "  distribution: random"))
    rc, _, err = run(["locate", "-c", rnd], b"x\n")
    check(rc == 1 and "random" in err, "random pools cannot be located: %r" % err)

    # Empty lines are empty keys; the last line may lack its newline.
    rc, out, _ = run(["locate", "-c", conf], b"\nfoo")
    check(rc == 0 and out.splitlines()[1] == "foo\t127.0.0.1:6381" and
          out.startswith("\t127.0.0.1:"), "empty key and unterminated line: %r" % out)


def test_diff(tmp):
    old = write(tmp, "old.yml", GOLDEN)
    new = write(tmp, "new.yml", FOUR)
    rc, out, err = run(["diff", old, new, "-p", "beta"])
    check(rc == 0, "diff exits 0: %r" % err)
    rows = dict(re.findall(r"^  (\S+) \(127\.0\.0\.1:\d+\)\s+(.*)$", out, re.M))
    check(set(rows) == {"one", "two", "three", "four"}, "diff lists every server: %r" % out)
    before = [float(x.rstrip("%")) for x in
              (rows[s].split()[0] for s in ("one", "two", "three"))]
    after = [float(rows[s].split()[-1].rstrip("%")) for s in ("one", "two", "three", "four")]
    check(abs(sum(before) - 100) < 0.01 and abs(sum(after) - 100) < 0.01,
          "shares add up to 100%%: %r %r" % (before, after))
    check(rows["four"].split()[0] == "-", "a new server has no share before")
    moving = float(re.search(r"keys moving: ([\d.]+)%", out).group(1))
    check(abs(moving - after[3]) < 0.001,
          "adding a server moves exactly its new share: %s vs %s" % (moving, after[3]))
    moves = re.findall(r"^  (\S+) -> (\S+): ([\d.]+)%$", out, re.M)
    check(all(t == "four" for _, t, _ in moves) and
          abs(sum(float(s) for _, _, s in moves) - moving) < 0.001,
          "every move goes to the new server and they add up: %r" % moves)
    check(20 < moving < 30, "about a quarter moves: %s" % moving)

    rc, out, _ = run(["diff", old, old])
    check(rc == 0 and "keys moving: 0.0000%" in out, "a file diffed with itself moves nothing")

    other = write(tmp, "md5.yml", GOLDEN.replace("  hash_tag", "  hash: md5\n  hash_tag"))
    rc, _, err = run(["diff", old, other, "-p", "beta"])
    check(rc == 1 and "hash keys differently" in err, "diff refuses a hash change: %r" % err)
    rc, _, err = run(["diff", old, os.path.join(tmp, "missing.yml")])
    check(rc == 1 and "cannot open" in err, "diff with a missing file: %r" % err)


def test_commands_table():
    """doc/commands.md's command table is what the binary routes by."""
    rc, out, err = run(["commands"])
    check(rc == 0 and out.startswith("| what shardis does |"), "shardis commands: %r" % err)
    doc = os.path.join(os.path.dirname(__file__), "..", "..", "doc", "commands.md")
    readme = open(doc).read()
    m = re.search(r"<!-- commands: begin -->\n(.*?)<!-- commands: end -->", readme, re.S)
    check(m is not None and m.group(1) == out,
          "doc/commands.md's command table matches `shardis commands` "
          "(run scripts/readme-commands)")
    for name in ("get", "mget", "blpop", "multi", "subscribe", "dbsize", "scan", "keys"):
        check(re.search(r"[|,] %s[,| ]" % name, out) is not None, "%s is in the table" % name)


def main():
    global SHARDIS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardis", default=os.environ.get("SHARDIS"))
    SHARDIS = os.path.abspath(ap.parse_args().shardis)
    with tempfile.TemporaryDirectory() as tmp:
        test_test_conf(tmp)
        test_usage()
        test_locate(tmp)
        test_diff(tmp)
        test_commands_table()
    print("%d passed, %d failed" % (PASSED, len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
