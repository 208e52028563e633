/* conf_int.h -- what conf.c, conf_parts.c and conf_pool.c share: the
 * parser's state and primitives (conf.c), the parts' parsers
 * (conf_parts.c) and a pool's (conf_pool.c). Private to conf/. Each
 * returns 0, or a negative errno with the error in p->err. */
#ifndef SHARDIS_CONF_INT_H
#define SHARDIS_CONF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "conf/conf.h"

struct parser {
    const char     *path;
    yaml_document_t doc;
    char           *err;
    size_t          errlen;
};

/* conf.c: "path:line:col: " and the message into p->err (n NULL: 1:1);
 * -EINVAL. */
int conf_fail(struct parser *p, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "path: out of memory" into p->err; -ENOMEM. */
int conf_oom(struct parser *p);
yaml_node_t *conf_node(struct parser *p, int id);
/* "a scalar", "a list", "a mapping": a node's kind, for errors. */
const char *conf_kind_name(const yaml_node_t *n);
int conf_scalar(struct parser *p, const yaml_node_t *n, const char *what,
                const char **s);
int conf_dup_scalar(struct parser *p, const yaml_node_t *n, const char *what,
                    char **out);
int conf_number(struct parser *p, const yaml_node_t *n, const char *what,
                long long min, long long max, long long *out);
int conf_size_value(struct parser *p, const yaml_node_t *n, const char *what, long long *out);
int conf_client_limits(struct parser *p, const yaml_node_t *n, struct conf_pool *pool);
int conf_boolean(struct parser *p, const yaml_node_t *n, const char *what,
                 bool *out);
typedef int (*pair_fn)(struct parser *p, yaml_node_t *key, const char *name,
                       yaml_node_t *value, void *arg);
int conf_each_pair(struct parser *p, yaml_node_t *map, const char *what,
                   pair_fn fn, void *arg);

/* conf_parts.c */
void conf_addr_free(struct conf_addr *a);
int conf_set_listen(struct parser *p, const yaml_node_t *n, const char *what,
                    struct conf_addr *addr);
int conf_set_servers(struct parser *p, yaml_node_t *n, struct conf_pool *pool);
int conf_set_sentinels(struct parser *p, yaml_node_t *n, struct conf_pool *pool);
int conf_set_users(struct parser *p, yaml_node_t *n, struct conf_pool *pool);
/* idgen: each key (a pair_fn of its mapping), then the whole checked. */
int conf_set_idgen_key(struct parser *p, yaml_node_t *k, const char *name,
                       yaml_node_t *v, void *arg);
int conf_check_idgen(struct parser *p, yaml_node_t *n, struct conf_idgen *ig);

/* conf_pool.c: one pool (a pair_fn of the top level mapping). */
int conf_parse_pool(struct parser *p, yaml_node_t *k, const char *name,
                    yaml_node_t *v, void *arg);

#endif
