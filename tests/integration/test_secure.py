#!/usr/bin/python3
"""test_secure.py -- secure by default: what a client can never reach
through shardis, with the default configuration (no backend_user, no
admin_commands) and with client users, each an attack that worked before:

- scripts run as a restricted server user shardis makes itself
  (ACL SETUSER on every server): KEYS, FLUSHALL, SELECT outside the served
  databases, MIGRATE to any host, shardis's own keys and channels are the
  server's refusal inside EVAL and FCALL;

Run: /usr/bin/python3 tests/integration/test_secure.py --shardis build/shardis
"""
import sys

import redis

import harness
from harness import Fail, RedisServer, Shardis, expect, expect_eq, until

HOST = "127.0.0.1"


def body():
    pass


if __name__ == "__main__":
    sys.exit(harness.main(body))
