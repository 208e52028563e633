/* local_int.h -- what local.c, local_acl.c and local_client.c share: the
 * reply builders every local command answers with, and the commands the
 * dispatch table (local.c) names from the other two files. Private to
 * ops/local*.c. */
#ifndef SHARDIS_LOCAL_INT_H
#define SHARDIS_LOCAL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "proxy/transport/client.h"
#include "proxy/base/resp.h"

struct args;
struct req;

/* Every value goes through the encoder, in the client's protocol. */
static inline struct resp_w local_w(struct client *c, struct req *r)
{
    return client_w(c, &r->rsp);
}

static inline void local_reply_bulk(struct client *c, struct req *r, const char *s, size_t len)
{
    struct resp_w w = local_w(c, r);
    resp_w_bulk(&w, s, len);
}

static inline void local_reply_str(struct client *c, struct req *r, const char *s)
{
    local_reply_bulk(c, r, s, strlen(s));
}

static inline void local_reply_ok(struct client *c, struct req *r)
{
    struct resp_w w = local_w(c, r);
    resp_w_simple(&w, "OK");
}

static inline void local_reply_arity(struct client *c, struct req *r, const char *name)
{
    client_reply_error(c, r, "ERR wrong number of arguments for '%s' command", name);
}

/* ACL (local_acl.c): the users of the pool, as far as a proxy that reads
 * them from its config file can show them. */
void local_acl_command(struct client *c, struct req *r, struct args *a);
/* CLIENT (local_client.c): the pool's clients are the server's. */
void local_client_command(struct client *c, struct req *r, struct args *a);
/* Set c's name as CLIENT SETNAME and HELLO SETNAME do (local_client.c). */
bool local_set_name(struct client *c, struct req *r, const char *n, size_t len);

#endif
