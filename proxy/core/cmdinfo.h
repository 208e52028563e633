/* cmdinfo.h -- the command table as the servers describe it (cmdinfo.c):
 * each server's COMMAND read into cmd.h's table, once per kind of server.
 * State per pool (pool.cmdinfo), made on first use, freed by
 * cmdinfo_free. */
#ifndef SHARDIS_CMDINFO_H
#define SHARDIS_CMDINFO_H

#include <stdint.h>

struct pool;

/* Server's INFO text came (info.c): ask its COMMAND if its run_id is new
 * and its kind's commands have not been read. */
void cmdinfo_seen(struct pool *p, uint32_t server, const char *text);
void cmdinfo_free(struct pool *p);

#endif
