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
 * Replies: any RESP2 value, nested arrays included (depth <= 64).
 *
 * And the one piece of encoding the proxy does itself: header lines. */
#ifndef SHARDIS_RESP_H
#define SHARDIS_RESP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RESP_MAX_ARGS       INT_MAX
#define RESP_MAX_BULK       (512LL * 1024 * 1024)
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

struct resp_rsp {
    int       state;
    long long num;
    bool      neg;
    bool      cr;
    bool      array;        /* the header being read is '*' (else '$') */
    int       digits;
    long long left;         /* bulk bytes plus CRLF still to skip */
    int       depth;
    long long stack[RESP_MAX_DEPTH];  /* elements left at each level */
    char      type;                   /* type byte of the top-level reply */
};

/* Feed n bytes. Returns 1 when a whole reply ended after *used bytes, 0
 * when all were used, -1 on a protocol error. After 1, resp_rsp_reset. */
int resp_rsp_feed(struct resp_rsp *s, const char *p, size_t n, size_t *used);
void resp_rsp_reset(struct resp_rsp *s);

/* Write the header line "<type><n>\r\n" ('*' 3, '$' 5, ':' -1 ...) at out,
 * which holds RESP_HEADER_MAX bytes; returns its length. Every header
 * shardis writes goes through here: printf's machinery cost more than the
 * rest of a split request. */
#define RESP_HEADER_MAX 24
size_t resp_header(char *out, char type, long long n);

#endif
