/* info.h -- INFO: a pool described as one redis-server would describe
 * itself, the servers' figures summed (info.c). */
#ifndef SHARDIS_INFO_H
#define SHARDIS_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct args;
struct client;
struct pool;
struct req;

/* What the servers last said of themselves (each one's INFO, asked every
 * INFO_REFRESH_MS on shardis's own connection to it), and the pool's
 * request rate sampled for instantaneous_ops_per_sec. Owned by the pool
 * (pool.info): made by info_tick on first use, freed by info_free. */
struct info;

#define INFO_REFRESH_MS 1000

/* From the proxy's tick: sample the request rate; ask each server whose
 * figures are INFO_REFRESH_MS old for new ones. Nothing waits for them:
 * INFO answers from what is there, and says how old it is. */
void info_tick(struct pool *p, uint64_t now);
/* At start, before the loop runs: each server's INFO server section,
 * asked and waited for, so that HELLO says what the servers are from the
 * first client on (and their commands are asked for: cmdinfo.c). */
void info_prime(struct pool *p);
/* The modules of the pool's servers, as the first server listed them at
 * start (MODULE LIST; Redis 8's vectorset), for HELLO and MODULE LIST:
 * written to w, in w's protocol. */
struct resp_w;
void info_modules(const struct pool *p, struct resp_w *w);
void info_free(struct pool *p);
/* INFO [section ...]: the reply to c's request r, now or (the keyspace
 * section: the servers are asked again) within INFO_WAIT_MS; r is done
 * either way. info_client_gone: c is closing, its INFOs are not to be
 * answered. */
#define INFO_WAIT_MS 500
void info_command(struct client *c, struct req *r, struct args *a);
void info_client_gone(struct client *c);
/* Whether, as far as the last INFO of servers[0..n) tells, keys of p are
 * in a database other than redis_db there (which a reshard does not
 * move: mig.c), or it cannot be told; why says which. */
bool info_other_databases(const struct pool *p, const uint32_t *servers, uint32_t n,
                          char *why, size_t size);
/* What the pool's servers are, as their INFO says: the lowest version
 * among them (what every one can do), by name ("redis", "valkey") and
 * that name's version, and the redis_version it reports. Before any
 * server answered, the command table's Redis version. True if the
 * servers differ (an upgrade under way). HELLO and INFO say the same. */
struct info_version {
    char name[32], version[32], redis_version[32];
};
bool info_servers_version(const struct pool *p, struct info_version *v);

/* instantaneous_ops_per_sec of p (this loop's copy): the mean of its
 * last samples (info_tick). */
double info_ops_per_sec(const struct pool *p);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module info_module;

#endif
