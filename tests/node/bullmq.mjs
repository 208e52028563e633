// bullmq.mjs -- BullMQ's Queue and Worker (on ioredis) against one Redis
// endpoint: shardis or a direct redis-server. Run by
// tests/integration/test_apps.py as: node bullmq.mjs PORT N PREFIX...
//
// For each prefix (a hash tag, so that every key of that queue lives on one
// server), a Queue adds N jobs (half with add(), half with addBulk()), one
// of which is delayed and one of which fails its first attempt and is
// retried; a Worker processes them. Prints one JSON line: per prefix the
// return values by job name, the job counts by state and the attempts the
// retried job made. Exits 1 if the jobs do not all complete within 20 s.
import { Queue, Worker, QueueEvents } from "bullmq";

const [port, n, ...prefixes] = process.argv.slice(2);
const N = Number(n);
const connection = { host: "127.0.0.1", port: Number(port), maxRetriesPerRequest: null };

async function run(prefix) {
    const queue = new Queue("jobs", { connection, prefix });
    const events = new QueueEvents("jobs", { connection, prefix });
    await events.waitUntilReady();
    let completed = 0, failures = 0;
    const done = new Promise((resolve) => {
        events.on("completed", () => { if (++completed === N) resolve(); });
    });
    const worker = new Worker("jobs", async (job) => {
        if (job.name === "flaky" && job.attemptsMade === 0) {
            failures++;
            throw new Error("first attempt fails");
        }
        return { doubled: job.data.x * 2, name: job.name };
    }, { connection, prefix, concurrency: 2 });
    const half = Math.floor(N / 2);
    const jobs = [];
    for (let i = 0; i < half; i++) {
        const opts = i === 0 ? { delay: 300 } : i === 1 ? { attempts: 2, backoff: 100 } : {};
        jobs.push(await queue.add(i === 1 ? "flaky" : "j" + i, { x: i }, opts));
    }
    jobs.push(...await queue.addBulk(
        Array.from({ length: N - half }, (_, k) => ({ name: "j" + (half + k), data: { x: half + k } }))));
    const timer = setTimeout(() => {
        console.error("not all jobs completed within 20 s: " + completed + " of " + N);
        process.exit(1);
    }, 20000);
    await done;
    clearTimeout(timer);
    const values = {};
    let flakyAttempts = null;
    for (const j of jobs) {
        const job = await queue.getJob(j.id);
        values[job.name] = job.returnvalue;
        if (job.name === "flaky") flakyAttempts = job.attemptsMade;
    }
    const counts = await queue.getJobCounts("completed", "failed", "waiting", "active", "delayed");
    await worker.close();
    await events.close();
    await queue.close();
    return { values, counts, flakyAttempts, failures };
}

const out = {};
for (const [prefix, r] of await Promise.all(prefixes.map(async (p) => [p, await run(p)])))
    out[prefix] = r;
console.log(JSON.stringify(out));
process.exit(0);
