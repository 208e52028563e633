/* acl.h -- client users and what each may do (acl.c): Redis's ACL, as the
 * config file's `users:` lines say it in ACL SETUSER's terms.
 *
 * A pool's users are built from its config (acl_build) and never change
 * after: what would change them (a reload, a command table the servers
 * taught shardis) builds new ones, and pool_set_acl swaps them whole: it
 * moves every signed-in client over to its user of the same name (or
 * closes it, if that user is gone or off, or may no longer use a channel
 * it is subscribed to), then gives the old ones back. A struct acl is
 * reference-counted (acl_ref, acl_unref; atomic, so pools on different
 * loops may share one): the pool holds one reference, a reload in flight
 * another. A client's user pointer is valid for as long as the client is
 * its pool's, and across a swap only as pool_set_acl moves it. */
#ifndef SHARDIS_ACL_H
#define SHARDIS_ACL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

struct cmd;

struct acl_user {
    char      *name;
    bool       on;
    bool       nopass;          /* any password signs in */
    bool       allkeys, allchannels;
    bool       all;             /* every command, key and channel: nothing to check */
    bool       future;          /* its commands were last set by +@all (allcommands), not
                                   -@all: how ACL LIST begins them, as redis-server's */
    uint8_t  (*pass)[32];       /* SHA-256 of each password */
    size_t     npass;
    uint64_t  *cmds;            /* a bit per command: Redis's table, then SHARD.* */
    char     **keys;            /* ~patterns */
    size_t     nkeys;
    char     **chans;           /* &patterns */
    size_t     nchans;
};

struct acl {
    struct acl_user *users;     /* users[0] is "default" */
    size_t           n;
    const struct conf_pool *pc; /* the lines they were built from (acl_relearn): its
                                   config held by a reference while the users are */
    atomic_uint      refs;      /* its holders (acl_ref) */
};

/* The pool's users: its `users:` lines, and "default" (if no line names
 * it: on, every permission, password redis_auth or none), held once by
 * the caller. On failure the return is -EINVAL and err holds
 * "path:line:col: what is wrong". */
int acl_build(const struct conf_pool *pc, const char *path, struct acl **out,
              char *err, size_t errlen);
/* The command table changed (cmd.h): the same users, built again from
 * the lines acl was built from (not the pool's config of the moment: a
 * reload swaps users at once, and its servers only once every proxy
 * agrees) against the table as it is now, as redis-server re-reads its
 * rules when a module adds commands (+@read takes the new read commands,
 * allcommands all); for pool_set_acl. NULL, with why in err, if they no
 * longer build (they did once, and the table only grows: not expected). */
struct acl *acl_relearn(const struct acl *acl, char *err, size_t errlen);
struct acl *acl_ref(struct acl *acl);
void acl_unref(struct acl *acl);
/* Build and free every pool's users: whether the config's users lines are
 * good (shardis -t). */
int acl_check(const struct conf *cf, char *err, size_t errlen);

/* The user called name[0..len), or NULL. */
const struct acl_user *acl_find(const struct acl *acl, const char *name, size_t len);
/* AUTH: the user if it is on and the password is one of its own (compared
 * in constant time, as redis-server does), else NULL. */
const struct acl_user *acl_login(const struct acl *acl, const char *name, size_t nlen,
                                 const char *pw, size_t plen);
/* Who a new connection is: "default" if it is on and needs no password,
 * else NULL (not signed in). */
const struct acl_user *acl_new_session(const struct acl *acl);

/* Whether u may run cmd (a row of Redis's table), or SHARD.* command i of
 * local.c's (acl_shard_ok). */
bool acl_cmd_ok(const struct acl_user *u, const struct cmd *cmd);
bool acl_shard_ok(const struct acl_user *u, size_t i);
/* Whether u may touch the key, or the channel (a PSUBSCRIBE pattern must
 * be one of u's own patterns, as in Redis). */
bool acl_key_ok(const struct acl_user *u, const char *key, size_t len);
bool acl_channel_ok(const struct acl_user *u, const char *name, size_t len, bool pattern);
/* Whether a reload from old to new may take a channel away from old's
 * subscribers: new may not use every channel and lacks one of old's
 * channel patterns, literally (redis-server asks this before it looks at
 * any subscriber, so a user whose patterns only grew keeps its clients). */
bool acl_channels_narrowed(const struct acl_user *old, const struct acl_user *new);

/* ACL LIST's and GETUSER's commands of u, as redis-server 7.0 describes its
 * bitmap: "+@all" or "-@all", the categories that fit best, then single
 * commands; applied again in that order they give u's commands exactly.
 * A string to free. */
char *acl_describe_commands(const struct acl_user *u);
/* A password hash as ACL LIST prints it (64 hex digits and a NUL). */
void acl_hex(const uint8_t h[32], char out[65]);
/* ACL GENPASS: chars random hex digits (at most 1024) and a NUL, from the
 * system's CSPRNG. */
void acl_genpass(char *out, size_t chars);

#define ACL_NOPERM_KEYS "NOPERM this user has no permissions to access one of the keys " \
                        "used as arguments"
#define ACL_NOPERM_CHANNELS "NOPERM this user has no permissions to access one of the " \
                            "channels used as arguments"
#define ACL_WRONGPASS "WRONGPASS invalid username-password pair or user is disabled."

#endif
