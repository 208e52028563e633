/* loop.c -- what an event loop owns (loop.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/transport/loop.h"
#include "proxy/transport/req.h"
#include "proxy/base/log.h"
#include "proxy/base/mbuf.h"
#include "proxy/base/util.h"

_Thread_local struct loop *cur_loop __attribute__((tls_model("initial-exec")));

/* The process's loops, and the world stop (loop.h, "Several loops"). */
static struct {
    pthread_mutex_t mu;         /* guards all below, and each loop's state and
                                   parked_epoch */
    pthread_cond_t  cv;         /* a loop parked, or retired; the stop is over */
    struct loop    *all[LOOP_MAX];
    uint32_t        n;          /* registered */
    struct loop    *stopper;    /* the loop whose thread stopped the world, or NULL */
    uint64_t        epoch;      /* world stops so far */
    uint32_t        parked;     /* loops parked for this epoch */
} world = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* A thread's stops under way: a stop within a stop (code run on each loop
 * that stops the world itself) is the one already made. */
static _Thread_local unsigned stop_depth;
/* The loop whose thread this is, whatever cur_loop points at meanwhile. */
static _Thread_local struct loop *own_loop;

void loop_init(struct loop *l, uv_loop_t *uv)
{
    memset(l, 0, sizeof(*l));
    l->uv = uv;
    l->started_ms = uv_now(uv);
    TAILQ_INIT(&l->dirty_backends);
    TAILQ_INIT(&l->stalled);
    tls_loop_init(&l->tls);
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
    tls_loop_free(&l->tls);
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

/* ---- Several loops ----------------------------------------------------------- */

/* Park me for a stop another loop made, as long as one lasts: and again
 * for the next, should one follow at once. world.mu held. */
static void park_locked(struct loop *me)
{
    while (world.stopper != NULL && world.stopper != me && me->state == LOOP_RUNNING &&
           me->parked_epoch != world.epoch) {
        uint64_t epoch = world.epoch;
        me->parked_epoch = epoch;
        world.parked++;
        pthread_cond_broadcast(&world.cv);
        while (world.stopper != NULL && world.epoch == epoch)
            pthread_cond_wait(&world.cv, &world.mu);
    }
}

/* The mail, taken whole, run in order. */
static void run_mail(struct loop_msg *m)
{
    while (m != NULL) {
        struct loop_msg *next = m->next;
        m->fn(m->arg);
        free(m);
        m = next;
    }
}

static struct loop_msg *take_mail(struct loop *l)
{
    struct loop_msg *m;

    pthread_mutex_lock(&l->mail_mu);
    m = l->mail;
    l->mail = NULL;
    l->mail_tail = &l->mail;
    pthread_mutex_unlock(&l->mail_mu);
    return m;
}

static void wake_cb(uv_async_t *h)
{
    struct loop *l = h->data;

    pthread_mutex_lock(&world.mu);
    park_locked(l);
    pthread_mutex_unlock(&world.mu);
    run_mail(take_mail(l));
}

void loop_register(struct loop *l)
{
    pthread_mutex_lock(&world.mu);
    if (world.n == LOOP_MAX) {
        log_error("more than %d loops", LOOP_MAX);
        abort();                /* (conf.c bounds --threads well below) */
    }
    l->id = world.n;
    world.all[world.n++] = l;
    pthread_mutex_unlock(&world.mu);
    pthread_mutex_init(&l->mail_mu, NULL);
    l->mail = NULL;
    l->mail_tail = &l->mail;
    uv_async_init(l->uv, &l->mail_wake, wake_cb);
    l->mail_wake.data = l;
}

void loop_run(struct loop *l)
{
    cur_loop = own_loop = l;
    mbuf_counts_at(&l->chunks_alloc, &l->chunks_free);
    pthread_mutex_lock(&world.mu);
    l->state = LOOP_RUNNING;
    park_locked(l);             /* (a stop began before we came) */
    pthread_mutex_unlock(&world.mu);
    uv_run(l->uv, UV_RUN_DEFAULT);
}

void loop_retire(struct loop *l)
{
    pthread_mutex_lock(&world.mu);
    l->state = LOOP_RETIRED;
    pthread_cond_broadcast(&world.cv);  /* (a stopper waiting for it) */
    pthread_mutex_unlock(&world.mu);
    /* Mail comes no more (loop_post reads the state under world.mu): what
     * came runs now. */
    run_mail(take_mail(l));
    uv_close((uv_handle_t *)&l->mail_wake, NULL);
}

uint32_t loop_others_live(void)
{
    struct loop *me = own_loop != NULL ? own_loop : cur_loop;
    uint32_t k = 0;

    pthread_mutex_lock(&world.mu);
    for (uint32_t i = 0; i < world.n; i++)
        k += world.all[i] != me && world.all[i]->state != LOOP_RETIRED;
    pthread_mutex_unlock(&world.mu);
    return k;
}

uint32_t loop_count(void)
{
    return world.n;             /* (written before any second thread runs) */
}

struct loop *loop_at(uint32_t i)
{
    return world.all[i];
}

bool loop_post(struct loop *to, loop_fn *fn, void *arg)
{
    struct loop_msg *m = xmalloc(sizeof(*m));
    bool live;

    m->fn = fn;
    m->arg = arg;
    m->next = NULL;
    pthread_mutex_lock(&world.mu);
    live = to->state != LOOP_RETIRED;   /* (a loop not running yet gets it then) */
    if (live) {
        pthread_mutex_lock(&to->mail_mu);
        *to->mail_tail = m;
        to->mail_tail = &m->next;
        pthread_mutex_unlock(&to->mail_mu);
    }
    pthread_mutex_unlock(&world.mu);
    if (!live) {
        free(m);
        return false;
    }
    uv_async_send(&to->mail_wake);
    return true;
}

/* Loops other than the stopper that a stop waits for. world.mu held. */
static uint32_t others_running(const struct loop *me)
{
    uint32_t k = 0;

    for (uint32_t i = 0; i < world.n; i++)
        k += world.all[i] != me && world.all[i]->state == LOOP_RUNNING;
    return k;
}

void loop_world_stop(void)
{
    struct loop *me = own_loop != NULL ? own_loop : cur_loop;

    if (stop_depth++ > 0)
        return;
    pthread_mutex_lock(&world.mu);
    while (world.stopper != NULL) {
        park_locked(me);        /* (another's stop: parked for it first) */
        if (world.stopper != NULL)
            pthread_cond_wait(&world.cv, &world.mu);
    }
    world.stopper = me;
    world.epoch++;
    world.parked = 0;
    for (uint32_t i = 0; i < world.n; i++)
        if (world.all[i] != me && world.all[i]->state == LOOP_RUNNING)
            uv_async_send(&world.all[i]->mail_wake);
    while (world.parked < others_running(me))
        pthread_cond_wait(&world.cv, &world.mu);
    pthread_mutex_unlock(&world.mu);
}

void loop_world_go(void)
{
    if (--stop_depth > 0)
        return;
    pthread_mutex_lock(&world.mu);
    world.stopper = NULL;
    pthread_cond_broadcast(&world.cv);
    pthread_mutex_unlock(&world.mu);
}

void loop_each(loop_fn *fn, void *arg)
{
    struct loop *back = cur_loop;

    if (world.n <= 1) {
        fn(arg);                /* one loop: itself, no lock */
        return;
    }
    struct loop *visit[LOOP_MAX];
    uint32_t n = 0;

    loop_world_stop();
    pthread_mutex_lock(&world.mu);
    for (uint32_t i = 0; i < world.n; i++)
        if (world.all[i] == back || world.all[i]->state != LOOP_RETIRED)
            visit[n++] = world.all[i];  /* (a retired one's thread is closing it) */
    pthread_mutex_unlock(&world.mu);
    for (uint32_t i = 0; i < n; i++) {
        cur_loop = visit[i];
        fn(arg);
    }
    cur_loop = back;
    loop_world_go();
}
