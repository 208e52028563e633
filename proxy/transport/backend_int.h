/* backend_int.h -- what the files of a server connection share and no one
 * else calls: backend.c (its life: connect, write, fail, close),
 * backend_hello.c (the handshake it starts with), backend_read.c (its
 * replies) and backend_sync.c (one run to its reply: a blocking call).
 * backend.h is the connection's interface. */
#ifndef SHARDIS_BACKEND_INT_H
#define SHARDIS_BACKEND_INT_H

#include <sys/types.h>
#include <uv.h>

#include "proxy/transport/backend.h"

/* What the layers above registered (backend_set_hooks): set once, before
 * any connection is made. */
extern const struct backend_hooks *backend_above;

/* Fail b: answer every request with reason, close, back off (backend.c). */
void backend_fail(struct backend *b, const char *reason);
/* b is connected (and its TLS handshake over): it may write. */
void backend_up(struct backend *b);
/* b's server's address now, for logs ("host:port", or a unix path): good
 * until the next call on the same thread. */
const char *backend_addr(const struct backend *b);

/* Queue b's handshake, at the front of what it sends (backend_hello.c),
 * as it connects to sv. */
void backend_hello(struct backend *b, const struct backend_server *sv);
/* The reply callback of the HELLO that asks a checking connection's role:
 * nothing after it is written until it is answered (backend_flush). */
int backend_role_reply(struct backend *b, struct req *r);

/* libuv's read callbacks for b's handle (backend_read.c). */
void backend_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void backend_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

#endif
