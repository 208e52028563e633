#!/usr/bin/python3
"""test_release_build.py -- a packager's release build builds, warning-free.

`meson setup --buildtype=release` (-O3, NDEBUG) with the project's default
options, then `ninja`, with gcc and with clang (scripts/deps installs
both): it must succeed with no warning at all. -Werror is not one of the
default options (scripts/test and CI pass -Dwerror=true to their own
builds), so a compiler newer than ours that finds something new still
builds shardis for everyone else; this test is where a warning fails.

Run: /usr/bin/python3 tests/build/test_release_build.py [source dir]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

COUNT = {"passed": 0, "failed": 0}


def check(name, fn, *a):
    try:
        detail = fn(*a)
    except AssertionError as e:
        COUNT["failed"] += 1
        print("FAIL %s: %s" % (name, e))
    else:
        COUNT["passed"] += 1
        print("ok   %s%s" % (name, ": " + detail if detail else ""))
    sys.stdout.flush()


def run(argv, env=None):
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout.decode(errors="replace")


def t_release(src, tmp, cc):
    build = os.path.join(tmp, cc)
    env = dict(os.environ, CC=cc)
    rc, out = run(["meson", "setup", build, src, "--buildtype=release"], env)
    assert rc == 0, "meson setup failed: %s" % out[-2000:]
    rc, out = run(["ninja", "-C", build], env)
    warnings = [l for l in out.splitlines() if "warning:" in l or "error:" in l]
    assert rc == 0 and not warnings, "ninja exit %d, %d warnings or errors: %s" % (
        rc, len(warnings), " | ".join(warnings[:4]) or out[-2000:])
    opts = {o["name"]: o["value"] for o in
            json.loads(run(["meson", "introspect", "--buildoptions", build])[1])}
    assert opts["werror"] is False, "werror is a default option: a warning breaks users' builds"
    return ""


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                          os.path.join(os.path.dirname(__file__), "..", ".."))
    with tempfile.TemporaryDirectory(prefix="shardis-release-") as tmp:
        for cc in ("gcc", "clang"):
            if shutil.which(cc) is None:
                COUNT["failed"] += 1
                print("FAIL release_build_%s: %s is not installed (scripts/deps)" % (cc, cc))
                continue
            check("release_build_%s" % cc, t_release, src, tmp, cc)
    print("%d passed, %d failed" % (COUNT["passed"], COUNT["failed"]))
    return 1 if COUNT["failed"] or not COUNT["passed"] else 0


if __name__ == "__main__":
    sys.exit(main())
