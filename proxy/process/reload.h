/* reload.h -- applying an edited config file (reload.c). */
#ifndef SHARDIS_RELOAD_H
#define SHARDIS_RELOAD_H

#include <stddef.h>

/* Read the config file again and apply it (SIGHUP, SHARD.RELOAD). On
 * success returns 0 and writes a summary (INFO-style lines) into out; a
 * file that is bad or cannot apply changes nothing: a negative errno and
 * the reason in err. SHARD.RELOAD runs it too (local_reload, set by
 * proxy_run). */
int reload_run(char *out, size_t outlen, char *err, size_t errlen);

#endif
