/* scan.c -- SCAN over every backend with one cursor.
 *
 * The client's cursor says which server to ask and where that server is:
 *
 *   cursor = server_cursor * nservers + server
 *
 * Cursor 0 starts server 0 at 0; when a server's own cursor comes back 0,
 * the next server starts (its cursor is just its index), and after the
 * last one the client gets 0. Each server's SCAN keeps Redis's guarantee
 * for its own keys, so the walk keeps it for all of them: a key present
 * from the first call to the last is returned at least once. MATCH, COUNT
 * and TYPE go to every server as they are; the elements of each reply are
 * forwarded, only the cursor is rewritten.
 *
 * Servers are the pool's server slots, which keep their numbers across
 * reconnects and reloads; slots of servers that hold no keys (they left
 * the ring) are skipped. While keys move after a reload a key can move
 * from a server not yet walked to one already walked, so a walk that
 * spans a migration may miss it. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core.h"

/* The first server from s on that holds keys; nservers if none. */
static uint64_t next_active(const struct pool *p, uint64_t s)
{
    while (s < p->nservers && !p->servers[s].active)
        s++;
    return s;
}

/* A cursor as redis-server reads one (strtoul: a sign is allowed, "" is
 * 0, leading space or trailing bytes or overflow are not). */
static bool parse_cursor(const char *s, size_t len, uint64_t *v)
{
    char buf[32], *end;

    if (len >= sizeof(buf) || (len > 0 && isspace((unsigned char)s[0])))
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    *v = strtoull(buf, &end, 10);
    return errno != ERANGE && *end == '\0';
}

/* The server's reply "*2\r\n$L\r\n<cursor>\r\n*N...": rewrite the cursor. */
static int scan_reply(struct req *r)
{
    struct client *c = r->client;
    uint64_t n = c->pool->nservers, server, cursor, next;
    char head[64], out[64];
    size_t len = r->rsp.len < sizeof(head) - 1 ? r->rsp.len : sizeof(head) - 1;
    unsigned long clen;
    int at = 0;
    struct msg rsp;

    msg_copy(&r->rsp, 0, len, head);
    head[len] = '\0';
    if (head[0] == '-' || r->backend == NULL)
        return 0;                   /* the server's error (or shardis's), as it is */
    server = r->backend->server;
    if (sscanf(head, "*2\r\n$%lu\r\n%n", &clen, &at) != 1 || at == 0 ||
        at + clen + 2 > len || !parse_cursor(head + at, clen, &cursor) ||
        memcmp(head + at + clen, "\r\n", 2) != 0) {
        msg_release(&r->rsp);
        client_reply_error(c, r, "ERR backend %s sent a SCAN reply shardis cannot read",
                           c->pool->servers[server].label);
        return 0;
    }
    if (cursor > (UINT64_MAX - server) / n) {
        /* Only a made-up cursor leads a server this far. */
        msg_release(&r->rsp);
        client_reply_error(c, r, "ERR invalid cursor");
        return 0;
    }
    if (cursor != 0)
        next = cursor * n + server;
    else if ((next = next_active(c->pool, server + 1)) == n)
        next = 0;
    len = (size_t)snprintf(out, sizeof(out), "%" PRIu64, next);
    len = (size_t)snprintf(out, sizeof(out), "*2\r\n$%zu\r\n%" PRIu64 "\r\n", len, next);
    rsp = r->rsp;
    memset(&r->rsp, 0, sizeof(r->rsp));
    client_reply(c, r, out, len);
    msg_sub(&rsp, (size_t)at + clen + 2, rsp.len - (size_t)at - clen - 2, &r->rsp);
    msg_release(&rsp);
    return 0;
}

void scan_send(struct client *c, struct req *r, struct args *a)
{
    struct pool *p = c->pool;
    uint64_t cursor;
    size_t len;
    const char *arg = args_get(a, 1, &len);
    char buf[48];
    uint64_t server;

    if (!parse_cursor(arg, len, &cursor)) {
        client_reply_error(c, r, "ERR invalid cursor");
        req_done(r);
        return;
    }
    server = cursor % p->nservers;
    if (!p->servers[server].active) {
        /* It left the ring since the cursor was made: the next one's start. */
        if ((server = next_active(p, server)) == p->nservers) {
            client_reply(c, r, "*2\r\n$1\r\n0\r\n*0\r\n", 18);
            req_done(r);
            return;
        }
        cursor = server;
    }
    /* "SCAN <server cursor>" and the client's options, re-encoded. */
    len = (size_t)snprintf(buf, sizeof(buf), "%" PRIu64, cursor / p->nservers);
    client_append(c, &r->out, buf, (size_t)snprintf(buf, sizeof(buf),
                  "*%u\r\n$4\r\nSCAN\r\n$%zu\r\n%" PRIu64 "\r\n", a->argc, len,
                  cursor / p->nservers));
    for (uint32_t i = 2; i < a->argc; i++) {
        arg = args_get(a, i, &len);
        client_append(c, &r->out, buf, (size_t)snprintf(buf, sizeof(buf), "$%zu\r\n", len));
        client_append(c, &r->out, arg, len);
        client_append(c, &r->out, "\r\n", 2);
    }
    r->hook = scan_reply;
    route_send(c, r, NULL, pool_backend(p, (uint32_t)server, c));
}
