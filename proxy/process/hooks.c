/* hooks.c -- the wiring of the layers above to the transport: what a
 * client's turns set going (transport/client.h's struct client_hooks) and
 * what frees what a module hung on a request (transport/req.h's struct
 * req_release), and what a server connection's turns set going
 * (transport/backend.h's struct backend_hooks). The transport calls these and nothing above it by name;
 * which layer does what at each turn is decided here, and only here. */
#include <stdint.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/modules/genkey.h"
#include "proxy/modules/mig.h"
#include "proxy/core/pool_conn.h"
#include "proxy/modules/sentinel.h"
#include "proxy/core/srvuser.h"
#include "proxy/transport/client.h"
#include "proxy/modules/frag.h"
#include "proxy/core/gate.h"
#include "proxy/process/hooks.h"
#include "proxy/ops/hotkeys.h"
#include "proxy/ops/info.h"
#include "proxy/modules/minify.h"
#include "proxy/ops/monitor.h"
#include "proxy/modules/pin.h"
#include "proxy/core/pool.h"
#include "proxy/modules/pubsub.h"
#include "proxy/transport/req.h"
#include "proxy/core/route.h"
#include "proxy/ops/slowlog.h"
#include "proxy/ops/stats.h"
#include "proxy/modules/track.h"

/* A new client is signed in as its pool's default user, or none (acl.h). */
static void hooks_session(struct client *c)
{
    c->user = acl_new_session(c->pool->acl);
}

/* A client's reply is complete: counted by its command, by the one server
 * that answered it (not a split request: r->server is where it was sent,
 * r->backend only says it was), in the slow log, and as a hot key. One
 * call for all of them: this runs for every reply. */
static void hooks_replied(struct client *c, struct req *r, uint64_t us)
{
    struct pool *p = c->pool;

    stats_reply(p->stats, r, us, r->backend != NULL && r->frag == NULL
                                      ? &p->servers[r->server].latency : NULL);
    slowlog_maybe(p, c, r, us);
    if (p->hotkeys != NULL && r->cmd != 0 && hotkeys_active(p))
        hotkeys_reply(p, r, us);
}

/* A closing client is dropped by, in this order: its gate (what waits is
 * let go), its pin and transaction, its subscriptions, MONITOR, the
 * INFOs it waits for, and the keys it tracks. */
static void (*const hooks_gone[])(struct client *c) = {
    gate_client_gone, pin_client_gone, pubsub_client_gone, monitor_gone, info_client_gone,
    track_client_gone,
};

static const struct client_hooks hooks_client = {
    .session = hooks_session,
    .request = route_request,
    .replied = hooks_replied,
    .held_answered = gate_answered,
    .pin_answered = pin_check,
    .fragment_done = frag_done,
    .gone = hooks_gone,
    .ngone = sizeof(hooks_gone) / sizeof(hooks_gone[0]),
};

static const struct req_release hooks_release = {
    .kept = route_kept_free,
    .minified = minify_req_free,
};

/* What a server connection calls up (backend.h says when). */
static const struct backend_hooks conn_hooks = {
    .conf = pool_conn_conf,
    .server = pool_conn_server,
    .sign_in = srvuser_sign_in,
    .server_failed = pool_backend_failed,
    .replica_shun = pool_shun,
    .connecting = genkey_connecting,
    .says_master = sentinel_says_master,
    .doubt = sentinel_hint,
    .frame = pubsub_frame,
    .lost = pubsub_failed,
    .unblocked = mig_unblocked,
    .keep_sent = hotkeys_active,
    .tracked = track_answered,
    .invalidate = track_invalidate,
    .untracked = track_untracked,
    .tracking_hello = track_hello,
    .progress = pin_check,
    .waits_on = gate_waits_on,
    .ready = gate_kick,
    .closed = pool_conn_closed,
    .idle = pool_conn_idle,
};

void hooks_register(void)
{
    client_set_hooks(&hooks_client);
    req_set_release(&hooks_release);
    backend_set_hooks(&conn_hooks);
}
