#!/usr/bin/python3
"""check_layers.py -- a file includes only headers of its own layer or below.

The layers are proxy/'s folders, lowest first (proxy/meson.build and
doc/development.md say what each is for), under the libraries beside
proxy/ (ring/, idgen/, conf/), which include nothing of proxy/. Every
#include "..." line of every .c and .h is read; one line per file, and
for a file that reaches up, which include does. Usage:
    check_layers.py [SOURCE-ROOT]     (default: this file's project)
"""
import os
import re
import sys

LAYERS = ["base", "transport", "core", "modules", "ops", "process"]
LIBS = ["ring", "idgen", "conf"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    """The layer of a project path, by its folder: -1 for the libraries
    below proxy/, None for a path outside them."""
    parts = path.split("/")
    if parts[0] in LIBS:
        return -1
    if parts[0] == "proxy" and len(parts) == 3 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return None


def name(level):
    return "library" if level == -1 else LAYERS[level]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    files = []
    for top in LIBS + ["proxy"]:
        for d, _, fs in os.walk(os.path.join(root, top)):
            files += [os.path.relpath(os.path.join(d, f), root) for f in fs if f.endswith((".c", ".h"))]
    passed = failed = 0
    for f in sorted(files):
        mine = layer_of(f)
        if mine is None:
            print("FAIL %s: not in a layer's folder (%s)" % (f, ", ".join(LAYERS)))
            failed += 1
            continue
        up = []
        for inc in INCLUDE.findall(open(os.path.join(root, f)).read()):
            theirs = layer_of(inc)
            if theirs is None and inc.startswith(tuple(t + "/" for t in LIBS + ["proxy"])):
                up.append("%s (no layer)" % inc)
            elif theirs is not None and theirs > mine:
                up.append("%s (%s)" % (inc, name(theirs)))
        if up:
            print("FAIL %s (%s) includes above its layer: %s" % (f, name(mine), ", ".join(up)))
            failed += 1
        else:
            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
