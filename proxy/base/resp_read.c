/* resp_read.c -- the reply reader (see resp.h): one small state machine
 * that walks a complete reply, RESP2 or RESP3, where its bytes lie.
 *
 * The reply is a run of slices (or one flat buffer); the reader keeps the
 * slice holding its position and moves only forward, so a value costs its
 * type byte, a memchr for its line, and for a bulk a jump over its bytes
 * and a look at the CRLF after them. What it reads it checks: every
 * header number (redis-server's rules: no sign but a lone '-', no leading
 * zero), every CRLF, every announced length against the bytes there are,
 * and nesting against RESP_MAX_DEPTH, like the framer. Aggregates are
 * kept as a stack of elements still to read at each open level:
 *
 *   next: header -> counts as an element of the level on top
 *                -> an aggregate of n > 0 opens a level of n (2n: maps)
 *                -> levels with nothing left close
 *
 * An attribute opens a level without counting in its parent, and unless
 * asked for is read through at once: the value it annotates comes next. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "proxy/base/mbuf.h"
#include "proxy/base/resp.h"

/* The shortest value, "_\r\n", is 3 bytes: an aggregate announcing more
 * elements than a third of the bytes left cannot be whole. */
#define MIN_VALUE 3

static int fail(struct resp_rd *rd, const char *why)
{
    if (rd->err == NULL)
        rd->err = why;
    return -1;
}

static const struct slice *slice_at(const struct msg *g, uint32_t i)
{
    return i < 2 ? &g->inl[i] : &g->more[i - 2];
}

static void load(struct resp_rd *rd)
{
    const struct slice *s = slice_at(rd->g, rd->seg_i);
    rd->seg = s->m->data + s->off;
    rd->seg_len = s->len;
}

void resp_rd_init(struct resp_rd *rd, const struct msg *g)
{
    memset(rd, 0, offsetof(struct resp_rd, left));
    rd->err = NULL;
    rd->g = g;
    rd->len = g->len;
    if (g->n > 0)
        load(rd);
}

void resp_rd_init_flat(struct resp_rd *rd, const char *p, size_t len)
{
    memset(rd, 0, offsetof(struct resp_rd, left));
    rd->err = NULL;
    rd->flat = p;
    rd->len = len;
    rd->seg = p;
    rd->seg_len = len;
}

/* Make the current slice the one holding off (< rd->len, and not before
 * the current slice: the reader only moves forward). */
static void seek(struct resp_rd *rd, size_t off)
{
    while (off >= rd->seg_off + rd->seg_len) {
        rd->seg_off += rd->seg_len;
        rd->seg_i++;
        load(rd);               /* g->len is the slices' sum: there is one */
    }
}

static char byte_at(struct resp_rd *rd, size_t off)
{
    seek(rd, off);
    return rd->seg[off - rd->seg_off];
}

/* The line at rd->pos, up to its CRLF: into v's string, rd->pos past it. */
static int read_line(struct resp_rd *rd, struct resp_val *v)
{
    size_t at = rd->pos, nl, first_end;
    const char *first;
    char last = 0;

    if (at >= rd->len)
        return fail(rd, "truncated reply");
    seek(rd, at);
    first = rd->seg + (at - rd->seg_off);
    first_end = rd->seg_off + rd->seg_len;
    for (;;) {
        const char *p = rd->seg + (at - rd->seg_off);
        size_t n = rd->seg_len - (at - rd->seg_off);
        const char *q = memchr(p, '\n', n);
        if (q != NULL) {
            if (q > p)
                last = q[-1];
            nl = at + (size_t)(q - p);
            break;
        }
        last = p[n - 1];
        at += n;
        if (at >= rd->len)
            return fail(rd, "truncated reply");
        seek(rd, at);
    }
    if (nl == rd->pos || last != '\r')
        return fail(rd, "line without CRLF in reply");
    v->off = rd->pos;
    v->len = nl - 1 - rd->pos;
    v->p = nl - 1 <= first_end ? first : NULL;
    rd->pos = nl + 1;
    return 0;
}

/* The line's bytes, copied into buf (at most n - 1 of them, NUL-ended);
 * false if it is longer. */
static bool line_text(const struct resp_rd *rd, const struct resp_val *v, char *buf, size_t n)
{
    if (v->len >= n)
        return false;
    resp_rd_copy(rd, v, buf, v->len);
    buf[v->len] = '\0';
    return true;
}

/* Whether every byte of v's string from the skip-th on is one of ok. */
static bool only(const struct resp_rd *rd, const struct resp_val *v, size_t skip, const char *ok)
{
    char buf[64];

    for (size_t at = skip; at < v->len; ) {
        size_t n = v->len - at < sizeof(buf) ? v->len - at : sizeof(buf);
        const char *s = v->p != NULL ? v->p + at : buf;
        if (v->p == NULL)
            msg_copy(rd->g, v->off + at, n, buf);
        for (size_t i = 0; i < n; i++)
            if (s[i] == '\0' || strchr(ok, s[i]) == NULL)
                return false;
        at += n;
    }
    return true;
}

/* "[-]digits" as redis-server's string2ll reads it: no '+', no leading
 * zero, no "-0", within long long (max_digits caps lengths at 18). */
static bool parse_ll(const char *s, size_t len, int max_digits, long long *out)
{
    unsigned long long v = 0, lim;
    bool neg = len > 0 && s[0] == '-';
    size_t i = neg;

    if (i == len || (int)(len - i) > max_digits || (s[i] == '0' && (len - i > 1 || neg)))
        return false;
    lim = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (lim - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = neg ? (long long)(0 - v) : (long long)v;
    return true;
}

/* The common header, read in place: 1 to 18 digits (or "-1" where nil
 * is allowed) and CRLF, wholly in the current slice. 1 if it was (then
 * rd->pos is past it), 0 for anything else: read_count then reads it
 * the long way, and finds the error if there is one. This path is what
 * a merged MGET costs per value. */
static int fast_count(struct resp_rd *rd, struct resp_val *v, bool nil_ok)
{
    size_t at = rd->pos - rd->seg_off;
    const char *p = rd->seg + at, *end = rd->seg + rd->seg_len, *q = p;
    long long n = 0;

    if (rd->pos < rd->seg_off || at >= rd->seg_len)
        return 0;
    if (*q == '-') {
        if (!nil_ok || end - q < 4 || q[1] != '1' || q[2] != '\r' || q[3] != '\n')
            return 0;
        v->n = -1;
        v->nil = true;
        rd->pos += 4;
        return 1;
    }
    if (*q == '0' && end - q > 1 && q[1] != '\r')
        return 0;                       /* a leading zero */
    while (q < end && *q >= '0' && *q <= '9' && q - p < 18)
        n = n * 10 + (*q++ - '0');
    if (q == p || end - q < 2 || q[0] != '\r' || q[1] != '\n')
        return 0;
    v->n = n;
    rd->pos += (size_t)(q + 2 - p);
    return 1;
}

/* A header number: a length or a count, or -1 where nil is allowed. */
static int read_count(struct resp_rd *rd, struct resp_val *v, bool nil_ok)
{
    char buf[24];

    if (fast_count(rd, v, nil_ok))
        return 0;
    if (read_line(rd, v) < 0)
        return -1;
    if (!line_text(rd, v, buf, sizeof(buf)) || !parse_ll(buf, v->len, 18, &v->n) ||
        (v->n < 0 && !(nil_ok && v->n == -1)))
        return fail(rd, "bad length in reply");
    v->nil = v->n < 0;
    v->off = v->len = 0;
    v->p = NULL;
    return 0;
}

/* A bulk's bytes, their CRLF checked: "=" strings lose their "txt:". */
static int read_bulk(struct resp_rd *rd, struct resp_val *v, char type)
{
    size_t n = (size_t)v->n, at = rd->pos;

    if (n > rd->len - at || rd->len - at - n < 2)
        return fail(rd, "truncated reply");
    seek(rd, at);
    if (type == '$' && at + n + 2 <= rd->seg_off + rd->seg_len) {
        const char *p = rd->seg + (at - rd->seg_off);    /* all in this slice */
        if (p[n] != '\r' || p[n + 1] != '\n')
            return fail(rd, "bulk without CRLF in reply");
        v->off = at;
        v->len = n;
        v->p = p;
        rd->pos = at + n + 2;
        return 0;
    }
    v->off = at;
    v->len = n;
    v->p = at + n <= rd->seg_off + rd->seg_len ? rd->seg + (at - rd->seg_off) : NULL;
    if (type == '=') {
        if (n < 4 || byte_at(rd, at + 3) != ':')
            return fail(rd, "bad verbatim string in reply");
        v->off += 4;
        v->len -= 4;
        v->p = v->p != NULL ? v->p + 4 : NULL;
    }
    if (byte_at(rd, at + n) != '\r' || byte_at(rd, at + n + 1) != '\n')
        return fail(rd, "bulk without CRLF in reply");
    rd->pos = at + n + 2;
    return 0;
}

/* The header (or the whole, for a scalar) of the value at rd->pos. */
static int read_value(struct resp_rd *rd, struct resp_val *v)
{
    char buf[24];
    char c;

    memset(v, 0, sizeof(*v));
    if (rd->pos >= rd->len)
        return fail(rd, "truncated reply");
    v->start = rd->pos;
    c = byte_at(rd, rd->pos++);
    v->type = c;
    switch (c) {
    case '+':
    case '-':
        if (read_line(rd, v) < 0)
            return -1;
        break;
    case ':':
        if (read_line(rd, v) < 0)
            return -1;
        if (!line_text(rd, v, buf, sizeof(buf)) || !parse_ll(buf, v->len, 19, &v->n))
            return fail(rd, "bad integer in reply");
        break;
    case '_':
        if (read_line(rd, v) < 0)
            return -1;
        if (v->len != 0)
            return fail(rd, "bad null in reply");
        v->nil = true;
        v->n = -1;
        break;
    case '#':
        if (read_line(rd, v) < 0)
            return -1;
        if (!line_text(rd, v, buf, sizeof(buf)) || (strcmp(buf, "t") && strcmp(buf, "f")))
            return fail(rd, "bad boolean in reply");
        v->n = buf[0] == 't';
        break;
    case ',':
        if (read_line(rd, v) < 0)
            return -1;
        if (v->len == 0 || !only(rd, v, 0, "0123456789+-.eEinfa"))
            return fail(rd, "bad double in reply");
        break;
    case '(': {
        if (read_line(rd, v) < 0)
            return -1;
        size_t sign = resp_rd_is(rd, v, "-", 1, true);
        if (v->len == sign || !only(rd, v, sign, "0123456789"))
            return fail(rd, "bad big number in reply");
        break;
    }
    case '$':
    case '!':
    case '=':
        if (read_count(rd, v, c == '$') < 0)
            return -1;
        if (!v->nil && read_bulk(rd, v, c) < 0)
            return -1;
        break;
    case '*':
    case '~':
    case '>':
    case '%':
    case '|':
        if (read_count(rd, v, c == '*') < 0)
            return -1;
        if (v->nil)
            break;
        v->elems = (size_t)v->n * (c == '%' || c == '|' ? 2 : 1);
        if ((unsigned long long)v->elems > (rd->len - rd->pos) / MIN_VALUE)
            return fail(rd, "truncated reply");
        break;
    default:
        return fail(rd, "bad type byte in reply");
    }
    v->end = rd->pos;
    return 0;
}

/* An aggregate of v->elems > 0 elements opens a level. */
static int open_level(struct resp_rd *rd, const struct resp_val *v)
{
    if (v->elems == 0)
        return 0;
    if (rd->depth == RESP_MAX_DEPTH)
        return fail(rd, "reply nested too deep");
    rd->left[rd->depth++] = v->elems;
    return 0;
}

static void close_levels(struct resp_rd *rd)
{
    while (rd->depth > 0 && rd->left[rd->depth - 1] == 0)
        rd->depth--;
}

int resp_rd_next(struct resp_rd *rd, struct resp_val *v)
{
    if (rd->err != NULL)
        return -1;
    for (;;) {
        if (read_value(rd, v) < 0)
            return -1;
        if (v->type != RESP_ATTR)
            break;
        /* Metadata about the value that follows: not an element. */
        int depth = rd->depth;
        if (open_level(rd, v) < 0)
            return -1;
        if (rd->attrs)
            return 0;
        while (rd->depth > depth) {
            struct resp_val e;
            if (resp_rd_next(rd, &e) < 0)
                return -1;
        }
    }
    if (rd->depth > 0)
        rd->left[rd->depth - 1]--;
    if (open_level(rd, v) < 0)
        return -1;
    close_levels(rd);
    return 0;
}

int resp_rd_skip(struct resp_rd *rd, struct resp_val *v)
{
    int depth = rd->depth;
    struct resp_val e;

    if (resp_rd_next(rd, v) < 0)
        return -1;
    while (rd->depth > depth)
        if (resp_rd_next(rd, &e) < 0)
            return -1;
    v->end = rd->pos;
    return 0;
}

char resp_rd_peek(const struct resp_rd *rd)
{
    size_t off = rd->pos, seg_off = rd->seg_off;
    uint32_t i = rd->seg_i;

    if (rd->err != NULL || off >= rd->len)
        return 0;
    if (rd->flat != NULL)
        return rd->flat[off];
    for (;;) {
        const struct slice *s = slice_at(rd->g, i);
        if (off < seg_off + s->len)
            return s->m->data[s->off + (off - seg_off)];
        seg_off += s->len;
        i++;
    }
}

bool resp_rd_end(const struct resp_rd *rd)
{
    return rd->err == NULL && rd->depth == 0 && rd->pos == rd->len;
}

size_t resp_rd_copy(const struct resp_rd *rd, const struct resp_val *v, char *out, size_t max)
{
    size_t n = v->len < max ? v->len : max;

    if (v->p != NULL)
        memcpy(out, v->p, n);
    else if (rd->flat != NULL)
        memcpy(out, rd->flat + v->off, n);
    else
        msg_copy(rd->g, v->off, n, out);
    return n;
}

const char *resp_rd_str(const struct resp_rd *rd, const struct resp_val *v, char *buf,
                        size_t buflen)
{
    if (v->p != NULL)
        return v->p;
    if (v->len > buflen)
        return NULL;
    resp_rd_copy(rd, v, buf, v->len);
    return buf;
}

bool resp_rd_is(const struct resp_rd *rd, const struct resp_val *v, const char *s, size_t n,
                bool prefix)
{
    char buf[64];

    if (v->len < n || (!prefix && v->len != n))
        return false;
    if (v->p != NULL)
        return memcmp(v->p, s, n) == 0;
    for (size_t at = 0; at < n; ) {
        size_t k = n - at < sizeof(buf) ? n - at : sizeof(buf);
        if (rd->flat != NULL)
            memcpy(buf, rd->flat + v->off + at, k);
        else
            msg_copy(rd->g, v->off + at, k, buf);
        if (memcmp(buf, s + at, k) != 0)
            return false;
        at += k;
    }
    return true;
}

bool resp_rd_error_is(const struct msg *g, const char *code)
{
    struct resp_rd rd;
    struct resp_val v;
    size_t n = strlen(code);
    char next;

    resp_rd_init(&rd, g);
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_ERROR || !resp_rd_is(&rd, &v, code, n, true))
        return false;
    if (v.len == n)
        return true;
    if (v.p != NULL)
        next = v.p[n];
    else if (rd.flat != NULL)
        next = rd.flat[v.off + n];
    else
        msg_copy(rd.g, v.off + n, 1, &next);
    return next == ' ';
}

char resp_rd_head(const struct msg *g, char *text, size_t textlen)
{
    struct resp_rd rd;
    struct resp_val v;

    if (text != NULL && textlen > 0)
        text[0] = '\0';
    resp_rd_init(&rd, g);
    if (resp_rd_next(&rd, &v) < 0)
        return 0;
    if (text != NULL && textlen > 0) {
        if (strchr("*~>%|", v.type) != NULL || (v.type == '$' && v.nil))
            snprintf(text, textlen, "%lld", v.n);
        else
            text[resp_rd_copy(&rd, &v, text, textlen - 1)] = '\0';
    }
    return v.type;
}
