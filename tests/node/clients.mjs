// clients.mjs -- node-redis 6 and ioredis 6 (both HELLO 3, RESP3, by
// default) at their defaults, through shardis and against a direct
// redis-server, each check's result compared between the two.
//
// Run by tests/integration/test_node.py, which starts the servers and
// shardis: node clients.mjs SHARDIS_PORT DIRECT_PORT. Prints `ok   <name>`
// or `FAIL <name>: <detail>` per check and ends with "N passed, N failed";
// exits 1 if anything failed or nothing ran.
import assert from "node:assert/strict";
import { createClient, defineScript } from "redis";
import Redis from "ioredis";

const [shardisPort, directPort] = process.argv.slice(2).map(Number);
const HOST = "127.0.0.1";
let passed = 0, failed = 0;

async function check(name, fn) {
    try {
        const detail = await fn();
        passed++;
        console.log("ok   " + name + (detail ? ": " + detail : ""));
    } catch (e) {
        failed++;
        console.log("FAIL " + name + ": " + String(e && e.stack || e).split("\n").slice(0, 4).join(" | "));
    }
}

// Both sides of a comparison: the same code on a client of shardis and one
// of the direct server, the results deep-equal.
async function same(make, fn, what) {
    const px = await make(shardisPort), d = await make(directPort);
    try {
        const got = await fn(px, "px"), want = await fn(d, "direct");
        assert.deepStrictEqual(got, want, what);
        return got;
    } finally {
        await close(px);
        await close(d);
    }
}

async function close(c) {
    if (c instanceof Redis) c.disconnect();
    else if (c.isOpen) c.destroy();
}

const nodeRedis = async (port, opts = {}) => {
    const c = createClient({ socket: { host: HOST, port, reconnectStrategy: false }, ...opts });
    c.on("error", () => {});        // surfaced by the failing command instead
    await c.connect();
    return c;
};
const ioredis = async (port) => {
    const c = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0,
                          retryStrategy: () => null });
    c.on("error", () => {});
    await c.connect();
    return c;
};

// Keys spread over every backend: shardis says where each lives.
async function spread(prefix, n) {
    const c = await nodeRedis(shardisPort);
    const keys = [], where = new Set();
    for (let i = 0; i < n; i++) {
        const k = prefix + ((i + 1) * 2654435761 >>> 0).toString(36);
        keys.push(k);
        where.add(String(await c.sendCommand(["SHARD.WHEREIS", k])));
    }
    await close(c);
    assert.ok(where.size >= 3, "keys on " + [...where].join(",") + " only");
    return keys;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
    const keys = await spread("nk:", 30);

    await check("node-redis connects with HELLO 3 and is a RESP3 client", async () => {
        const c = await nodeRedis(shardisPort);
        const info = await c.clientInfo();
        await close(c);
        assert.equal(info.resp, 3, "CLIENT INFO resp=" + info.resp);
        const hello = await same(nodeRedis, (c) => c.hello(3).then((h) => [h.proto, h.mode, h.role]));
        return "HELLO proto/mode/role " + hello.join("/");
    });

    await check("node-redis RESP3 types: strings, maps, sets, doubles, nulls, booleans", async () => {
        return "" + (await same(nodeRedis, async (c, side) => {
            await c.flushDb();
            const out = [];
            for (const k of keys) {
                await c.hSet("h" + k, { a: "1", b: "two" });
                await c.sAdd("s" + k, ["x", "y"]);
                await c.zAdd("z" + k, [{ score: 1.5, value: "m" }]);
                await c.set(k, "v" + k);
            }
            for (const k of keys) {
                const h = await c.hGetAll("h" + k);
                out.push([{ ...h }, (await c.sMembers("s" + k)).sort(), await c.zScore("z" + k, "m"),
                          await c.zIncrBy("z" + k, 0.25, "m"), await c.get(k), await c.get("no" + k),
                          await c.sendCommand(["EVAL", "return true", "1", k])]);
            }
            out.push(await c.mGet([...keys, "nothing-here"]));
            out.push(await c.configGet("maxmemory-policy"));
            out.push(await c.dbSize());
            return out;
        }, "replies")).length + " replies equal";
    });

    await check("node-redis pipeline of 600 commands across servers", async () => {
        await same(nodeRedis, async (c) => {
            const p = [];
            for (const k of keys) for (let i = 0; i < 10; i++) p.push(c.incr("n" + k));
            for (const k of keys) for (let i = 0; i < 10; i++) p.push(c.get("n" + k));
            return Promise.all(p);
        }, "pipelined replies");
    });

    await check("node-redis MULTI with a hash tag, and WATCH aborting it", async () => {
        await same(nodeRedis, async (c) => {
            await c.del(["{u1}a", "{u1}b"]);
            const r1 = await c.multi().set("{u1}a", "1").incr("{u1}a").lPush("{u1}b", ["p", "q"])
                .lRange("{u1}b", 0, -1).hSet("{u1}h", "f", "v").hGetAll("{u1}h").exec();
            await c.watch("{u1}a");
            const other = await c.duplicate().connect();
            await other.set("{u1}a", "changed");
            await other.destroy();
            const r2 = await c.multi().get("{u1}a").exec().catch((e) => e.constructor.name);
            assert.equal(r2, "WatchError");
            return [r1.map((x) => (typeof x === "object" && x && !Array.isArray(x) ? { ...x } : x)), r2];
        }, "transaction replies");
    });

    await check("node-redis pub/sub in RESP3: commands on the subscribed connection", async () => {
        const sub = await nodeRedis(shardisPort), pub = await nodeRedis(shardisPort);
        const got = [];
        try {
            await sub.subscribe(["chan:a", "chan:b"], (msg, ch) => got.push(ch + "=" + msg));
            await sub.pSubscribe("pat:*", (msg, ch) => got.push(ch + "~" + msg));
            // RESP3: ordinary commands on the same connection while subscribed.
            await sub.set("sub-own", "v");
            assert.equal(await sub.get("sub-own"), "v");
            const n = [];
            for (let i = 0; i < 5; i++) {
                n.push(await pub.publish("chan:a", "a" + i));
                n.push(await pub.publish("chan:b", "b" + i));
                n.push(await pub.publish("pat:x", "p" + i));
                assert.equal(await sub.incr("sub-count"), i + 1);
            }
            for (let i = 0; i < 50 && got.length < 15; i++) await sleep(20);
            await sub.unsubscribe();
            await sub.pUnsubscribe();
            assert.equal(await sub.ping(), "PONG");
            assert.deepStrictEqual(n, Array(15).fill(1), "PUBLISH counts");
            const want = [];
            for (let i = 0; i < 5; i++) want.push("chan:a=a" + i, "chan:b=b" + i, "pat:x~p" + i);
            assert.deepStrictEqual(got.filter((m) => m.startsWith("chan:a")), want.filter((m) => m.startsWith("chan:a")));
            assert.deepStrictEqual(got.sort(), want.sort(), "messages");
            return got.length + " messages";
        } finally {
            await close(sub);
            await close(pub);
        }
    });

    await check("node-redis SCAN iterator over every server", async () => {
        const seen = await same(nodeRedis, async (c) => {
            const out = new Set();
            for await (const batch of c.scanIterator({ MATCH: "nk:*", COUNT: 7 }))
                for (const k of [].concat(batch)) out.add(k);
            return [...out].sort();
        }, "keys scanned");
        assert.deepStrictEqual(seen, [...keys].sort());
        return seen.length + " keys";
    });

    await check("node-redis scripts: EVAL, and EVALSHA falling back on NOSCRIPT", async () => {
        const script = defineScript({
            NUMBER_OF_KEYS: 1,
            SCRIPT: "return redis.call('INCRBY', KEYS[1], ARGV[1]) * 2",
            parseCommand(parser, key, by) { parser.pushKey(key); parser.push(String(by)); },
            transformReply: (r) => r,
        });
        const make = (port) => nodeRedis(port, { scripts: { incr2: script } });
        await same(make, async (c) => {
            await c.sendCommand(["SCRIPT", "FLUSH"]);
            const out = [];
            for (const k of keys) {
                await c.del("sc" + k);
                out.push(await c.incr2("sc" + k, 3));   // NOSCRIPT, then EVAL
                out.push(await c.incr2("sc" + k, 4));   // EVALSHA
                out.push(await c.eval("return {KEYS[1], ARGV[1], redis.call('GET', KEYS[1])}",
                                      { keys: ["sc" + k], arguments: ["arg"] }));
            }
            return out;
        }, "script replies");
    });

    await check("a RESP2 and a RESP3 node-redis client on the same keys keep their types", async () => {
        const c3 = await nodeRedis(shardisPort), c2 = await nodeRedis(shardisPort, { RESP: 2 });
        try {
            const raw3 = [], raw2 = [];
            for (const k of keys.slice(0, 10)) {
                raw3.push(await c3.sendCommand(["HGETALL", "h" + k]), await c3.sendCommand(["ZSCORE", "z" + k, "m"]));
                raw2.push(await c2.sendCommand(["HGETALL", "h" + k]), await c2.sendCommand(["ZSCORE", "z" + k, "m"]));
            }
            for (let i = 0; i < raw3.length; i += 2) {
                assert.ok(!Array.isArray(raw3[i]) && typeof raw3[i] === "object", "RESP3 HGETALL is a map: " + JSON.stringify(raw3[i]));
                assert.ok(Array.isArray(raw2[i]) && raw2[i].length === 4, "RESP2 HGETALL is a flat array: " + JSON.stringify(raw2[i]));
                assert.equal(typeof raw3[i + 1], "number", "RESP3 ZSCORE is a double");
                assert.equal(typeof raw2[i + 1], "string", "RESP2 ZSCORE is a bulk string");
            }
            return raw3.length + " replies each";
        } finally {
            await close(c3);
            await close(c2);
        }
    });

    // node-redis 6's client-side cache at its defaults: it turns tracking on
    // (CLIENT TRACKING ON), serves reads from its cache and drops a key when
    // the server says it changed. A change by another client, on every
    // server, must reach it: the next read is the new value, not the cached one.
    await check("node-redis clientSideCache: reads served from its cache, changes seen", async () => {
        const ks = keys.slice(0, 9);
        const run = async (port) => {
            const w = await nodeRedis(port);
            const c = await nodeRedis(port, { RESP: 3, clientSideCache: {} });
            try {
                for (const k of ks) await w.set(k, "v1");
                const first = [], again = [], after = [];
                for (const k of ks) first.push(await c.get(k));
                for (const k of ks) again.push(await c.get(k));
                const hits = c.clientSideCache.stats().hitCount;
                for (const k of ks) await w.set(k, "v2");
                // Each invalidation comes before any later reply on the
                // tracking connection: a read of each key's server, then.
                const deadline = Date.now() + 5000;
                for (;;) {
                    after.length = 0;
                    for (const k of ks) after.push(await c.get(k));
                    if (after.every((v) => v === "v2") || Date.now() > deadline) break;
                    await sleep(20);
                }
                return { first, again, after, hits, size: c.clientSideCache.size() };
            } finally {
                await close(w);
                await close(c);
            }
        };
        const got = await run(shardisPort), want = await run(directPort);
        assert.deepStrictEqual(got.after, ks.map(() => "v2"), "reads after the change");
        assert.equal(got.hits, ks.length, "cache hits on the second reads");
        assert.deepStrictEqual(got, want, "as against redis-server");
        return ks.length + " keys on every server, " + got.hits + " hits";
    });

    await check("ioredis connects at its defaults with HELLO 3: a RESP3 client", async () => {
        // (ioredis 6.0 negotiates RESP3; shardis's README called it RESP2.)
        const resp = await same(ioredis, async (c) =>
            String(await c.client("INFO")).match(/ resp=(\d)/)[1], "the protocol negotiated");
        assert.equal(resp, "3", "ioredis's CLIENT INFO resp=" + resp);
        return "resp=" + resp + " through shardis and direct";
    });

    await check("ioredis pipeline, MULTI, scanStream and defineCommand", async () => {
        await same(ioredis, async (c) => {
            const out = [];
            const p = c.pipeline();
            for (const k of keys) p.set("io" + k, k).get("io" + k).hgetall("h" + k);
            out.push(await p.exec());
            out.push(await c.multi().set("{io}x", "1").incr("{io}x").get("{io}x").exec());
            const scanned = await new Promise((resolve, reject) => {
                const seen = new Set();
                c.scanStream({ match: "ionk:*", count: 5 })
                    .on("data", (b) => b.forEach((k) => seen.add(k)))
                    .on("end", () => resolve([...seen].sort())).on("error", reject);
            });
            out.push(scanned);
            c.defineCommand("twice", { numberOfKeys: 1, lua: "return redis.call('GET', KEYS[1]) .. redis.call('GET', KEYS[1])" });
            for (const k of keys.slice(0, 5)) out.push(await c.twice("io" + k));
            return out;
        }, "ioredis replies");
    });

    await check("ioredis pub/sub", async () => {
        const sub = await ioredis(shardisPort), pub = await ioredis(shardisPort);
        try {
            const got = [];
            sub.on("message", (ch, m) => got.push(ch + "=" + m));
            sub.on("pmessage", (p, ch, m) => got.push(ch + "~" + m));
            await sub.subscribe("io:a", "io:b");
            await sub.psubscribe("iop:*");
            for (let i = 0; i < 5; i++) {
                await pub.publish("io:a", "a" + i);
                await pub.publish("io:b", "b" + i);
                await pub.publish("iop:1", "p" + i);
            }
            for (let i = 0; i < 50 && got.length < 15; i++) await sleep(20);
            assert.equal(got.length, 15, JSON.stringify(got));
            assert.deepStrictEqual(got.filter((m) => m.startsWith("io:a")), [0, 1, 2, 3, 4].map((i) => "io:a=a" + i));
            return got.length + " messages";
        } finally {
            await close(sub);
            await close(pub);
        }
    });

    console.log(passed + " passed, " + failed + " failed");
    process.exit(failed || !passed ? 1 : 0);
}

main().catch((e) => {
    console.log("FAIL setup: " + (e && e.stack || e));
    console.log(passed + " passed, " + (failed + 1) + " failed");
    process.exit(1);
});
