/* digest.c -- SHA-256 and PBKDF2-HMAC-SHA256 over libcrypto's SHA-256
 * functions.
 *
 * Why not EVP: the first EVP digest loads OpenSSL 3's default provider,
 * about 2 MB of resident memory (measured: a shardis without TLS went from
 * 6.8 to 9.0 MB idle when every pool hashed its clients' user's password).
 * The SHA256_* functions are deprecated in OpenSSL 3 but compute directly,
 * with nothing to load; HMAC and PBKDF2 over them are a few lines (RFC
 * 2104, RFC 8018), and tests/unit/test_digest.c checks both against EVP's. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "proxy/base/digest.h"

void digest_sha256(const void *data, size_t len, uint8_t out[32])
{
    SHA256_CTX c;

    SHA256_Init(&c);
    SHA256_Update(&c, data, len);
    SHA256_Final(out, &c);
}

void digest_sha256_hex(const void *data, size_t len, char out[65])
{
    uint8_t h[32];

    digest_sha256(data, len, h);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* HMAC's two keyed states, made once for every round: the inner and the
 * outer hash after their padded key block. */
struct hmac {
    SHA256_CTX inner, outer;
};

static void hmac_init(struct hmac *h, const void *key, size_t len)
{
    uint8_t k[64] = {0}, pad[64];

    if (len > sizeof(k))
        digest_sha256(key, len, k);
    else
        memcpy(k, key, len);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    SHA256_Init(&h->inner);
    SHA256_Update(&h->inner, pad, 64);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    SHA256_Init(&h->outer);
    SHA256_Update(&h->outer, pad, 64);
}

/* HMAC of a then b (b may be empty). */
static void hmac(const struct hmac *h, const void *a, size_t alen, const void *b, size_t blen,
                 uint8_t out[32])
{
    SHA256_CTX c = h->inner;

    SHA256_Update(&c, a, alen);
    SHA256_Update(&c, b, blen);
    SHA256_Final(out, &c);
    c = h->outer;
    SHA256_Update(&c, out, 32);
    SHA256_Final(out, &c);
}

void digest_pbkdf2(const void *pw, size_t pwlen, const void *salt, size_t saltlen,
                   unsigned rounds, uint8_t out[32])
{
    static const uint8_t block1[4] = {0, 0, 0, 1};
    struct hmac h;
    uint8_t u[32];

    hmac_init(&h, pw, pwlen);
    hmac(&h, salt, saltlen, block1, sizeof(block1), u);
    memcpy(out, u, 32);
    for (unsigned r = 1; r < rounds; r++) {
        hmac(&h, u, 32, NULL, 0, u);
        for (int i = 0; i < 32; i++)
            out[i] ^= u[i];
    }
}
