/* sentinel.h -- high availability: where each named master is now, as
 * Redis Sentinel says (sentinel.c). */
#ifndef SHARDIS_SENTINEL_H
#define SHARDIS_SENTINEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct pool;
struct resp_w;

/* A pool's links to its Sentinels and what they last said of each master
 * (pool.sentinel; NULL for a pool without sentinels). Owned by the pool:
 * made by sentinel_start, its handles closed by sentinel_close (or the
 * stop's walk, sentinel_close_handle), freed by sentinel_free once the
 * loop has run their close callbacks. */
struct sentinel;

/* At start, before the loop runs and before anything is read from the
 * servers: ask every Sentinel where each of p's masters is (blocking, a
 * second at most per Sentinel), and point each server at the address a
 * majority gives, if the server there says it is a master. A master none
 * can be agreed on is left unresolved: its keys get an error until a
 * later round finds it. Then the links open (once the loop runs). */
void sentinel_start(struct pool *p);
/* On a loop other than 0, for its copy p of loop 0's src (which
 * sentinel_start has filled): a mirror of src's Sentinel state, with no
 * links (sentinel.c, struct sentinel), every master at src's address. */
void sentinel_start_copy(struct pool *p, const struct pool *src);
/* From the proxy's tick: reconnect links, and ask again about every
 * master each SENTINEL_CHECK_MS. */
void sentinel_tick(struct pool *p, uint64_t now);
/* A hint that server's master may have moved (a -READONLY reply, a
 * connection reset, a server saying it is a replica): ask the Sentinels
 * now (at most one round at a time per master; from another loop, by
 * mail to loop 0). */
void sentinel_hint(struct pool *p, uint32_t server, const char *why);
/* The stop: close the links' handles (true if h was one of them, for
 * the stop's walk over every handle). */
bool sentinel_close_handle(struct pool *p, void *h);
void sentinel_free(struct pool *p);
/* HELLO's reply (len bytes at p): whether the server says it is a master
 * (its "role"). Every connection to a server of a pool with sentinels
 * asks, before anything else is written on it (backend_hello.c). */
bool sentinel_says_master(const char *p, size_t len);
/* INFO's: ",master=host:port,config_epoch=E,switches=N,read_replicas=R"
 * for server (R: the replicas its reads may go to). */
void sentinel_info(const struct pool *p, uint32_t server, FILE *f);
/* SHARD.NODES: the fields of server's master and the replicas read
 * from ("host:port,..."), name/value pairs
 * written with w (their count: SENTINEL_FIELDS pairs). */
#define SENTINEL_FIELDS 5
/* The master switches followed for server (/metrics). */
uint32_t sentinel_switches(const struct pool *p, uint32_t server);
void sentinel_describe(const struct pool *p, uint32_t server, struct resp_w *w);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module sentinel_module;

#endif
