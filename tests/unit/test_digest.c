/* test_digest.c -- proxy/base/digest.c against OpenSSL's EVP: SHA-256 of
 * lengths around its 64-byte block, and PBKDF2-HMAC-SHA256 of keys
 * shorter and longer than a block, salts of any length, 1 to 20000
 * rounds. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <openssl/evp.h>
#include <string.h>

#include "proxy/base/digest.h"

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 3));
}

Test(digest, sha256_as_evp)
{
    static uint8_t data[300];
    uint8_t want[32], got[32];
    unsigned int n;

    for (size_t len = 0; len <= sizeof(data); len++) {
        fill(data, len, (unsigned)len);
        cr_assert(EVP_Digest(data, len, want, &n, EVP_sha256(), NULL) == 1);
        digest_sha256(data, len, got);
        cr_assert(eq(int, memcmp(want, got, 32), 0), "sha256 of %zu bytes", len);
    }
    char hex[65];
    digest_sha256_hex("abc", 3, hex);
    cr_assert(eq(str, hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
}

Test(digest, pbkdf2_as_evp)
{
    static const size_t keys[] = {0, 1, 32, 63, 64, 65, 200};
    static const size_t salts[] = {0, 5, 64, 100};
    static const unsigned rounds[] = {1, 2, 3, 1000, 20000};
    uint8_t key[200], salt[100], want[32], got[32];

    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        for (size_t s = 0; s < sizeof(salts) / sizeof(salts[0]); s++)
            for (size_t r = 0; r < sizeof(rounds) / sizeof(rounds[0]); r++) {
                fill(key, keys[k], 1 + (unsigned)k);
                fill(salt, salts[s], 9 + (unsigned)s);
                cr_assert(PKCS5_PBKDF2_HMAC((const char *)key, (int)keys[k], salt,
                                            (int)salts[s], (int)rounds[r], EVP_sha256(), 32,
                                            want) == 1);
                digest_pbkdf2(key, keys[k], salt, salts[s], rounds[r], got);
                cr_assert(eq(int, memcmp(want, got, 32), 0),
                          "pbkdf2: key %zu bytes, salt %zu, %u rounds", keys[k], salts[s],
                          rounds[r]);
            }
}
