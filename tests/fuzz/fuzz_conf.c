/* fuzz_conf.c -- libFuzzer target for conf_parse.
 *
 * Any bytes must give either a config whose every pool builds a ring, or
 * an error that names the file and a position; never a crash, a leak or a
 * hang. Build with -Dfuzz=true (clang) for libFuzzer; replay.c runs the
 * same target over the corpus and seeded mutations in the normal test
 * suite, under ASan/UBSan in scripts/test's sanitizer build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct conf *cf;
    char err[CONF_ERRLEN];

    if (conf_parse(&cf, "fuzz.yml", (const char *)data, size, err, sizeof(err)) < 0) {
        if (strncmp(err, "fuzz.yml:", 9) != 0) {
            fprintf(stderr, "error without a position: %s\n", err);
            abort();
        }
        return 0;
    }
    for (size_t i = 0; i < cf->npools; i++) {
        struct ring *r;
        if (conf_pool_ring(&cf->pools[i], &r, err, sizeof(err)) == 0) {
            (void)ring_lookup(r, "fuzz", 4);
            ring_unref(r);
        }
    }
    conf_free(cf);
    return 0;
}
