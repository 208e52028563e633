/* local.h -- commands the proxy answers itself (local.c). */
#ifndef SHARDIS_LOCAL_H
#define SHARDIS_LOCAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct args;
struct client;
struct cmd;
struct req;

/* Whether the command (or parent command) called name is answered here. */
bool local_has(const char *name);
/* Local commands (PING, INFO, SHARD.* ...): run one if name is one; cmd
 * is its row (its subcommand's) in the command table, or NULL if the
 * table has none (SHARD.*). Returns 1 if it was local (replied, or sent
 * on by the command), 0 if not. */
int local_exec(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
/* MODULE LIST: none (route.c says why). Answers r and ends it. */
void local_module_list(struct client *c, struct req *r);
/* The i-th SHARD.* command's name and ACL categories (struct cmd's acl
 * bits), or NULL past the last (acl.c numbers them after Redis's). */
const char *local_shard_command(size_t i, uint32_t *acl);

/* SHARD.RELOAD's work, set by the process at start (proxy_run: its
 * reload_run): read the config file again and apply it; 0 and a summary
 * in out, or a negative errno and why in err, having changed nothing. It
 * runs within the command, on the loop, and may replace the pools'
 * configs and rings, never the client asking. NULL (a test without the
 * process): SHARD.RELOAD is refused. */
extern int (*local_reload)(char *out, size_t outlen, char *err, size_t errlen);
struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module local_module;

#endif
