/* digest.h -- SHA-256 and PBKDF2-HMAC-SHA256, for passwords (acl.c) and
 * the clients' user shardis makes on the servers (srvuser.c). */
#ifndef SHARDIS_DIGEST_H
#define SHARDIS_DIGEST_H

#include <stddef.h>
#include <stdint.h>

void digest_sha256(const void *data, size_t len, uint8_t out[32]);
/* The same in lower-case hex, NUL-terminated (ACL's #<sha256>). */
void digest_sha256_hex(const void *data, size_t len, char out[65]);
/* RFC 8018's PBKDF2 with HMAC-SHA256, one 32-byte block. */
void digest_pbkdf2(const void *pw, size_t pwlen, const void *salt, size_t saltlen,
                   unsigned rounds, uint8_t out[32]);

#endif
