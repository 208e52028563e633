#!/usr/bin/python3
"""test_node.py -- the Node.js client libraries people install today, at
their defaults, through shardis: node-redis 6 (npm `redis`) and ioredis 6,
both of which open every connection with HELLO 3 (the protocol each
negotiated is asserted: ioredis 6 was once called RESP2 here). tests/node/clients.mjs
runs each check against shardis (three servers, keys on each) and a direct
redis-server and compares what the library returns: connecting, RESP3 maps,
sets, doubles and nulls, a 600-command pipeline, MULTI with a hash tag and
WATCH, pub/sub with commands on the subscribed RESP3 connection, the SCAN
iterator, scripts (EVALSHA falling back to EVAL on NOSCRIPT), RESP2 and
RESP3 clients on the same keys, and ioredis's pipeline, MULTI, scanStream,
defineCommand and pub/sub.

The libraries are tests/node/package-lock.json's, installed by scripts/deps
(npm ci into tests/node/node_modules); a missing install fails, never skips.

Run: /usr/bin/python3 tests/integration/test_node.py --shardis build/shardis
"""
import os
import re
import shutil
import subprocess
import sys

import harness
from harness import RedisServer, Shardis

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "node")


def body():
    node = shutil.which("node")
    if not node or not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "redis")):
        print("FAIL setup: node or tests/node/node_modules missing (scripts/deps installs them)")
        harness.COUNT["failed"] += 1
        return
    servers = harness.fresh_servers(3)
    direct = RedisServer("direct")
    px = Shardis("node", servers, admin_commands="true")
    out = subprocess.run([node, os.path.join(NODE_DIR, "clients.mjs"), str(px.port),
                          str(direct.port)], cwd=NODE_DIR, capture_output=True, text=True,
                         timeout=240)
    lines = out.stdout.splitlines()
    for line in lines:
        if line.startswith("ok   "):
            harness.COUNT["passed"] += 1
            print(line)
        elif line.startswith("FAIL "):
            harness.COUNT["failed"] += 1
            print(line)
    if out.returncode != 0 or not any(re.fullmatch(r"\d+ passed, \d+ failed", l) for l in lines):
        harness.COUNT["failed"] += 1
        print("FAIL node exited %d: %s" % (out.returncode, harness.short(out.stderr, 2000)))
    harness.t_exit_clean(px)
    harness.COUNT["passed"] += 1
    print("ok   shardis exits clean after the node clients")


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-node-"))
