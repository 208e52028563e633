/* backend_sync.c -- blocking requests to a server, for use before the
 * loop runs (mig_record.c reads the migration record at start): connect,
 * AUTH and SELECT as the pool's connections do, one command, its reply
 * read with the one reply reader, over TLS where the pool's servers speak
 * it (tls.c's blocking calls); every step bounded by BACKEND_SYNC_MS.
 * Nothing here touches a struct backend or the loop: what it must know
 * of the server comes as a struct backend_server, filled by the caller
 * (pool_conn_server, or by hand for a Sentinel). */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proxy/transport/backend.h"
#include "proxy/base/log.h"
#include "proxy/base/resp.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

#define BACKEND_SYNC_MS 1000

static int sync_connect(const struct backend_server *sv)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    struct pollfd pfd;
    char port[8];
    int fd, rc, soerr = 0;
    socklen_t sl = sizeof(soerr);

    if (sv->unix_socket) {
        snprintf(un.sun_path, sizeof(un.sun_path), "%s", sv->host);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&un, sizeof(un));
    } else {
        snprintf(port, sizeof(port), "%u", sv->port);
        if (getaddrinfo(sv->host, port, &hints, &ai) != 0 || ai == NULL)
            return -1;
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        rc = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
    }
    if (fd < 0)
        return -1;
    if (rc < 0 && errno != EINPROGRESS)
        goto fail;
    pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
    if (poll(&pfd, 1, BACKEND_SYNC_MS) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0)
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

/* The value of one whole reply, the len bytes at p: 0, and into *out
 * (when out is given) a bulk's bytes or an array of bulks' elements one
 * per line (nil ones left out), else NULL; -1 for an error reply, or
 * anything else in an array. */
static int sync_value(const char *p, size_t len, char **out, size_t *outlen)
{
    struct resp_rd rd;
    struct resp_val v, e;
    char *val = NULL;
    size_t vlen = 0;

    resp_rd_init_flat(&rd, p, len);
    if (resp_rd_next(&rd, &v) < 0 || v.type == RESP_ERROR || v.type == RESP_BLOBERR)
        return -1;
    if ((v.type == RESP_BULK && !v.nil) || v.type == RESP_SIMPLE) {
        val = xmalloc(v.len + 1);
        memcpy(val, v.p, v.len);
        vlen = v.len;
        val[vlen] = '\0';
    } else if (v.type == RESP_ARRAY || v.type == RESP_SET) {
        val = xstrdup("");              /* nil or empty: "" */
        for (long long i = 0; i < v.n; i++) {
            if (resp_rd_next(&rd, &e) < 0 || e.type != RESP_BULK) {
                free(val);
                return -1;
            }
            if (e.nil)
                continue;
            val = xrealloc(val, vlen + e.len + 2);
            if (i > 0)
                val[vlen++] = '\n';
            memcpy(val + vlen, e.p, e.len);
            vlen += e.len;
            val[vlen] = '\0';
        }
    }
    if (out != NULL && val != NULL) {
        *out = val;
        *outlen = vlen;
    } else {
        free(val);
    }
    return 0;
}

/* Read n replies, each framed as it arrives; the last one's value
 * (sync_value; raw: its bytes as they came) into *out, or NULL. 0; -1 for
 * a reply of no use; -2 when reading failed (no answer in time, closed,
 * TLS). */
#define BACKEND_SYNC_MAX (64u << 20)     /* the most a blocking call reads */

static int sync_replies(int fd, struct tls *t, int n, bool raw, char **out, size_t *outlen)
{
    size_t cap = 4096, len = 0, at = 0, fed = 0, used;
    char *buf = xmalloc(cap);
    int got = 0, rc = -1;
    struct resp_rsp scan;
    struct timespec now;
    int64_t end;

    /* The whole call, not each read, is bounded: a server that drips a
     * byte at a time must not hold the start for ever. */
    clock_gettime(CLOCK_MONOTONIC, &now);
    end = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + 3 * BACKEND_SYNC_MS;

    *out = NULL;
    resp_rsp_init(&scan, true);    /* read here, never forwarded: any type */
    while (got < n) {
        if (fed < len) {
            if ((rc = resp_rsp_feed(&scan, buf + fed, len - fed, &used)) < 0)
                goto fail;
            fed += used;
            if (rc == 1) {
                if (raw && got == n - 1) {
                    *out = xmalloc(fed - at);
                    memcpy(*out, buf + at, fed - at);
                    *outlen = fed - at;
                } else if (!raw &&
                           sync_value(buf + at, fed - at, got == n - 1 ? out : NULL, outlen) < 0) {
                    goto fail;
                }
                at = fed;
                got++;
                resp_rsp_reset(&scan);
                continue;
            }
        }
        if (len == cap) {
            if (cap >= BACKEND_SYNC_MAX) {
                rc = -2;
                goto out;
            }
            buf = xrealloc(buf, cap *= 2);
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t r;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t left = end - ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
        int wait = left <= 0 ? 0 : left < BACKEND_SYNC_MS ? (int)left : BACKEND_SYNC_MS;
        if (wait == 0)
            r = -1;
        else if (t != NULL)
            r = tls_sync_read(t, buf + len, cap - len, wait);
        else if (poll(&pfd, 1, wait) != 1)
            r = -1;
        else
            r = read(fd, buf + len, cap - len);
        if (r <= 0) {
            rc = -2;
            goto out;
        }
        len += (size_t)r;
    }
    free(buf);
    return 0;
fail:
    rc = -1;
out:
    free(buf);
    free(*out);
    *out = NULL;
    return rc;
}

/* Send what w holds (n commands) on fd (over t if given) and read their
 * replies: the last one's, as sync_replies gives it. The request is
 * written as every other (resp_w, into chunks), then copied out once:
 * write(2) on this socket wants one buffer. */
static char *sync_exchange(int fd, struct tls *t, struct msg *g, int n, bool raw,
                           size_t *len, int *rc)
{
    char *req = xmalloc(g->len), *val = NULL;

    msg_copy(g, 0, g->len, req);
    /* (An error reply is the caller's to judge.) */
    if (t != NULL ? tls_sync_write(t, req, g->len, BACKEND_SYNC_MS) < 0
                  : write(fd, req, g->len) != (ssize_t)g->len)
        *rc = -2;
    else
        *rc = sync_replies(fd, t, n, raw, &val, len);
    free(req);
    return val;
}

char *backend_sync(const struct backend_server *sv, int pre_argc, const char *const *pre,
                   int argc, const char *const *argv, bool raw, size_t *len)
{
    if (!sv->resolved) {
        /* (A pool with sentinels: where the file guessed may be a replica,
         * or another shard's server. Nothing is read from a guess.) */
        log_warn("pool '%s': %s: its master's address is not known: not asked",
                 sv->conf->name, sv->label);
        return NULL;
    }
    const struct conf_pool *pc = sv->conf;
    struct tls *t = NULL;
    char *val, db[16];
    struct msg g = {0};
    struct mbuf *m = NULL;
    struct resp_w w = resp_w_on(&g, &m, RESP2);
    int n = 1, rc, fd = sync_connect(sv);

    if (fd < 0)
        return NULL;
    if (sv->tls != NULL && (t = tls_sync_new(sv->tls, fd, sv->tls_name)) == NULL) {
        close(fd);
        return NULL;
    }
    const char *auth[3];
    int nauth = backend_auth_args(pc, BACKEND_AS_INTERNAL, auth);
    if (nauth > 0) {
        resp_w_command(&w, nauth, auth, NULL);
        n++;
    }
    if (pc->redis_db != 0) {
        snprintf(db, sizeof(db), "%d", pc->redis_db);
        resp_w_command(&w, 2, (const char *const[]){"SELECT", db}, NULL);
        n++;
    }
    if (pre_argc > 0) {
        resp_w_command(&w, pre_argc, pre, NULL);
        n++;
    }
    resp_w_command(&w, argc, argv, NULL);
    val = sync_exchange(fd, t, &g, n, raw, len, &rc);
    if (rc == -2 && t != NULL)          /* (a TLS failure is said here) */
        log_warn("pool '%s': %s: %s", pc->name, sv->label, tls_error(t));
    msg_release(&g);
    mbuf_unref(m);
    tls_free(t);
    close(fd);
    return val;
}

char *backend_sync_sentinel(const char *host, uint16_t port, const char *password, int argc,
                            const char *const *argv, size_t *len)
{
    struct backend_server sv = {.host = host, .port = port};
    struct msg g = {0};
    struct mbuf *m = NULL;
    struct resp_w w = resp_w_on(&g, &m, RESP2);
    char *val;
    int n = 1, rc, fd = sync_connect(&sv);

    if (fd < 0)
        return NULL;
    if (password != NULL) {
        resp_w_command(&w, 2, (const char *const[]){"AUTH", password}, NULL);
        n++;
    }
    resp_w_command(&w, argc, argv, NULL);
    val = sync_exchange(fd, NULL, &g, n, true, len, &rc);
    msg_release(&g);
    mbuf_unref(m);
    close(fd);
    return val;
}
