/* bench_tx.c -- MULTI/EXEC transactions per second against a Redis endpoint.
 *
 * redis-benchmark sends one command per request, so it cannot time a
 * transaction. This client runs CLIENTS threads, each on its own
 * connection, sending MULTI, SET, INCR, EXEC (on keys with one {tag} per
 * thread, so a sharding proxy can place each transaction) in one write and
 * reading the four replies, for SECONDS. It prints
 *
 *   <transactions/s> <p50 ms> <p99 ms>
 *
 * A benchmark tool, not a test: scripts/bench runs it. */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_lat.h"


struct worker {
    pthread_t   thread;
    const char *host;
    int         port, id;
    double      seconds;
    long        done;
    double     *lat;            /* ms, the first MAX_SAMPLES transactions */
    int         failed;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    redisContext *c = redisConnect(w->host, w->port);
    char key[32], counter[32];
    double end;

    if (c == NULL || c->err) {
        w->failed = 1;
        return NULL;
    }
    snprintf(key, sizeof(key), "{tx%d}k", w->id);
    snprintf(counter, sizeof(counter), "{tx%d}n", w->id);
    end = now_s() + w->seconds;
    while (now_s() < end) {
        double t0 = now_s();
        redisReply *r;
        redisAppendCommand(c, "MULTI");
        redisAppendCommand(c, "SET %s %s", key, "value-of-some-64-bytes-like-the-other-rows-here!!");
        redisAppendCommand(c, "INCR %s", counter);
        redisAppendCommand(c, "EXEC");
        for (int i = 0; i < 4; i++) {
            if (redisGetReply(c, (void **)&r) != REDIS_OK) {
                w->failed = 1;
                redisFree(c);
                return NULL;
            }
            if ((i == 3 && r->type != REDIS_REPLY_ARRAY) || r->type == REDIS_REPLY_ERROR)
                w->failed = 1;
            freeReplyObject(r);
        }
        if (w->done < MAX_SAMPLES)
            w->lat[w->done] = (now_s() - t0) * 1000;
        w->done++;
    }
    redisFree(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_tx HOST PORT CLIENTS SECONDS\n");
        return 2;
    }
    int n = atoi(argv[3]);
    double seconds = atof(argv[4]), t0 = now_s();
    struct worker *w = calloc((size_t)n, sizeof(*w));
    long total = 0;

    for (int i = 0; i < n; i++) {
        w[i] = (struct worker){.host = argv[1], .port = atoi(argv[2]), .id = i,
                               .seconds = seconds, .lat = malloc(MAX_SAMPLES * sizeof(double))};
        pthread_create(&w[i].thread, NULL, run, &w[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(w[i].thread, NULL);
    double elapsed = now_s() - t0;
    double **lat = malloc((size_t)n * sizeof(*lat)), p50, p99;
    long *done = malloc((size_t)n * sizeof(*done));
    for (int i = 0; i < n; i++) {
        if (w[i].failed) {
            fprintf(stderr, "bench_tx: client %d failed\n", i);
            return 1;
        }
        total += w[i].done;
        lat[i] = w[i].lat;
        done[i] = w[i].done;
    }
    lat_merge(lat, done, n, &p50, &p99);
    printf("%.0f %.3f %.3f\n", (double)total / elapsed, p50, p99);
    free(lat);
    free(done);
    free(w);
    return 0;
}
