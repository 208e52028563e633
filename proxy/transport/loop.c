/* loop.c -- what an event loop owns (loop.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/transport/loop.h"
#include "proxy/transport/req.h"
#include "proxy/base/log.h"
#include "proxy/base/util.h"

_Thread_local struct loop *cur_loop __attribute__((tls_model("initial-exec")));

void loop_init(struct loop *l, uv_loop_t *uv)
{
    memset(l, 0, sizeof(*l));
    l->uv = uv;
    l->started_ms = uv_now(uv);
    TAILQ_INIT(&l->dirty_backends);
    TAILQ_INIT(&l->stalled);
    l->idle_trimmed = true;
    l->rng = ((uint64_t)uv_hrtime() << 20) ^ (uint64_t)getpid() ^ 0x9e3779b97f4a7c15ULL;
    cur_loop = l;
}

void loop_free(struct loop *l)
{
    free(l->dirty);
    l->dirty = NULL;
    l->ndirty = l->dirty_cap = 0;
    req_pool_trim();            /* (cur_loop's: l) */
}

int loop_enter(struct loop *l, uv_loop_t *uv, struct loop **prev)
{
    int rc = uv_loop_init(uv);

    if (rc < 0)
        return rc;
    *prev = cur_loop;
    loop_init(l, uv);
    return 0;
}

void loop_leave(struct loop *l, struct loop *prev)
{
    int rc;

    uv_run(l->uv, UV_RUN_DEFAULT);  /* (only close callbacks are left to run) */
    loop_free(l);
    if ((rc = uv_loop_close(l->uv)) != 0)
        log_warn("a blocking call's event loop closed with handles open: %s",
                 uv_strerror(rc));
    cur_loop = prev;
}

void loop_mark_client(struct client *c)
{
    struct loop *l = cur_loop;

    if (!c->is_dirty && !c->closing) {
        if (l->ndirty == l->dirty_cap) {
            l->dirty_cap = l->dirty_cap ? 2 * l->dirty_cap : 64;
            l->dirty = xrealloc(l->dirty, l->dirty_cap * sizeof(*l->dirty));
        }
        l->dirty[l->ndirty++] = c;
        c->is_dirty = 1;
    }
}

void loop_mark_backend(struct backend *b)
{
    if (!b->is_dirty && !b->closing) {
        TAILQ_INSERT_TAIL(&cur_loop->dirty_backends, b, dirty);
        b->is_dirty = 1;
    }
}

void loop_flush_backends(void)
{
    struct backend *b;

    while ((b = TAILQ_FIRST(&cur_loop->dirty_backends)) != NULL) {
        TAILQ_REMOVE(&cur_loop->dirty_backends, b, dirty);
        b->is_dirty = 0;
        backend_flush(b);
    }
}
