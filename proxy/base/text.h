/* text.h -- plain text helpers of no one layer: Redis's glob, a field of
 * an INFO-style text, a byte string escaped for a label or a log line.
 * Each is pure: no state, no allocation. */
#ifndef SHARDIS_TEXT_H
#define SHARDIS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Redis's glob (util.c's stringmatchlen, case-sensitive): *, ?, [...]
 * with ^ and ranges, \ escapes. Bytes compare unsigned (redis-server
 * compares a range's bounds as plain char, signed on x86: a range with a
 * bound past 0x7f may differ). The one matcher: ACL key and channel
 * patterns (acl.c), HSCAN's MATCH applied to minified fields (minify.c). */
bool text_glob(const char *pat, size_t plen, const char *s, size_t slen);

/* The value of field name ("run_id") in an INFO text ("name:value\r\n"
 * lines), copied into buf (size bytes with the NUL); NULL if it has none,
 * or a longer one. */
const char *text_field(const char *text, const char *name, char *buf, size_t size);

/* s[0 .. len) written to f whatever its bytes: printable ASCII as is, \
 * and " escaped, any other byte as the four characters \xHH, so the text
 * stays valid UTF-8 (a Prometheus label value, metrics.c and hotkeys.c;
 * a name a client chose, in a log line, pubsub.c). */
void text_escape(FILE *f, const char *s, size_t len);

#endif
