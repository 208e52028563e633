/* debug.h -- DEBUG, spread over the servers by its subcommand (debug.c). */
#ifndef SHARDIS_DEBUG_H
#define SHARDIS_DEBUG_H

struct module;
/* DEBUG, PFDEBUG, PFSELFTEST (debug.c): its module answers ROUTE_DEBUG
 * (module.h), listed in process/modules.c. */
extern const struct module debug_module;

#endif
