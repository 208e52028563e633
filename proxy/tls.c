/* tls.c -- TLS on a connection: OpenSSL through memory BIOs on the loop.
 *
 * Each connection's SSL reads ciphertext from one memory BIO (filled by
 * tls_feed with what the stream read) and writes ciphertext to another
 * (emptied onto the stream by pump). So OpenSSL never touches a socket and
 * never blocks: a handshake is a few rounds of feed, read, pump, driven by
 * the owner's read callback, and a write is SSL_write into the BIO, then
 * the BIO onto the socket: uv_try_write first, as for a plain connection,
 * and a uv_write of what is left (copied out of the BIO, so that the BIO
 * can take more meanwhile).
 *
 * The trade-offs: plaintext is copied once each way (the cost of TLS
 * anyway), and small replies are gathered into one record per write
 * rather than one per slice (a record costs its header, MAC and a cipher
 * call). Contexts are built once per start or reload and shared by every
 * connection made from them; SSL_MODE_RELEASE_BUFFERS gives an idle
 * connection's record buffers back. A server-side handshake has a
 * deadline (tls_expired): a peer that connects and stalls costs one SSL
 * and its BIOs until then, and what it may make shardis buffer is bounded
 * by OpenSSL's own limits on handshake messages. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "proxy/stream.h"
#include "proxy/tls.h"
#include "proxy/util.h"

#define TLS_RBUF   (64 * 1024)      /* ciphertext read at once (tls_read_buf) */
#define TLS_WBUF   (64 * 1024)      /* ciphertext written at once (pump) */
#define TLS_RECORD (16 * 1024)      /* the most plaintext one record carries */

struct tls {
    SSL         *ssl;
    BIO         *rbio, *wbio;       /* ciphertext from / for the stream (the SSL owns both) */
    uv_stream_t *stream;
    uv_write_t   wreq;
    char        *wleft;             /* what the write in flight holds: the socket's to take */
    tls_sent_cb *on_sent;
    void        *data;
    uint64_t     deadline;          /* loop ms; on the handshaking list while it is not 0 */
    TAILQ_ENTRY(tls) hs;
    int          werr;              /* a write failed: every later send does */
    unsigned     writing:1;         /* wreq is in flight */
    unsigned     owner_waits:1;     /* a tls_send returned 0: on_sent is owed */
    char         err[160];
};

static TAILQ_HEAD(tls_head_s, tls) handshaking = TAILQ_HEAD_INITIALIZER(handshaking);
static char rbuf[TLS_RBUF], wbuf[TLS_WBUF], gather[TLS_RECORD];

/* ---- contexts -------------------------------------------------------------------- */

/* OpenSSL's reason for the last failure, for messages. */
static const char *ssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

    return r != NULL ? r : "unknown error";
}

static SSL_CTX *ctx_new(bool server)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

    if (ctx == NULL)
        return NULL;
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

/* ---- connections ------------------------------------------------------------------ */

static void watch_end(struct tls *t)
{
    if (t->deadline != 0) {
        TAILQ_REMOVE(&handshaking, t, hs);
        t->deadline = 0;
    }
}

struct tls *tls_new(SSL_CTX *ctx, uv_stream_t *s, bool server, const char *server_name,
                    uint64_t deadline_ms, tls_sent_cb *on_sent, void *data)
{
    struct tls *t = xcalloc(1, sizeof(*t));
    unsigned char ip[16];

    ERR_clear_error();
    t->ssl = SSL_new(ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_mem_eof_return(t->rbio, -1);    /* empty: "read again later", not EOF */
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    if (server) {
        SSL_set_accept_state(t->ssl);
    } else {
        SSL_set_connect_state(t->ssl);
        if (server_name != NULL) {
            bool is_ip = inet_pton(AF_INET, server_name, ip) == 1 ||
                         inet_pton(AF_INET6, server_name, ip) == 1;
            /* SNI names a host, never an address (RFC 6066). */
            if (is_ip)
                X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), server_name);
            else
                SSL_set_tlsext_host_name(t->ssl, server_name), SSL_set1_host(t->ssl, server_name);
        }
    }
    t->stream = s;
    t->on_sent = on_sent;
    t->data = data;
    t->wreq.data = t;
    if (deadline_ms != 0) {
        struct tls *o;
        t->deadline = deadline_ms;
        /* In deadline order; pools' timeouts differ, but seldom. */
        TAILQ_FOREACH_REVERSE(o, &handshaking, tls_head_s, hs)
            if (o->deadline <= deadline_ms)
                break;
        if (o == NULL)
            TAILQ_INSERT_HEAD(&handshaking, t, hs);
        else
            TAILQ_INSERT_AFTER(&handshaking, o, t, hs);
    }
    return t;
}

void tls_free(struct tls *t)
{
    if (t == NULL)
        return;
    watch_end(t);
    SSL_free(t->ssl);               /* and its BIOs */
    free(t->wleft);
    free(t);
}

void *tls_expired(uint64_t now_ms)
{
    struct tls *t = TAILQ_FIRST(&handshaking);

    if (t == NULL || t->deadline > now_ms)
        return NULL;
    watch_end(t);
    snprintf(t->err, sizeof(t->err), "TLS handshake timed out");
    return t->data;
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

static int pump(struct tls *t);

static void write_cb(uv_write_t *w, int status)
{
    struct tls *t = w->data;
    int rc = status;

    t->writing = 0;
    free(t->wleft);
    t->wleft = NULL;
    if (status < 0)
        t->werr = status;
    else if ((rc = pump(t)) == 0)
        return;                     /* more of it in flight */
    if (t->owner_waits) {
        t->owner_waits = 0;
        t->on_sent(t->data, rc < 0 ? rc : 0);
    }
}

/* Move the write BIO onto the socket: 1 when it is empty, 0 when a write
 * is in flight (write_cb goes on), or a negative error. */
static int pump(struct tls *t)
{
    while (!t->writing && BIO_ctrl_pending(t->wbio) > 0) {
        int n = BIO_read(t->wbio, wbuf, sizeof(wbuf));
        uv_buf_t b = uv_buf_init(wbuf, n > 0 ? (unsigned)n : 0), *iov = &b;
        unsigned niov = 1;
        int rc;
        if (n <= 0)
            break;
        rc = stream_try_write(t->stream, &iov, &niov, (size_t)n);
        if (rc < 0)
            return t->werr = rc;
        if (rc == 1)
            continue;
        t->wleft = xmalloc(iov->len);   /* wbuf is the next pump's */
        memcpy(t->wleft, iov->base, iov->len);
        b = uv_buf_init(t->wleft, iov->len);
        if ((rc = uv_write(&t->wreq, t->stream, &b, 1, write_cb)) < 0) {
            free(t->wleft);
            t->wleft = NULL;
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
        return t->werr = UV_EPROTO;
    }
    return 0;
}

int tls_send(struct tls *t, const uv_buf_t *iov, unsigned niov)
{
    size_t have = 0;
    int rc;

    if (t->werr < 0)
        return t->werr;
    ERR_clear_error();
    for (unsigned i = 0; i < niov; i++) {
        const char *p = iov[i].base;
        size_t len = iov[i].len;
        if (have + len > sizeof(gather) && have > 0) {
            if ((rc = put(t, gather, have)) < 0)
                return rc;
            have = 0;
        }
        if (len >= sizeof(gather)) {
            if ((rc = put(t, p, len)) < 0)
                return rc;
            continue;
        }
        memcpy(gather + have, p, len);
        have += len;
    }
    if (have > 0 && (rc = put(t, gather, have)) < 0)
        return rc;
    rc = pump(t);
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
        return UV_EPROTO;
    }
    rc = pump(t);
    return rc < 0 ? rc : 0;
}

/* ---- blocking, before the loop -------------------------------------------------- */

struct tls *tls_sync_new(SSL_CTX *ctx, int fd, const char *server_name)
{
    struct tls *t = tls_new(ctx, NULL, false, server_name, 0, NULL, NULL);

    if (t != NULL)
        SSL_set_fd(t->ssl, fd), t->rbio = t->wbio = NULL;   /* (it freed the BIOs) */
    return t;
}

/* Wait up to ms for what OpenSSL asked for after rc: 0, or -1. */
static int sync_wait(struct tls *t, int rc, int ms)
{
    struct pollfd pfd = {.fd = SSL_get_fd(t->ssl)};

    switch (SSL_get_error(t->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        pfd.events = POLLIN;
        break;
    case SSL_ERROR_WANT_WRITE:
        pfd.events = POLLOUT;
        break;
    default:
        note_error(t);
        return -1;
    }
    if (poll(&pfd, 1, ms) != 1) {
        snprintf(t->err, sizeof(t->err), "TLS: no answer in %d ms", ms);
        return -1;
    }
    return 0;
}

int tls_sync_write(struct tls *t, const char *p, size_t len, int ms)
{
    size_t n;
    int rc;

    ERR_clear_error();
    while ((rc = SSL_write_ex(t->ssl, p, len, &n)) != 1)
        if (sync_wait(t, rc, ms) < 0)
            return -1;
    return n == len ? 0 : -1;
}

ssize_t tls_sync_read(struct tls *t, char *p, size_t len, int ms)
{
    size_t n;
    int rc;

    ERR_clear_error();
    while ((rc = SSL_read_ex(t->ssl, p, len, &n)) != 1)
        if (sync_wait(t, rc, ms) < 0)
            return -1;
    return (ssize_t)n;
}

/* ---- reading ---------------------------------------------------------------------- */

void tls_read_buf(uv_buf_t *buf)
{
    *buf = uv_buf_init(rbuf, sizeof(rbuf));
}

void tls_feed(struct tls *t, const char *p, size_t len)
{
    /* A memory BIO takes all of it (it grows); SSL_read empties it. */
    if (len > 0)
        BIO_write(t->rbio, p, (int)len);
}

ssize_t tls_read(struct tls *t, char *buf, size_t len)
{
    size_t n = 0;
    int rc, e;

    ERR_clear_error();
    rc = SSL_read_ex(t->ssl, buf, len, &n);
    if (t->deadline != 0 && SSL_is_init_finished(t->ssl))
        watch_end(t);
    if (rc == 1)
        return (ssize_t)n;
    e = SSL_get_error(t->ssl, rc);
    /* The handshake's answers, or the alert that says why it failed. */
    int prc = pump(t);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        if (prc < 0) {
            snprintf(t->err, sizeof(t->err), "TLS: write: %s", uv_strerror(prc));
            return prc;
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
