#!/usr/bin/python3
"""test_service.py -- shardis as a package installs and systemd runs it:

- meson install (into a scratch DESTDIR) puts the binary, the manual page,
  the example config and the systemd unit in their places;
- the manual page renders with groff -ww without a warning, and names
  every command-line option and every pool key the parser knows;
- the unit passes systemd-analyze verify with nothing to say, and its
  ExecStartPre (shardis -t) accepts the installed config;
- started as systemd starts a Type=notify service (NOTIFY_SOCKET, a path
  or an abstract name), shardis says READY=1 with its MAINPID once its
  listener accepts, RELOADING=1 then READY=1 around a SIGHUP reload, and
  STOPPING=1 on SIGTERM.

Run: /usr/bin/python3 tests/integration/test_service.py --shardis build/shardis
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import redis

import harness
from harness import Fail, RedisServer, check, expect, expect_eq

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def installed():
    """meson install of shardis's build directory into a scratch DESTDIR."""
    build = os.path.dirname(harness.ARGS.shardis)
    dest = os.path.join(harness.TMP, "dest")
    out = subprocess.run(["meson", "install", "-C", build, "--no-rebuild", "--destdir", dest],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise Fail("meson install: %s%s" % (out.stdout[-500:], out.stderr[-500:]))
    files = {}
    for root, _, names in os.walk(dest):
        for n in names:
            files[n] = os.path.join(root, n)
    return dest, files


def t_install():
    dest, files = installed()
    for name in ("shardis", "shardis.8", "shardis.yml", "shardis.service"):
        expect(name in files, "installed: %s (have %s)" % (name, sorted(files)))
    expect(files["shardis"].endswith("/bin/shardis"), "the binary in bin/")
    expect(files["shardis.8"].endswith("/share/man/man8/shardis.8"), "the page in man8/")
    expect(files["shardis.yml"].endswith("/etc/shardis/shardis.yml"), "the config in etc/")
    expect("/lib/systemd/system/" in files["shardis.service"], "the unit")
    return "%d files" % len(files)


def t_man_page():
    """Every option and every pool key, and no groff warning."""
    page = os.path.join(SRC, "doc", "shardis.8")
    out = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", page], capture_output=True,
                         text=True)
    expect(out.returncode == 0 and out.stderr == "", "groff -ww: %s" % out.stderr)
    text = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", page], capture_output=True,
                          text=True).stdout
    conf = open(os.path.join(SRC, "conf", "conf_pool.c")).read()
    table = conf[conf.index("pool_keys[] = {"):]
    keys = re.findall(r'^\s*\{"([a-z_]+)",', table[:table.index("};")], re.M)
    main = open(os.path.join(SRC, "proxy", "process", "main.c")).read()
    opts = re.findall(r'^\s*\{"([a-z-]+)",\s+(?:required|no)_argument', main, re.M)
    expect(len(keys) > 40 and len(opts) > 8, "read %d keys, %d options" % (len(keys), len(opts)))
    missing = [k for k in keys if not re.search(r"\b%s\b" % re.escape(k), text)]
    missing += ["--" + o for o in opts if "--" + o not in text.replace("\u2010", "-")]
    expect(not missing, "not in the manual page: %r" % missing)
    return "%d keys, %d options" % (len(keys), len(opts))


def t_unit():
    dest, files = installed()
    unit = open(files["shardis.service"]).read()
    m = re.search(r"^ExecStart=(\S+) -c (\S+)$", unit, re.M)
    expect(m is not None, "ExecStart: %r" % unit)
    # The unit as installed, its paths pointed at the DESTDIR copies.
    local = unit.replace(m.group(1), files["shardis"]).replace(m.group(2), files["shardis.yml"])
    path = os.path.join(harness.TMP, "shardis.service")
    with open(path, "w") as f:
        f.write(local)
    env = dict(os.environ, MANPATH=os.path.dirname(os.path.dirname(files["shardis.8"])))
    out = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                         env=env)
    expect(out.returncode == 0 and out.stdout + out.stderr == "",
           "systemd-analyze verify: %s%s" % (out.stdout, out.stderr))
    pre = re.search(r"^ExecStartPre=(.*)$", local, re.M).group(1).split()
    out = subprocess.run(pre, capture_output=True, text=True)
    expect(out.returncode == 0, "ExecStartPre %r: %s" % (pre, out.stderr))
    for need in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "NoNewPrivileges=yes",
                 "ProtectSystem=strict"):
        expect(need in unit, "the unit has %s" % need)
    return "verified"


def notify_socket(abstract):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = "shardis-test-%d-%d" % (os.getpid(), time.monotonic_ns())
        s.bind("\0" + name)
        return s, "@" + name
    path = os.path.join(harness.TMP, "notify.sock")
    s.bind(path)
    return s, path


def messages(s, until_key, timeout=10):
    """Datagrams until one holds until_key=..., as a list of dicts."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = s.recv(4096).decode()
        except socket.timeout:
            break
        d = dict(line.split("=", 1) for line in data.split("\n") if "=" in line)
        got.append(d)
        if until_key in d:
            return got
    raise Fail("no %s= within %d s; got %r" % (until_key, timeout, got))


def t_notify(servers, abstract):
    s, addr = notify_socket(abstract)
    port = harness.free_port()
    conf = os.path.join(harness.TMP, "svc.yml")
    with open(conf, "w") as f:
        f.write("alpha:\n  listen: %s:%d\n  servers:\n%s" % (harness.HOST, port, "".join(
            "    - %s:%d:1\n" % (harness.HOST, r.port) for r in servers)))
    log = os.path.join(harness.TMP, "svc.log")
    proc = harness.start([harness.ARGS.shardis, "-c", conf, "-o", log], log + ".out",
                         env=dict(os.environ, NOTIFY_SOCKET=addr))
    try:
        ready = messages(s, "READY")
        # The listener accepts now: a client is served at once.
        c = redis.Redis(harness.HOST, port, socket_timeout=2, socket_connect_timeout=0.5)
        expect_eq(c.ping(), True, "PING right after READY=1")
        expect_eq(ready[-1].get("MAINPID"), str(proc.pid), "MAINPID")
        expect("STATUS" in ready[-1], "a STATUS")
        proc.send_signal(signal.SIGHUP)
        around = messages(s, "READY")
        expect(around[0].get("RELOADING") == "1" and "MONOTONIC_USEC" in around[0],
               "RELOADING=1 first: %r" % around)
        proc.send_signal(signal.SIGTERM)
        stop = messages(s, "STOPPING")
        expect_eq(stop[-1].get("STOPPING"), "1", "STOPPING=1")
        expect_eq(proc.wait(10), 0, "exit status")
    finally:
        if proc.poll() is None:
            harness.stop(proc)
        s.close()
    return "READY, RELOADING/READY, STOPPING over %s" % ("an abstract socket" if abstract
                                                         else "a path")


def body():
    for tool in ("groff", "systemd-analyze", "meson"):
        if shutil.which(tool) is None:
            raise RuntimeError("%s is not installed (scripts/deps installs it)" % tool)
    check("install_puts_files_in_place", t_install)
    check("man_page_names_every_key_and_option", t_man_page)
    check("unit_verifies_and_checks_config", t_unit)
    servers = [RedisServer("svc0")]
    check("notify_ready_reload_stopping_path", t_notify, servers, False)
    check("notify_ready_reload_stopping_abstract", t_notify, servers, True)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-svc-"))
