/* minify.h -- idgen.minify: the hash field names of some key types stored
 * short on the servers (idgen.subkeys, shardjs's subKeys) and long for the
 * application, mapped by the proxy on the way in and back (minify.c). */
#ifndef SHARDIS_MINIFY_H
#define SHARDIS_MINIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/transport/req.h"

struct args;
struct client;
struct cmd;
struct conf_pool;
struct msg;
struct req;

/* A pool's dictionary, indexed both ways, and the key types it applies to
 * (pool.minify: rebuilt by pool_set_conf, through the module's conf_set, borrowed for one call at a time,
 * never kept across a loop turn). */
struct minify;


/* The short name of the long one s[0 .. len) (maxify: the long name of a
 * short one), its length in *outlen; NULL if the dictionary has none. */
const char *minify_name(const struct minify *m, const char *s, size_t len, bool maxify,
                        size_t *outlen);

/* route.c, for a request about to be forwarded (its keys in a->ks): if
 * cmd reads or writes hash fields and its key is of a type m minifies,
 * its fields are mapped: a->minify is set (args_request then encodes the
 * request with short names) and r gets the hook that maps its reply back.
 * Returns false after replying an error (a field that is a short name:
 * on such keys those are the dictionary's). */
bool minify_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);

/* args_request for a request minify_route marked. */
void minify_request(struct args *a, struct msg *g);

/* How a reply's field names map back: what minify_route leaves in
 * r->u.minify (r->minified set), and a transaction's list of them. */
enum minify_reply {
    MINIFY_REPLY_FIELD = 1,     /* HRANDFIELD key: one field, or nil */
    MINIFY_REPLY_FIELDS,        /* HKEYS, HRANDFIELD key n: every element */
    MINIFY_REPLY_PAIRS,         /* HGETALL, HRANDFIELD key n WITHVALUES: field, value ...
                                   flat, as a map, or as [field, value] arrays */
    MINIFY_REPLY_SCAN,          /* HSCAN: [cursor, [field, value ...]] */
};

/* struct minify_map is plain data a request carries (r->u.minify): it is
 * defined with the request, in transport/req.h. */

/* A transaction's mapped commands, by their place in EXEC's reply. */
struct minify_tx {
    uint32_t n, cap;
    struct {
        uint32_t index;
        struct minify_map map;
    } *at;
};

/* pin.c: r, which minify_route marked, is queued in c's transaction as
 * its index-th command: its reply is +QUEUED, and its map goes to c's
 * list (*tx, made on first use) for EXEC. */
void minify_tx_queued(struct minify_tx **tx, struct req *r, uint32_t index);
/* pin.c: r is the EXEC of the transaction whose list is *tx: r takes it
 * (*tx becomes NULL) and maps its reply's elements. */
void minify_tx_exec(struct minify_tx **tx, struct req *r);
void minify_tx_free(struct minify_tx *tx);
/* req_maybe_free: what r->u holds for its map. */
void minify_req_free(struct req *r);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module minify_module;

#endif
