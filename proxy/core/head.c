/* head.c -- a request's head spread over chunks, copied (head.h). */
#include <string.h>

#include "proxy/core/head.h"

void head_keep_spread(struct req_head *h, struct rstream *in, uint64_t off, uint64_t end)
{
    h->kept = 0;
    for (struct mbuf *m = rstream_find(in, off); m != NULL && off < end; m = m->next) {
        uint64_t to = end < m->base + m->len ? end : m->base + m->len;
        memcpy(h->raw + h->kept, m->data + (off - m->base), (size_t)(to - off));
        h->kept += (uint8_t)(to - off);
        off = to;
    }
}
