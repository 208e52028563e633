/* cli.h -- the operator's offline tools: check a config, locate keys,
 * diff two configs' rings, print the ACL users the servers need. None of
 * them opens a socket but `acl --check`.
 *
 * Each returns the process exit code: 0 ok, 1 error (already reported on
 * stderr), as nutcracker does. */
#ifndef SHARDIS_CLI_H
#define SHARDIS_CLI_H

#include <stdbool.h>
#include <stdio.h>

/* Validate a config: "shardis: configuration file 'F' syntax is ok". */
int cli_test_conf(const char *path);

/* Read keys from in, one per line (hex-encoded when hex), and print
 * "<line as given>\t<server>" for each to out. */
int cli_locate(const char *path, const char *pool, bool hex, FILE *in, FILE *out);

/* Print each server's share before and after, and what moves where. */
int cli_diff(const char *oldpath, const char *newpath, const char *pool, FILE *out);

/* Print doc/commands.md's command-support table: for each way shardis treats a
 * command, the Redis commands it treats that way (route_kind). */
int cli_commands(FILE *out);

/* Print, for each pool of the config (or the one named), the ACL SETUSER
 * lines its servers need: the clients' user (srvuser.c, or the
 * backend_user's rules), the internal_user and keyless_user where named.
 * With check, ask each server whether it has them (1 if one has not). */
int cli_acl(const char *path, const char *pool, bool check, FILE *out);

#endif
