/* resp_write.c -- the RESP encoder: every value shardis writes itself.
 *
 * Replies the proxy makes (local commands, merged multi-key replies,
 * errors, pub/sub confirmations), commands it sends on its own (handshakes,
 * MIGRATE, SCAN, EVAL, subscriptions) and requests it rewrites are all
 * spelled here; nothing else in proxy/ writes "\r\n". Bytes forwarded as
 * they came are not encoded at all.
 *
 * The sink is a struct msg and a chunk, not a buffer of the encoder's own.
 * A growable buffer (inline storage, heap beyond) would be one more copy:
 * everything written ends in a msg anyway, as bytes of a chunk, and the
 * chunk is the client's (or migration's) lbuf, already allocated and
 * shared by every reply it makes; so the common reply costs no allocation
 * and one memcpy. The price: a writer cannot take back what it wrote (so
 * an error's length is known before it is written), and a caller that
 * needs contiguous bytes copies the msg out once (msg_copy).
 *
 * Every header line is resp_header's: printf costs more than the rest of
 * a split request. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "proxy/base/mbuf.h"
#include "proxy/base/resp.h"

/* Values of at most this many bytes are written with their header and
 * CRLF in one piece (one slice, and contiguous with the values around
 * them); longer ones are copied on across chunks. */
#define W_SHORT 512

void resp_w_raw(struct resp_w *w, const void *data, size_t len)
{
    msg_write(w->g, w->cur, data, len);
}

static void w_line(struct resp_w *w, char type, long long n)
{
    char hdr[RESP_HEADER_MAX];

    msg_write(w->g, w->cur, hdr, resp_header(hdr, type, n));
}

/* "<type><data>\r\n" or, for a bulk, "<type><len>\r\n<data>\r\n". */
static void w_value(struct resp_w *w, char type, bool bulk, const void *data, size_t len)
{
    char hdr[RESP_HEADER_MAX];
    size_t n = 1;

    if (bulk)
        n = resp_header(hdr, type, (long long)len);
    else
        hdr[0] = type;
    if (len <= W_SHORT) {
        char *at = msg_reserve(w->g, w->cur, n + len + 2);
        memcpy(at, hdr, n);
        memcpy(at + n, data, len);
        memcpy(at + n + len, "\r\n", 2);
        return;
    }
    msg_write(w->g, w->cur, hdr, n);
    msg_write(w->g, w->cur, data, len);
    msg_write(w->g, w->cur, "\r\n", 2);
}

/* ---- aggregates --------------------------------------------------------------- */

void resp_w_array(struct resp_w *w, long long n)
{
    w_line(w, '*', n);
}

void resp_w_map(struct resp_w *w, long long npairs)
{
    if (w->proto >= RESP3)
        w_line(w, '%', npairs);
    else
        w_line(w, '*', 2 * npairs);
}

void resp_w_set(struct resp_w *w, long long n)
{
    w_line(w, w->proto >= RESP3 ? '~' : '*', n);
}

void resp_w_push(struct resp_w *w, long long n)
{
    w_line(w, w->proto >= RESP3 ? '>' : '*', n);
}

void resp_w_null(struct resp_w *w)
{
    if (w->proto >= RESP3)
        resp_w_raw(w, "_\r\n", 3);
    else
        resp_w_raw(w, "$-1\r\n", 5);
}

void resp_w_null_array(struct resp_w *w)
{
    if (w->proto >= RESP3)
        resp_w_raw(w, "_\r\n", 3);
    else
        resp_w_raw(w, "*-1\r\n", 5);
}

/* ---- scalars ------------------------------------------------------------------ */

void resp_w_int(struct resp_w *w, long long v)
{
    w_line(w, ':', v);
}

void resp_w_bool(struct resp_w *w, bool v)
{
    if (w->proto >= RESP3)
        resp_w_raw(w, v ? "#t\r\n" : "#f\r\n", 4);
    else
        resp_w_raw(w, v ? ":1\r\n" : ":0\r\n", 4);
}

/* As redis-server: "%.17g", with inf, -inf and nan spelled out, since libcs
 * differ there. */
void resp_w_double(struct resp_w *w, double d)
{
    char buf[40];
    int n;

    if (isinf(d))
        n = snprintf(buf, sizeof(buf), "%s", d > 0 ? "inf" : "-inf");
    else if (isnan(d))
        n = snprintf(buf, sizeof(buf), "nan");
    else
        n = snprintf(buf, sizeof(buf), "%.17g", d);
    w_value(w, w->proto >= RESP3 ? ',' : '$', w->proto < RESP3, buf, (size_t)n);
}

void resp_w_simple(struct resp_w *w, const char *s)
{
    w_value(w, '+', false, s, strlen(s));
}

void resp_w_verror(struct resp_w *w, const char *fmt, va_list ap)
{
    char buf[RESP_W_ERROR_MAX + 1];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);

    if (n < 0)
        n = 0;
    if (n > RESP_W_ERROR_MAX) {
        n = RESP_W_ERROR_MAX;
        memcpy(buf + n - 3, "...", 3);
    }
    /* An error is one line: newlines in it would break the protocol. */
    for (int i = 0; i < n; i++)
        if (buf[i] == '\r' || buf[i] == '\n')
            buf[i] = ' ';
    w_value(w, '-', false, buf, (size_t)n);
}

void resp_w_error(struct resp_w *w, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    resp_w_verror(w, fmt, ap);
    va_end(ap);
}

/* ---- bulks -------------------------------------------------------------------- */

void resp_w_bulk(struct resp_w *w, const void *data, size_t len)
{
    w_value(w, '$', true, data, len);
}

void resp_w_bulk_str(struct resp_w *w, const char *s)
{
    w_value(w, '$', true, s, strlen(s));
}

void resp_w_bulk_ull(struct resp_w *w, unsigned long long v)
{
    char buf[24];
    size_t n = 0;

    do
        buf[sizeof(buf) - ++n] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    w_value(w, '$', true, buf + sizeof(buf) - n, n);
}

void resp_w_bulk_header(struct resp_w *w, size_t len)
{
    w_line(w, '$', (long long)len);
}

void resp_w_bulk_end(struct resp_w *w)
{
    resp_w_raw(w, "\r\n", 2);
}

void resp_w_verbatim_header(struct resp_w *w, const char *fmt, size_t len)
{
    if (w->proto < RESP3) {
        w_line(w, '$', (long long)len);
        return;
    }
    w_line(w, '=', (long long)len + 4);
    resp_w_raw(w, fmt, 3);
    resp_w_raw(w, ":", 1);
}

void resp_w_verbatim(struct resp_w *w, const char *fmt, const void *data, size_t len)
{
    if (w->proto < RESP3) {
        resp_w_bulk(w, data, len);
        return;
    }
    resp_w_verbatim_header(w, fmt, len);
    resp_w_raw(w, data, len);
    resp_w_bulk_end(w);
}

void resp_w_command(struct resp_w *w, int argc, const char *const *argv, const size_t *lens)
{
    resp_w_array(w, argc);
    for (int i = 0; i < argc; i++)
        resp_w_bulk(w, argv[i], lens != NULL ? lens[i] : strlen(argv[i]));
}
