/* route_int.h -- what route.c and route_kind.c share, and nothing else
 * includes. */
#ifndef SHARDIS_ROUTE_INT_H
#define SHARDIS_ROUTE_INT_H

#include "proxy/base/cmd.h"

/* How the replies of cmd run on every server merge (route_kind.c): by its
 * response policy, but for a few shardis merges by rules of its own. */
enum cmd_reply route_broadcast_reply(const struct cmd *cmd);
/* Decide every command's kind, for the calling thread (route_init; again
 * when the table changes: cmd_generation). */
void route_kinds_init(void);

#endif
