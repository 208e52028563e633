/* own.c -- shardis's own keys on the servers, left out of what a client
 * is told of the keyspace (own.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idgen/idgen.h"
#include "proxy/modules/genkey.h"
#include "proxy/modules/own.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/base/resp.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"

bool own_key(const struct resp_rd *rd, const struct resp_val *v)
{
    return v->type == RESP_BULK &&
           (resp_rd_is(rd, v, SHARDIS_RESERVED, strlen(SHARDIS_RESERVED), true) ||
            resp_rd_is(rd, v, SHARDIS_SEQUENCE, strlen(SHARDIS_SEQUENCE), true));
}

void own_exists(const struct pool *p, uint32_t server, struct resp_w *w)
{
    const uint16_t *shards;
    uint32_t n = genkey_sequences_on(p, server, &shards);
    size_t npools = cur_loop->conf->npools;
    const char **argv;
    char (*names)[13], (*records)[sizeof(SHARDIS_RESERVED "ctl:") + 64];

    if (p->mig != NULL)
        shards = NULL;              /* (an earlier owner may hold one still) */
    if (shards == NULL)
        n = IDGEN_SHARDS;
    argv = xmalloc((1 + n + npools) * sizeof(*argv));
    names = xmalloc(n * sizeof(*names));
    records = xmalloc(npools * sizeof(*records));
    argv[0] = "EXISTS";
    for (uint32_t i = 0; i < n; i++) {
        genkey_sequence_key(shards != NULL ? shards[i] : i, names[i]);
        argv[1 + i] = names[i];
    }
    /* mig_record.c's name: every pool's, as pools may share servers */
    for (size_t i = 0; i < npools; i++) {
        snprintf(records[i], sizeof(records[i]), "%sctl:%.63s", SHARDIS_RESERVED,
                 cur_loop->conf->pools[i].name);
        argv[1 + n + i] = records[i];
    }
    resp_w_command(w, (int)(1 + n + npools), argv, NULL);
    free(records);
    free(names);
    free(argv);
}

/* Redis 7's EVAL_RO: a script that writes nothing runs on replicas too.
 * string.sub on the prefixes is route.h's route_reserved. */
_Static_assert(sizeof(SHARDIS_RESERVED) - 1 == 10 && sizeof(SHARDIS_SEQUENCE) - 1 == 9,
               "the script's prefix lengths");
static const char randomkey_script[] =
    "local function own(k)\n"
    "  return string.sub(k, 1, 10) == '" SHARDIS_RESERVED "' or\n"
    "         string.sub(k, 1, 9) == '" SHARDIS_SEQUENCE "'\n"
    "end\n"
    "for i = 1, 16 do\n"
    "  local k = redis.call('RANDOMKEY')\n"
    "  if not k then return nil end\n"
    "  if not own(k) then return k end\n"
    "end\n"
    "local cursor = '0'\n"
    "repeat\n"
    "  local page = redis.call('SCAN', cursor, 'COUNT', 100)\n"
    "  cursor = page[1]\n"
    "  for _, k in ipairs(page[2]) do\n"
    "    if not own(k) then return k end\n"
    "  end\n"
    "until cursor == '0'\n"
    "return nil\n";

void own_randomkey(struct resp_w *w)
{
    resp_w_command(w, 3, (const char *const[]){"EVAL_RO", randomkey_script, "0"}, NULL);
}
