/* debug.h -- DEBUG, spread over the servers by its subcommand (debug.c). */
#ifndef SHARDIS_DEBUG_H
#define SHARDIS_DEBUG_H

struct args;
struct client;
struct cmd;
struct req;

/* Route cmd, DEBUG <subcommand> ..., PFDEBUG or PFSELFTEST (its arity
 * checked): to its key's server, every server, or the first; or refuse
 * it. Replies or sends r. */
void debug_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module debug_module;

#endif
