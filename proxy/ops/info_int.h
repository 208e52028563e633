/* info_int.h -- what info.c (asking the servers, INFO's command) and
 * info_sections.c (INFO's text) share: a pool's INFO state and the
 * sections' numbering. Private to ops/info*.c. */
#ifndef SHARDIS_INFO_INT_H
#define SHARDIS_INFO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/ops/info.h"

struct args;
struct client;
struct mbuf;
struct pool;
struct req;

#define INFO_SAMPLES     16     /* instantaneous_ops_per_sec: as redis-server, */
#define INFO_SAMPLE_MS   100    /* the mean of 16 samples 100 ms apart */
#define INFO_TEXT_MAX    (1 << 20)

struct info_server {
    char    *text;          /* its last INFO's text (owned), NUL-terminated; NULL none */
    uint64_t at_ms;         /* loop ms it came */
    uint64_t asked_ms;      /* loop ms it was last asked (answered or not) */
    uint64_t asked_ns;      /* ... and uv_hrtime then, for the other loops (info.c) */
    uint64_t clean;         /* the last answer's req.clean: if not 0, its text
                               shows every key the first clean - 1 requests in
                               another database made (info_other_databases) */
    uint64_t own;           /* shardis's own keys in redis_db there (own_exists), asked
                               right after a client's INFO's: left out of its keyspace */
    bool     asking;        /* ... and the answer is still to come */
    uint32_t asked, answered;   /* questions with the own keys' count sent (ask) and
                                   answered or failed (the connection answers in
                                   order: the k-th answer is the k-th question's) */
};

/* A client's INFO with the keyspace section, waiting for the servers'
 * answers to questions asked after it came (info_command). */
struct info_wait {
    struct client *c;       /* borrowed: info_client_gone drops the entry first */
    struct req    *r;       /* c's INFO, in c->reqs, done when answered */
    uint32_t       mask;    /* its sections */
    uint64_t       until_ms;/* loop ms: answered then with what is there */
    uint32_t       n;       /* servers when it came: need[n] */
    uint32_t      *need;    /* server s's `answered` that answers it (owned) */
};

struct info {
    struct info_server *servers;    /* [nservers], by server index */
    uint32_t nservers;
    struct info_wait *waits;        /* [nwaits] */
    uint32_t nwaits, waits_cap;
    struct mbuf *buf;               /* the questions' bytes */
    uint64_t sample_ms, sample_requests;
    double   samples[INFO_SAMPLES];
    uint32_t nsample;
    char    *modules;               /* the first server's MODULE LIST, as it came
                                       (RESP2; owned), or NULL */
    size_t   modules_len;
    struct info_version version;    /* info_servers_version's answer, made again when */
    bool     version_mixed;         /* a server's text changed (version_stale): HELLO */
    bool     version_stale;         /* reads it once per connection */
};

/* INFO's sections, in redis-server's order: whether "default" and "all"
 * include each ("everything" includes every one). Bit i of a mask is
 * sections[i] (info_sections.c). */
enum {
    S_SERVER, S_CLIENTS, S_MEMORY, S_PERSISTENCE, S_STATS, S_REPLICATION, S_CPU, S_MODULES,
    S_COMMANDSTATS, S_ERRORSTATS, S_LATENCYSTATS, S_CLUSTER, S_KEYSPACE, S_SHARDIS,
};
#define WANT(mask, k) (((mask) >> (k)) & 1u)

/* p's INFO state, made on first use (info.c); the pool frees it
 * (info_free). */
struct info *info_of(struct pool *p);
/* The sections INFO's arguments ask for: a mask (info_sections.c). */
uint32_t info_sections_of(struct args *a);
/* INFO's reply to c's r, of the sections in mask, from the figures there
 * are now (info_sections.c); r is not ended. */
void info_render(struct client *c, struct req *r, uint32_t mask);

#endif
