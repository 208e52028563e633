/* stream.h -- a connection's bytes (stream.c): the chunks a reader reads
 * into and frames from, and writing slices out. */
#ifndef SHARDIS_STREAM_H
#define SHARDIS_STREAM_H

#include <stdint.h>
#include <uv.h>

#include "proxy/base/mbuf.h"

/* A reader's chunks: from the oldest byte still needed to the newest. */
struct rstream {
    struct mbuf *head, *tail;
    struct mbuf *seek;          /* the chunk rstream_find last found, or NULL */
    uint64_t     rx;            /* stream offset: bytes read so far */
};

/* The chunk that holds stream offset off (the first one after it if off
 * is at a chunk's end), or NULL. Lookups in increasing order cost O(1)
 * each: it starts from where the last one ended. */
struct mbuf *rstream_find(struct rstream *s, uint64_t off);
/* Append bytes [start, end) of the stream to g (references the chunks). */
void rstream_slice(struct rstream *s, uint64_t start, uint64_t end, struct msg *g);
/* Drop chunks wholly before offset keep; with keep == rx drop them all. */
void rstream_trim(struct rstream *s, uint64_t keep);
/* Libuv alloc_cb helper: free space in the tail chunk, or a new chunk. */
void rstream_buf(struct rstream *s, uv_buf_t *buf);

union stream {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t    tcp;
    uv_pipe_t   pipe;
};

/* Write what it can of iov (total bytes) to s now: 1 if all of it, 0 if
 * some is left (*iov, *niov then describe the rest, for uv_write), or a
 * negative error. */
int stream_try_write(uv_stream_t *s, uv_buf_t **iov, unsigned *niov, size_t total);

/* Point out[0 .. g->n) at g's slices; returns g->n. */
unsigned msg_bufs(struct msg *g, uv_buf_t *out);

#endif
