/* srvuser.h -- the user clients' commands and scripts run as on the
 * servers, made by shardis itself where the pool names no backend_user
 * (srvuser.c says why and how). */
#ifndef SHARDIS_SRVUSER_H
#define SHARDIS_SRVUSER_H

#include <stdbool.h>
#include <stddef.h>

#include "conf/conf.h"

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

#endif
