/* route.h -- deciding where each request goes (route.c), and the
 * arguments of the request being routed. */
#ifndef SHARDIS_ROUTE_H
#define SHARDIS_ROUTE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proxy/transport/args.h"
#include "proxy/base/mbuf.h"

struct acl_user;
struct args;
struct backend;
struct client;
struct cmd;
struct req;

/* Decide what to do with the request c's framer just completed; r is the
 * request, already queued on c. Sends it, or replies. */
void route_request(struct client *c, struct req *r);

/* Append the request's bytes to g: the client's own (array requests), or
 * encoded as RESP (inline ones). */
void args_request(struct args *a, struct msg *g);

/* What shardis does with a command (route.c decides by it, and `shardis
 * commands` prints it for doc/commands.md, so the two cannot differ). */
enum route_kind {
    ROUTE_LOCAL,            /* answered by shardis */
    ROUTE_KEY,              /* one key: its server */
    ROUTE_SAME_SERVER,      /* several keys: their server if they share one */
    ROUTE_SPLIT,            /* keys grouped per server, replies merged */
    ROUTE_BLOCKING,         /* its keys' server, on the client's own connection */
    ROUTE_EVERY,            /* every server, replies merged */
    ROUTE_EVERY_ADMIN,      /* the same, with admin_commands */
    ROUTE_FIRST_ADMIN,      /* the first server, with admin_commands */
    ROUTE_FIRST,            /* the first server (COMMAND INFO, DOCS, GETKEYS) */
    ROUTE_SCAN,             /* one server after another */
    ROUTE_DEBUG,            /* DEBUG, PFDEBUG ...: by subcommand, with admin_commands (debug.c) */
    ROUTE_WAIT,             /* WAIT: every server, after a write of its own (pin.c) */
    ROUTE_TX,               /* MULTI ... EXEC, WATCH (pin.c) */
    ROUTE_PUBSUB,           /* publish and subscribe (pubsub.c) */
    ROUTE_KEYLESS,          /* refused: no key to route by */
    ROUTE_UNSUPPORTED,      /* refused */
};
#define ROUTE_KINDS (ROUTE_UNSUPPORTED + 1)

enum route_kind route_kind(const struct cmd *cmd);
/* At start, before any loop runs: decide every command's kind (again,
 * lazily, whenever the command table changes: cmd_generation). */
void route_init(void);

/* The server owning every key of r (cmd's key positions, left in a->ks),
 * or -1 after replying an error (-CROSSSLOT, bad numkeys, no key to route
 * by). */
int route_owner(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
/* ACL DRYRUN: whether u may run the request in a (its command cmd, its
 * arity checked) through shardis, by the checks a real one meets in
 * route_request (the command), route_owner and frag.c (its keys) and
 * pubsub.c (its channels): 0 yes; 1 not the command; 2 not the key, 3 not
 * the channel, at position *at. */
int route_dryrun(const struct acl_user *u, struct args *a, const struct cmd *cmd, uint32_t *at);
/* An error was sent for r: count it, end r, and a transaction it was
 * queued in aborts at EXEC, as in Redis. */
void route_refused(struct client *c, struct req *r);
/* True if c's pool runs admin commands (admin_commands: true); else the
 * error naming name was sent and r refused. */
bool route_admin_ok(struct client *c, struct req *r, const char *name);
/* True if c may run name (as "client list"), a command shardis answers
 * itself that shows or steers the pool's other clients (local.c says
 * which); else the admin error was sent and r refused (route_refused). */
bool route_admin_view_ok(struct client *c, struct req *r, const char *name);
/* A blocking command waiting on an old owner was unblocked (mig.c): send r
 * again by the current ring, with what is left of its timeout. 1 if it
 * was (or an error answered it), 0 if it cannot be (its arguments were not
 * kept, or c's connection still has other requests). */
int route_reissue(struct client *c, struct req *r);
/* Free what route.c kept for r (req_maybe_free). */
void route_kept_free(struct req *r);

/* Send r (its bytes in r->out) to b for client c: at once, or after the
 * keys in a->ks (a may be NULL: none) have moved to b's server while a
 * reload's migration runs, and after c's requests already waiting. */
void route_send(struct client *c, struct req *r, struct args *a, struct backend *b);

/* shardis's own keys, out of every client's reach (an error names them):
 * its bookkeeping under "__shardis:" (the migration record), which stays
 * on its server, and idgen's sequences "$equence{LL}" (genkey.c), which
 * move with their tag like any key. A client that could read or rewrite a
 * sequence could make SHARD.GENKEY hand out an id twice. The check is on
 * every request's keys: a byte or two when they are not shardis's. */
#define SHARDIS_RESERVED "__shardis:"
#define SHARDIS_SEQUENCE "$equence{"
#define SHARDIS_RESERVED_ERR "ERR keys under '" SHARDIS_RESERVED "' or '" SHARDIS_SEQUENCE \
                             "' are shardis's own"
static inline bool route_internal(const char *key, size_t len)
{
    return len >= 10 && key[0] == '_' && key[1] == '_' && memcmp(key, SHARDIS_RESERVED, 10) == 0;
}
static inline bool route_reserved(const char *key, size_t len)
{
    return route_internal(key, len) ||
           (len >= 9 && key[0] == '$' && key[1] == 'e' && memcmp(key, SHARDIS_SEQUENCE, 9) == 0);
}

#endif
