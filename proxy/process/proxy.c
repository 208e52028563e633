/* proxy.c -- the process: its loops (one per thread, --threads) and what
 * the process keeps with each (struct worker), listeners and the hand-over
 * of each accepted connection, each loop's flush and timer handles,
 * signals, and an orderly stop of every loop.
 *
 * Loop 0 runs on the main thread: it listens, accepts, and hands each new
 * connection to the loop with the fewest clients (itself included) by that
 * loop's mail (transport/loop.h, "Several loops"); it alone keeps the
 * signals, the Sentinels' links, the group and the migrations. Every
 * loop has its own copy of every pool, made from the same config and
 * sharing its ring, users and TLS contexts by reference.
 *
 * Time is enforced in one place, tick_cb, every PROXY_TICK_MS: request
 * deadlines (backend_check_timeout: a request's deadline is set when it is
 * queued, and a backend still sending is not timed out), clients that take
 * none of their unread replies (client_check_stalled) and TLS handshakes
 * that take too long (tls_tick), ejected servers
 * coming back and idle ones retired (pool_tick), the group's rounds and
 * the migration's retries and mover (group_tick, mig_tick), and the idle
 * trim. The only other timer is the stop's (drain_cb).
 *
 * Writes are batched: callbacks only mark connections dirty; a uv_check
 * handle, which runs once per loop turn after all I/O callbacks, writes
 * each dirty connection once with everything queued on it.
 *
 * SIGTERM/SIGINT stop accepting, let requests in flight finish (at most
 * PROXY_DRAIN_MS), then close every handle so uv_run returns and the
 * process exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/modules/genkey.h"
#include "proxy/core/gate.h"
#include "proxy/core/keys.h"
#include "proxy/modules/group.h"
#include "proxy/process/hooks.h"
#include "proxy/base/log.h"
#include "proxy/modules/mig.h"
#include "proxy/ops/info.h"
#include "proxy/ops/local.h"
#include "proxy/ops/metrics.h"
#include "proxy/core/module.h"
#include "proxy/core/pool.h"
#include "proxy/core/pool_conn.h"
#include "proxy/process/proxy.h"
#include "proxy/process/reload.h"
#include "proxy/modules/sentinel.h"
#include "proxy/core/srvuser.h"
#include "proxy/core/route.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

#define PROXY_DRAIN_MS  5000
#define PROXY_TICK_MS   10
#define PROXY_IDLE_MS   500     /* no requests this long: give memory back */

struct proxy proxy;
void (*proxy_idle_hook)(void);

/* The worker whose loop is current. */
static struct worker *cur_worker(void)
{
    return container_of(cur_loop, struct worker, loop);
}


static void flush_cb(uv_check_t *h)
{
    struct client *c;

    (void)h;
    for (size_t i = 0; i < cur_loop->npools; i++)
        if (cur_loop->pools[i].mig != NULL)
            mig_flush(&cur_loop->pools[i]);
    /* Replies first: they are ready now, while writing to a backend on a
     * busy core can let that redis-server run before we go on. A backend
     * that fails answers its requests, marking clients again. */
    do {
        /* (client_flush may mark more, appended behind) */
        for (size_t i = 0; i < cur_loop->ndirty; i++) {
            if ((c = cur_loop->dirty[i]) == NULL)
                continue;
            c->is_dirty = 0;
            client_flush(c);
        }
        cur_loop->ndirty = 0;
        loop_flush_backends();
    } while (cur_loop->ndirty > 0);
}

/* After a burst the chunk and request pools (and the allocator's own
 * caches) hold what the burst needed, up to MBUF_FREE_MAX chunks of 14
 * KiB: once no request has come and no client come or gone for
 * PROXY_IDLE_MS, let all of it go, so an idle proxy is back to its idle
 * size whatever came before. (Clients count: with several loops, one
 * whose clients all left asks nothing more, and what their closing freed
 * would stay in its thread's caches.) */
static void idle_check(uint64_t now)
{
    uint64_t seen = cur_loop->total_commands + cur_loop->total_connections +
                    cur_loop->nclients;

    if (seen != cur_loop->idle_seen) {
        cur_loop->idle_seen = seen;
        cur_loop->idle_since = now;
        cur_loop->idle_trimmed = false;
    } else if (!cur_loop->idle_trimmed && now - cur_loop->idle_since >= PROXY_IDLE_MS) {
        for (size_t i = 0; i < cur_loop->npools; i++)
            pool_conn_close_spares(&cur_loop->pools[i], UINT32_MAX);
        mbuf_pool_trim();
        req_pool_trim();
        if (proxy_idle_hook != NULL)
            proxy_idle_hook();
        cur_loop->idle_trimmed = true;
    }
}

static void tick_cb(uv_timer_t *t)
{
    uint64_t now = uv_now(cur_loop->uv);

    (void)t;
    cur_loop->now_us = uv_hrtime() / 1000;  /* (timeouts answer requests here) */
    cur_loop->seconds = (uint32_t)((now - cur_loop->started_ms) / 1000);
    idle_check(now);
    client_check_stalled(now);
    tls_tick(&cur_loop->tls, now);
    for (size_t i = 0; i < cur_loop->npools; i++) {
        struct pool *p = &cur_loop->pools[i];
        pool_tick(p, now);
        client_tick(&p->front, now);
        gate_kick_publishers(p);    /* (one waiting GATE_SUBSCRIBING_MS goes) */
        module_tick(p, now);        /* the group's rounds, the migration's, Sentinels ... */
        /* (MIGRATE and the mover's commands have deadlines of their own,
         * even where the pool has no timeout.) */
        for (uint32_t s = 0; s < p->nservers; s++) {
            struct backend *b;
            for (uint32_t it = 0; (b = pool_server_next(p, s, &it)) != NULL;)
                backend_check_timeout(b, now);
            if (p->servers[s].mover != NULL)
                backend_check_timeout(p->servers[s].mover, now);
        }
        if (p->conf->timeout <= 0)
            continue;
        /* (next first: a failing one may be released and freed.) */
        for (struct backend *b = TAILQ_FIRST(&p->dedicated), *next; b != NULL; b = next) {
            next = TAILQ_NEXT(b, link);
            backend_check_timeout(b, now);
        }
    }
}

/* ---- connections handed over ------------------------------------------------ */

/* A connection loop 0 accepted for another loop: its pool (an index:
 * each loop has its own pools, in the config's order) and socket. */
struct handoff {
    uint32_t     pool;
    uv_os_sock_t fd;
    bool         unix_socket, tls;
};

/* On the receiving loop (its mail). */
static void adopt_cb(void *arg)
{
    struct handoff *h = arg;

    atomic_fetch_sub_explicit(&cur_loop->load, 1, memory_order_relaxed);
    if (cur_loop->stopping)
        close(h->fd);           /* (as a connection after the listener closed) */
    else
        client_adopt(&cur_loop->pools[h->pool].front, h->fd, h->unix_socket, h->tls);
    free(h);
}

/* The loop with the fewest clients (each counts its own, and the
 * connections on their way to it), the first of equals: a hop per
 * connection, so that a loop's share is by what it holds, not by turns. */
static struct loop *least_loaded(void)
{
    struct loop *best = cur_loop;
    uint32_t min = atomic_load_explicit(&best->load, memory_order_relaxed);

    for (uint32_t i = 0; i < proxy.nworkers; i++) {
        struct loop *l = &proxy.workers[i].loop;
        uint32_t n = atomic_load_explicit(&l->load, memory_order_relaxed);
        if (n < min) {
            min = n;
            best = l;
        }
    }
    return best;
}

static void handle_free_cb(uv_handle_t *h)
{
    free(h);
}

/* Accept on a handle of this loop's, then give its socket (a copy: the
 * handle closes its own) to `to`. */
static void hand_over(struct pool *p, uv_stream_t *listener, struct loop *to, bool tls)
{
    union stream *tmp = xmalloc(sizeof(*tmp));
    bool unix_socket = listener->type == UV_NAMED_PIPE;
    struct handoff *h;
    uv_os_fd_t fd;
    int copy = -1;

    if (unix_socket)
        uv_pipe_init(cur_loop->uv, &tmp->pipe, 0);
    else
        uv_tcp_init(cur_loop->uv, &tmp->tcp);
    if (uv_accept(listener, &tmp->stream) == 0 && uv_fileno(&tmp->handle, &fd) == 0 &&
        (copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
        log_warn("pool '%s': a connection not handed over: %s", p->conf->name,
                 strerror(errno));
    uv_close(&tmp->handle, handle_free_cb);
    if (copy < 0)
        return;
    h = xmalloc(sizeof(*h));
    *h = (struct handoff){.pool = (uint32_t)(p - cur_loop->pools), .fd = copy,
                          .unix_socket = unix_socket, .tls = tls};
    atomic_fetch_add_explicit(&to->load, 1, memory_order_relaxed);
    if (!loop_post(to, adopt_cb, h)) {     /* (it is stopping) */
        atomic_fetch_sub_explicit(&to->load, 1, memory_order_relaxed);
        close(copy);
        free(h);
    }
}

static void accept_cb(uv_stream_t *listener, int status)
{
    struct pool *p = listener->data;
    bool tls = listener == &p->tls_listener.stream;
    struct loop *to;

    if (status < 0) {
        log_warn("pool '%s': accept: %s", p->conf->name, uv_strerror(status));
        return;
    }
    if (proxy.nworkers > 1 && (to = least_loaded()) != cur_loop)
        hand_over(p, listener, to, tls);
    else
        client_accept(&p->front, listener, tls);
}

/* ---- pools ------------------------------------------------------------------ */

static int listen_tcp(struct pool *p, union stream *l, const struct conf_addr *a, char *err,
                      size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    char port[8];
    int rc;

    snprintf(port, sizeof(port), "%u", a->port);
    if ((rc = getaddrinfo(a->host, port, &hints, &ai)) != 0) {
        snprintf(err, errlen, "cannot resolve '%s': %s", a->host, gai_strerror(rc));
        return -EINVAL;
    }
    uv_tcp_init(cur_loop->uv, &l->tcp);
    if (p->conf->reuseport) {
        /* libuv 1.44 has no flag for it: make the socket ourselves. Once
         * uv_tcp_open took it the handle owns it; until then we do. */
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
            rc = -errno;
        else
            rc = uv_tcp_open(&l->tcp, fd);
        if (rc < 0 && fd >= 0)
            close(fd);
    }
    if (rc == 0)
        rc = uv_tcp_bind(&l->tcp, ai->ai_addr, 0);
    freeaddrinfo(ai);
    if (rc == 0)
        rc = uv_listen(&l->stream, p->conf->backlog, accept_cb);
    if (rc < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", a->text, uv_strerror(rc));
        /* The socket goes now (uv_close closes it at once); the process
         * is about to stop without running the loop again. */
        uv_close(&l->handle, NULL);
    }
    if (rc == 0 && cur_loop->port == 0 && l == &p->listener)
        cur_loop->port = a->port;       /* (INFO's tcp_port: the first plain one) */
    return rc;
}

static int listen_unix(struct pool *p, union stream *l, const struct conf_addr *a, char *err,
                       size_t errlen)
{
    int rc;

    uv_pipe_init(cur_loop->uv, &l->pipe, 0);
    unlink(a->host);            /* a stale socket from an earlier run */
    rc = uv_pipe_bind(&l->pipe, a->host);
    if (rc == 0 && a->perm != 0 && chmod(a->host, a->perm) < 0)
        rc = -errno;
    if (rc == 0)
        rc = uv_listen(&l->stream, p->conf->backlog, accept_cb);
    if (rc < 0)
        snprintf(err, errlen, "cannot listen on %s: %s", a->text, uv_strerror(rc));
    return rc;
}

/* Listen on a, plain (l: p->listener) or TLS (l: p->tls_listener). */
static int listen_on(struct pool *p, union stream *l, const struct conf_addr *a, char *err,
                     size_t errlen)
{
    int rc = a->unix_socket ? listen_unix(p, l, a, err, errlen)
                            : listen_tcp(p, l, a, err, errlen);

    l->handle.data = p;
    return rc;
}

static int pool_start(struct pool *p, const struct conf_pool *pc, char *err, size_t errlen)
{
    struct ring *ring;
    int rc;

    pool_set_conf(p, pc);           /* (the pool holds its config from here) */
    if ((rc = acl_build(pc, cur_loop->conf->path, &p->acl, err, errlen)) < 0)
        return rc;
    if (pc->nservers > POOL_SLOTS_MAX) {
        snprintf(err, errlen, "%zu servers: a pool has at most %d", pc->nservers,
                 POOL_SLOTS_MAX);
        return -EINVAL;
    }
    if ((rc = conf_pool_ring(pc, &ring, err, errlen)) < 0)
        return rc;
    p->nconns = (uint32_t)pc->server_connections;
    p->ndbs = (uint32_t)pc->databases;
    TAILQ_INIT(&p->dedicated);
    TAILQ_INIT(&p->subscribers);
    if (pc->auto_eject_hosts && pc->eject_mode == CONF_EJECT_FAIL)
        log_notice("pool '%s': auto_eject_hosts is set but eject_mode is fail: a failing "
                   "server keeps its keys and its requests fail fast; set eject_mode: "
                   "rehash for twemproxy's ejection", pc->name);
    if ((rc = tls_ctx_build(pc, &p->front.tls_server, &p->tls_client, err, errlen)) < 0) {
        ring_unref(ring);
        return rc;
    }
    rc = listen_on(p, &p->listener, &pc->listen, err, errlen);
    if (rc == 0 && pc->tls.listen.text != NULL)
        rc = listen_on(p, &p->tls_listener, &pc->tls.listen, err, errlen);
    if (rc == 0)
        rc = metrics_start(p, err, errlen);
    pool_set_ring(p, pc, ring, NULL);
    if (rc < 0)
        return rc;
    info_prime(p);
    log_notice("pool '%s' listening on %s%s%s with %u servers (%s, %s)%s", pc->name,
               pc->listen.text, pc->tls.listen.text ? " and, TLS, on " : "",
               pc->tls.listen.text ? pc->tls.listen.text : "", p->nservers,
               ring_dist_name(pc->distribution), ring_hash_name(pc->hash),
               pc->tls.backend ? ", TLS to the servers" : "");
    if (pc->nsentinels > 0)
        sentinel_start(p);          /* where each master is, before anything is read */
    return 0;
}

/* p, on a loop other than 0, for config pc: as loop 0's src, with no
 * listener (loop 0 accepts for every loop), and sharing src's users, ring
 * and TLS contexts. No Sentinel, group or mover of its own: loop 0 keeps
 * those (a mirror of its Sentinel state: sentinel.c; of its migration's
 * earlier rings: mig.c). */
static void pool_start_other(struct pool *p, const struct conf_pool *pc, struct pool *src)
{
    pool_set_conf(p, pc);
    if (src->front.all == NULL)
        src->front.all = &src->front.own_all;
    p->front.all = src->front.all;  /* (client_connections: one count; loop 0's
                                       front is freed last) */
    p->subscribing = pool_subscribing_counts(src);  /* (PUBLISH waits for any loop's
                                                       SUBSCRIBEs) */
    p->acl = acl_ref(src->acl);
    p->nconns = src->nconns;
    p->ndbs = src->ndbs;
    TAILQ_INIT(&p->dedicated);
    TAILQ_INIT(&p->subscribers);
    p->front.tls_server = tls_ctx_ref(src->front.tls_server);
    p->tls_client = tls_ctx_ref(src->tls_client);
    /* Every loop names a server by the same index (a world stop's visit,
     * a mail between loops): src's table, slot for slot, then its ring. */
    pool_copy_servers(p, src);
    pool_set_ring(p, pc, ring_ref(src->ring), NULL);
    if (src->mig != NULL)
        mig_copy(p, src);           /* a recorded migration taken up: its earlier rings */
    /* What loop 0 learnt of its servers at its start (INFO says it), and
     * those keys still move from. */
    for (uint32_t s = 0; s < p->nservers; s++) {
        p->servers[s].active = src->servers[s].active;
        p->servers[s].user_refused = src->servers[s].user_refused;
        if (src->servers[s].record_ignored != NULL)
            p->servers[s].record_ignored = xstrdup(src->servers[s].record_ignored);
    }
    if (pc->nsentinels > 0)
        sentinel_start_copy(p, src);    /* (where loop 0 found each master) */
    info_prime(p);
}

/* How many loops: threads, or (0) one per core the process may run on. */
static uint32_t loops_wanted(int threads)
{
    cpu_set_t set;
    int n = threads;

    if (n <= 0)
        n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    return (uint32_t)(n < 1 ? 1 : n > LOOP_MAX ? LOOP_MAX : n);
}

static void worker_main(void *arg)
{
    struct worker *w = arg;

    loop_run(&w->loop);
    /* What the thread kept for itself (its loop's state is freed by the
     * main thread once it is joined: loop_finish). */
    mbuf_pool_trim();
    keys_cache_free();
}

/* ---- stopping ------------------------------------------------------------------- */

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (uv_is_closing(h))
        return;
    if (h == (uv_handle_t *)&cur_loop->mail_wake) {
        loop_retire(cur_loop);  /* (no more mail, no more world stops) */
        return;
    }
    /* Clients and backends close through their own paths (they own
     * requests); everything else closes plainly. */
    if (h->type == UV_TCP || h->type == UV_NAMED_PIPE) {
        for (size_t i = 0; i < cur_loop->npools; i++) {
            struct pool *p = &cur_loop->pools[i];
            if (h == &p->listener.handle || h == &p->tls_listener.handle) {
                uv_close(h, NULL);
                return;
            }
            for (uint32_t s = 0; s < p->nservers; s++) {
                struct backend *b;
                for (uint32_t it = 0; (b = pool_server_next(p, s, &it)) != NULL;)
                    if (h == &b->h.handle) {
                        backend_close(b);
                        return;
                    }
                if (p->servers[s].mover != NULL && h == &p->servers[s].mover->h.handle) {
                    backend_close(p->servers[s].mover);
                    return;
                }
            }
            if (sentinel_close_handle(p, h) || metrics_close_handle(p, h))
                return;
            if (group_close_handle(p, h))
                return;
            struct backend *b;
            TAILQ_FOREACH(b, &p->dedicated, link)
                if (h == &b->h.handle) {
                    backend_close(b);
                    return;
                }
        }
        client_close(container_of(h, struct client, h.handle));
        return;
    }
    uv_close(h, NULL);
}

static bool drained(void)
{
    for (size_t i = 0; i < cur_loop->npools; i++) {
        struct pool *p = &cur_loop->pools[i];
        for (uint32_t s = 0; s < p->nservers; s++) {
            struct backend *b;
            for (uint32_t it = 0; (b = pool_server_next(p, s, &it)) != NULL;)
                if (!backend_idle(b))
                    return false;
        }
        /* A blocking command (no deadline) may wait for ever: not for it. */
        struct backend *b;
        TAILQ_FOREACH(b, &p->dedicated, link)
            if (!TAILQ_EMPTY(&b->sendq) ||
                (!TAILQ_EMPTY(&b->pendq) && TAILQ_FIRST(&b->pendq)->deadline != 0))
                return false;
    }
    return cur_loop->ndirty == 0;
}

/* The signals the proxy handles (on loop 0's thread alone: the other
 * loops' threads start with them blocked). */
static void block_signals(int how)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(how, &set, NULL);
}

static void drain_cb(uv_timer_t *t)
{
    if (!drained() && uv_now(cur_loop->uv) - cur_worker()->stop_ms < PROXY_DRAIN_MS)
        return;
    /* Loop 0 closes last: its signal handles closed, a second SIGTERM
     * would end the process while another loop still drains. */
    if (cur_loop->id == 0 && loop_others_live() > 0)
        return;
    uv_timer_stop(t);
    if (loop_count() > 1)
        log_notice("stopped: loop %u closing %u client connections", cur_loop->id,
                   cur_loop->nclients);
    else
        log_notice("stopped: closing %u client connections", cur_loop->nclients);
    /* Closing the last signal handle puts back the default disposition:
     * a SIGTERM or SIGINT repeated while the threads are joined and the
     * pools freed would end the process by the signal, not with 0. The
     * stop it asks for is under way: from here it stays pending (every
     * other thread has them blocked since its start), and dies with the
     * process. */
    if (cur_loop->id == 0)
        block_signals(SIG_BLOCK);
    uv_walk(cur_loop->uv, close_walk_cb, NULL);
}

/* Stop taking connections, and close everything once the requests in
 * flight are answered: each loop for itself (loop 0 by the signal, the
 * others by its mail). */
static void loop_stop(void *arg)
{
    struct worker *w = cur_worker();

    (void)arg;
    if (cur_loop->stopping)
        return;
    cur_loop->stopping = true;
    w->stop_ms = uv_now(cur_loop->uv);
    for (size_t i = 0; i < cur_loop->npools; i++) {
        if (cur_loop->pools[i].listener.handle.loop != NULL)
            uv_close(&cur_loop->pools[i].listener.handle, NULL);
        if (cur_loop->pools[i].tls_listener.handle.loop != NULL)
            uv_close(&cur_loop->pools[i].tls_listener.handle, NULL);
    }
    uv_timer_init(cur_loop->uv, &w->drainer);
    uv_timer_start(&w->drainer, drain_cb, 0, 20);
}

/* ---- systemd ------------------------------------------------------------------- */

/* Tell the service manager (Type=notify) what state the proxy is in: a
 * datagram of "NAME=value" lines to $NOTIFY_SOCKET, a unix socket's path
 * or, after '@', an abstract one's name. Nothing without the variable;
 * a send that fails is not retried (systemd's sd_notify is no surer). */
static void notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len;
    socklen_t salen;
    int fd;

    if (path == NULL || (path[0] != '/' && path[0] != '@') ||
        (len = strlen(path)) >= sizeof(sa.sun_path))
        return;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
    if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
        return;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0)
        log_warn("NOTIFY_SOCKET %s: %s", path, strerror(errno));
    close(fd);
}

static void stop_cb(uv_signal_t *s, int signum)
{
    (void)s;
    if (cur_loop->stopping)
        return;
    notify("STOPPING=1\nSTATUS=stopping: finishing requests in flight");
    log_notice("signal %d: stopping; finishing requests in flight", signum);
    loop_stop(NULL);
    for (uint32_t i = 1; i < proxy.nworkers; i++)
        loop_post(&proxy.workers[i].loop, loop_stop, NULL);
}

static void hup_cb(uv_signal_t *s, int signum)
{
    char out[4096], err[CONF_ERRLEN];

    (void)s;
    (void)signum;
    char state[96];
    snprintf(state, sizeof(state), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)(uv_hrtime() / 1000));
    notify(state);
    log_notice("SIGHUP: reopening the log and reloading '%s'", cur_loop->conf->path);
    log_reopen();
    if (reload_run(out, sizeof(out), err, sizeof(err)) < 0) {
        log_error("reload refused, nothing changed: %s", err);
        notify("READY=1\nSTATUS=reload refused: see the log");
    } else {
        log_notice("reload applied");
        notify("READY=1\nSTATUS=serving; reload applied");
    }
}

/* ---- running ------------------------------------------------------------------ */

/* A SIGHUP before the loop runs (the pid file is written, then the
 * start's checks on the servers take up to a second each) would end the
 * process, SIGHUP's default. So it is blocked until libuv's handler is in
 * place: one that came meanwhile is then a reload, once the loop runs
 * (proxy_run unblocks it with the others: block_signals). */
void proxy_hold_sighup(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void proxy_loop_start(void)
{
    uv_check_init(cur_loop->uv, &cur_loop->flusher);
    uv_check_start(&cur_loop->flusher, flush_cb);
    uv_timer_init(cur_loop->uv, &cur_loop->ticker);
    uv_timer_start(&cur_loop->ticker, tick_cb, PROXY_TICK_MS, PROXY_TICK_MS);
}

/* The loop's identity for INFO: a fresh run_id (random; the clock's bits
 * if the kernel gives none), when it started, the executable's path. */
static void loop_identify(void)
{
    unsigned char raw[20];
    ssize_t n;

    if (uv_random(NULL, NULL, raw, sizeof(raw), 0, NULL) != 0)
        for (size_t i = 0; i < sizeof(raw); i++)
            raw[i] = (unsigned char)(uv_hrtime() >> (i % 8));
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(cur_loop->run_id + 2 * i, 3, "%02x", raw[i]);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    cur_loop->start_unix = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
    n = readlink("/proc/self/exe", cur_loop->executable, sizeof(cur_loop->executable) - 1);
    cur_loop->executable[n > 0 ? n : 0] = '\0';
}

/* Each server has ACL users of its own: every one clients reach is asked
 * (those of the ring, and those a taken-up migration empties); the
 * findings are logged (srvuser_check), a clean pool once. */
static void pool_check_users(struct pool *p)
{
    size_t n = 0;
    int found = 0;              /* servers with findings, or that could not tell */
    for (uint32_t k = 0; k < p->nservers; k++) {
        if (p->servers[k].active) {
            n++;
            found += srvuser_check(p, &p->servers[k], true) != 0;
        }
    }
    if (n > 0 && found == 0)
        log_notice("pool '%s': checked on its %zu server%s: clients' user '%s' cannot touch "
                   "shardis's keys or channels, nor run admin commands",
                   p->conf->name, n, n > 1 ? "s" : "",
                   srvuser_name(p->conf, p->clients_user));
}

/* After the current loop has run out (and its thread, if not the main
 * one, is joined): its pools and the loop freed, its config let go; loop
 * 0's unix sockets unlinked. */
static void loop_finish(void)
{
    int rc;

    for (size_t i = 0; i < cur_loop->npools; i++) {
        struct pool *p = &cur_loop->pools[i];
        if (cur_loop->id == 0 && p->conf->listen.unix_socket)
            unlink(p->conf->listen.host);
        if (cur_loop->id == 0 && p->conf->tls.listen.unix_socket)
            unlink(p->conf->tls.listen.host);
        pool_free(p);
    }
    free(cur_loop->pools);
    loop_free(cur_loop);
    conf_unref(cur_loop->conf);     /* (the pools let theirs go: pool_free) */
    cur_loop->conf = NULL;
    rc = uv_loop_close(cur_loop->uv);
    if (rc != 0)
        log_warn("event loop %u closed with handles open: %s", cur_loop->id, uv_strerror(rc));
}

/* Every other loop: made, its pools started as loop 0's are, its flush
 * and tick handles; its thread not started yet. 0, or -1 with err. */
static int workers_start(char *err, size_t errlen)
{
    struct loop *zero = cur_loop;
    struct conf *cf = zero->conf;   /* (a recorded migration's, if one was taken up) */

    for (uint32_t i = 1; i < proxy.nworkers; i++) {
        struct worker *w = &proxy.workers[i];
        int rc = uv_loop_init(&w->uv);
        if (rc < 0) {
            snprintf(err, errlen, "loop %u: %s", i, uv_strerror(rc));
            cur_loop = zero;
            return -1;
        }
        loop_init(&w->loop, &w->uv);    /* (current from here) */
        loop_register(&w->loop);
        w->loop.conf = conf_ref(cf);
        w->loop.port = zero->port;
        memcpy(w->loop.run_id, zero->run_id, sizeof(zero->run_id));
        memcpy(w->loop.executable, zero->executable, sizeof(zero->executable));
        w->loop.start_unix = zero->start_unix;
        w->loop.npools = cf->npools;
        w->loop.pools = xcalloc(cf->npools, sizeof(*w->loop.pools));
        for (size_t k = 0; k < cf->npools; k++)
            pool_start_other(&w->loop.pools[k], zero->pools[k].conf, &zero->pools[k]);
        proxy_loop_start();
    }
    cur_loop = zero;
    return 0;
}

int proxy_run(struct conf *cf, int threads)
{
    char err[CONF_ERRLEN];
    int rc;

    memset(&proxy, 0, sizeof(proxy));
    proxy.nworkers = loops_wanted(threads);
    proxy.workers = xcalloc(proxy.nworkers, sizeof(*proxy.workers));
    struct loop *zero = &proxy.workers[0].loop;
    loop_init(zero, uv_default_loop());
    loop_register(zero);
    cur_loop->conf = cf;
    loop_identify();
    hooks_register();
    route_init();
    genkey_init();
    local_reload = reload_run;
    signal(SIGPIPE, SIG_IGN);

    cur_loop->npools = cf->npools;
    cur_loop->pools = xcalloc(cf->npools, sizeof(*cur_loop->pools));
    for (size_t i = 0; i < cf->npools; i++) {
        if ((rc = pool_start(&cur_loop->pools[i], &cf->pools[i], err, sizeof(err))) < 0) {
            log_error("pool '%s': %s", cf->pools[i].name, err);
            fprintf(stderr, "shardis: pool '%s': %s\n", cf->pools[i].name, err);
            conf_unref(cf);
            return 1;
        }
    }
    /* A migration that was under way when a proxy stopped goes on; then
     * the proxy joins the others in front of the same servers; then the
     * file, if a record was taken up, is a reload. */
    bool taken = false;
    for (size_t i = 0; i < cur_loop->npools; i++)
        taken = mig_recover(&cur_loop->pools[i]) || taken;
    for (size_t i = 0; i < cur_loop->npools; i++) {
        if ((rc = group_check_start(&cur_loop->pools[i], err, sizeof(err))) < 0) {
            log_error("pool '%s': %s", cur_loop->pools[i].conf->name, err);
            fprintf(stderr, "shardis: pool '%s': %s\n", cur_loop->pools[i].conf->name, err);
            return 1;
        }
        group_init(&cur_loop->pools[i]);
        pool_check_users(&cur_loop->pools[i]);
    }
    char out[4096];
    if (taken && reload_run(out, sizeof(out), err, sizeof(err)) < 0)
        log_warn("the config file is not applied while the recorded migration runs: %s", err);
    proxy_loop_start();
    if (workers_start(err, sizeof(err)) < 0) {
        log_error("%s", err);
        fprintf(stderr, "shardis: %s\n", err);
        return 1;
    }
    uv_signal_init(cur_loop->uv, &proxy.sigterm);
    uv_signal_start(&proxy.sigterm, stop_cb, SIGTERM);
    uv_signal_init(cur_loop->uv, &proxy.sigint);
    uv_signal_start(&proxy.sigint, stop_cb, SIGINT);
    uv_signal_init(cur_loop->uv, &proxy.sighup);
    uv_signal_start(&proxy.sighup, hup_cb, SIGHUP);
    block_signals(SIG_BLOCK);   /* (the threads inherit the mask) */
    for (uint32_t i = 1; i < proxy.nworkers; i++)
        if ((rc = uv_thread_create(&proxy.workers[i].thread, worker_main,
                                   &proxy.workers[i])) != 0) {
            log_error("cannot start loop %u's thread: %s", i, uv_strerror(rc));
            fprintf(stderr, "shardis: cannot start loop %u's thread: %s\n", i,
                    uv_strerror(rc));
            _exit(1);           /* (others may run: no orderly way back) */
        }
    if (proxy.nworkers > 1)
        log_notice("%u event loops, one thread each", proxy.nworkers);
    block_signals(SIG_UNBLOCK); /* (SIGHUP too: held since main's start) */
    /* Every listener listens: connections are taken from here on. */
    snprintf(out, sizeof(out), "READY=1\nMAINPID=%d\nSTATUS=serving %zu pool%s",
             (int)getpid(), cur_loop->npools, cur_loop->npools > 1 ? "s" : "");
    notify(out);

    loop_run(zero);
    for (uint32_t i = 1; i < proxy.nworkers; i++)
        uv_thread_join(&proxy.workers[i].thread);
    for (uint32_t i = proxy.nworkers; i-- > 0;) {
        cur_loop = &proxy.workers[i].loop;
        loop_finish();
    }
    mbuf_pool_trim();
    keys_cache_free();
    free(proxy.workers);
    proxy.workers = NULL;
    log_notice("exiting");
    return 0;
}
