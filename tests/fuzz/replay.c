/* replay.c -- run the conf fuzz target without libFuzzer: every corpus
 * file as is, then a fixed number of seeded mutations of them (byte flips,
 * YAML tokens spliced in, cuts and duplicated runs). Deterministic, so a
 * failure reproduces; bounded, so it fits in the unit test budget.
 *
 * usage: fuzz_conf_replay ITERATIONS FILE... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT   (64 * 1024)

static uint64_t state = 0x2545f4914f6cdd1du;

static uint64_t next(void)
{
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * UINT64_C(0x2545f4914f6cdd1d);
}

static const char *const tokens[] = {
    ":", " ", "\n", "- ", "{", "}", "[", "]", ",", "\"", "'", "&a ", "*a", "!!str ",
    "---\n", "...\n", "#", "\t", "\\0", "\\x80", "?", "|\n", ">\n", "<<: *a\n",
    "listen: ", "servers:\n  - ", "127.0.0.1:6379:1", "/tmp/s.sock:1 n", "[::1]:1:1",
    "hash: ", "hash_tag: ", "distribution: ", "jedis", "modula", "random", "hash_ring",
    "murmur64a", "md5", "idgen: ", "types: {a: 1}", "fixed: {b: a}", "4294967296",
    "-1", "0", "true", "false", "\xff\xfe", "\xc3\xa9", "\xe2\x80\xa8",
};

struct input {
    char  *data;
    size_t len;
};

static void mutate(char *buf, size_t *len, const struct input *in, size_t nin)
{
    size_t n = 1 + next() % 8;

    for (size_t i = 0; i < n; i++) {
        size_t pos = *len > 0 ? next() % (*len + 1) : 0;
        switch (next() % 5) {
        case 0:                              /* flip a byte */
            if (*len > 0)
                buf[next() % *len] ^= (char)(1u << (next() % 8));
            break;
        case 1: {                            /* insert a token */
            const char *t = tokens[next() % (sizeof(tokens) / sizeof(tokens[0]))];
            size_t tl = strlen(t);
            if (*len + tl > MAX_INPUT)
                break;
            memmove(buf + pos + tl, buf + pos, *len - pos);
            memcpy(buf + pos, t, tl);
            *len += tl;
            break;
        }
        case 2: {                            /* cut a run */
            size_t cut = next() % 32;
            if (pos + cut > *len)
                cut = *len - pos;
            memmove(buf + pos, buf + pos + cut, *len - pos - cut);
            *len -= cut;
            break;
        }
        case 3: {                            /* duplicate a run */
            size_t from = *len > 0 ? next() % *len : 0, run = next() % 64;
            if (from + run > *len)
                run = *len - from;
            if (*len + run > MAX_INPUT)
                break;
            memmove(buf + pos + run, buf + pos, *len - pos);
            memmove(buf + pos, buf + (from < pos ? from : from + run), run);
            *len += run;
            break;
        }
        default: {                           /* splice another input's tail */
            const struct input *o = &in[next() % nin];
            size_t from = o->len > 0 ? next() % o->len : 0, run = o->len - from;
            if (pos + run > MAX_INPUT)
                run = MAX_INPUT - pos;
            memcpy(buf + pos, o->data + from, run);
            *len = pos + run;
            break;
        }
        }
    }
}

static int read_file(const char *path, struct input *in)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    in->data = malloc(MAX_INPUT);
    in->len = in->data != NULL ? fread(in->data, 1, MAX_INPUT, f) : 0;
    fclose(f);
    return in->data != NULL ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct input *in;
    char *buf;
    long iterations;
    int nin = argc - 2;

    if (argc < 3 || (iterations = strtol(argv[1], NULL, 10)) < 0) {
        fprintf(stderr, "usage: %s ITERATIONS FILE...\n", argv[0]);
        return 2;
    }
    in = calloc((size_t)nin, sizeof(*in));
    buf = malloc(MAX_INPUT);
    if (in == NULL || buf == NULL)
        return 1;
    for (int i = 0; i < nin; i++) {
        if (read_file(argv[i + 2], &in[i]) < 0) {
            fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i + 2]);
            return 1;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)in[i].data, in[i].len);
    }
    for (long it = 0; it < iterations; it++) {
        const struct input *seed = &in[next() % (size_t)nin];
        size_t len = seed->len;
        memcpy(buf, seed->data, len);
        mutate(buf, &len, in, (size_t)nin);
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    }
    printf("replayed %d inputs and %ld mutations\n", nin, iterations);
    for (int i = 0; i < nin; i++)
        free(in[i].data);
    free(in);
    free(buf);
    return 0;
}
