/* bench_track.c -- RESP3 GETs per second against a Redis endpoint, with the
 * connections tracking the keys they read (CLIENT TRACKING ON) or not.
 *
 * redis-benchmark cannot turn tracking on for its connections. This client
 * runs CLIENTS threads, each on its own connection: HELLO 3, then (mode
 * "track") CLIENT TRACKING ON, then PIPELINE GETs of random keys among
 * KEYS ("key:NNNNNNNNNNNN", redis-benchmark's -r naming) per write, their
 * replies read (pushes, if any, set aside and counted), for SECONDS. It
 * prints
 *
 *   <GETs/s> <p50 ms> <p99 ms> <pushes>
 *
 * (latency per pipeline). Replies are read with a small RESP3 scanner of
 * its own: Debian 12's hiredis (0.14) reads no RESP3. A benchmark tool, not
 * a test: scripts/bench runs it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "bench_lat.h"
#include <unistd.h>

#define BUF (1 << 20)

struct worker {
    pthread_t   thread;
    const char *host;
    int         port, pipeline, track;
    long        keys;
    unsigned    seed;
    double      seconds;
    long        done, pushes;
    double     *lat;            /* ms per pipeline, the first MAX_SAMPLES */
    int         failed;
    char       *in;
    size_t      have, at;
};

/* The end of the RESP value at w->in[i], or 0 if it is not all read yet;
 * *push set if it is a push. */
static size_t value_end(const struct worker *w, size_t i, int *push)
{
    long left = 1;

    *push = i < w->have && w->in[i] == '>';
    while (left > 0) {
        const char *nl = memchr(w->in + i, '\n', w->have - i);
        if (i >= w->have || nl == NULL)
            return 0;
        char t = w->in[i];
        long n = strtol(w->in + i + 1, NULL, 10);
        size_t line = (size_t)(nl - w->in) + 1;
        left--;
        if (t == '$' || t == '!' || t == '=') {
            i = n < 0 ? line : line + (size_t)n + 2;
            if (i > w->have)
                return 0;
        } else if (t == '*' || t == '~' || t == '>') {
            i = line;
            left += n > 0 ? n : 0;
        } else if (t == '%' || t == '|') {
            i = line;
            left += 2 * n + (t == '|');
        } else {
            i = line;               /* + - : _ , # ( */
        }
    }
    return i;
}

static int fill(struct worker *w, int fd)
{
    if (w->at > 0) {
        memmove(w->in, w->in + w->at, w->have - w->at);
        w->have -= w->at;
        w->at = 0;
    }
    if (w->have == BUF)
        return -1;
    ssize_t r = read(fd, w->in + w->have, BUF - w->have);
    if (r <= 0)
        return -1;
    w->have += (size_t)r;
    return 0;
}

/* Read the next reply that is not a push (pushes counted): 0, or -1 on
 * an error reply or EOF. */
static int next_reply(struct worker *w, int fd)
{
    for (;;) {
        int push;
        size_t e = w->at < w->have ? value_end(w, w->at, &push) : 0;
        if (e == 0) {
            if (fill(w, fd) < 0)
                return -1;
            continue;
        }
        char t = w->in[w->at];
        w->at = e;
        if (t == '-')
            return -1;
        if (!push)
            return 0;
        w->pushes++;
    }
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)w->port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    char *out = malloc((size_t)w->pipeline * 64 + 128);
    double end;

    w->in = malloc(BUF);
    inet_pton(AF_INET, w->host, &sa.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        w->failed = 1;
        return NULL;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const char *hello = "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n";
    const char *track = "*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\nON\r\n";
    if (write(fd, hello, strlen(hello)) < 0 ||
        (w->track && write(fd, track, strlen(track)) < 0)) {
        w->failed = 1;
        return NULL;
    }
    for (int i = 0; i < 1 + w->track; i++)
        if (next_reply(w, fd) < 0) {
            w->failed = 1;
            return NULL;
        }
    end = now_s() + w->seconds;
    while (now_s() < end) {
        double t0 = now_s();
        size_t len = 0;
        for (int i = 0; i < w->pipeline; i++) {
            long k = (long)(rand_r(&w->seed) % (unsigned)w->keys);
            len += (size_t)sprintf(out + len, "*2\r\n$3\r\nGET\r\n$16\r\nkey:%012ld\r\n", k);
        }
        if (write(fd, out, len) != (ssize_t)len) {
            w->failed = 1;
            break;
        }
        for (int i = 0; i < w->pipeline; i++)
            if (next_reply(w, fd) < 0) {
                w->failed = 1;
                goto out;
            }
        if (w->done < MAX_SAMPLES)
            w->lat[w->done] = (now_s() - t0) * 1000;
        w->done++;
    }
out:
    close(fd);
    free(out);
    free(w->in);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 8 || (strcmp(argv[6], "plain") && strcmp(argv[6], "track"))) {
        fprintf(stderr, "usage: bench_track HOST PORT CLIENTS SECONDS PIPELINE plain|track KEYS\n");
        return 2;
    }
    int n = atoi(argv[3]), pipeline = atoi(argv[5]);
    double seconds = atof(argv[4]), t0 = now_s();
    struct worker *w = calloc((size_t)n, sizeof(*w));
    long total = 0, pushes = 0;

    for (int i = 0; i < n; i++) {
        w[i] = (struct worker){.host = argv[1], .port = atoi(argv[2]), .pipeline = pipeline,
                               .track = !strcmp(argv[6], "track"), .keys = atol(argv[7]),
                               .seed = (unsigned)i * 7919u + 1, .seconds = seconds,
                               .lat = malloc(MAX_SAMPLES * sizeof(double))};
        pthread_create(&w[i].thread, NULL, run, &w[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(w[i].thread, NULL);
    double elapsed = now_s() - t0;
    double **lat = malloc((size_t)n * sizeof(*lat)), p50, p99;
    long *done = malloc((size_t)n * sizeof(*done));
    for (int i = 0; i < n; i++) {
        if (w[i].failed) {
            fprintf(stderr, "bench_track: client %d failed\n", i);
            return 1;
        }
        total += w[i].done * pipeline;
        pushes += w[i].pushes;
        lat[i] = w[i].lat;
        done[i] = w[i].done;
    }
    lat_merge(lat, done, n, &p50, &p99);
    printf("%.0f %.3f %.3f %ld\n", (double)total / elapsed, p50, p99, pushes);
    free(lat);
    free(done);
    free(w);
    return 0;
}
