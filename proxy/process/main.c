/* main.c -- the shardis command line.
 *
 *   shardis -c FILE [-d] [-p PIDFILE] [-o LOG] [-v N]   run the proxy
 *   shardis -c FILE -t              check a config, as nutcracker -t does
 *   shardis locate -c FILE [...]    which server owns each key on stdin
 *   shardis diff OLD NEW [...]      what a change of servers would move
 *   shardis acl -c FILE [--check]   the ACL users the servers need
 *
 * Exit codes: 0 ok, 1 error, 2 bad usage. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/conf.h"
#include "proxy/process/cli.h"
#include "proxy/process/modules.h"
#include "proxy/base/log.h"
#include "proxy/process/proxy.h"

#ifndef SHARDIS_VERSION
#define SHARDIS_VERSION "unknown"
#endif

#ifdef SHARDIS_JEMALLOC
#include <jemalloc/jemalloc.h>

/* Hand freed pages back to the kernel within a second, from jemalloc's own
 * thread, so memory falls after a burst of clients even when the proxy
 * then goes quiet (by default jemalloc purges only while allocating). */
const char *malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

/* Idle: the thread cache keeps up to 20 freed chunks of 14 KiB and up to
 * 200 objects of each small size, and it is only trimmed while allocating;
 * flush it, then return every free page now rather than over the decay. */
static void jemalloc_idle(void)
{
    char purge[32];

    snprintf(purge, sizeof(purge), "arena.%d.purge", MALLCTL_ARENAS_ALL);
    mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
    mallctl(purge, NULL, NULL, NULL, 0);
}
#endif

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: shardis -c FILE [-d] [-p PIDFILE] [-o LOGFILE] [-v LEVEL]\n"
        "       shardis -c FILE -t\n"
        "       shardis locate -c FILE [-p POOL] [--hex]\n"
        "       shardis diff OLD NEW [-p POOL]\n"
        "       shardis acl -c FILE [-p POOL] [--check]\n"
        "       shardis commands\n"
        "       shardis -V | -h\n"
        "\n"
        "Options:\n"
        "  -c, --conf-file=FILE   the configuration file (nutcracker.yml superset)\n"
        "  -t, --test-conf        check the configuration and exit: 0 when it is\n"
        "                         valid, 1 with file:line:col and the reason if not\n"
        "  -d, --daemonize        run in the background\n"
        "  -p, --pid-file=FILE    write the process id to FILE (when running)\n"
        "  -o, --output=FILE      log to FILE instead of stderr\n"
        "  -v, --verbosity=N      log level: 3 errors, 4 warnings, 5 notices\n"
        "                         (default), 6 info, 7 debug\n"
        "      --threads=N|auto   event loops, one thread each (default: the\n"
        "                         config's threads:, else $SHARDIS_THREADS,\n"
        "                         else 1); auto: one per core\n"
        "  -p, --pool=POOL        (locate, diff) the pool; default: the first one;\n"
        "                         (acl) the pool; default: every one\n"
        "      --hex              (locate) keys on stdin are hex-encoded bytes\n"
        "      --check            (acl) ask each server whether it has them\n"
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
        "commands prints which Redis commands shardis runs how (doc/commands.md's table).\n"
        "\n"
        "acl prints the ACL SETUSER lines each pool's servers need: the user\n"
        "clients' commands and scripts run as (shardis makes it itself where\n"
        "its own user may), and the internal_user and keyless_user if named.\n"
        "--check asks each server, as shardis's own user, whether they are\n"
        "there and no more than that (1 if one is not).\n"
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

enum { OPT_HEX = 256, OPT_CHECK, OPT_THREADS };

static const struct option long_opts[] = {
    {"conf-file", required_argument, NULL, 'c'},
    {"test-conf", no_argument,       NULL, 't'},
    {"pool",      required_argument, NULL, 'p'},
    {"pid-file",  required_argument, NULL, 'p'},
    {"daemonize", no_argument,       NULL, 'd'},
    {"output",    required_argument, NULL, 'o'},
    {"verbosity", required_argument, NULL, 'v'},
    {"hex",       no_argument,       NULL, OPT_HEX},
    {"check",     no_argument,       NULL, OPT_CHECK},
    {"threads",   required_argument, NULL, OPT_THREADS},
    {"version",   no_argument,       NULL, 'V'},
    {"help",      no_argument,       NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Detach from the terminal, as nutcracker -d does; the working directory
 * stays, so relative paths given on the command line keep working. */
static int daemonize(void)
{
    pid_t pid = fork();
    int fd;

    if (pid < 0)
        return -errno;
    if (pid > 0)
        _exit(0);
    if (setsid() < 0)
        return -errno;
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid > 0)
        _exit(0);
    umask(0);
    fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        if (fd > STDERR_FILENO)
            close(fd);
    }
    return 0;
}

/* --threads's value (N, or auto: 0), or -1 if it is not one. */
static int threads_value(const char *s)
{
    char *end;
    long v;

    if (strcmp(s, "auto") == 0)
        return 0;
    v = strtol(s, &end, 10);
    return *s == '\0' || *end != '\0' || v < 0 || v > CONF_THREADS_MAX ? -1 : (int)v;
}

/* $SHARDIS_THREADS, where neither --threads nor the config says: -1 if
 * unset or empty, -2 if not a value (a container's default, a test
 * suite run with several loops). */
static int threads_env(void)
{
    const char *s = getenv("SHARDIS_THREADS");

    if (s == NULL || *s == '\0')
        return -1;
    int v = threads_value(s);
    return v < 0 ? -2 : v;
}

static int run(const char *path, bool detach, const char *pidfile, const char *log,
               int level, int threads)
{
    char err[CONF_ERRLEN];
    struct conf *cf;
    int rc;

    if (conf_load(&cf, path, err, sizeof(err)) < 0) {
        fprintf(stderr, "shardis: %s\n", err);
        return 1;
    }
    if ((rc = log_init(level, log)) < 0) {
        fprintf(stderr, "shardis: cannot open log file '%s': %s\n", log, strerror(-rc));
        conf_free(cf);
        return 1;
    }
    if (detach && (rc = daemonize()) < 0) {
        fprintf(stderr, "shardis: cannot daemonize: %s\n", strerror(-rc));
        conf_free(cf);
        return 1;
    }
    proxy_hold_sighup();        /* a reload once the loop runs (proxy.c) */
    if (pidfile != NULL) {
        FILE *f = fopen(pidfile, "w");
        if (f == NULL) {
            log_error("cannot write pid file '%s': %s", pidfile, strerror(errno));
            conf_free(cf);
            return 1;
        }
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    log_notice("shardis %s started on pid %d with '%s'", SHARDIS_VERSION, (int)getpid(), path);
#ifdef SHARDIS_JEMALLOC
    proxy_idle_hook = jemalloc_idle;
#endif
    if (threads < 0)
        threads = cf->threads;
    if (threads < 0 && (threads = threads_env()) == -2) {
        fprintf(stderr, "shardis: SHARDIS_THREADS is not auto nor a number from 0 to "
                CONF_THREADS_MAX_TEXT "\n");
        conf_free(cf);
        return 1;
    }
    rc = proxy_run(cf, threads < 0 ? 1 : threads);    /* takes cf */
    if (pidfile != NULL)
        unlink(pidfile);
    return rc;
}

int main(int argc, char **argv)
{
    const char *cmd = NULL, *conf = NULL, *pool = NULL, *log = NULL;
    bool test = false, hex = false, detach = false, check = false;
    int c, level = LOG_NOTICE, threads = -1;     /* -1: the config's */

    /* First: the commands' kinds, a config's check (its ACL) and the
     * proxy all depend on what the modules answer. */
    modules_register();
    if (argc == 2 && strcmp(argv[1], "commands") == 0)
        return cli_commands(stdout);
    if (argc > 1 && (strcmp(argv[1], "locate") == 0 || strcmp(argv[1], "diff") == 0 ||
                     strcmp(argv[1], "acl") == 0)) {
        cmd = argv[1];
        argv++;
        argc--;
    }
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:tp:do:v:Vh", long_opts, NULL)) != -1) {
        switch (c) {
        case 'c': conf = optarg; break;
        case 't': test = true; break;
        case 'p': pool = optarg; break;
        case 'd': detach = true; break;
        case 'o': log = optarg; break;
        case 'v': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v < 0 || v > 11)
                return bad_usage("verbosity '%s' is not a level from 0 to 11", optarg);
            level = (int)v;
            break;
        }
        case OPT_HEX: hex = true; break;
        case OPT_CHECK: check = true; break;
        case OPT_THREADS:
            if ((threads = threads_value(optarg)) < 0)
                return bad_usage("--threads '%s' is not auto nor a number from 0 to "
                                 CONF_THREADS_MAX_TEXT, optarg);
            break;
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
        if (hex)
            return bad_usage("%s", "--hex goes with locate");
        if (test)
            return cli_test_conf(conf);
        return run(conf, detach, pool, log, level, threads);
    }
    if (test || detach || log != NULL || threads >= 0)
        return bad_usage("-t, -d, -o and --threads do not go with %s", cmd);
    if (strcmp(cmd, "acl") == 0) {
        if (conf == NULL)
            return bad_usage("%s", "acl needs -c FILE");
        if (hex)
            return bad_usage("%s", "--hex goes with locate");
        if (optind < argc)
            return bad_usage("unexpected argument '%s'", argv[optind]);
        return cli_acl(conf, pool, check, stdout);
    }
    if (check)
        return bad_usage("%s", "--check goes with acl");
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
