/* tls.c -- TLS on a connection: OpenSSL on the loop, through a BIO of
 * shardis's own.
 *
 * OpenSSL never touches a socket, so it never blocks: its BIO reads the
 * ciphertext the owner's read callback got (tls_feed lends it, and the
 * owner reads until tls gives nothing, which leaves none unread), and
 * writes into one staging buffer shared by every connection, which goes
 * to the socket with uv_try_write at the end of each call, as a plain
 * connection's writes do; only what the socket does not take is copied,
 * into the connection's pending buffer, for a uv_write. A handshake is a
 * few rounds of that, driven by the owner's read callback.
 *
 * Why not OpenSSL's memory BIOs: a memory BIO keeps the largest buffer it
 * ever held, so one 3 MiB reply would cost its connection 3 MiB for life;
 * here a connection holds ciphertext only while its socket is full.
 *
 * The trade-offs: plaintext is copied once each way (the cost of TLS
 * anyway), and small replies are gathered into one record per write
 * rather than one per slice (a record costs its header, MAC and a cipher
 * call). Contexts are built once per start or reload and shared by every
 * connection made from them; SSL_MODE_RELEASE_BUFFERS gives an idle
 * connection's record buffers back. Every handshake has a deadline
 * (tls_tick): a client that connects and stalls costs its SSL until then
 * (a record buffer while a record is half sent, about what redis-server
 * pays), bounded by OpenSSL's own limits on handshake messages; a server
 * that never answers fails its connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "proxy/base/stream.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

#define TLS_RBUF   (64 * 1024)      /* ciphertext read at once (tls_read_buf) */
#define TLS_STAGE  (64 * 1024)      /* ciphertext gathered for one socket write */
#define TLS_RECORD (16 * 1024)      /* the most plaintext one record carries */

struct tls {
    SSL         *ssl;
    uv_stream_t *stream;
    uv_write_t   wreq;
    const char  *in;                /* ciphertext lent by tls_feed, not yet read */
    size_t       inlen;
    char        *pend;              /* ciphertext the socket has not taken, after */
    size_t       pendlen, pendcap;  /*   what is in flight; owned (xmalloc) */
    char        *inflight;          /* what wreq is writing: owned until write_cb */
    tls_sent_cb *on_sent;
    tls_expired_cb *on_expired;
    void        *data;
    struct tls_loop *tl;            /* the loop's list and buffers it uses */
    uint64_t     deadline;          /* loop ms; on tl's handshaking list while it is not 0 */
    TAILQ_ENTRY(tls) hs;
    int          werr;              /* a write failed: every later send does */
    unsigned     writing:1;         /* wreq is in flight */
    unsigned     owner_waits:1;     /* a tls_send returned 0: on_sent is owed */
    char         err[160];
};

/* The BIO's methods: made once (pthread_once), kept for the process's life. */
static BIO_METHOD *loop_bio;
static pthread_once_t loop_bio_once = PTHREAD_ONCE_INIT;

/* ---- contexts -------------------------------------------------------------------- */

/* OpenSSL's reason for the last failure, for messages. */
static const char *ssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

    return r != NULL ? r : "unknown error";
}

/* OpenSSL's default asks the terminal for an encrypted key's passphrase,
 * which would stop the loop at a reload: shardis takes none. Set and read
 * within one tls_ctx_build, on the thread that runs it. */
static _Thread_local bool asked_passphrase;

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    asked_passphrase = true;
    return 0;
}

static SSL_CTX *ctx_new(bool server)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

    if (ctx == NULL)
        return NULL;
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    return ctx;
}

/* Say which key's file is wrong, and free ctx (NULL: the failure is not
 * about a file). */
static int ctx_fail(SSL_CTX *ctx, char *err, size_t errlen, const char *key, const char *file)
{
    /* OpenSSL says "system lib" of a file it cannot open: say why. */
    if (ctx != NULL && access(file, R_OK) < 0)
        snprintf(err, errlen, "%s '%s': %s", key, file, strerror(errno));
    else if (ctx != NULL && asked_passphrase)
        snprintf(err, errlen, "%s '%s': the key is encrypted, and shardis takes no "
                 "passphrase (decrypt it: openssl pkey -in KEY -out PLAIN)", key, file);
    else
        snprintf(err, errlen, "%s '%s': %s", key, file, ssl_reason());
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return -EINVAL;
}

static int ctx_server(const struct conf_tls *ct, SSL_CTX **out, char *err, size_t errlen)
{
    SSL_CTX *ctx = ctx_new(true);

    if (ctx == NULL)
        return ctx_fail(NULL, err, errlen, "tls_listen", ct->listen.text);
    if (SSL_CTX_use_certificate_chain_file(ctx, ct->cert_file) != 1)
        return ctx_fail(ctx, err, errlen, "tls_cert_file", ct->cert_file);
    if (SSL_CTX_use_PrivateKey_file(ctx, ct->key_file, SSL_FILETYPE_PEM) != 1)
        return ctx_fail(ctx, err, errlen, "tls_key_file", ct->key_file);
    if (SSL_CTX_check_private_key(ctx) != 1)
        return ctx_fail(ctx, err, errlen, "tls_key_file", ct->key_file);
    if (ct->ca_cert_file != NULL) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ct->ca_cert_file);
        if (names == NULL || SSL_CTX_load_verify_locations(ctx, ct->ca_cert_file, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            return ctx_fail(ctx, err, errlen, "tls_ca_cert_file", ct->ca_cert_file);
        }
        SSL_CTX_set_client_CA_list(ctx, names);
    }
    switch (ct->auth_clients) {
    case CONF_TLS_AUTH_NO:
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        break;
    case CONF_TLS_AUTH_YES:
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        break;
    case CONF_TLS_AUTH_OPTIONAL:
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        break;
    }
    /* (Resumed sessions of verified clients need one.) */
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"shardis", 7);
    *out = ctx;
    return 0;
}

static int ctx_client(const struct conf_tls *ct, SSL_CTX **out, char *err, size_t errlen)
{
    SSL_CTX *ctx = ctx_new(false);

    if (ctx == NULL)
        return ctx_fail(NULL, err, errlen, "backend_tls", "true");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (ct->backend_ca_cert_file != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, ct->backend_ca_cert_file, NULL) != 1)
            return ctx_fail(ctx, err, errlen, "backend_tls_ca_cert_file",
                            ct->backend_ca_cert_file);
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        SSL_CTX_free(ctx);
        return ctx_fail(NULL, err, errlen, "backend_tls", "the system's CAs");
    }
    if (ct->backend_cert_file != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, ct->backend_cert_file) != 1)
            return ctx_fail(ctx, err, errlen, "backend_tls_cert_file", ct->backend_cert_file);
        if (SSL_CTX_use_PrivateKey_file(ctx, ct->backend_key_file, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1)
            return ctx_fail(ctx, err, errlen, "backend_tls_key_file", ct->backend_key_file);
    }
    *out = ctx;
    return 0;
}

int tls_ctx_build(const struct conf_pool *pc, SSL_CTX **server, SSL_CTX **client,
                  char *err, size_t errlen)
{
    int rc;

    asked_passphrase = false;
    *server = *client = NULL;
    if (pc->tls.listen.text != NULL && (rc = ctx_server(&pc->tls, server, err, errlen)) < 0)
        return rc;
    if (pc->tls.backend && (rc = ctx_client(&pc->tls, client, err, errlen)) < 0) {
        SSL_CTX_free(*server);
        *server = NULL;
        return rc;
    }
    return 0;
}

void tls_ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

SSL_CTX *tls_ctx_ref(SSL_CTX *ctx)
{
    if (ctx != NULL)
        SSL_CTX_up_ref(ctx);
    return ctx;
}

/* ---- the BIO ---------------------------------------------------------------------- */

static int flush(struct tls *t);

static void queue_pending(struct tls *t, const char *p, size_t len)
{
    if (t->pendlen + len > t->pendcap) {
        t->pendcap = t->pendlen + len > 2 * t->pendcap ? t->pendlen + len : 2 * t->pendcap;
        t->pend = xrealloc(t->pend, t->pendcap);
    }
    memcpy(t->pend + t->pendlen, p, len);
    t->pendlen += len;
}

static int bio_write(BIO *b, const char *p, size_t len, size_t *written)
{
    struct tls *t = BIO_get_data(b);
    struct tls_loop *tl = t->tl;

    if (tl->stage_owner != t && tl->stage_len > 0)
        flush(tl->stage_owner);     /* (each call flushes its own: not expected) */
    if (tl->stage == NULL)
        tl->stage = xmalloc(TLS_STAGE);
    tl->stage_owner = t;
    *written = len;
    while (len > 0) {
        size_t n = len < TLS_STAGE - tl->stage_len ? len : TLS_STAGE - tl->stage_len;
        memcpy(tl->stage + tl->stage_len, p, n);
        tl->stage_len += n;
        p += n;
        len -= n;
        if (tl->stage_len == TLS_STAGE)
            flush(t);
    }
    return 1;
}

static int bio_read(BIO *b, char *p, size_t len, size_t *got)
{
    struct tls *t = BIO_get_data(b);
    size_t n = len < t->inlen ? len : t->inlen;

    BIO_clear_retry_flags(b);
    if (n == 0) {
        BIO_set_retry_read(b);      /* none now: "again later", not EOF */
        *got = 0;
        return 0;
    }
    memcpy(p, t->in, n);
    t->in += n;
    t->inlen -= n;
    *got = n;
    return 1;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH;   /* flushed by the call that wrote */
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void loop_bio_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "shardis loop");

    if (m == NULL || !BIO_meth_set_write_ex(m, bio_write) || !BIO_meth_set_read_ex(m, bio_read) ||
        !BIO_meth_set_ctrl(m, bio_ctrl) || !BIO_meth_set_create(m, bio_create)) {
        BIO_meth_free(m);
        return;                     /* (then no connection gets TLS) */
    }
    loop_bio = m;
}

static BIO *bio_new(struct tls *t)
{
    BIO *b;

    pthread_once(&loop_bio_once, loop_bio_make);
    if (loop_bio == NULL)
        return NULL;
    if ((b = BIO_new(loop_bio)) != NULL)
        BIO_set_data(b, t);
    return b;
}

/* ---- connections ------------------------------------------------------------------ */

static void watch_end(struct tls *t)
{
    if (t->deadline != 0) {
        TAILQ_REMOVE(&t->tl->handshaking, t, hs);
        t->deadline = 0;
    }
}

void tls_loop_init(struct tls_loop *tl)
{
    memset(tl, 0, sizeof(*tl));
    TAILQ_INIT(&tl->handshaking);
}

void tls_loop_free(struct tls_loop *tl)
{
    free(tl->rbuf);
    free(tl->gather);
    free(tl->stage);
    tl->rbuf = tl->gather = tl->stage = NULL;
    tl->stage_len = 0;
    tl->stage_owner = NULL;
}

struct tls *tls_new(struct tls_loop *tl, SSL_CTX *ctx, uv_stream_t *s, bool server,
                    const char *server_name, uint64_t deadline_ms, tls_sent_cb *on_sent,
                    tls_expired_cb *on_expired, void *data)
{
    struct tls *t = xcalloc(1, sizeof(*t));
    unsigned char ip[16];
    BIO *b;

    t->tl = tl;
    ERR_clear_error();
    t->ssl = SSL_new(ctx);
    b = t->ssl != NULL ? bio_new(t) : NULL;
    if (b == NULL) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_bio(t->ssl, b, b);      /* (one reference: the SSL's) */
    if (server) {
        SSL_set_accept_state(t->ssl);
    } else {
        SSL_set_connect_state(t->ssl);
        if (server_name != NULL) {
            bool is_ip = inet_pton(AF_INET, server_name, ip) == 1 ||
                         inet_pton(AF_INET6, server_name, ip) == 1;
            /* SNI names a host, never an address (RFC 6066). */
            if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl),
                                                      server_name) != 1
                      : SSL_set_tlsext_host_name(t->ssl, server_name) != 1 ||
                        SSL_set1_host(t->ssl, server_name) != 1) {
                SSL_free(t->ssl);
                free(t);
                ERR_clear_error();
                return NULL;
            }
        }
    }
    t->stream = s;
    t->on_sent = on_sent;
    t->on_expired = on_expired;
    t->data = data;
    t->wreq.data = t;
    if (deadline_ms != 0) {
        struct tls *o;
        t->deadline = deadline_ms;
        /* In deadline order; pools' timeouts differ, but seldom. */
        TAILQ_FOREACH_REVERSE(o, &tl->handshaking, tls_head_s, hs)
            if (o->deadline <= deadline_ms)
                break;
        if (o == NULL)
            TAILQ_INSERT_HEAD(&tl->handshaking, t, hs);
        else
            TAILQ_INSERT_AFTER(&tl->handshaking, o, t, hs);
    }
    return t;
}

void tls_free(struct tls *t)
{
    if (t == NULL)
        return;
    watch_end(t);
    if (t->tl->stage_owner == t) {
        t->tl->stage_owner = NULL;
        t->tl->stage_len = 0;
    }
    SSL_free(t->ssl);               /* and its BIO */
    free(t->pend);
    free(t->inflight);
    free(t);
}

void tls_tick(struct tls_loop *tl, uint64_t now_ms)
{
    struct tls *t;

    while ((t = TAILQ_FIRST(&tl->handshaking)) != NULL && t->deadline <= now_ms) {
        watch_end(t);
        snprintf(t->err, sizeof(t->err), "TLS handshake timed out");
        t->on_expired(t->data);
    }
}

bool tls_ready(const struct tls *t)
{
    return SSL_is_init_finished(t->ssl);
}

const char *tls_error(const struct tls *t)
{
    return t->err[0] != '\0' ? t->err : "TLS error";
}

/* Note why t failed: OpenSSL's reason, and the certificate check's. */
static void note_error(struct tls *t)
{
    long v = SSL_get_verify_result(t->ssl);

    if (v != X509_V_OK)
        snprintf(t->err, sizeof(t->err), "TLS: %s (%s)", ssl_reason(),
                 X509_verify_cert_error_string(v));
    else
        snprintf(t->err, sizeof(t->err), "TLS: %s", ssl_reason());
    ERR_clear_error();
}

/* ---- writing ---------------------------------------------------------------------- */

static int finish(struct tls *t, int e);

static void write_cb(uv_write_t *w, int status)
{
    struct tls *t = w->data;
    int rc = status;

    t->writing = 0;
    free(t->inflight);
    t->inflight = NULL;
    if (status < 0)
        t->werr = status;
    else if ((rc = flush(t)) == 0)
        return;                     /* more of it in flight */
    if (t->owner_waits) {
        t->owner_waits = 0;
        t->on_sent(t->data, rc < 0 ? rc : 0);
    }
}

/* Move what t wrote onto the socket: the stage now, as much as the socket
 * takes, the rest into t's pending buffer, which a uv_write then takes.
 * 1 when all of it is on the socket, 0 when a write is in flight
 * (write_cb goes on), or a negative error. */
static int flush(struct tls *t)
{
    struct tls_loop *tl = t->tl;
    int rc;

    if (tl->stage_owner == t && tl->stage_len > 0) {
        if (t->werr < 0) {
            ;                       /* dropped: the connection is failing */
        } else if (t->writing || t->pendlen > 0) {
            queue_pending(t, tl->stage, tl->stage_len);     /* behind what waits */
        } else {
            uv_buf_t b = uv_buf_init(tl->stage, (unsigned)tl->stage_len), *iov = &b;
            unsigned niov = 1;
            rc = stream_try_write(t->stream, &iov, &niov, tl->stage_len);
            if (rc < 0)
                t->werr = rc;
            else if (rc == 0)
                queue_pending(t, iov->base, iov->len);
        }
        tl->stage_len = 0;
    }
    if (t->werr < 0)
        return t->werr;
    if (!t->writing && t->pendlen > 0) {
        uv_buf_t b = uv_buf_init(t->pend, (unsigned)t->pendlen);
        t->inflight = t->pend;      /* wreq's until write_cb */
        t->pend = NULL;
        t->pendlen = t->pendcap = 0;
        if ((rc = uv_write(&t->wreq, t->stream, &b, 1, write_cb)) < 0) {
            free(t->inflight);
            t->inflight = NULL;
            return t->werr = rc;
        }
        t->writing = 1;
    }
    return t->writing ? 0 : 1;
}

static int put(struct tls *t, const char *p, size_t len)
{
    size_t n;

    if (SSL_write_ex(t->ssl, p, len, &n) != 1 || n != len) {
        note_error(t);
        flush(t);
        return t->werr = UV_EPROTO;
    }
    return 0;
}

int tls_send(struct tls *t, const uv_buf_t *iov, unsigned niov)
{
    size_t have = 0;
    char *gather;
    int rc;

    if (t->werr < 0)
        return t->werr;
    if (t->tl->gather == NULL)
        t->tl->gather = xmalloc(TLS_RECORD);
    gather = t->tl->gather;
    ERR_clear_error();
    for (unsigned i = 0; i < niov; i++) {
        const char *p = iov[i].base;
        size_t len = iov[i].len;
        if (have + len > TLS_RECORD && have > 0) {
            if ((rc = put(t, gather, have)) < 0)
                return rc;
            have = 0;
        }
        if (len >= TLS_RECORD) {
            if ((rc = put(t, p, len)) < 0)
                return rc;
            continue;
        }
        memcpy(gather + have, p, len);
        have += len;
    }
    if (have > 0 && (rc = put(t, gather, have)) < 0)
        return rc;
    rc = flush(t);
    if (rc == 0)
        t->owner_waits = 1;
    return rc;
}

int tls_connect(struct tls *t)
{
    int rc;

    ERR_clear_error();
    rc = SSL_do_handshake(t->ssl);
    if (rc != 1 && SSL_get_error(t->ssl, rc) != SSL_ERROR_WANT_READ) {
        note_error(t);
        flush(t);
        return UV_EPROTO;
    }
    rc = flush(t);
    return rc < 0 ? rc : 0;
}

/* ---- reading ---------------------------------------------------------------------- */

/* After an SSL call that did not succeed (SSL_get_error's e): send what it
 * wrote (the handshake's answers, or the alert that says why it failed);
 * 0 if it only wants more from the peer, else a negative error. */
static int finish(struct tls *t, int e)
{
    int rc = flush(t);

    switch (e) {
    case SSL_ERROR_WANT_READ:
        if (rc < 0) {
            snprintf(t->err, sizeof(t->err), "TLS: write: %s", uv_strerror(rc));
            return rc;
        }
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        snprintf(t->err, sizeof(t->err), "TLS: closed by the peer");
        return UV_EOF;
    default:
        note_error(t);
        return UV_EPROTO;
    }
}

void tls_read_buf(struct tls *t, uv_buf_t *buf)
{
    if (t->tl->rbuf == NULL)
        t->tl->rbuf = xmalloc(TLS_RBUF);
    *buf = uv_buf_init(t->tl->rbuf, TLS_RBUF);
}

void tls_feed(struct tls *t, const char *p, size_t len)
{
    t->in = p;                      /* bio_read's, until the owner has read it all */
    t->inlen = len;
}

int tls_accept(struct tls *t)
{
    int rc;

    if (SSL_is_init_finished(t->ssl))
        return 1;
    ERR_clear_error();
    rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        watch_end(t);
        rc = flush(t);              /* (TLS 1.3: its session tickets) */
        if (rc < 0)
            snprintf(t->err, sizeof(t->err), "TLS: write: %s", uv_strerror(rc));
        return rc < 0 ? rc : 1;
    }
    return finish(t, SSL_get_error(t->ssl, rc));
}

ssize_t tls_read(struct tls *t, char *buf, size_t len)
{
    size_t n = 0;
    int rc;

    ERR_clear_error();
    rc = SSL_read_ex(t->ssl, buf, len, &n);
    if (t->deadline != 0 && SSL_is_init_finished(t->ssl))
        watch_end(t);
    if (rc == 1) {
        if (t->tl->stage_owner == t && t->tl->stage_len > 0 && flush(t) < 0)
            snprintf(t->err, sizeof(t->err), "TLS: write: %s", uv_strerror(t->werr));
        return (ssize_t)n;
    }
    return finish(t, SSL_get_error(t->ssl, rc));
}
