/* args.h -- the arguments of the request being routed (args.c), and its
 * keys once found (core/keys.h finds them). */
#ifndef SHARDIS_ARGS_H
#define SHARDIS_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct client;

/* Where a command's keys are among its arguments, as keys_find (core/keys.h)
 * found them: plain data the arguments carry, defined here with them. */

/* Enough for every command of Redis 7.0 to 8.0 (at most 3 key specs,
 * SORT's 2 written keys); a command with more gets keys_find's error. */
#define KEYS_MAX_SPANS 4

/* Positions first, first + step, ... last (first <= last, step > 0). */
struct keyspan {
    uint32_t first, last;
    uint16_t step;
    uint16_t flags;             /* its key spec's CMD_KEY_* */
};

struct keys {
    uint32_t       n;           /* spans; 0: none found (yet) */
    struct keyspan span[KEYS_MAX_SPANS];
};

/* The arguments of the request being routed: in the client's read chunks
 * (array requests) or its framer's inline buffer. */
struct args {
    struct client *c;
    uint32_t       argc;
    struct keys    keys;        /* its keys, once keys_find found them (n 0 before) */
    char          *copies[8];   /* arguments that spanned chunks, copied */
    int            ncopies;
    char         **av;          /* a kept request's own arguments (route_reissue), or
                                   NULL: the client's framer has them */
    size_t        *avlen;
    const char    *name;        /* sent instead of argument 0 (a keyless script runs
                                   as its read-only form), or NULL: as the client sent it */
    uint8_t        minify;      /* its hash fields are mapped (minify_route), or 0 */
};

/* Argument i; *len gets its length. Valid until args_release. */
const char *args_get(struct args *a, uint32_t i, size_t *len);
void args_release(struct args *a);
/* True if argument i equals s, ignoring case. */
bool args_is(struct args *a, uint32_t i, const char *s);
/* Argument i as a decimal long long (redis-server's string2ll, less its
 * overflow check): false if it is not one. */
bool args_ll(struct args *a, uint32_t i, long long *v);
/* Whether argument i is a secret, shown as "(redacted)" wherever shardis
 * shows a client's arguments (MONITOR, SLOWLOG; its log and /metrics show
 * none), as redis-server 7.0 redacts it (redactClientCommandArgument):
 * AUTH's every argument, HELLO's AUTH user and password, MIGRATE's AUTH
 * password and AUTH2 user and password, CONFIG SET's value of a password
 * or user parameter (requirepass, masterauth, masteruser, *pass*,
 * *auth*), ACL SETUSER's user and rules. The one place that decides it. */
bool args_redacted(struct args *a, uint32_t i);

#endif
