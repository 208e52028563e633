#!/usr/bin/python3
"""test_apps.py -- real applications through their own libraries, each run
against a direct redis-server and through shardis in front of three, with
the same outcome asserted:

- Celery 5.2 (Debian's python3-celery) with its Redis broker and result
  backend in database 1 (redis://host:port/1: SELECT 1 on every
  connection), configured as Celery's docs say for Redis Cluster: a hash-tagged
  global_keyprefix in broker_transport_options and
  result_backend_transport_options. Two apps on tags that live on
  different servers, a real worker process each; tasks sent, results got
  with AsyncResult.get() (the result backend's MULTI, SETEX, PUBLISH, EXEC
  and its subscription), a failing task's exception, a control ping (the
  broker's fanout over PUBLISH), a chord. Celery 5.2 prefixes only the
  broker's keys: its result keys (celery-task-meta-<id>) spread over the
  servers, each stored in a transaction of its own.
- BullMQ (npm `bullmq`, tests/node/bullmq.mjs): two queues, prefixes
  `{bull}` and a tag on another server; jobs added, one delayed, one
  retried, a Worker completes them all with their return values.
- Sidekiq 6.4 (Debian's ruby-sidekiq, with ruby-redis-namespace) in
  database 2: the namespace `{sidekiq}`, jobs pushed with the client API (perform_async,
  push_bulk, perform_in: the scheduled poller's EVALSHA), a real `sidekiq`
  process performs them, each writing an untagged marker key (the markers
  span the servers); it registers and unregisters itself.
- django-redis (Debian's python3-django-redis): two caches, KEY_PREFIX
  `{app}` and a tag on another server: set/get, add, get_many, set_many,
  delete_many, incr, ttl, touch, iter_keys, delete_pattern and clear()
  (FLUSHDB, on every server with admin_commands: true; refused without).
  With an untagged KEY_PREFIX the keys spread over every server, and
  set_many, a MULTI of SETs, is refused with CROSSSLOT.

Every process this test starts runs in a session of its own, stopped by
its process group. The libraries are Debian's (scripts/deps) and
tests/node/package-lock.json's; a missing one fails, never skips.

Run: /usr/bin/python3 tests/integration/test_apps.py --shardis build/shardis
"""
import json
import os
import shutil
import signal
import subprocess
import sys

import redis

import harness
from harness import RedisServer, Shardis, check, expect, expect_eq, Fail

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "node")
PY = "/usr/bin/python3"


class Group(subprocess.Popen):
    """A process started in a session of its own: its signals go to its
    whole process group (a Celery worker's pool children, say), so that
    harness.stop() ends them all."""

    def send_signal(self, sig):
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass


def start_group(argv, log, cwd, env):
    with open(log, "ab") as out:
        p = Group(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                  cwd=cwd, env=env, start_new_session=True)
    harness.PROCS.append(p)
    return p


def stop_group(p, grace=10):
    """SIGTERM to the group, SIGKILL after grace s; the exit code."""
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(grace)
    except subprocess.TimeoutExpired:
        rc = None
    p.send_signal(signal.SIGKILL)      # any child left behind
    if rc is None:
        p.wait()
    if p in harness.PROCS:
        harness.PROCS.remove(p)
    return rc


def tail(path, n=1500):
    with open(path, errors="replace") as f:
        return f.read()[-n:]


def servers_of(servers, pattern, db=0):
    """Indexes of the servers holding a key that matches pattern in
    database db (read on each redis-server directly)."""
    return sorted(i for i, s in enumerate(servers)
                  if redis.Redis(harness.HOST, s.port, db=db).keys(pattern))


def other_tag(px, base, tag):
    """A hash tag base<n> whose keys live on another server than tag's."""
    home = px.whereis([("{%s}x" % tag).encode()])[("{%s}x" % tag).encode()]
    for n in range(2, 60):
        t = "%s%d" % (base, n)
        if px.whereis([("{%s}x" % t).encode()])[("{%s}x" % t).encode()] != home:
            return t
    raise Fail("no tag %s<n> off server %d" % (base, home))


def both(fn, targets):
    """fn(name, port) for direct, then shardis (one after the other: their
    workers would share this 2-core machine); {name: result}."""
    return {name: fn(name, port) for name, port in targets}


# ---- Celery --------------------------------------------------------------------------

CELERY_APP = '''\
import os
from celery import Celery

url = os.environ["APP_REDIS"]
tag = os.environ["APP_TAG"]
app = Celery("apps", broker=url, backend=url)
app.conf.broker_transport_options = {"global_keyprefix": tag}
app.conf.result_backend_transport_options = {"global_keyprefix": tag}
app.conf.task_default_queue = "work"
app.conf.worker_hijack_root_logger = False


@app.task(name="apps.add")
def add(x, y):
    return x + y


@app.task(name="apps.total")
def total(xs, plus):
    return sum(xs) + plus


@app.task(name="apps.fail")
def fail(why):
    raise ValueError(why)
'''


# The client: the same app, in a process of its own (its result consumer
# unsubscribes at exit, which must happen while the servers are up).
CELERY_CLIENT = '''\
import json
import sys

from celery import chord
from celery_app import app

tag = sys.argv[1]
sent = [app.send_task("apps.add", (i, 100 * i)) for i in range(6)]
bad = app.send_task("apps.fail", ("boom %s" % tag,))
values = [r.get(timeout=30) for r in sent]
try:
    bad.get(timeout=30)
    failed = "no exception"
except ValueError as e:
    failed = "ValueError: %s" % e
pong = app.control.ping(timeout=5, limit=1)
# A chord: Celery 5.2 counts its parts in a MULTI on three untagged keys,
# celery-taskset-meta-<group>.j, .t and .s, which differ in their last
# byte only: fnv1a_64 (the default hash) puts them on one server.
parts = [app.signature("apps.add", (i, i)) for i in range(4)]
joined = chord(parts)(app.signature("apps.total", (1000,))).get(timeout=30)
print(json.dumps({"values": values, "states": [r.state for r in sent],
                  "failed": failed, "failed_state": bad.state, "chord": joined,
                  "ping": [list(p.values()) for p in pong],
                  "ids": [r.id for r in sent] + [bad.id]}))
'''


def celery_run(name, port, tags, workdir):
    """A worker per tag, then the client of each app; what came back."""
    workers, out = {}, {}
    try:
        for tag in tags:
            env = dict(os.environ, APP_REDIS="redis://127.0.0.1:%d/1" % port, APP_TAG=tag,
                       PYTHONPATH=workdir)
            log = os.path.join(workdir, "worker-%s-%s.log" % (name, tag.strip("{}")))
            workers[tag] = (start_group([PY, "-m", "celery", "-A", "celery_app", "worker",
                                         "--pool", "solo", "-n", "%s-%s@localhost" % (
                                             name, tag.strip("{}")),
                                         "--without-gossip", "--without-mingle",
                                         "--loglevel", "INFO"], log, workdir, env), log, env)
        for tag, (p, log, env) in workers.items():
            c = subprocess.run([PY, "celery_client.py", tag], cwd=workdir, env=env,
                               capture_output=True, text=True, timeout=60,
                               start_new_session=True)
            if c.returncode != 0:
                raise Fail("%s %s: the client exited %d: %s; worker log: %s" % (
                    name, tag, c.returncode, harness.short(c.stderr[-1500:], 1500),
                    tail(log)))
            out[tag] = json.loads(c.stdout.strip().splitlines()[-1])
    finally:
        rcs = {tag: (stop_group(p), log) for tag, (p, log, env) in workers.items()}
    for tag, (rc, log) in rcs.items():     # (a failure above is the one reported)
        if rc != 0:
            raise Fail("%s worker %s exited %s: %s" % (name, tag, rc, tail(log)))
    return out


def t_celery(servers, direct, px):
    """Two apps (tags on different servers), a worker each, on both sides."""
    workdir = os.path.join(harness.TMP, "celery")
    os.mkdir(workdir)
    for fname, text in (("celery_app.py", CELERY_APP), ("celery_client.py", CELERY_CLIENT)):
        with open(os.path.join(workdir, fname), "w") as f:
            f.write(text)
    tags = ["{celery}", "{%s}" % other_tag(px, "celery", "celery")]
    got = both(lambda name, port: celery_run(name, port, tags, workdir),
               [("direct", direct.port), ("shardis", px.port)])
    for name in got:
        for tag in tags:
            r = got[name][tag]
            expect_eq(r["values"], [101 * i for i in range(6)], "%s %s: results" % (name, tag))
            expect_eq(r["states"], ["SUCCESS"] * 6, "%s %s: states" % (name, tag))
            expect_eq(r["failed"], "ValueError: boom %s" % tag, "%s %s: the failing task" % (
                name, tag))
            expect_eq(r["failed_state"], "FAILURE", "%s %s: its state" % (name, tag))
            expect_eq(r["ping"], [[{"ok": "pong"}]], "%s %s: control ping" % (name, tag))
            expect_eq(r["chord"], 1012, "%s %s: the chord" % (name, tag))
    strip = lambda g: {t: {k: v for k, v in r.items() if k != "ids"} for t, r in g.items()}
    expect_eq(strip(got["shardis"]), strip(got["direct"]), "shardis's outcome vs direct")
    # The broker's keys of each app on one server, the two apps on two.
    homes = [servers_of(servers, "%s*" % t, db=1) for t in tags]
    expect(all(len(h) == 1 for h in homes) and homes[0] != homes[1],
           "broker keys of %s on servers %s" % (tags, homes))
    # The results (Celery 5.2 does not prefix them) spread over the servers.
    ids = [i for t in tags for i in got["shardis"][t]["ids"]]
    keys = [k for i in ids for k in ("celery-task-meta-" + i, "%scelery-task-meta-%s" % (
        tags[0], i))]
    where = {i for i, s in enumerate(servers) for k in keys
             if redis.Redis(harness.HOST, s.port, db=1).exists(k)}
    expect(len(where) >= 2, "the results on servers %s only" % sorted(where))
    return "results %s, broker keys on servers %s, results on %s" % (
        got["shardis"][tags[0]]["values"], homes, sorted(where))


# ---- BullMQ --------------------------------------------------------------------------

def t_bullmq(servers, direct, px):
    node = shutil.which("node")
    if not node or not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "bullmq")):
        raise Fail("node or tests/node/node_modules/bullmq missing (scripts/deps installs it)")
    n = 10
    prefixes = ["{bull}", "{%s}" % other_tag(px, "bull", "bull")]

    def run(name, port):
        out = subprocess.run([node, os.path.join(NODE_DIR, "bullmq.mjs"), str(port), str(n)]
                             + prefixes, cwd=NODE_DIR, capture_output=True, text=True,
                             timeout=60, start_new_session=True)
        if out.returncode != 0:
            raise Fail("%s: node exited %d: %s %s" % (name, out.returncode,
                                                     harness.short(out.stdout, 1000),
                                                     harness.short(out.stderr, 1000)))
        return json.loads(out.stdout.strip().splitlines()[-1])

    got = both(run, [("direct", direct.port), ("shardis", px.port)])
    want = {"j%d" % i: {"doubled": 2 * i, "name": "j%d" % i} for i in range(n)}
    want["flaky"] = want.pop("j1")
    want["flaky"]["name"] = "flaky"
    for name in got:
        for p in prefixes:
            r = got[name][p]
            expect_eq(r["values"], want, "%s %s: return values" % (name, p))
            expect_eq(r["counts"], {"completed": n, "failed": 0, "waiting": 0, "active": 0,
                                    "delayed": 0}, "%s %s: job counts" % (name, p))
            expect_eq((r["flakyAttempts"], r["failures"]), (2, 1),
                      "%s %s: the retried job's attempts, failures" % (name, p))
    expect_eq(got["shardis"], got["direct"], "shardis's outcome vs direct")
    homes = [servers_of(servers, "%s*" % p) for p in prefixes]
    expect(all(len(h) == 1 for h in homes) and homes[0] != homes[1],
           "keys of %s on servers %s" % (prefixes, homes))
    return "%d jobs per queue completed, queues on servers %s" % (n, homes)


# ---- Sidekiq -------------------------------------------------------------------------

SIDEKIQ_JOBS = '''\
require "sidekiq"

REDIS = { url: ENV.fetch("APP_REDIS"), namespace: ENV.fetch("APP_NS") }
Sidekiq.configure_server { |c| c.redis = REDIS }
Sidekiq.configure_client { |c| c.redis = REDIS }
Sidekiq.options[:poll_interval_average] = 1

# Each job leaves a marker outside the namespace, on whichever server owns
# it: its argument doubled.
class Double
  include Sidekiq::Worker
  def perform(n)
    r = Redis.new(url: ENV.fetch("APP_REDIS"))
    r.set("done#{n}-sidekiq", n * 2)
    r.close
  end
end
'''

SIDEKIQ_PUSH = '''\
require_relative "jobs"
require "sidekiq/api"
4.times { |i| Double.perform_async(i) }
Sidekiq::Client.push_bulk("class" => Double, "args" => (4...8).map { |i| [i] })
Double.perform_in(1, 8)
puts Sidekiq::Queue.new("default").size
'''


def sidekiq_run(name, port, workdir):
    env = dict(os.environ, APP_REDIS="redis://127.0.0.1:%d/2" % port, APP_NS="{sidekiq}")
    push = subprocess.run(["ruby", "push.rb"], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=30, start_new_session=True)
    if push.returncode != 0:
        raise Fail("%s: push.rb exited %d: %s" % (name, push.returncode,
                                                  harness.short(push.stderr, 1000)))
    queued = int(push.stdout.strip())
    log = os.path.join(workdir, "sidekiq-%s.log" % name)
    p = start_group(["sidekiq", "-r", os.path.join(workdir, "jobs.rb"), "-c", "2",
                     "-q", "default", "-t", "5"], log, workdir, env)
    c = redis.Redis("127.0.0.1", port, db=2, socket_timeout=10)
    done = lambda: [c.get("done%d-sidekiq" % i) for i in range(9)]
    try:
        harness.until("%s: every job performed" % name,
                      lambda: all(v is not None for v in done()), timeout=25)
    except Fail:
        stop_group(p)
        raise Fail("%s: performed %s; sidekiq log: %s" % (name, done(), tail(log)))
    registered = c.scard("{sidekiq}:processes")
    rc = stop_group(p)
    expect_eq(rc, 0, "%s: sidekiq's exit code (log: %s)" % (name, tail(log, 600)))
    return {"queued": queued, "done": [int(v) for v in done()], "registered": registered,
            "after": {"queue": c.llen("{sidekiq}:queue:default"),
                      "schedule": c.zcard("{sidekiq}:schedule"),
                      "processes": c.scard("{sidekiq}:processes"),
                      "queues": sorted(c.smembers("{sidekiq}:queues"))}}


def t_sidekiq(servers, direct, px):
    if not shutil.which("sidekiq") or not shutil.which("ruby"):
        raise Fail("sidekiq or ruby missing (scripts/deps installs ruby-sidekiq)")
    workdir = os.path.join(harness.TMP, "sidekiq")
    os.mkdir(workdir)
    for fname, text in (("jobs.rb", SIDEKIQ_JOBS), ("push.rb", SIDEKIQ_PUSH)):
        with open(os.path.join(workdir, fname), "w") as f:
            f.write(text)
    got = both(lambda name, port: sidekiq_run(name, port, workdir),
               [("direct", direct.port), ("shardis", px.port)])
    want = {"queued": 8, "done": [2 * i for i in range(9)], "registered": 1,
            "after": {"queue": 0, "schedule": 0, "processes": 0, "queues": [b"default"]}}
    for name in got:
        expect_eq(got[name], want, "%s: outcome" % name)
    homes = servers_of(servers, "{sidekiq}*", db=2)
    expect(len(homes) == 1, "Sidekiq's keys on servers %s" % homes)
    markers = servers_of(servers, "done*-sidekiq", db=2)
    expect(len(markers) >= 2, "the markers on servers %s only" % markers)
    return "9 jobs performed; namespace on server %s, markers on %s" % (homes, markers)


# ---- django-redis ----------------------------------------------------------------------

def django_setup(direct, px, tags):
    """Django's CACHES: per tag a django-redis cache of the direct server and
    one of shardis (aliases direct-TAG, shardis-TAG; KEY_PREFIX {TAG}), and
    'plain', shardis's with an untagged KEY_PREFIX."""
    from django.conf import settings
    caches = {}
    for tag in tags:
        for name, port in (("direct", direct.port), ("shardis", px.port)):
            caches["%s-%s" % (name, tag)] = {
                "BACKEND": "django_redis.cache.RedisCache",
                "LOCATION": "redis://127.0.0.1:%d/0" % port,
                "KEY_PREFIX": "{%s}" % tag, "TIMEOUT": 300}
    caches["plain"] = dict(caches["shardis-" + tags[0]], KEY_PREFIX="plain")
    caches["default"] = caches["plain"]
    settings.configure(CACHES=caches)
    import django
    django.setup()


# The cache's keys: names that differ early (twemproxy's hashes keep keys
# that differ only at the end together, which matters without a tag).
NAMES = {g: ["%s%08x" % (g, (i + 1) * 2654435761 % 2 ** 32) for i in range(10)] for g in "abc"}


def django_ops(cache, raw, prefix, before_clear):
    """The same calls on one cache; what each returned."""
    a, b, c = NAMES["a"], NAMES["b"], NAMES["c"]
    out = []
    rec = lambda what, v: out.append((what, v))
    rec("set", cache.set("obj", {"x": 1}))
    rec("get", cache.get("obj"))
    rec("get missing", cache.get("nope", "dflt"))
    rec("add existing", cache.add("obj", 2))
    rec("set_many", cache.set_many({k: i for g in (a, b, c) for i, k in enumerate(g)}))
    rec("get_many", cache.get_many(a[::3] + c[::2] + ["nope"]))
    rec("delete_many", cache.delete_many(c[:5] + ["nope"]))
    rec("get_many after", cache.get_many(c))
    rec("incr", cache.incr(b[3], 5))
    rec("incr again", cache.incr(b[3]))
    try:
        cache.incr("nope")
        rec("incr missing", "no error")
    except ValueError as e:
        rec("incr missing", "ValueError: %s" % e)
    rec("set timeout", cache.set("t", "v", timeout=100))
    rec("ttl", cache.ttl("t") in (99, 100))
    rec("touch", cache.touch("t", 500))
    rec("ttl after touch", cache.ttl("t") in (499, 500))
    rec("touch persist", cache.touch("t", None))
    rec("ttl persisted", cache.ttl("t"))
    rec("touch missing", cache.touch("nope", 10))
    rec("iter_keys", sorted(cache.iter_keys("b*")))
    rec("delete_pattern", cache.delete_pattern("a*"))
    rec("has_key", [cache.has_key(k) for k in (a[0], a[9], b[0], c[9])])
    rec("keys in redis", sorted(raw.scan_iter(prefix + ":*")))
    before_clear()
    raw.set("not-the-cache", "x")
    rec("clear", cache.clear())
    rec("after clear", (cache.get("obj"), cache.get(b[5]), raw.get("not-the-cache"),
                        raw.dbsize()))
    return out


def t_django(servers, direct, px, tags):
    """Two caches, KEY_PREFIX {TAG} on two servers, direct and through shardis."""
    from django.core.cache import caches
    a, b, c = NAMES["a"], NAMES["b"], NAMES["c"]
    homes = []
    for tag in tags:
        got = {}
        for name, port in (("direct", direct.port), ("shardis", px.port)):
            where = lambda: homes.append(servers_of(servers, "{%s}*" % tag)) \
                if name == "shardis" else None
            got[name] = django_ops(caches["%s-%s" % (name, tag)],
                                   redis.Redis("127.0.0.1", port, socket_timeout=10),
                                   "{%s}" % tag, where)
        d = dict(got["direct"])
        expect_eq(d["get"], {"x": 1}, "direct get")
        expect_eq(d["get_many"], {k: a.index(k) for k in a[::3]}
                  | {k: c.index(k) for k in c[::2]}, "direct get_many")
        expect_eq(d["delete_many"], 5, "direct delete_many")
        expect_eq(d["get_many after"], {k: c.index(k) for k in c[5:]}, "direct get_many after")
        expect_eq(d["incr again"], 9, "direct incr")
        expect_eq(d["ttl persisted"], None, "direct ttl after touch(None)")
        expect_eq(d["iter_keys"], sorted(b), "direct iter_keys")
        expect_eq(d["delete_pattern"], 10, "direct delete_pattern")
        expect_eq(d["has_key"], [False, False, True, True], "direct has_key")
        expect_eq(len(d["keys in redis"]), 17, "direct: the keys in redis")
        expect_eq(d["after clear"], (None, None, None, 0), "direct after clear()")
        expect_eq(len(got["shardis"]), len(got["direct"]), "calls")
        for (what, want), (_, have) in zip(got["direct"], got["shardis"]):
            expect_eq(have, want, "{%s} shardis's %s vs direct" % (tag, what))
    expect(all(len(h) == 1 for h in homes) and homes[0] != homes[1],
           "the caches' keys on servers %s" % homes)
    return "%d calls alike per cache; caches on servers %s; clear() empties every server" % (
        len(d), homes)


def t_django_untagged(servers, px):
    """KEY_PREFIX without a tag: set_many's MULTI spans servers, refused;
    the other calls work, the keys on every server."""
    from django.core.cache import caches
    cache = caches["plain"]
    keys = [k for g in "abc" for k in NAMES[g]]
    try:
        cache.set_many({k: 1 for k in keys})
        raise Fail("set_many of untagged keys on three servers succeeded")
    except redis.ResponseError as e:
        err = str(e)
    expect("CROSSSLOT" in err, "set_many: %s" % err)
    for k in keys:
        cache.set(k, k)
    expect_eq(cache.get_many(keys), {k: k for k in keys}, "get_many")
    where = px.whereis([("plain:1:" + k).encode() for k in keys])
    expect_eq(sorted(set(where.values())), [0, 1, 2], "servers of the keys")
    expect_eq(cache.delete_many(keys), 30, "delete_many")
    return "set_many: %s" % err


def t_django_no_admin(servers):
    """Without admin_commands, clear() (FLUSHDB) is refused, nothing lost."""
    from django_redis.cache import RedisCache
    px = Shardis("apps-noadmin", servers)
    cache = RedisCache("redis://127.0.0.1:%d/0" % px.port, {"KEY_PREFIX": "{app}"})
    cache.set("kept", 1)
    try:
        cache.clear()
        raise Fail("clear() without admin_commands succeeded")
    except redis.ResponseError as e:
        err = str(e)
    expect("admin command" in err, "the error: %s" % err)
    expect_eq(cache.get("kept"), 1, "the key after the refused clear()")
    harness.t_exit_clean(px)
    return "refused: %s" % err


def body():
    servers = harness.fresh_servers(3)
    direct = RedisServer("direct")
    px = Shardis("apps", servers, admin_commands="true")
    reset = lambda: [s.client.flushall() for s in servers + [direct]]
    tags = ["app", other_tag(px, "app", "app")]
    django_setup(direct, px, tags)
    check("django-redis, KEY_PREFIX {app} and a tag on another server: set/get, get_many, "
          "set_many, delete_many, incr, ttl, touch, iter_keys, delete_pattern, clear() "
          "return what they return direct", t_django, servers, direct, px, tags)
    reset()
    check("django-redis, an untagged KEY_PREFIX: set_many (MULTI) refused with CROSSSLOT, "
          "get_many and delete_many over every server", t_django_untagged, servers, px)
    reset()
    check("django-redis without admin_commands: clear() refused, the keys kept",
          t_django_no_admin, servers)
    reset()
    check("BullMQ: two queues ({bull} and a tag on another server), jobs added, delayed, "
          "retried, all completed with their return values as direct", t_bullmq, servers,
          direct, px)
    reset()
    check("Celery: two apps with a hash-tagged global_keyprefix each, on two servers; "
          "a worker each; results, a task's failure, control ping, a chord as direct",
          t_celery, servers, direct, px)
    reset()
    check("Sidekiq: namespace {sidekiq}, jobs pushed (perform_async, push_bulk, "
          "perform_in), a sidekiq process performs all, as direct", t_sidekiq, servers,
          direct, px)
    check("shardis exits clean after the applications", harness.t_exit_clean, px)


if __name__ == "__main__":
    sys.exit(harness.main(body, tmp_prefix="shardis-apps-"))
