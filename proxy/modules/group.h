/* group.h -- several proxies agreeing on a change of servers (group.c). */
#ifndef SHARDIS_GROUP_H
#define SHARDIS_GROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "conf/conf.h"
#include "ring/ring.h"

struct pool;

/* Several proxies in front of the same servers (group.c). group_init
 * registers p (routing by p->conf's servers); group_prepare takes a
 * reload's new servers (pc in a conf kept alive, ring owned from then on,
 * from_text the config routed by now, to_text pc's) and switches p once every proxy has
 * them; group_tick keeps the registration fresh and moves the phases on;
 * group_check_start refuses (-EBUSY,
 * err says why) to start a proxy whose servers differ from those the live
 * proxies route by. */
void group_init(struct pool *p);
void group_free(struct pool *p);
uint64_t group_checksum(const struct conf_pool *pc);
void group_prepare(struct pool *p, const struct conf_pool *pc, struct ring *ring,
                   const char *from_text, const char *to_text);
void group_tick(struct pool *p, uint64_t now);
void group_status(const struct pool *p, FILE *f);
int group_check_start(struct pool *p, char *err, size_t errlen);
/* A reload back to the servers p routes by: forget the one waiting. */
void group_cancel(struct pool *p);
/* Between the switch and the release: no reload is taken then. */
/* Whether a reload's servers are on their way: the proxies agree, switch
 * or drain (any phase but steady). */
bool group_changing(const struct pool *p);
bool group_switching(const struct pool *p);
/* "steady", "prepared", "holding" or "locked". */
const char *group_phase_name(const struct pool *p);
/* h is one of the group's connections: closed (1), or not ours (0). */
int group_close_handle(struct pool *p, uv_handle_t *h);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module group_module;

#endif
