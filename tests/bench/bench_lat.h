/* bench_lat.h -- what scripts/bench's own clients share (bench_tx.c,
 * bench_track.c): the clock, and each worker's latency samples merged
 * into a median and a 99th percentile. Header only: each tool is one
 * file. */
#ifndef SHARDIS_BENCH_LAT_H
#define SHARDIS_BENCH_LAT_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Samples a worker keeps (ms): its first so many. */
#define MAX_SAMPLES 200000

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int lat_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The samples of n workers (lat[i], done[i] of them taken, the first
 * MAX_SAMPLES kept), merged: their median and 99th percentile into *p50
 * and *p99 (0 without any). Frees each lat[i]. */
static inline void lat_merge(double **lat, const long *done, int n, double *p50, double *p99)
{
    double *all = malloc((size_t)n * MAX_SAMPLES * sizeof(double));
    long nlat = 0;

    for (int i = 0; i < n; i++) {
        long k = done[i] < MAX_SAMPLES ? done[i] : MAX_SAMPLES;
        memcpy(all + nlat, lat[i], (size_t)k * sizeof(double));
        nlat += k;
        free(lat[i]);
    }
    qsort(all, (size_t)nlat, sizeof(double), lat_cmp);
    *p50 = nlat ? all[nlat / 2] : 0;
    *p99 = nlat ? all[(long)((double)nlat * 0.99)] : 0;
    free(all);
}

#endif
