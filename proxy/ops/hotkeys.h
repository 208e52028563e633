/* hotkeys.h -- HOTKEYS: the keys that cost a pool most, across all its
 * servers at once, as Redis 8.6's HOTKEYS tracks one server's (hotkeys.c). */
#ifndef SHARDIS_HOTKEYS_H
#define SHARDIS_HOTKEYS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct args;
struct client;
struct pool;
struct req;

/* A pool's tracking session (pool.hotkeys): made by HOTKEYS START, kept
 * after STOP for GET, freed by RESET or hotkeys_free. */
struct hotkeys;

/* Whether p is tracking now (requests keep their bytes until the reply,
 * where their key is read: backend_written). */
bool hotkeys_active(const struct pool *p);
/* c's request r is answered, us after it was read: count its key. */
void hotkeys_reply(struct pool *p, const struct req *r, uint64_t us);
/* HOTKEYS START | STOP | GET | RESET | HELP. */
void hotkeys_command(struct client *c, struct req *r, struct args *a);
/* /metrics: the tracked keys of p (the last session's), as gauges. */
void hotkeys_metrics(const struct pool *p, FILE *f);
void hotkeys_free(struct pool *p);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module hotkeys_module;

#endif
