/* req.c -- request objects: a free list of them, and the one rule for
 * when one is freed (req.h says who keeps a request alive). */
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "proxy/transport/loop.h"
#include "proxy/transport/req.h"
#include "proxy/base/util.h"

#define REQ_FREE_MAX 4096

/* The layers above's (req_set_release): set once, before any loop runs. */
static struct req_release release;

void req_set_release(const struct req_release *rel)
{
    release = *rel;
}

struct req *req_get(void)
{
    struct req *r = cur_loop->req_free;

    if (r != NULL) {
        cur_loop->req_free = (struct req *)r->client;
        cur_loop->req_nfree--;
    } else {
        r = xmalloc(sizeof(*r));
    }
    memset(r, 0, offsetof(struct req, head.raw));
    return r;
}

void req_maybe_free(struct req *r)
{
    if (r->client != NULL || r->queued || r->pending || r->parent != NULL || r->frag != NULL ||
        r->gated || r->migs > 0)
        return;
    if (r->other_db && --cur_loop->other_db_reqs == 0)
        cur_loop->other_db_quiet_ns = uv_hrtime();
    msg_release(&r->out);
    msg_release(&r->rsp);
    if (r->kept)
        release.kept(r);
    if (r->minified)
        release.minified(r);
    if (cur_loop->req_nfree < REQ_FREE_MAX) {
        r->client = (struct client *)cur_loop->req_free;
        cur_loop->req_free = r;
        cur_loop->req_nfree++;
    } else {
        free(r);
    }
}

void req_pool_trim(void)
{
    while (cur_loop->req_free != NULL) {
        struct req *r = cur_loop->req_free;
        cur_loop->req_free = (struct req *)r->client;
        free(r);
    }
    cur_loop->req_nfree = 0;
}

