/* bench_ring.c -- lookups per second for 16-byte keys, per hash and
 * distribution, on a ring of 8 servers (a benchmark, not a test: the
 * numbers depend on the machine; compare rows, not runs).
 *
 * "lookup" is ring_lookup (hash tag scan, hash, binary search); "search" is
 * ring_lookup_hash alone on precomputed positions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ring/ring.h"

#define NKEYS   (1 << 18)
#define KEYLEN  16

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile uint32_t sink;

int main(int argc, char **argv)
{
    static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static char keys[NKEYS][KEYLEN];
    static uint64_t pos[NKEYS];
    double budget = argc > 1 ? atof(argv[1]) : 0.2;   /* seconds per row */
    struct ring_server sv[8];
    char addr[8][40];
    uint64_t x = 88172645463325252u;

    for (int i = 0; i < 8; i++) {
        snprintf(addr[i], sizeof(addr[i]), "10.0.0.%d:6379", i + 1);
        sv[i] = (struct ring_server){NULL, addr[i], 6379, 1};
    }
    for (size_t i = 0; i < NKEYS; i++)
        for (int j = 0; j < KEYLEN; j++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            keys[i][j] = alnum[x % (sizeof(alnum) - 1)];
        }

    printf("%-10s %-14s %8s %14s %14s\n", "dist", "hash", "points", "lookup/s", "search/s");
    for (int d = 0; d < RING_DIST_RANDOM; d++) {
        for (int h = 0; h < RING_HASH_COUNT; h++) {
            struct ring_options o = {.dist = d, .hash = h, .jedis_version = 3,
                                     .tag = {'{', '}'}, .has_tag = 1};
            struct ring *r;
            char err[256];
            double t0, t1, t2;
            size_t n = 0, m = 0;

            if (ring_check_hash(d, h, err, sizeof(err)) < 0 ||
                ring_create(&r, &o, sv, 8, err, sizeof(err)) < 0)
                continue;
            for (size_t i = 0; i < NKEYS; i++)
                pos[i] = ring_key_hash(r, keys[i], KEYLEN);
            t0 = now();
            do {
                for (size_t i = 0; i < NKEYS; i++)
                    sink += ring_lookup(r, keys[i], KEYLEN);
                n += NKEYS;
            } while ((t1 = now()) - t0 < budget);
            do {
                for (size_t i = 0; i < NKEYS; i++)
                    sink += ring_lookup_hash(r, pos[i]);
                m += NKEYS;
            } while ((t2 = now()) - t1 < budget);
            printf("%-10s %-14s %8zu %14.0f %14.0f\n", ring_dist_name(d), ring_hash_name(h),
                   ring_npoints(r), (double)n / (t1 - t0), (double)m / (t2 - t1));
            ring_unref(r);
        }
    }
    return 0;
}
