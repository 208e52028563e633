#!/usr/bin/python3
"""check_calls.py -- a file calls only functions of its own layer or below.

check_layers.py reads the include lines; a header included through
another can still hand a file a name from above. This reads the built
objects instead: for each object of proxy's static library, the symbols
it uses (nm's U) and the layer of the object that defines each. Objects
are named by meson as <layer>_<file>.c.o. Usage:
    check_calls.py LIBPROXY.a
"""
import re
import subprocess
import sys

LINE = re.compile(r"^(.*?\.o):\s*(?:[0-9a-f]+)?\s+([A-Za-z])\s+(\S+)$")
LAYERS = ["base", "transport", "core", "modules", "ops", "process"]


def main():
    out = subprocess.run(["nm", "-A", sys.argv[1]], capture_output=True, text=True,
                         check=True).stdout
    defined, used = {}, {}
    for line in out.splitlines():
        # "lib.a:member.o:ADDR T name", "lib.a:member.o:     U name" (a thin
        # archive names the member by its path)
        m = LINE.match(line)
        if m is None:
            continue
        obj = m.group(1).rsplit(":", 1)[-1].rsplit("/", 1)[-1]
        kind, sym = m.group(2), m.group(3)
        used.setdefault(obj, set())
        if kind == "U":
            used[obj].add(sym)
        elif kind in "TDBRCV":
            defined[sym] = obj
    passed = failed = 0
    for obj in sorted(used):
        layer = obj.split("_", 1)[0]
        if layer not in LAYERS:
            print("FAIL %s: not in a layer's folder" % obj)
            failed += 1
            continue
        up = sorted("%s (%s)" % (s, defined[s]) for s in used[obj]
                    if s in defined and LAYERS.index(defined[s].split("_", 1)[0]) > LAYERS.index(layer))
        if up:
            print("FAIL %s (%s) calls above its layer: %s" % (obj, layer, ", ".join(up)))
            failed += 1
        else:
            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
