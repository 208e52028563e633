/* tls.h -- TLS on a connection (tls.c): OpenSSL driven on the loop
 * through a BIO of its own, so that no handshake, read or write ever
 * blocks it.
 *
 * The owner (a client or a backend connection) keeps reading its stream
 * and lends tls the ciphertext; tls gives back plaintext, which the owner
 * frames as it frames a plain connection's bytes, and sends what the
 * owner writes, encrypted, on the stream. Ciphertext the socket has not
 * taken yet is tls's, not in the owner's queues.
 *
 * Lifetime: the owner makes one with tls_new once its stream is connected
 * and frees it with tls_free from the stream's close callback (a write in
 * flight is cancelled by uv_close and its callback runs before that). */
#ifndef SHARDIS_TLS_H
#define SHARDIS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <uv.h>

#include "conf/conf.h"

typedef struct ssl_ctx_st SSL_CTX;
struct tls;

/* What a loop's connections share (struct loop's tls): its handshakes
 * under way, and scratch buffers that hold bytes only while one call or
 * one read callback runs, allocated on first use. One per loop, so loops
 * on several threads share none of it. */
struct tls_loop {
    TAILQ_HEAD(tls_head_s, tls) handshaking;    /* by deadline (tls_tick) */
    char       *rbuf;               /* ciphertext read (tls_read_buf) */
    char       *gather;             /* small writes made one record (tls_send) */
    char       *stage;              /* ciphertext for one socket write ... */
    size_t      stage_len;
    struct tls *stage_owner;        /* ... and whose it is (empty between calls) */
};

/* Make tl empty (loop_init); give back its buffers (loop_free: every
 * connection that used it is gone by then). */
void tls_loop_init(struct tls_loop *tl);
void tls_loop_free(struct tls_loop *tl);

/* A tls_send that returned 0 is done: status 0, or the write's error. */
typedef void tls_sent_cb(void *data, int status);
/* The handshake did not end by its deadline (tls_tick): tls_error says so. */
typedef void tls_expired_cb(void *data);

/* The contexts a pool's connections are made from, read from the files
 * pc names: *server for its TLS listener (NULL without tls_listen),
 * *client for its servers (NULL without backend_tls). 0, or -EINVAL with
 * err saying which file is wrong and why; then neither is made. A context
 * outlives its pool's hold on it while connections made from it last
 * (OpenSSL counts them): a reload replaces them without closing any. */
int tls_ctx_build(const struct conf_pool *pc, SSL_CTX **server, SSL_CTX **client,
                  char *err, size_t errlen);
void tls_ctx_free(SSL_CTX *ctx);
/* Another holder of ctx (NULL: none): each loop's pools share the
 * contexts loop 0's built, each holder freeing its own (tls_ctx_free).
 * OpenSSL's contexts may make connections on several threads at once. */
SSL_CTX *tls_ctx_ref(SSL_CTX *ctx);

/* TLS on stream s, connected, on the loop whose tls is tl: as a server (server_name NULL), or as a
 * client that checks the peer's certificate is for server_name (a host
 * name, also sent as SNI, or an IP address) if it is not NULL. The
 * handshake must end by deadline_ms (loop time; 0: no deadline), else
 * on_expired runs (tls_tick). NULL if OpenSSL cannot. */
struct tls *tls_new(struct tls_loop *tl, SSL_CTX *ctx, uv_stream_t *s, bool server,
                    const char *server_name, uint64_t deadline_ms, tls_sent_cb *on_sent,
                    tls_expired_cb *on_expired, void *data);
void tls_free(struct tls *t);

/* A client's handshake: send its first flight. 0 or a negative error. */
int tls_connect(struct tls *t);

/* Where the owner's alloc_cb reads ciphertext into: one buffer for every
 * connection of t's loop, as read_cb runs right after alloc_cb and
 * tls_feed empties it. */
void tls_read_buf(struct tls *t, uv_buf_t *buf);
/* Ciphertext read from the stream, lent: the owner then reads (tls_accept,
 * tls_read) until tls_read gives 0 or an error, which leaves none of it
 * unread, or stops reading the connection for good; either way it ends
 * the loan before its read callback returns, with tls_feed(t, NULL, 0). */
void tls_feed(struct tls *t, const char *p, size_t len);
/* Plaintext into buf: the bytes, 0 when none can be read for now (the
 * handshake's replies are on their way), or a negative error: UV_EOF for
 * the peer's close_notify, UV_EPROTO for anything else (tls_error says
 * what). */
ssize_t tls_read(struct tls *t, char *buf, size_t len);
/* Go on with a server's handshake with what was fed: 1 when it is over, 0
 * when it needs more from the peer, or a negative error as tls_read's.
 * The owner holds no buffer for plaintext until it is over. */
int tls_accept(struct tls *t);
/* The handshake is over: plaintext may be written. */
bool tls_ready(const struct tls *t);
/* Why the connection failed, for a log line. */
const char *tls_error(const struct tls *t);

/* Encrypt iov[0 .. niov) and write it: 1 when the socket took all of it, 0
 * when some waits (on_sent runs once it is written, or failed), or a
 * negative error (on_sent will not run for it). */
int tls_send(struct tls *t, const uv_buf_t *iov, unsigned niov);

/* Call on_expired of each connection of tl whose handshake is past its
 * deadline (the loop's tick; it is taken off the watch first, so
 * on_expired may close the owner). */
void tls_tick(struct tls_loop *tl, uint64_t now_ms);

#endif
