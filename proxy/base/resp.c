/* resp.c -- the request and reply framers (see resp.h).
 *
 * Request states:
 *
 *   START --'*'--> ALEN --\r\n--> BHDR --'$'--> BLEN --\r\n--> BDATA --> BCRLF
 *     |                            ^                                      |
 *     |                            +------------- more args --------------+
 *     +--other--> INLINE (to '\n', then split)
 *
 * Numbers are parsed as they arrive; a header line is "digits\r\n", and
 * anything else in it is the matching "invalid ... length" error. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/base/resp.h"
#include "proxy/base/util.h"

enum {
    RQ_START, RQ_ALEN, RQ_BHDR, RQ_BLEN, RQ_BDATA, RQ_BCRLF, RQ_INLINE
};

/* ---- numbers in header lines ------------------------------------------- */

enum { NUM_MORE, NUM_DONE, NUM_BAD };

/* Consume one byte of "[-]digits\r\n". Like redis-server's string2ll,
 * refuse a leading zero ("01", "-0"): only "0" itself is written so. */
static int num_byte(long long *num, bool *neg, int *digits, bool *cr, char c)
{
    if (*cr) {
        if (c != '\n')
            return NUM_BAD;
        return *digits > 0 ? NUM_DONE : NUM_BAD;
    }
    if (c == '\r') {
        *cr = true;
        return NUM_MORE;
    }
    if (c == '-' && *digits == 0 && !*neg) {
        *neg = true;
        return NUM_MORE;
    }
    if (c < '0' || c > '9' || *digits >= 18)
        return NUM_BAD;
    if ((*digits == 1 && *num == 0) || (*digits == 0 && *neg && c == '0'))
        return NUM_BAD;
    *num = *num * 10 + (c - '0');
    (*digits)++;
    return NUM_MORE;
}

/* ---- requests ------------------------------------------------------------ */

void resp_req_reset(struct resp_req *s)
{
    s->state = RQ_START;
    s->num = 0;
    s->neg = false;
    s->cr = false;
    s->digits = 0;
    s->left = 0;
    s->argc = 0;
    s->nargs = 0;
    s->is_inline = false;
    s->inllen = 0;
}

bool resp_req_idle(const struct resp_req *s)
{
    return s->state == RQ_START;
}

void resp_req_free(struct resp_req *s)
{
    if (s->argv != s->argv_inl)
        free(s->argv);
    if (s->inl != NULL)
        free(s->inl);
    s->argv = s->argv_inl;
    s->inl = NULL;
    s->argcap = ARRAY_SIZE(s->argv_inl);
    s->inlcap = 0;
    resp_req_reset(s);
}

/* The text of the last error. A connection reports its error before it
 * frames anything else, so one buffer per thread (per loop) serves every
 * framer of that loop and no connection carries one. */
static _Thread_local char err_buf[96];

const char *resp_error(void)
{
    return err_buf;
}

static int req_error(const char *what)
{
    snprintf(err_buf, sizeof(err_buf), "Protocol error: %s", what);
    return -1;
}

static void add_arg(struct resp_req *s, uint64_t off, uint32_t len)
{
    if (s->argv == NULL) {
        s->argv = s->argv_inl;
        s->argcap = ARRAY_SIZE(s->argv_inl);
    }
    if (s->nargs == s->argcap) {
        /* Double with what has arrived, never size from the announced
         * count: "*2147483647" alone must not cost 32 GB. The count only
         * caps the last step (argcap stays <= RESP_MAX_ARGS, so the
         * doubling never wraps). */
        uint32_t cap = s->argcap * 2;
        if (cap > s->argc && s->argc > s->nargs && !s->is_inline)
            cap = s->argc;      /* the array said how many */
        if (s->argv == s->argv_inl) {
            s->argv = xmalloc(cap * sizeof(*s->argv));
            memcpy(s->argv, s->argv_inl, sizeof(s->argv_inl));
        } else {
            s->argv = xrealloc(s->argv, cap * sizeof(*s->argv));
        }
        s->argcap = cap;
    }
    s->argv[s->nargs++] = (struct resp_arg){off, len};
}

static int hexdigit(int c)
{
    return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

/* Split the inline line in s->inl[0..len) into arguments the way
 * redis-server's sdssplitargs does, unquoting into the space after the
 * line. Returns 0, or -1 for unbalanced quotes. */
static int split_inline(struct resp_req *s, size_t len)
{
    size_t i = 0;

    /* Unquoted args can only be shorter than the line: room for both. */
    if (s->inlcap < 2 * len + 1) {
        s->inlcap = (uint32_t)(2 * len + 1);
        s->inl = xrealloc(s->inl, s->inlcap);
    }
    char *line = s->inl, *out = s->inl + len;
    size_t base = len, olen = 0;

    len = strnlen(line, len);   /* redis-server splits a C string */

    for (;;) {
        while (i < len && isspace((unsigned char)line[i]))
            i++;
        if (i == len)
            return 0;
        size_t begin = olen;
        int inq = 0, insq = 0, done = 0;
        while (!done) {
            char c = i < len ? line[i] : '\0';
            if (inq) {
                if (i >= len)
                    return -1;
                if (c == '\\' && i + 3 < len && line[i + 1] == 'x' &&
                    isxdigit((unsigned char)line[i + 2]) && isxdigit((unsigned char)line[i + 3])) {
                    out[olen++] = (char)(hexdigit(line[i + 2]) * 16 + hexdigit(line[i + 3]));
                    i += 3;
                } else if (c == '\\' && i + 1 < len) {
                    char e = line[++i];
                    out[olen++] = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t'
                                : e == 'b' ? '\b' : e == 'a' ? '\a' : e;
                } else if (c == '"') {
                    if (i + 1 < len && !isspace((unsigned char)line[i + 1]))
                        return -1;      /* closing quote must end the arg */
                    done = 1;
                } else {
                    out[olen++] = c;
                }
            } else if (insq) {
                if (i >= len)
                    return -1;
                if (c == '\\' && i + 1 < len && line[i + 1] == '\'') {
                    out[olen++] = '\'';
                    i++;
                } else if (c == '\'') {
                    if (i + 1 < len && !isspace((unsigned char)line[i + 1]))
                        return -1;
                    done = 1;
                } else {
                    out[olen++] = c;
                }
            } else if (i >= len || c == ' ' || c == '\n' || c == '\r' || c == '\t') {
                done = 1;
            } else if (c == '"') {
                inq = 1;
            } else if (c == '\'') {
                insq = 1;
            } else {
                out[olen++] = c;
            }
            if (i < len)
                i++;
        }
        add_arg(s, base + begin, (uint32_t)(olen - begin));
    }
}

/* The inline line is complete (without its '\n'). */
static int req_inline_done(struct resp_req *s)
{
    size_t len = s->inllen;

    if (len > 0 && s->inl[len - 1] == '\r')
        len--;
    s->nargs = 0;
    if (split_inline(s, len) < 0)
        return req_error("unbalanced quotes in request");
    s->argc = s->nargs;
    return 0;
}

static void req_num_start(struct resp_req *s)
{
    s->num = 0;
    s->neg = false;
    s->cr = false;
    s->digits = 0;
}

/* Over 100 lines, on purpose: this is the state machine of the header
 * comment, one case per state, and every byte a client sends passes
 * through it. Its states share the loop and its position i (a bulk's
 * bytes are skipped whole, a header's taken byte by byte); split into a
 * function per state, each header byte would pay a call and i would go
 * through memory, on the hottest path of the proxy. Read it state by
 * state. */
int resp_req_feed(struct resp_req *s, const char *p, size_t n, uint64_t off, size_t *used)
{
    size_t i = 0;

    while (i < n) {
        char c = p[i];
        switch (s->state) {
        case RQ_START:
            s->start = off + i;
            if (c == '*') {
                s->state = RQ_ALEN;
                req_num_start(s);
                i++;
            } else {
                s->state = RQ_INLINE;
                s->is_inline = true;
                s->inllen = 0;
            }
            break;

        case RQ_ALEN:
        case RQ_BLEN:
            switch (num_byte(&s->num, &s->neg, &s->digits, &s->cr, c)) {
            case NUM_BAD:
                return req_error(s->state == RQ_ALEN ? "invalid multibulk length"
                                                        : "invalid bulk length");
            case NUM_MORE:
                i++;
                break;
            default:
                i++;
                if (s->state == RQ_ALEN) {
                    if (s->neg || s->num == 0) {         /* *0 / *-1: nothing */
                        s->state = RQ_START;
                        break;
                    }
                    if (s->num > RESP_MAX_ARGS)
                        return req_error("invalid multibulk length");
                    if (s->preauth && s->num > RESP_PREAUTH_ARGS)
                        return req_error("unauthenticated multibulk length");
                    s->argc = (uint32_t)s->num;
                    s->nargs = 0;
                    s->state = RQ_BHDR;
                } else {
                    if (s->neg || s->num > RESP_MAX_BULK)
                        return req_error("invalid bulk length");
                    if (s->preauth && s->num > RESP_PREAUTH_BULK)
                        return req_error("unauthenticated bulk length");
                    add_arg(s, off + i, (uint32_t)s->num);
                    s->left = s->num;
                    s->state = RQ_BDATA;
                }
            }
            break;

        case RQ_BHDR:
            if (c != '$') {
                snprintf(err_buf, sizeof(err_buf), "Protocol error: expected '$', got '%c'", c);
                            return -1;
            }
            s->state = RQ_BLEN;
            req_num_start(s);
            i++;
            break;

        case RQ_BDATA: {
            size_t take = n - i < (size_t)s->left ? n - i : (size_t)s->left;
            i += take;
            s->left -= (long long)take;
            if (s->left == 0) {
                s->state = RQ_BCRLF;
                s->left = 2;
            }
            break;
        }

        case RQ_BCRLF:
            /* redis-server skips the two bytes after a bulk unchecked. */
            i++;
            if (--s->left == 0) {
                if (s->nargs == s->argc) {
                    *used = i;
                    s->end = off + i;
                    return 1;
                }
                s->state = RQ_BHDR;
            }
            break;

        case RQ_INLINE: {
            const char *nl = memchr(p + i, '\n', n - i);
            size_t take = nl != NULL ? (size_t)(nl - (p + i)) : n - i;
            if (s->inllen + take > RESP_MAX_INLINE)
                return req_error("too big inline request");
            if (s->inlcap < s->inllen + take + 1) {
                s->inlcap = (uint32_t)(s->inllen + take + 1 > 64 ? s->inllen + take + 1 : 64);
                s->inl = xrealloc(s->inl, s->inlcap);
            }
            memcpy(s->inl + s->inllen, p + i, take);
            s->inllen += (uint32_t)take;
            i += take;
            if (nl == NULL)
                break;
            i++;                            /* the '\n' */
            if (req_inline_done(s) < 0)
                return -1;
            if (s->argc == 0) {             /* empty line: skipped */
                s->state = RQ_START;
                s->is_inline = false;
                break;
            }
            *used = i;
            s->end = off + i;
            return 1;
        }
        }
    }
    *used = n;
    return 0;
}

/* ---- replies ------------------------------------------------------------- */

/* RS_BULK reads a bulk's bytes, RS_BULK_CR and RS_BULK_LF the CRLF that
 * must follow them; RS_LINE a line up to its LF (s->cr: the byte before
 * it, when that was in an earlier feed, was a CR). */
enum { RS_TYPE, RS_LINE, RS_NUM, RS_BULK, RS_BULK_CR, RS_BULK_LF };

void resp_rsp_init(struct resp_rsp *s, bool resp3)
{
    s->resp3 = resp3;
    resp_rsp_reset(s);
}

void resp_rsp_reset(struct resp_rsp *s)
{
    s->state = RS_TYPE;
    s->depth = 0;
    s->attr = 0;
    s->type = 0;
    s->left = 0;
}

static int rsp_error(const char *what, char c)
{
    snprintf(err_buf, sizeof(err_buf), "%s (byte 0x%02x)", what, (unsigned char)c);
    return -1;
}

/* One value ended: pop finished aggregates. 1 if the whole reply is done.
 * An attribute that ends does not count as an element of its parent, nor
 * as the reply: the value it goes with follows. */
static int rsp_value_done(struct resp_rsp *s)
{
    while (s->depth > 0) {
        if (--s->stack[s->depth - 1] > 0)
            break;
        s->depth--;
        if (s->attr & (1ull << s->depth)) {
            s->attr &= ~(1ull << s->depth);
            s->state = RS_TYPE;
            return 0;
        }
    }
    s->state = RS_TYPE;
    return s->depth == 0;
}

/* An aggregate header "<hdr>n" was read: open it, or (null or empty) it is
 * a whole value. */
static int rsp_open(struct resp_rsp *s)
{
    bool attr = s->hdr == '|';

    if (s->neg || s->num == 0) {
        if (!attr)
            return rsp_value_done(s);
        s->state = RS_TYPE;             /* an empty attribute: nothing to go with */
        return 0;
    }
    /* The last element of its parent (not an attribute) ends with it, so
     * it takes the parent's level rather than one of its own: a reply
     * nested one element a level (a script returning a table that holds
     * itself, which redis-server nests some 8,000 deep until its Lua stack
     * is full) takes one level, however deep. */
    if (s->depth > 0 && s->stack[s->depth - 1] == 1 && !(s->attr & (1ull << (s->depth - 1))))
        s->depth--;
    if (attr)
        s->attr |= 1ull << s->depth;
    /* Maps and attributes hold n pairs (n < 10^18: 2n fits). */
    s->stack[s->depth++] = s->hdr == '%' || attr ? 2 * s->num : s->num;
    s->state = RS_TYPE;
    return 0;
}

/* What each type byte starts: a line, a bulk (length header, bytes, CRLF)
 * or an aggregate (count header); RK_RESP3 if only RESP3 has it. */
enum { RK_LINE = 1, RK_BULK = 2, RK_AGGREGATE = 4, RK_RESP3 = 8 };
static const unsigned char rsp_kinds[256] = {
    ['+'] = RK_LINE, ['-'] = RK_LINE, [':'] = RK_LINE,
    ['$'] = RK_BULK, ['*'] = RK_AGGREGATE,
    ['_'] = RK_LINE | RK_RESP3, [','] = RK_LINE | RK_RESP3,         /* null, double */
    ['#'] = RK_LINE | RK_RESP3, ['('] = RK_LINE | RK_RESP3,         /* boolean, big number */
    ['!'] = RK_BULK | RK_RESP3, ['='] = RK_BULK | RK_RESP3,         /* blob error, verbatim */
    ['%'] = RK_AGGREGATE | RK_RESP3, ['~'] = RK_AGGREGATE | RK_RESP3,   /* map, set */
    ['>'] = RK_AGGREGATE | RK_RESP3, ['|'] = RK_AGGREGATE | RK_RESP3,   /* push, attribute */
};

/* Over 100 lines, on purpose, as resp_req_feed: one state machine over
 * every byte a server replies, a case per state sharing the loop and its
 * locals; a call per state and byte would cost the hot path. */
int resp_rsp_feed(struct resp_rsp *s, const char *p, size_t n, size_t *used)
{
    size_t i = 0;
    unsigned kind;

    while (i < n) {
        char c = p[i];
        switch (s->state) {
        case RS_TYPE:
            if (s->depth == 0 && s->type == 0 && c != '|')
                s->type = c;    /* the reply's own: not an element that took its level */
            i++;
            kind = rsp_kinds[(unsigned char)c];
            if (kind == 0)
                return rsp_error("bad reply type", c);
            if ((kind & RK_RESP3) && !s->resp3)
                return rsp_error("a RESP3 type on a RESP2 connection", c);
            if ((kind & RK_LINE)) {
                s->state = RS_LINE;
                s->cr = false;
                break;
            }
            if ((kind & RK_AGGREGATE) && s->depth == RESP_MAX_DEPTH)
                return rsp_error("reply nested too deep", c);
            s->state = RS_NUM;          /* a header: a length or a count */
            s->hdr = c;
            s->num = 0;
            s->neg = false;
            s->cr = false;
            s->digits = 0;
            break;

        case RS_LINE: {
            const char *nl = memchr(p + i, '\n', n - i);
            if (nl == NULL) {
                s->cr = p[n - 1] == '\r';
                i = n;
                break;
            }
            if (nl > p + i ? nl[-1] != '\r' : !s->cr)
                return rsp_error("line without CRLF in reply", '\n');
            i = (size_t)(nl - p) + 1;
            if (rsp_value_done(s)) {
                *used = i;
                return 1;
            }
            break;
        }

        case RS_NUM:
            switch (num_byte(&s->num, &s->neg, &s->digits, &s->cr, c)) {
            case NUM_BAD:
                return rsp_error("bad length in reply", c);
            case NUM_MORE:
                i++;
                break;
            default:
                i++;
                if (rsp_kinds[(unsigned char)s->hdr] & RK_BULK) {
                    if (s->neg) {               /* $-1: null */
                        if (rsp_value_done(s)) {
                            *used = i;
                            return 1;
                        }
                        break;
                    }
                    s->left = s->num;
                    s->state = s->left > 0 ? RS_BULK : RS_BULK_CR;
                } else if (rsp_open(s)) {
                    *used = i;
                    return 1;
                }
            }
            break;

        case RS_BULK: {
            size_t take = n - i < (size_t)s->left ? n - i : (size_t)s->left;
            i += take;
            s->left -= (long long)take;
            if (s->left > 0)
                break;
            s->state = RS_BULK_CR;
            /* Most bulks end where they were read: their CRLF at once. */
            if (n - i >= 2 && p[i] == '\r' && p[i + 1] == '\n') {
                i += 2;
                if (rsp_value_done(s)) {
                    *used = i;
                    return 1;
                }
            }
            break;
        }

        case RS_BULK_CR:
            if (c != '\r')
                return rsp_error("bulk not followed by CRLF in reply", c);
            i++;
            s->state = RS_BULK_LF;
            break;

        case RS_BULK_LF:
            if (c != '\n')
                return rsp_error("bulk not followed by CRLF in reply", c);
            i++;
            if (rsp_value_done(s)) {
                *used = i;
                return 1;
            }
            break;
        }
    }
    *used = n;
    return 0;
}

/* ---- header lines ---------------------------------------------------------- */

size_t resp_header(char *out, char type, long long n)
{
    unsigned long long v = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
    size_t len = 1, digits = 1;

    out[0] = type;
    if (n < 0)
        out[len++] = '-';
    for (unsigned long long t = v; t >= 10; t /= 10)
        digits++;
    for (size_t i = len + digits; i-- > len; v /= 10)
        out[i] = (char)('0' + v % 10);
    len += digits;
    out[len++] = '\r';
    out[len++] = '\n';
    return len;
}
