/* clientlist.h -- what CLIENT LIST, CLIENT INFO and CLIENT KILL say of
 * clients and match them by (clientlist.c). */
#ifndef SHARDIS_CLIENTLIST_H
#define SHARDIS_CLIENTLIST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct client;

/* c as a line of CLIENT LIST and CLIENT INFO, redis-server 7.0's fields in
 * its order, without the newline. */
void client_describe(const struct client *c, FILE *f);
/* What CLIENT KILL matches a client by; a field unset (NULL, 0) matches
 * any. */
struct client_filter {
    const uint64_t *ids;        /* [nids]: any of them; nids 0 any */
    uint32_t    nids;
    const char *addr, *laddr, *user;
    int         type;           /* -1 any; 0 normal; 1 pubsub */
    long long   maxage;         /* seconds; 0 any */
};
bool client_matches(const struct client *c, const struct client_filter *f);

#endif
