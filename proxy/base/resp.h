/* resp.h -- incremental RESP framers for requests and replies.
 *
 * Both are small state machines fed bytes in whatever pieces the socket
 * delivered; they record where things are (stream offsets) and copy
 * nothing, so the caller can forward the very bytes it read.
 *
 * This departs from design.md's "hiredis reader" on purpose: hiredis's
 * reader copies every byte into its own buffer, and only reports a bulk
 * once all of it has arrived, so a client announcing a 4 GB bulk would be
 * buffered before it could be refused. Here every length is checked when
 * its header is read, with redis-server's own error texts.
 *
 * Requests: arrays of bulk strings (`*N\r\n$L\r\n...`) or inline commands
 * (`SET a b\r\n`, split with redis-server's quoting rules). Limits as
 * redis-server 7.0: at most INT_MAX elements, bulks of at most 512 MB,
 * inline lines of at most 64 KiB. Empty arrays and empty inline lines are
 * skipped, as redis-server does. The announced element count costs
 * nothing by itself: argv grows only as elements arrive.
 *
 * Replies: any RESP2 value (any RESP3 one where the connection said HELLO 3),
 * nested aggregates included (depth <= 64, not counting
 * levels whose last element is the next level).
 *
 * And the encoder: every RESP value shardis writes itself (as opposed to
 * the bytes it forwards) goes through resp_w_* (resp_write.c), which
 * knows the protocol version of whoever reads it. */
#ifndef SHARDIS_RESP_H
#define SHARDIS_RESP_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct msg;
struct mbuf;

#define RESP_MAX_ARGS       INT_MAX
#define RESP_MAX_BULK       (512LL * 1024 * 1024)
/* Before AUTH, as redis-server 7: a client may not announce more, so a
 * connection that has not signed in costs a few KiB at most. */
#define RESP_PREAUTH_ARGS   10
#define RESP_PREAUTH_BULK   16384
#define RESP_MAX_INLINE     (64 * 1024)
#define RESP_MAX_DEPTH      64

/* Where an argument's bytes are: a stream offset for array requests, an
 * offset into resp_req.inl for inline ones. */
struct resp_arg {
    uint64_t off;
    uint32_t len;
};

/* Every client holds one: fields are ordered to leave no padding. */
struct resp_req {
    int       state;
    uint32_t  argcap;
    long long num;          /* header number being parsed */
    bool      neg;
    bool      cr;           /* header: '\r' seen */
    bool      is_inline;
    bool      preauth;      /* set by the caller before each feed: the client has
                               not signed in, so requests are held to
                               RESP_PREAUTH_ARGS and RESP_PREAUTH_BULK */
    int       digits;
    long long left;         /* bulk bytes (or CRLF bytes) still to skip */
    uint64_t  start;        /* stream offset of the request's first byte */
    uint64_t  end;          /* ... and one past its last, once complete */
    uint32_t  argc;         /* arguments announced */
    uint32_t  nargs;        /* arguments complete */
    struct resp_arg *argv;  /* [argcap]: argv_inl, or owned heap */
    struct resp_arg argv_inl[4];  /* most requests: no allocation */
    char     *inl;          /* inline: the line, then its unquoted args */
    uint32_t  inllen, inlcap;     /* at most 2 * RESP_MAX_INLINE + 1 */
};

/* Why the last feed of any framer (of this thread) returned -1:
 * "Protocol error: ..." for requests. Valid until the next error; a
 * connection reports its error before it frames anything else, so none
 * needs to carry one. */
const char *resp_error(void);

/* Feed n bytes at stream offset off. Returns 1 when a request completed
 * after *used bytes (its arguments are in argv[0..argc-1], its bytes span
 * [start, off + *used)); 0 when all n bytes were used and more are needed;
 * -1 on a protocol error (resp_error says which; the connection must close).
 * After 1, call resp_req_reset before feeding the rest. */
int resp_req_feed(struct resp_req *s, const char *p, size_t n, uint64_t off, size_t *used);
void resp_req_reset(struct resp_req *s);
/* True between requests (no partial request buffered). */
bool resp_req_idle(const struct resp_req *s);
/* Free what the framer holds; it stays usable. */
void resp_req_free(struct resp_req *s);

/* The reply framer: finds where each reply a server sends ends, RESP2 or
 * RESP3, nested, without copying. An attribute ("|") goes with the value
 * after it, and is not counted as an element of the aggregate it sits in;
 * a push (">") is a frame of its own, its type in .type.
 *
 * It is as strict as the connection's protocol: on one that did not say
 * HELLO 3 a RESP3 type byte is a protocol error, never a reply (forwarded
 * to a RESP2 client it would be a type its library does not have), and
 * every line and bulk must end in CRLF. A server does not send otherwise;
 * a network or a relay that mangles a reply does, and then the connection
 * fails (its requests get errors) rather than a client reading garbage. */
struct resp_rsp {
    int       state;
    bool      resp3;        /* RESP3's types are allowed (the connection said HELLO 3) */
    long long num;
    bool      neg;
    bool      cr;
    char      hdr;          /* the type byte of the header being read */
    int       digits;
    long long left;         /* bulk bytes plus CRLF still to skip */
    int       depth;
    uint64_t  attr;         /* bit d: the aggregate at depth d is an attribute */
    long long stack[RESP_MAX_DEPTH];  /* elements left at each level */
    char      type;                   /* type byte of the top-level reply (not '|') */
};

/* Start framing a connection's replies, in RESP3 (resp3) or RESP2 only. */
void resp_rsp_init(struct resp_rsp *s, bool resp3);
/* Feed n bytes. Returns 1 when a whole reply ended after *used bytes, 0
 * when all were used, -1 on a protocol error. After 1, resp_rsp_reset
 * (which keeps the protocol). */
int resp_rsp_feed(struct resp_rsp *s, const char *p, size_t n, size_t *used);
void resp_rsp_reset(struct resp_rsp *s);

/* ---- The reply reader ----------------------------------------------------------
 *
 * Every reply the proxy interprets (SCAN, INFO, MIGRATE, the idgen
 * script, PUBSUB, the merges of split commands ...) is read with this one
 * reader, over the bytes the framer above cut out: a struct msg (mbuf.h),
 * slices of chunks that a long reply spans, read where they lie and never
 * first copied flat. A pull API: each resp_rd_next gives the next value in
 * reading order (an aggregate, then its elements), resp_rd_skip a whole
 * value. Strict: a malformed or truncated value is an error (sticky, with
 * its text in rd->err), never a read past the end.
 *
 * Types: all of RESP2 and RESP3. Attributes ('|') are skipped, unless
 * rd->attrs asks for them: then they come as a value of type '|' whose 2n
 * elements follow, and do not count as an element of what holds them.
 * RESP3's streamed strings and aggregates ("$?", "*?") are refused: Redis
 * does not send them. */
struct msg;

enum resp_type {
    RESP_SIMPLE   = '+',    /* simple string */
    RESP_ERROR    = '-',    /* simple error: its text without the '-' */
    RESP_INTEGER  = ':',
    RESP_BULK     = '$',
    RESP_ARRAY    = '*',
    RESP_NULL     = '_',    /* RESP3 */
    RESP_DOUBLE   = ',',    /* its text ("1.5", "inf", "nan") */
    RESP_BOOLEAN  = '#',    /* n is 1 or 0 */
    RESP_BIGNUM   = '(',    /* its digits */
    RESP_BLOBERR  = '!',    /* bulk error */
    RESP_VERBATIM = '=',    /* its text, after the "txt:" format */
    RESP_MAP      = '%',    /* n pairs: 2n elements */
    RESP_SET      = '~',
    RESP_PUSH     = '>',
    RESP_ATTR     = '|',    /* n pairs, only with rd->attrs */
};

/* One value, as resp_rd_next read it. Offsets are into the reply. */
struct resp_val {
    char      type;         /* an enum resp_type */
    bool      nil;          /* "$-1", "*-1" or '_' */
    long long n;            /* integer, boolean, a bulk's length or an
                               aggregate's announced count (-1: nil) */
    size_t    elems;        /* values that follow as its elements */
    size_t    off, len;     /* a string's bytes (any type but aggregates) */
    const char *p;          /* ... where they lie, if in one slice; else NULL */
    size_t    start;        /* offset of its type byte */
    size_t    end;          /* one past its last byte (an aggregate's
                               header only, unless it was skipped whole) */
};

struct resp_rd {
    const struct msg *g;    /* the reply (NULL: the flat bytes below) */
    const char *flat;
    size_t    len;          /* bytes in the reply */
    size_t    pos;          /* offset of the next byte to read */
    const char *seg;        /* the slice holding pos ... */
    size_t    seg_off;      /* ... its offset in the reply, */
    size_t    seg_len;      /* ... its length, */
    uint32_t  seg_i;        /* ... and its index in g */
    bool      attrs;        /* report attributes (else skip them) */
    int       depth;        /* aggregates open */
    size_t    left[RESP_MAX_DEPTH];   /* elements still to read in each */
    const char *err;        /* why reading stopped (sticky), or NULL */
};

/* Read the reply g (or the len bytes at p), which must stay unchanged
 * while rd is in use. */
void resp_rd_init(struct resp_rd *rd, const struct msg *g);
void resp_rd_init_flat(struct resp_rd *rd, const char *p, size_t len);
/* The next value into *v: 0, or -1 if it is malformed or truncated (then
 * and ever after; rd->err says why). */
int resp_rd_next(struct resp_rd *rd, struct resp_val *v);
/* The next value whole, elements and all: *v its header, v->end past it. */
int resp_rd_skip(struct resp_rd *rd, struct resp_val *v);
/* The type byte of the next value without reading it (0 at the end). */
char resp_rd_peek(const struct resp_rd *rd);
/* True once every byte is read and no aggregate is open. */
bool resp_rd_end(const struct resp_rd *rd);
/* Copy at most max bytes of v's string into out; returns how many. */
size_t resp_rd_copy(const struct resp_rd *rd, const struct resp_val *v, char *out, size_t max);
/* v's string as one run of bytes: v->p, else a copy in buf if it fits
 * there (buflen bytes), else NULL. Valid while the reply and buf are. */
const char *resp_rd_str(const struct resp_rd *rd, const struct resp_val *v, char *buf,
                        size_t buflen);
/* Whether v's string is the n bytes s (or, prefix, begins with them). */
bool resp_rd_is(const struct resp_rd *rd, const struct resp_val *v, const char *s, size_t n,
                bool prefix);
/* The first value of g, for a decision: its type (0 if g is empty or its
 * first value malformed) and, when text is given, its string (a scalar's;
 * an aggregate's or nil's count in decimal), NUL-terminated and cut to
 * textlen - 1 bytes. */
char resp_rd_head(const struct msg *g, char *text, size_t textlen);
/* Whether g is an error reply whose code (its first word) is code, as
 * "-UNBLOCKED client unblocked via CLIENT UNBLOCK" has "UNBLOCKED". */
bool resp_rd_error_is(const struct msg *g, const char *code);

/* Write the header line "<type><n>\r\n" ('*' 3, '$' 5, ':' -1 ...) at out,
 * which holds RESP_HEADER_MAX bytes; returns its length. Every header
 * shardis writes goes through here: printf's machinery cost more than the
 * rest of a split request. */
#define RESP_HEADER_MAX 24
size_t resp_header(char *out, char type, long long n);

/* ---- The encoder ------------------------------------------------------------
 *
 * A writer appends RESP values to a struct msg, copying them into the chunk
 * *cur (a client's lbuf, a migration's buf ...; the caller holds the
 * reference, as with msg_write). It carries the protocol of its reader, so
 * that a RESP3 client (HELLO 3) gets maps, sets, pushes, nulls, doubles and
 * booleans as such and a RESP2 one their RESP2 spelling, with the same call:
 *
 *     call                  RESP2                  RESP3
 *     resp_w_map(w, n)      *<2n>                  %<n>
 *     resp_w_set(w, n)      *<n>                   ~<n>
 *     resp_w_push(w, n)     *<n>                   ><n>
 *     resp_w_null(w)        $-1                    _
 *     resp_w_null_array(w)  *-1                    _
 *     resp_w_double(w, d)   $<len> <%.17g>         ,<%.17g>
 *     resp_w_bool(w, b)     :1 / :0                #t / #f
 *     resp_w_verbatim(...)  $<len> <text>          =<len+4> txt:<text>
 *
 * Commands sent to backends are arrays of bulks in both; a RESP3 client's
 * go over backend connections that said HELLO 3 (pool.h).
 *
 * Writing never fails (chunks come from the aborting allocator) and never
 * allocates per value: a value is copied into the current chunk, a short
 * one in one piece so that a run of short values is one iovec when
 * written. A value that does not fit the rest of the chunk goes on in the
 * next one (a msg may span chunks), so a 1 MB bulk is ~75 chunk-sized
 * copies, not a 1 MB buffer. Zero-copy callers write a bulk's header with
 * resp_w_bulk_header, append the payload (and its CRLF) as slices of their
 * own chunks, or resp_w_bulk_end after payload slices without one. */

enum resp_proto { RESP2 = 2, RESP3 = 3 };

struct resp_w {
    struct msg   *g;        /* appended to */
    struct mbuf **cur;      /* the chunk written into (caller's reference) */
    int           proto;    /* RESP2 or RESP3: the reader's */
};

static inline struct resp_w resp_w_on(struct msg *g, struct mbuf **cur, int proto)
{
    return (struct resp_w){.g = g, .cur = cur, .proto = proto};
}

/* Aggregates: n elements follow (n pairs for a map). */
void resp_w_array(struct resp_w *w, long long n);
void resp_w_map(struct resp_w *w, long long npairs);
void resp_w_set(struct resp_w *w, long long n);
void resp_w_push(struct resp_w *w, long long n);
void resp_w_null(struct resp_w *w);             /* a nil value */
void resp_w_null_array(struct resp_w *w);       /* a nil aggregate */

void resp_w_int(struct resp_w *w, long long v);
void resp_w_bool(struct resp_w *w, bool v);
void resp_w_double(struct resp_w *w, double d);
/* "+<s>": s must hold no CR or LF. */
void resp_w_simple(struct resp_w *w, const char *s);
/* "-<text>": printf-style, one line (CR and LF become spaces), at most
 * RESP_W_ERROR_MAX bytes; a longer text is cut and ends in "..." so that
 * the cut shows. */
#define RESP_W_ERROR_MAX 1024
void resp_w_error(struct resp_w *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void resp_w_verror(struct resp_w *w, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

void resp_w_bulk(struct resp_w *w, const void *data, size_t len);
void resp_w_bulk_str(struct resp_w *w, const char *s);
/* A bulk of the decimal digits of v (cursors, ports, timestamps). */
void resp_w_bulk_ull(struct resp_w *w, unsigned long long v);
/* A bulk in pieces: its header "$<len>\r\n", then the caller's len bytes
 * (resp_w_raw, or slices appended to w->g), then resp_w_bulk_end. */
void resp_w_bulk_header(struct resp_w *w, size_t len);
void resp_w_bulk_end(struct resp_w *w);
/* A verbatim string of format fmt ("txt", "mkd": three bytes); and its
 * header only, for one written in pieces (then resp_w_bulk_end). */
void resp_w_verbatim(struct resp_w *w, const char *fmt, const void *data, size_t len);
void resp_w_verbatim_header(struct resp_w *w, const char *fmt, size_t len);

/* The command argv[0..argc) (lens NULL: C strings) as an array of bulks. */
void resp_w_command(struct resp_w *w, int argc, const char *const *argv, const size_t *lens);

/* Bytes that are already RESP, or a piece of a value begun above. */
void resp_w_raw(struct resp_w *w, const void *data, size_t len);

#endif
