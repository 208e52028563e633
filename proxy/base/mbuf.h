/* mbuf.h -- fixed-size, reference-counted byte chunks and slices of them.
 *
 * Bytes read from a socket stay in the chunk they were read into until the
 * last slice pointing into them is released: a request is forwarded from
 * the client's chunks, a reply from the backend's. Chunks never move or
 * grow, so a slice (and a uv_buf_t made from it) stays valid while held.
 * Free chunks go to a small free list; beyond it they go back to the
 * allocator, so memory falls after a burst.
 *
 * Ownership: mbuf_get returns a chunk holding one reference; every
 * mbuf_ref needs an mbuf_unref; the chunk returns to the pool at zero. */
#ifndef SHARDIS_MBUF_H
#define SHARDIS_MBUF_H

#include <stddef.h>
#include <stdint.h>

/* A chunk is exactly jemalloc's largest small size class, 14 KiB: small
 * sizes are carved from slabs with nothing between them. 16 KiB is the
 * smallest large class, and jemalloc (cache_oblivious, its default) gives
 * every large allocation a page more so that it can start at a random
 * cache line: a 16 KiB chunk took 20 KiB, 1.25 times the bytes it held. */
#define MBUF_CHUNK  (14 * 1024)
#define MBUF_HEADER 24                      /* next, base, refs, len */
#define MBUF_SIZE   (MBUF_CHUNK - MBUF_HEADER)  /* data bytes */

struct mbuf {
    struct mbuf *next;      /* free list, or a reader's chunk list */
    uint64_t     base;      /* stream offset of data[0] (readers) */
    uint32_t     refs;
    uint32_t     len;       /* bytes filled */
    char         data[MBUF_SIZE];
};

_Static_assert(sizeof(struct mbuf) == MBUF_CHUNK, "a chunk is one allocator size class");

/* Bytes [off, off+len) of a chunk; holds one reference. */
struct slice {
    struct mbuf *m;
    uint32_t     off;
    uint32_t     len;
};

/* A run of bytes that may span chunks. The first two slices are inline:
 * almost every request and reply fits; longer runs spill to the heap. */
struct msg {
    struct slice  inl[2];
    struct slice *more;     /* slices 2.. (heap), or NULL */
    uint32_t      n;        /* slices in use */
    uint32_t      cap;      /* capacity of more */
    size_t        len;      /* total bytes */
};

struct mbuf *mbuf_get(void);
void mbuf_ref(struct mbuf *m);
void mbuf_unref(struct mbuf *m);

/* Chunks allocated, and free in the pool (for INFO and tests): the calling
 * thread's counts. A chunk given back on another thread than took it is
 * counted off there (its nalloc may wrap below 0), so only the sum over
 * every loop's thread means "allocated". */
size_t mbuf_nalloc(void);
size_t mbuf_nfree(void);
/* The calling thread's two counts, where another thread may read them
 * while this one waits (a loop's, in a world stop: INFO). */
void mbuf_counts_at(const size_t **nalloc, const size_t **nfree);
void mbuf_pool_trim(void);

struct slice *msg_slice(struct msg *g, uint32_t i);
/* Append bytes [off, off+len) of m, taking a reference. 0 or -ENOMEM. */
int msg_append(struct msg *g, struct mbuf *m, uint32_t off, uint32_t len);
/* Release every slice; the msg is empty and reusable. */
void msg_release(struct msg *g);
/* Append slices of g's bytes [off, off+len) to out (references, no copy). */
void msg_sub(const struct msg *g, size_t off, size_t len, struct msg *out);
/* Copy bytes [off, off+len) of the msg into out. */
void msg_copy(const struct msg *g, size_t off, size_t len, char *out);
/* The first byte (a reply's type), 0 if the msg is empty. */
static inline char msg_first(const struct msg *g)
{
    char c = 0;

    if (g->len > 0 && g->inl[0].len > 0)
        return g->inl[0].m->data[g->inl[0].off];
    if (g->len > 0)
        msg_copy(g, 0, 1, &c);
    return c;
}
/* Copy data into the chunk *cur (a new one when it is full or NULL; the
 * caller holds a reference to *cur) and append the bytes to g. */
void msg_write(struct msg *g, struct mbuf **cur, const void *data, size_t len);
/* Append len bytes (at most MBUF_SIZE) of the chunk *cur to g, in one
 * piece (a new chunk when the rest of *cur is too short), and return where
 * the caller writes them. Appends that follow each other in one chunk
 * merge into one slice: one iovec when written. */
char *msg_reserve(struct msg *g, struct mbuf **cur, size_t len);

#endif
