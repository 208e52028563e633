/* monitor.h -- MONITOR: every command a pool's clients send, streamed to
 * the clients that asked, in redis-server's format (monitor.c). */
#ifndef SHARDIS_MONITOR_H
#define SHARDIS_MONITOR_H

#include <stdint.h>

struct args;
struct client;
struct req;

/* MONITOR: c receives every command from now on (who may: local.c). */
void monitor_command(struct client *c, struct req *r, struct args *a);
/* c's command a passed its ACL checks: a line to each monitor of its
 * pool. A no-op without monitors (the check is the caller's: pool.nmonitors). */
void monitor_feed(struct client *c, struct args *a);
/* c closes: it monitors no more. */
void monitor_gone(struct client *c);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module monitor_module;

#endif
