/* test_loop.c -- the proxy's objects on the real event loop, against real
 * redis-servers that each case starts on free loopback ports: a pool made
 * from a config text, clients whose connection is one end of a
 * socketpair (the case writes requests into the other end and reads the
 * replies there), and the flush and tick handles proxy_run starts. Every
 * case asserts the exact reply bytes, and ends as libuv's own tests do:
 * every handle closed and uv_loop_close returning 0, so a handle left
 * open fails it, and (in the ASan build) nothing leaked.
 *
 * The cases: the order of replies (a pipeline, two clients interleaved),
 * split commands' merged replies, a client gone while its requests wait
 * at a server, a server refusing or killed, the ordering gate behind a
 * BLPOP, a request for a key moving after a reload (mig.c's switch,
 * done directly as group.c does it, without the reload's coordination),
 * and a blocking call on a loop of its own beside the pool's.
 *
 * Every wait on the loop is bounded (LOOP_WAIT_MS, by a uv_timer): a case
 * that would hang fails instead. A server is held still with SIGSTOP
 * where a case needs requests to stay queued at it, never with a sleep.
 *
 * redis-server is taken from $REDIS_SERVER, else from PATH. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/modules/mig.h"
#include "proxy/core/pool.h"
#include "proxy/process/hooks.h"
#include "proxy/process/modules.h"
#include "proxy/core/pool_conn.h"
#include "proxy/process/proxy.h"
#include "proxy/transport/req.h"
#include "proxy/base/util.h"

/* Under ASan, each case checks for leaks itself at its end: LeakSanitizer's
 * report at a Criterion worker's exit only warns, and the case passes. */
#if defined(__SANITIZE_ADDRESS__)
#define LOOP_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOOP_LSAN 1
#endif
#endif
#ifdef LOOP_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#define LOOP_WAIT_MS    2000    /* any one wait on the loop, before the case fails */
#define SERVER_WAIT_MS  3000    /* a redis-server to answer PING once started */

/* A condition, as Criterion's cr_assert takes one that is not its own. */
static bool holds(bool cond)
{
    return cond;
}

/* ---- redis-servers ------------------------------------------------------------- */

static struct server {
    pid_t    pid;               /* 0: not running */
    uint16_t port;
} servers[3];

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A loopback port nobody listens on just now. */
static uint16_t free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    cr_assert(fd >= 0);
    cr_assert(eq(int, bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0));
    cr_assert(eq(int, getsockname(fd, (struct sockaddr *)&sa, &len), 0));
    close(fd);
    return ntohs(sa.sin_port);
}

/* A loopback port that refuses connections for the rest of the case: a
 * socket is bound to it (so no other case's server can take it) and never
 * listens. */
static int refusers[2] = {-1, -1};

static uint16_t refusing_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    size_t i = refusers[0] < 0 ? 0 : 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    cr_assert(fd >= 0 && refusers[i] < 0);
    cr_assert(eq(int, bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0));
    cr_assert(eq(int, getsockname(fd, (struct sockaddr *)&sa, &len), 0));
    refusers[i] = fd;
    return ntohs(sa.sin_port);
}

/* Whether a redis-server on port answers PING. */
static bool server_pings(uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_usec = 200000};
    char buf[16] = "";
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = false;

    if (fd < 0)
        return false;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && write(fd, "PING\r\n", 6) == 6)
        ok = read(fd, buf, sizeof(buf) - 1) >= 7 && !strncmp(buf, "+PONG\r\n", 7);
    close(fd);
    return ok;
}

/* Start servers[i]: a redis-server on a free port, with no persistence,
 * and extra arguments (NULL-terminated) after those. It dies with this
 * process (PR_SET_PDEATHSIG) should the case crash before its teardown. */
static void server_start(size_t i, ...)
{
    const char *path = getenv("REDIS_SERVER");
    const char *argv[32];
    char port[8];
    va_list ap;
    int argc;

    if (path == NULL || *path == '\0')
        path = "redis-server";
    for (int attempt = 0; attempt < 5; attempt++) {
        uint16_t p = free_port();
        snprintf(port, sizeof(port), "%u", p);
        argc = 0;
        argv[argc++] = path;
        argv[argc++] = "--port";
        argv[argc++] = port;
        argv[argc++] = "--bind";
        argv[argc++] = "127.0.0.1";
        argv[argc++] = "--save";
        argv[argc++] = "";
        argv[argc++] = "--appendonly";
        argv[argc++] = "no";
        va_start(ap, i);
        for (const char *a; (a = va_arg(ap, const char *)) != NULL;)
            argv[argc++] = a;
        va_end(ap);
        argv[argc] = NULL;

        pid_t parent = getpid(), pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            int null = open("/dev/null", O_RDWR);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
            execvp(path, (char *const *)argv);
            _exit(127);
        }
        for (uint64_t until = wall_ms() + SERVER_WAIT_MS; wall_ms() < until;) {
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                cr_assert(holds(!WIFEXITED(status) || WEXITSTATUS(status) != 127),
                          "cannot run %s (set REDIS_SERVER, or put it on PATH)", path);
                pid = 0;            /* the port was taken meanwhile: another */
                break;
            }
            if (server_pings(p)) {
                servers[i] = (struct server){pid, p};
                return;
            }
            nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
        }
        if (pid != 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
    }
    cr_fatal("redis-server did not start");
}

static void server_signal(size_t i, int sig)
{
    cr_assert(servers[i].pid != 0);
    cr_assert(eq(int, kill(servers[i].pid, sig), 0));
}

static void server_kill(size_t i)
{
    server_signal(i, SIGKILL);
    waitpid(servers[i].pid, NULL, 0);
    servers[i].pid = 0;
}

/* ---- the pool and the loop --------------------------------------------------------- */

static uv_loop_t loop;
static uv_timer_t guard;        /* bounds every wait (RUN_UNTIL) */
static bool timed_out;
static struct conf *cf;
static struct conf *old_cf;     /* the one a reload replaced, or NULL */
static struct pool pool;

static void guard_cb(uv_timer_t *t)
{
    (void)t;
    timed_out = true;
}

/* Run the loop until cond holds; fail the case if that takes longer than
 * LOOP_WAIT_MS. (The ticker wakes the loop every few ms, so a condition
 * that no I/O changes is seen too.) */
#define RUN_UNTIL(cond, ...)                                                       \
    do {                                                                           \
        timed_out = false;                                                         \
        uv_timer_start(&guard, guard_cb, LOOP_WAIT_MS, 0);                         \
        while (!(cond) && !timed_out)                                              \
            uv_run(&loop, UV_RUN_ONCE);                                            \
        uv_timer_stop(&guard);                                                     \
        cr_assert(holds(cond), "timed out waiting for " __VA_ARGS__);              \
    } while (0)

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);       /* as proxy_run: a closed peer is an error, not death */
    static struct loop the_loop;

    memset(&proxy, 0, sizeof(proxy));
    cr_assert(eq(int, uv_loop_init(&loop), 0));
    loop_init(&the_loop, &loop);
    modules_register();             /* as main */
    hooks_register();
    uv_timer_init(&loop, &guard);
}

/* The servers go whatever became of the case (the loop and the pool are
 * loop_finish's, which only a case that got to its end runs). */
static void teardown(void)
{
    for (size_t i = 0; i < ARRAY_SIZE(servers); i++)
        if (servers[i].pid != 0) {
            kill(servers[i].pid, SIGKILL);
            waitpid(servers[i].pid, NULL, 0);
            servers[i].pid = 0;
        }
    for (size_t i = 0; i < ARRAY_SIZE(refusers); i++)
        if (refusers[i] >= 0) {
            close(refusers[i]);
            refusers[i] = -1;
        }
}

TestSuite(loop, .init = setup, .fini = teardown, .timeout = 20);

/* The config of pool "alpha" over servers on ports[0 .. n), named one,
 * two, three. */
static struct conf *conf_of(size_t n, const uint16_t *ports)
{
    static const char *const names[] = {"one", "two", "three"};
    char text[1024], err[CONF_ERRLEN];
    struct conf *c;
    int len;

    len = snprintf(text, sizeof(text),
                   "alpha:\n"
                   "  listen: 127.0.0.1:1\n"
                   "  hash_tag: \"{}\"\n"
                   "  hash: md5\n"
                   "  servers:\n");
    for (size_t i = 0; i < n; i++)
        len += snprintf(text + len, sizeof(text) - (size_t)len, "    - 127.0.0.1:%u:1 %s\n",
                        ports[i], names[i]);
    cr_assert(eq(int, conf_parse(&c, "test", text, (size_t)len, err, sizeof(err)), 0), "%s",
              err);
    return c;
}

/* The pool over servers on ports[0 .. n), as proxy_run starts one (its
 * listener aside), and the loop's flush and tick handles. */
static void pool_up(size_t n, const uint16_t *ports)
{
    char err[CONF_ERRLEN];
    struct ring *ring;

    cf = conf_of(n, ports);
    cur_loop->conf = cf;
    cr_assert(eq(int, conf_pool_ring(&cf->pools[0], &ring, err, sizeof(err)), 0), "%s", err);
    memset(&pool, 0, sizeof(pool));
    pool.nconns = (uint32_t)cf->pools[0].server_connections;
    TAILQ_INIT(&pool.dedicated);
    TAILQ_INIT(&pool.subscribers);
    pool_set_ring(&pool, &cf->pools[0], ring, NULL);
    cr_assert(eq(int, acl_build(&cf->pools[0], "test", &pool.acl, err, sizeof(err)), 0));
    cur_loop->pools = &pool;
    cur_loop->npools = 1;
    proxy_loop_start();
}

/* The pool over servers[0 .. n). */
static void pool_up_servers(size_t n)
{
    uint16_t ports[ARRAY_SIZE(servers)];

    for (size_t i = 0; i < n; i++)
        ports[i] = servers[i].port;
    pool_up(n, ports);
}

/* The k-th key "<prefix><i>" (k from 0) that the pool routes to server. */
static const char *key_on(uint32_t server, const char *prefix, int k)
{
    static char keys[32][160];
    static int next;
    char *key = keys[next++ % 32];

    for (int i = 0;; i++) {
        snprintf(key, sizeof(keys[0]), "%s%d", prefix, i);
        if (pool_owner(&pool, key, strlen(key)) == server && k-- == 0)
            return key;
    }
}

/* ---- the case's end of a client -------------------------------------------------- */

struct end {
    union stream   h;
    char          *buf;         /* replies read, not yet checked */
    size_t         len, cap;
    bool           eof, open;
    struct client *c;           /* the proxy's end (until it closes) */
};

static struct end ends[3];

static void end_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct end *e = container_of(h, struct end, h);

    (void)suggested;
    if (e->cap - e->len < 4096)
        e->buf = xrealloc(e->buf, e->cap = e->cap * 2 + 4096);
    *buf = uv_buf_init(e->buf + e->len, (unsigned)(e->cap - e->len));
}

static void end_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct end *e = container_of(s, struct end, h);

    (void)buf;
    if (n < 0) {
        e->eof = true;
        uv_read_stop(s);
    } else {
        e->len += (size_t)n;
    }
}

/* A client of the pool over a socketpair; the case holds the other end. */
static struct end *end_open(size_t i)
{
    struct end *e = &ends[i];
    int sv[2];

    cr_assert(eq(int, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0));
    e->c = client_open(&pool.front, sv[0]);
    cr_assert(e->c != NULL);
    cr_assert(eq(int, uv_pipe_init(&loop, &e->h.pipe, 0), 0));
    cr_assert(eq(int, uv_pipe_open(&e->h.pipe, sv[1]), 0));
    cr_assert(eq(int, uv_read_start(&e->h.stream, end_alloc, end_read), 0));
    e->open = true;
    return e;
}

static void end_closed(uv_handle_t *h)
{
    struct end *e = container_of(h, struct end, h);

    free(e->buf);
    e->buf = NULL;
    e->len = e->cap = 0;
}

/* Hang up (the fd closes now; the proxy sees it on its next read). */
static void end_close(struct end *e)
{
    e->open = false;
    e->c = NULL;
    uv_close(&e->h.handle, end_closed);
}

/* Write bytes to the proxy (all at once: the socket buffer takes them). */
static void end_write(struct end *e, const char *data, size_t len)
{
    uv_os_fd_t fd;

    cr_assert(eq(int, uv_fileno(&e->h.handle, &fd), 0));
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        cr_assert(n > 0, "write: %s", strerror(errno));
        data += n;
        len -= (size_t)n;
    }
}

/* Append the command of space-separated words to f, as a RESP array. */
static void resp_cmd(FILE *f, const char *words)
{
    char copy[256], *save = NULL;
    const char *argv[16];
    int argc = 0;

    snprintf(copy, sizeof(copy), "%s", words);
    for (char *w = strtok_r(copy, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    fprintf(f, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++)
        fprintf(f, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
}

/* Send one command, printf-style. */
__attribute__((format(printf, 2, 3)))
static void end_send(struct end *e, const char *fmt, ...)
{
    char words[256], *req = NULL;
    size_t len;
    va_list ap;
    FILE *f;

    va_start(ap, fmt);
    vsnprintf(words, sizeof(words), fmt, ap);
    va_end(ap);
    f = xopen_memstream(&req, &len);
    resp_cmd(f, words);
    fclose(f);
    end_write(e, req, len);
    free(req);
}

/* s, with \r and \n shown, for a failure's message. */
static const char *shown(const char *s, size_t len)
{
    static char out[2][8192];
    static int which;
    char *o = out[which++ % 2];
    size_t k = 0;

    for (size_t i = 0; i < len && k + 5 < sizeof(out[0]); i++) {
        if (s[i] == '\r' || s[i] == '\n') {
            o[k++] = '\\';
            o[k++] = s[i] == '\r' ? 'r' : 'n';
        } else {
            o[k++] = s[i];
        }
    }
    o[k] = '\0';
    return o;
}

/* Run the loop until e has read len bytes, which must be want exactly,
 * and nothing more has come with them; they are consumed. */
static void expect_bytes(struct end *e, const char *want, size_t len)
{
    RUN_UNTIL(e->len >= len || e->eof, "%zu reply bytes (have %zu: %s)", len, e->len,
              shown(e->buf, e->len));
    uv_run(&loop, UV_RUN_NOWAIT);   /* anything that came right behind them */
    cr_assert(e->len == len && memcmp(e->buf, want, len) == 0,
              "replies:\n  got  %s\n  want %s", shown(e->buf, e->len), shown(want, len));
    e->len = 0;
}

static void expect(struct end *e, const char *want)
{
    expect_bytes(e, want, strlen(want));
}

/* ---- the end of every case -------------------------------------------------------- */

static void count_cb(uv_handle_t *h, void *arg)
{
    if (h != (uv_handle_t *)&guard)
        ++*(int *)arg;
}

/* Handles on the loop but the guard, open or closing. */
static int handles_left(void)
{
    int n = 0;

    uv_walk(&loop, count_cb, &n);
    return n;
}

static void name_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h != (uv_handle_t *)&guard)
        cr_log_error("handle left: %s%s", uv_handle_type_name(h->type),
                     uv_is_closing(h) ? " (closing)" : "");
}

/* Hang up every client, close every connection and the proxy's handles,
 * run the loop until no handle is left, and close it: it must close
 * (uv_loop_close 0). Then free the pool, as proxy_run does. */
static void loop_finish(void)
{
    for (size_t i = 0; i < ARRAY_SIZE(ends); i++)
        if (ends[i].open)
            end_close(&ends[i]);
    RUN_UNTIL(cur_loop->nclients == 0, "the proxy to close its clients");
    cur_loop->stopping = true;
    pool_conn_close_spares(&pool, UINT32_MAX);
    for (uint32_t s = 0; s < pool.nservers; s++) {
        for (uint32_t k = 0; k < pool_nconns(&pool); k++)   /* shardis's own two too */
            backend_close(&pool.servers[s].conns[k]);
        if (pool.servers[s].mover != NULL)
            backend_close(pool.servers[s].mover);
    }
    uv_close((uv_handle_t *)&cur_loop->flusher, NULL);
    uv_close((uv_handle_t *)&cur_loop->ticker, NULL);
    timed_out = false;
    uv_timer_start(&guard, guard_cb, LOOP_WAIT_MS, 0);
    while (handles_left() > 0 && !timed_out)
        uv_run(&loop, UV_RUN_ONCE);
    if (handles_left() > 0)
        uv_walk(&loop, name_cb, NULL);
    cr_assert(eq(int, handles_left(), 0), "every handle closes");
    cr_assert(holds(TAILQ_EMPTY(&pool.dedicated)), "no dedicated connection is left");
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(eq(int, uv_loop_close(&loop), 0), "the loop closes: no live handle");
    pool_free(&pool);
    conf_free(cf);
    conf_free(old_cf);
    cf = old_cf = NULL;
    cur_loop->conf = NULL;
    mbuf_pool_trim();
    req_pool_trim();
#ifdef LOOP_LSAN
    cr_assert(eq(int, __lsan_do_recoverable_leak_check(), 0), "nothing leaks (see the report)");
#endif
}

/* ---- ordering ---------------------------------------------------------------------- */

/* A pipeline of n mixed SET, GET and INCR over keys on both servers, and
 * the replies redis-server gives it on an empty database, in order. */
struct script {
    char  *req, *rsp;
    size_t reqlen, rsplen;
};

static void mixed(const char *prefix, int n, struct script *s)
{
    char key[10][32], val[10][32], cnt[4][32], words[128];
    long counts[4] = {0};
    FILE *req = xopen_memstream(&s->req, &s->reqlen), *rsp = xopen_memstream(&s->rsp, &s->rsplen);

    for (int k = 0; k < 10; k++) {
        snprintf(key[k], sizeof(key[k]), "%s", key_on((uint32_t)(k % 2), prefix, k / 2));
        val[k][0] = '\0';
    }
    snprintf(words, sizeof(words), "%s-n", prefix);
    for (int k = 0; k < 4; k++)
        snprintf(cnt[k], sizeof(cnt[k]), "%s", key_on((uint32_t)(k % 2), words, k / 2));
    for (int i = 0; i < n; i++) {
        int k = (i * 7) % 10, m = i % 4;
        switch (i % 3) {
        case 0:
            snprintf(val[i % 10], sizeof(val[0]), "v%d", i);
            snprintf(words, sizeof(words), "SET %s %s", key[i % 10], val[i % 10]);
            fprintf(rsp, "+OK\r\n");
            break;
        case 1:
            snprintf(words, sizeof(words), "GET %s", key[k]);
            if (val[k][0] == '\0')
                fprintf(rsp, "$-1\r\n");
            else
                fprintf(rsp, "$%zu\r\n%s\r\n", strlen(val[k]), val[k]);
            break;
        default:
            snprintf(words, sizeof(words), "INCR %s", cnt[m]);
            fprintf(rsp, ":%ld\r\n", ++counts[m]);
            break;
        }
        resp_cmd(req, words);
    }
    fclose(req);
    fclose(rsp);
}

static void script_free(struct script *s)
{
    free(s->req);
    free(s->rsp);
}

Test(loop, a_pipeline_of_100_gets_its_replies_in_order)
{
    struct script s;

    server_start(0, NULL);
    server_start(1, NULL);
    pool_up_servers(2);
    struct end *e = end_open(0);
    mixed("k", 100, &s);
    end_write(e, s.req, s.reqlen);
    expect_bytes(e, s.rsp, s.rsplen);
    script_free(&s);
    loop_finish();
}

/* Two clients whose pipelines arrive cut into small pieces, one's after
 * the other's, over the same connections to the servers: each gets its
 * own replies, in its own order. */
Test(loop, two_interleaved_clients_each_get_their_own_replies)
{
    struct script sa, sb;

    server_start(0, NULL);
    server_start(1, NULL);
    pool_up_servers(2);
    struct end *a = end_open(0), *b = end_open(1);
    mixed("a", 100, &sa);
    mixed("b", 100, &sb);
    for (size_t at = 0, bt = 0; at < sa.reqlen || bt < sb.reqlen;) {
        size_t n = sa.reqlen - at < 37 ? sa.reqlen - at : 37;
        end_write(a, sa.req + at, n);
        at += n;
        uv_run(&loop, UV_RUN_NOWAIT);
        n = sb.reqlen - bt < 23 ? sb.reqlen - bt : 23;
        end_write(b, sb.req + bt, n);
        bt += n;
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    expect_bytes(a, sa.rsp, sa.rsplen);
    expect_bytes(b, sb.rsp, sb.rsplen);
    script_free(&sa);
    script_free(&sb);
    loop_finish();
}

/* ---- split commands ------------------------------------------------------------------ */

/* MSET, MGET and DEL over keys of both servers: one fragment per server,
 * merged back in the order the keys were asked, missing keys nil. */
Test(loop, split_commands_merge_their_fragments)
{
    server_start(0, NULL);
    server_start(1, NULL);
    pool_up_servers(2);
    struct end *e = end_open(0);
    const char *a1 = key_on(0, "m", 0), *a2 = key_on(0, "m", 1), *a3 = key_on(0, "m", 2);
    const char *b1 = key_on(1, "m", 0), *b2 = key_on(1, "m", 1), *b3 = key_on(1, "m", 2);

    end_send(e, "MSET %s 1 %s 2 %s 3 %s 4", a1, b1, a2, b2);
    expect(e, "+OK\r\n");
    end_send(e, "MGET %s %s %s %s %s %s", a1, b1, a3, a2, b3, b2);
    expect(e, "*6\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n$1\r\n3\r\n$-1\r\n$1\r\n4\r\n");
    end_send(e, "DEL %s %s %s %s", a1, b1, a3, b3);
    expect(e, ":2\r\n");
    end_send(e, "MGET %s %s %s %s", a1, b1, b2, a2);
    expect(e, "*4\r\n$-1\r\n$-1\r\n$1\r\n4\r\n$1\r\n3\r\n");
    loop_finish();
}

/* A fragment that a server refuses (a read-only replica's -READONLY) is
 * the reply: never +OK, nor a count that looks complete. What the other
 * server took stays done (MSET over servers is not atomic). */
Test(loop, an_error_fragment_is_the_reply)
{
    char master[8];

    snprintf(master, sizeof(master), "%u", refusing_port());  /* it stays a replica */
    server_start(0, NULL);
    server_start(1, "--replicaof", "127.0.0.1", master, NULL);
    pool_up_servers(2);
    struct end *e = end_open(0);
    const char *a1 = key_on(0, "r", 0), *b1 = key_on(1, "r", 0), *b2 = key_on(1, "r", 1);

    end_send(e, "MSET %s x %s y", a1, b1);
    expect(e, "-READONLY You can't write against a read only replica.\r\n");
    end_send(e, "MGET %s %s %s", b2, a1, b1);
    expect(e, "*3\r\n$-1\r\n$1\r\nx\r\n$-1\r\n");
    end_send(e, "DEL %s %s", a1, b1);
    expect(e, "-READONLY You can't write against a read only replica.\r\n");
    end_send(e, "GET %s", a1);
    expect(e, "$-1\r\n");
    loop_finish();
}

/* ---- a client that goes away --------------------------------------------------------- */

/* Requests sent to b and waiting for their replies (nothing still to be
 * written), or 0 while some are not on the wire yet. */
/* Clients' requests sent on b and not answered, theirs still if they have
 * gone (shardis's own, INFO and COMMAND, which carry a reply callback and
 * share the first connection without split credentials, are not
 * counted). */
static size_t pending(const struct backend *b)
{
    const struct req *r;
    size_t n = 0;

    if (!TAILQ_EMPTY(&b->sendq) || !TAILQ_EMPTY(&b->writeq))
        return 0;
    TAILQ_FOREACH(r, &b->pendq, pq)
        n += r->on_reply == NULL;
    return n;
}

/* x hangs up while 50 of its requests wait at a server (held still by
 * SIGSTOP), y's behind them on the same connection. Their replies come
 * once the server goes on: x's are read and dropped (x is freed by then),
 * y gets exactly its own, and x's requests did run. */
Test(loop, a_client_gone_while_its_requests_are_queued_leaves_the_others_be)
{
    server_start(0, NULL);
    server_start(1, NULL);
    pool_up_servers(2);
    struct end *x = end_open(0), *y = end_open(1);
    struct backend *b0 = &pool.servers[0].conns[0];
    const char *kx = key_on(0, "x", 0), *ky = key_on(0, "y", 0), *kb = key_on(1, "y", 0);

    end_send(x, "SET %s 0", kx);
    expect(x, "+OK\r\n");                   /* connected, handshake done */
    server_signal(0, SIGSTOP);
    for (int i = 0; i < 50; i++)
        end_send(x, "INCR %s", kx);
    RUN_UNTIL(pending(b0) == 50, "x's 50 INCRs on the wire");
    end_send(y, "INCR %s", ky);
    end_send(y, "SET %s z", kb);
    RUN_UNTIL(pending(b0) == 51, "y's INCR behind them");
    cr_assert(eq(sz, y->len, 0), "y's SET on the other server waits for its INCR");

    end_close(x);
    RUN_UNTIL(pool.front.nclients == 1, "the proxy to close x");
    uv_run(&loop, UV_RUN_NOWAIT);           /* (x's close callback has run: it is freed) */
    cr_assert(eq(sz, pending(b0), 51), "x's requests are still owed by the server");
    server_signal(0, SIGCONT);
    expect(y, ":1\r\n+OK\r\n");
    end_send(y, "GET %s", kx);
    expect(y, "$2\r\n50\r\n");
    cr_assert(eq(int, b0->state, BACKEND_UP), "the connection stayed in step");
    cr_assert(eq(u64, b0->errors, 0));
    loop_finish();
}

/* ---- a server that fails --------------------------------------------------------------- */

#define DOWN(reason) "-ERR backend two unavailable: " reason "\r\n"

/* The second server's port has nobody: what goes there (whole, or as a
 * fragment of an MGET) gets the proxy's error; the first server's
 * requests, between them in the same pipeline, are answered. */
Test(loop, a_server_that_refuses_fails_only_its_own_requests)
{
    server_start(0, NULL);
    uint16_t ports[2] = {servers[0].port, refusing_port()};
    pool_up(2, ports);
    struct end *e = end_open(0);
    const char *ka = key_on(0, "f", 0), *kb = key_on(1, "f", 0);

    end_send(e, "SET %s 1", kb);
    end_send(e, "SET %s 1", ka);
    end_send(e, "GET %s", kb);
    end_send(e, "MGET %s %s", ka, kb);
    end_send(e, "GET %s", ka);
    expect(e, DOWN("connection refused") "+OK\r\n" DOWN("connection refused")
              DOWN("connection refused") "$1\r\n1\r\n");
    end_send(e, "GET %s", kb);              /* failing fast, or refused again */
    end_send(e, "INCR %s", ka);
    expect(e, DOWN("connection refused") ":2\r\n");
    loop_finish();
}

/* A blocking call (pool_conn_call: backend_sync) is a connection run to
 * its reply on a loop of its own: the pool's loop is current again after
 * it, with nothing of the call left on it (loop_finish: every handle
 * closed, nothing leaked); a value, raw bytes, or NULL for nil, an error
 * and a server that refuses (at once, not at the deadline). */
Test(loop, a_blocking_call_runs_on_a_loop_of_its_own)
{
    server_start(0, NULL);
    uint16_t ports[2] = {servers[0].port, refusing_port()};
    pool_up(2, ports);
    struct loop *was = cur_loop;
    size_t len = 0;
    char *v;

    v = pool_conn_call(&pool, 0, 3, (const char *const[]){"SET", "sync:k", "v1"}, &len);
    cr_assert(holds(v != NULL && strcmp(v, "OK") == 0), "SET: %s", v ? v : "NULL");
    free(v);
    v = pool_conn_call(&pool, 0, 2, (const char *const[]){"GET", "sync:k"}, &len);
    cr_assert(holds(v != NULL && len == 2 && strcmp(v, "v1") == 0), "GET: %s", v ? v : "NULL");
    free(v);
    v = pool_conn_call_raw(&pool, 0, 2, (const char *const[]){"GET", "sync:k"}, &len);
    cr_assert(holds(v != NULL && len == 8 && memcmp(v, "$2\r\nv1\r\n", 8) == 0), "raw GET");
    free(v);
    v = pool_conn_call(&pool, 0, 2, (const char *const[]){"GET", "sync:none"}, &len);
    cr_assert(holds(v == NULL), "GET of no key: NULL");
    v = pool_conn_call(&pool, 0, 1, (const char *const[]){"NOSUCHCOMMAND"}, &len);
    cr_assert(holds(v == NULL), "an error reply: NULL");
    v = pool_conn_call_raw(&pool, 0, 1, (const char *const[]){"NOSUCHCOMMAND"}, &len);
    cr_assert(holds(v != NULL && v[0] == '-'), "an error reply, raw: its bytes");
    free(v);
    uint64_t t0 = wall_ms();
    v = pool_conn_call(&pool, 1, 1, (const char *const[]){"PING"}, &len);
    cr_assert(holds(v == NULL && wall_ms() - t0 < 500), "a refusing server: NULL at once");
    cr_assert(holds(cur_loop == was), "the pool's loop is current again");
    loop_finish();
}

/* The second server is killed while requests wait at it: they get the
 * proxy's error, in their place among the first server's replies. */
Test(loop, a_server_killed_fails_what_it_owed)
{
    server_start(0, NULL);
    server_start(1, NULL);
    pool_up_servers(2);
    struct end *e = end_open(0);
    struct backend *b1 = &pool.servers[1].conns[0];
    const char *ka = key_on(0, "f", 0), *kb = key_on(1, "f", 0);

    end_send(e, "SET %s 1", kb);
    expect(e, "+OK\r\n");
    server_signal(1, SIGSTOP);
    end_send(e, "INCR %s", kb);
    end_send(e, "INCR %s", ka);
    end_send(e, "INCR %s", kb);
    RUN_UNTIL(pending(b1) == 2, "both INCRs on the wire");
    server_kill(1);
    expect(e, DOWN("connection reset by peer") ":1\r\n" DOWN("connection reset by peer"));
    end_send(e, "INCR %s", ka);
    expect(e, ":2\r\n");
    loop_finish();
}

/* ---- the ordering gate on a real server ----------------------------------------------- */

/* A command sent after a blocking one runs after it, though it goes to
 * another server: y sees x's SET only once x's BLPOP returned. */
Test(loop, a_command_after_a_blocking_one_waits_for_it)
{
    server_start(0, NULL);
    server_start(1, NULL);
    pool_up_servers(2);
    struct end *x = end_open(0), *y = end_open(1);
    const char *kl = key_on(0, "l", 0), *kb = key_on(1, "l", 0);
    char want[8192];  /* (gcc -O3 cannot see a key is short) */

    end_send(x, "BLPOP %s 0", kl);
    end_send(x, "SET %s after", kb);
    RUN_UNTIL(x->c->inflight == 2, "x's two requests routed");
    end_send(y, "GET %s", kb);              /* behind x's SET, had it gone */
    expect(y, "$-1\r\n");
    cr_assert(eq(sz, x->len, 0));
    end_send(y, "RPUSH %s v", kl);
    expect(y, ":1\r\n");
    snprintf(want, sizeof(want), "*2\r\n$%zu\r\n%s\r\n$1\r\nv\r\n+OK\r\n", strlen(kl), kl);
    expect(x, want);
    end_send(y, "GET %s", kb);
    expect(y, "$5\r\nafter\r\n");
    loop_finish();
}

/* ---- a request for a moving key ---------------------------------------------------------- */

/* What a redis-server on port answers to the inline command cmd, compared
 * with want, over a connection of the case's own. */
static bool server_says(uint16_t port, const char *cmd, const char *want)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 1};
    char buf[256] = "";
    size_t len = 0, n = strlen(want);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    cr_assert(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    cr_assert(eq(int, connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0));
    cr_assert(eq(sz, (size_t)write(fd, cmd, strlen(cmd)), strlen(cmd)));
    while (len < n && len < sizeof(buf) - 1) {
        ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    return len == n && memcmp(buf, want, n) == 0;
}

/* The k-th key "<prefix><i>" that ring r places on its server idx. */
static const char *key_in(const struct ring *r, uint32_t idx, const char *prefix, int k)
{
    static char keys[8][32];
    static int next;
    char *key = keys[next++ % 8];

    for (int i = 0;; i++) {
        snprintf(key, 32, "%s%d", prefix, i);
        if (ring_lookup(r, key, strlen(key)) == idx && k-- == 0)
            return key;
    }
}

/* The pool gains a second server as a reload does once every proxy has
 * it (group.c's switch): it routes by the new ring, and a key whose owner
 * changed is moved (MIGRATE from the first server) before a request for
 * it goes on. The first server is held still meanwhile: the request, and
 * the client's later ones, wait; once it goes on they are answered in
 * order, the moved key with the value it had. */
Test(loop, a_request_for_a_moving_key_waits_for_it_and_the_rest_keep_their_order)
{
    char err[CONF_ERRLEN], cmd[64];
    struct ring *ring, *old;
    uint32_t *old_slot;

    server_start(0, NULL);
    server_start(1, NULL);
    pool_up_servers(1);
    uint16_t ports[2] = {servers[0].port, servers[1].port};
    struct conf *next = conf_of(2, ports);
    cr_assert(eq(int, conf_pool_ring(&next->pools[0], &ring, err, sizeof(err)), 0), "%s", err);
    const char *km = key_in(ring, 1, "m", 0), *ka = key_in(ring, 0, "m", 0);
    struct end *x = end_open(0);

    end_send(x, "SET %s old", km);
    end_send(x, "SET %s a", ka);
    expect(x, "+OK\r\n+OK\r\n");            /* both on the first server */

    old = pool_set_ring(&pool, &next->pools[0], ring, &old_slot);
    cr_assert(eq(int, mig_start(&pool, old, old_slot, cf->text, next->text, err, sizeof(err)),
                 0), "%s", err);
    old_cf = cf;
    cur_loop->conf = cf = next;
    server_signal(0, SIGSTOP);
    end_send(x, "GET %s", km);
    end_send(x, "SET %s new", km);
    end_send(x, "GET %s", km);
    end_send(x, "GET %s", ka);
    RUN_UNTIL(x->c->inflight == 4, "x's four requests routed");
    for (int i = 0; i < 5; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert(eq(sz, x->len, 0), "nothing is answered while the key cannot move");
    cr_assert(x->c->rare != NULL && !TAILQ_EMPTY(&x->c->rare->gate), "they wait, parked");
    snprintf(cmd, sizeof(cmd), "EXISTS %s\r\n", km);
    cr_assert(server_says(servers[1].port, cmd, ":0\r\n"), "the new owner has nothing yet");

    server_signal(0, SIGCONT);
    expect(x, "$3\r\nold\r\n+OK\r\n$3\r\nnew\r\n$1\r\na\r\n");
    cr_assert(server_says(servers[0].port, cmd, ":0\r\n"), "the key left the first server");
    snprintf(cmd, sizeof(cmd), "GET %s\r\n", km);
    cr_assert(server_says(servers[1].port, cmd, "$3\r\nnew\r\n"), "and is on the second");
    loop_finish();
}
