/* srvuser.h -- the user clients' commands and scripts run as on the
 * servers, made by shardis itself where the pool names no backend_user
 * (srvuser.c says why and how). */
#ifndef SHARDIS_SRVUSER_H
#define SHARDIS_SRVUSER_H

#include <stdbool.h>
#include <stddef.h>

#include "conf/conf.h"

struct backend;
struct pool;
struct pool_server;

/* The clients' user of a pool: the same config makes the same user, in
 * any shardis. Made by srvuser_make, owned by the pool (pool_set_conf),
 * never changed once made. */
struct srvuser {
    char    name[32];           /* "shardis-clients-<12 hex>": the rules' hash */
    char    password[65];       /* derived: see srvuser.c */
    int     argc;               /* ACL SETUSER's arguments, "ACL" first */
    char  **argv;               /* (owned, like the strings) */
    char   *line;               /* the same as one line, quoted where needed */
};

/* The clients' user for pool pc: its name, password and the ACL SETUSER
 * that makes it. */
struct srvuser *srvuser_make(const struct conf_pool *pc);
void srvuser_free(struct srvuser *u);
/* The user pool pc's clients' connections sign in as on the servers: its
 * backend_user, else u's name (u: the pool's clients_user). */
static inline const char *srvuser_name(const struct conf_pool *pc, const struct srvuser *u)
{
    return pc->backend_user != NULL ? pc->backend_user : u->name;
}

/* The ACL SETUSER line (without "ACL SETUSER"'s quoting of the password:
 * it is there as #sha256) for a user called name with password hash
 * hash_hex, for operators who manage users themselves (shardis acl). */
char *srvuser_rules_line(const struct conf_pool *pc, const char *name, const char *hash_hex);

/* b, a clients' connection connecting (hooks.sign_in): queue, at the
 * front, the steps that make its pool's clients' user and sign in as it;
 * false, nothing queued, where the pool has none (a backend_user). */
bool srvuser_sign_in(struct backend *b);
/* Server ps did not let shardis make or sign in as the pool's clients'
 * user: mark it (INFO), and say so loudly, once, with why and how to
 * mend it. */
void srvuser_refused(const struct pool *p, struct pool_server *ps, const char *why);
/* At start (and `shardis acl --check`): ask server ps (ACL DRYRUN, as the
 * internal user) whether the pool's clients' user (backend_user, or the
 * one shardis makes there first when make) may touch shardis's keys and
 * channels or run admin commands, and whether the internal_user may do
 * shardis's work; each finding is a warning in the log. The number of
 * findings, -1 if it cannot tell. */
int srvuser_check(const struct pool *p, struct pool_server *ps, bool make);

#endif
