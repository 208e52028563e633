/* main.c -- the shardis command line.
 *
 *   shardis -c FILE -t              check a config, as nutcracker -t does
 *   shardis locate -c FILE [...]    which server owns each key on stdin
 *   shardis diff OLD NEW [...]      what a change of servers would move
 *
 * Exit codes: 0 ok, 1 error, 2 bad usage. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/cli.h"

#ifndef SHARDIS_VERSION
#define SHARDIS_VERSION "unknown"
#endif

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: shardis -c FILE -t\n"
        "       shardis locate -c FILE [-p POOL] [--hex]\n"
        "       shardis diff OLD NEW [-p POOL]\n"
        "       shardis -V | -h\n"
        "\n"
        "Options:\n"
        "  -c, --conf-file=FILE   the configuration file (nutcracker.yml superset)\n"
        "  -t, --test-conf        check the configuration and exit: 0 when it is\n"
        "                         valid, 1 with file:line:col and the reason if not\n"
        "  -p, --pool=POOL        (locate, diff) the pool; default: the first one\n"
        "      --hex              (locate) keys on stdin are hex-encoded bytes\n"
        "  -V, --version          print the version and exit\n"
        "  -h, --help             print this help and exit\n"
        "\n"
        "locate reads keys from stdin, one per line, and prints\n"
        "\"<key as given>\\t<server>\" for each: the server's name, or its\n"
        "host:port as written in the config when it has no name.\n"
        "\n"
        "diff prints each server's share of the key space under OLD and NEW\n"
        "and the share of all keys that would move, from which server to which.\n"
        "\n"
        "Exit status: 0 ok, 1 error, 2 usage.\n");
}

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "shardis: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'shardis --help'.\n");
    return 2;
}

enum { OPT_HEX = 256 };

static const struct option long_opts[] = {
    {"conf-file", required_argument, NULL, 'c'},
    {"test-conf", no_argument,       NULL, 't'},
    {"pool",      required_argument, NULL, 'p'},
    {"hex",       no_argument,       NULL, OPT_HEX},
    {"version",   no_argument,       NULL, 'V'},
    {"help",      no_argument,       NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
    const char *cmd = NULL, *conf = NULL, *pool = NULL;
    bool test = false, hex = false;
    int c;

    if (argc > 1 && (strcmp(argv[1], "locate") == 0 || strcmp(argv[1], "diff") == 0)) {
        cmd = argv[1];
        argv++;
        argc--;
    }
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:tp:Vh", long_opts, NULL)) != -1) {
        switch (c) {
        case 'c': conf = optarg; break;
        case 't': test = true; break;
        case 'p': pool = optarg; break;
        case OPT_HEX: hex = true; break;
        case 'V':
            printf("shardis %s\n", SHARDIS_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            return bad_usage("option '%s' needs a value", argv[optind - 1]);
        default:
            return bad_usage("unknown option '%s'", argv[optind - 1]);
        }
    }

    if (cmd == NULL) {
        if (optind < argc)
            return bad_usage("unexpected argument '%s'", argv[optind]);
        if (conf == NULL)
            return bad_usage("%s", "no configuration file: give -c FILE");
        if (!test)
            return bad_usage("%s", "this build checks configs (-t), locates keys and "
                             "diffs rings; it does not serve requests yet");
        if (pool != NULL || hex)
            return bad_usage("%s", "-p and --hex go with locate or diff");
        return cli_test_conf(conf);
    }
    if (test)
        return bad_usage("-t does not go with %s", cmd);
    if (strcmp(cmd, "locate") == 0) {
        if (conf == NULL)
            return bad_usage("%s", "locate needs -c FILE");
        if (optind < argc)
            return bad_usage("unexpected argument '%s'", argv[optind]);
        return cli_locate(conf, pool, hex, stdin, stdout);
    }
    if (hex || conf != NULL)
        return bad_usage("%s", "diff takes two config files: shardis diff OLD NEW");
    if (argc - optind != 2)
        return bad_usage("%s", "diff takes two config files: shardis diff OLD NEW");
    return cli_diff(argv[optind], argv[optind + 1], pool, stdout);
}
