/* test_loops.c -- several loops on threads (transport/loop.h, "Several
 * loops"): a loop's mail runs on its own thread, in the order posted; a
 * world stop parks every other running loop for as long as it lasts, and
 * visits each with cur_loop pointing at it; loops stopping the world at
 * the same time take turns instead of waiting for each other; a retired
 * loop refuses mail and is not waited for. No server: the loops run
 * timers and their mail. Run under ThreadSanitizer in the suite
 * (build-tsan), where a visit that is not ordered with the parked loop's
 * own writes is reported. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "proxy/transport/loop.h"

#define NLOOPS 3                /* the test's own thread's loop and two more */

/* A loop on a thread of its own, with a timer that counts its turns. */
static struct worker {
    struct loop  loop;
    uv_loop_t    uv;
    uv_thread_t  thread;
    uv_timer_t   ticker;
    uint64_t     ticks;         /* written by its own thread only (its ticker) */
    pthread_t    self;
    uint32_t     order[200], norder;    /* mail seen, in order */
    unsigned     stops;         /* world stops it made (its ticker's) */
    unsigned     want_stops;
    uint32_t     visits;        /* visits seen by this loop (written in stops) */
} w[NLOOPS];

static void tick_cb(uv_timer_t *t);

static void worker_main(void *arg)
{
    struct worker *x = arg;

    x->self = pthread_self();
    loop_run(&x->loop);
}

/* Loop i made and registered (loop 0: the test's own thread's, made
 * first so that its id is 0), with its ticker. */
static void make(uint32_t i)
{
    struct loop *back = cur_loop;

    cr_assert(eq(int, uv_loop_init(&w[i].uv), 0));
    loop_init(&w[i].loop, &w[i].uv);
    loop_register(&w[i].loop);
    cr_assert(eq(u32, w[i].loop.id, i));
    uv_timer_init(&w[i].uv, &w[i].ticker);
    w[i].ticker.data = &w[i];
    uv_timer_start(&w[i].ticker, tick_cb, 1, 1);
    cur_loop = back != NULL ? back : &w[i].loop;
}

static void start(uint32_t i)
{
    cr_assert(eq(int, uv_thread_create(&w[i].thread, worker_main, &w[i]), 0));
}

/* On a loop's own thread: close everything, so its run ends. */
static void retire(void *arg)
{
    struct worker *x = arg;

    uv_close((uv_handle_t *)&x->ticker, NULL);
    loop_retire(&x->loop);
}

static void finish(uint32_t i)
{
    uv_thread_join(&w[i].thread);
    cr_assert(eq(int, uv_loop_close(&w[i].uv), 0));
}

static void note(void *arg)
{
    struct worker *x = &w[cur_loop->id];

    cr_assert(pthread_equal(x->self, pthread_self()), "mail ran on its loop's thread");
    x->order[x->norder++] = (uint32_t)(uintptr_t)arg;
}

static void visit(void *arg)
{
    atomic_uint *seen = arg;

    w[cur_loop->id].visits++;
    atomic_fetch_or(seen, 1u << cur_loop->id);
}

static void tick_cb(uv_timer_t *t)
{
    struct worker *x = t->data;

    x->ticks++;
    if (x->stops < x->want_stops) {
        atomic_uint seen = 0;
        loop_each(visit, &seen);
        x->stops++;                 /* (after: a stop counted is a stop made) */
        cr_assert(eq(u32, atomic_load(&seen), (1u << NLOOPS) - 1), "every loop visited");
        cr_assert(cur_loop == &x->loop, "back on its own loop");
    }
}

/* Loop 0 is the test thread's and never runs: its handles closed here. */
static void close_zero(void)
{
    uv_close((uv_handle_t *)&w[0].ticker, NULL);
    uv_close((uv_handle_t *)&w[0].loop.mail_wake, NULL);
    uv_run(&w[0].uv, UV_RUN_DEFAULT);
    cr_assert(eq(int, uv_loop_close(&w[0].uv), 0));
}

static uint64_t ms_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

Test(loops, mail_runs_on_its_loop_in_the_order_posted)
{
    for (uint32_t i = 0; i < NLOOPS; i++)
        make(i);
    /* Mail before the thread runs waits for it. */
    for (uint32_t k = 0; k < 50; k++)
        cr_assert(loop_post(&w[1].loop, note, (void *)(uintptr_t)k));
    start(1);
    start(2);
    for (uint32_t k = 50; k < 150; k++)
        cr_assert(loop_post(&w[1].loop, note, (void *)(uintptr_t)k));
    cr_assert(loop_post(&w[1].loop, retire, &w[1]));
    cr_assert(loop_post(&w[2].loop, retire, &w[2]));
    finish(1);
    finish(2);
    cr_assert(eq(u32, w[1].norder, 150));
    for (uint32_t k = 0; k < 150; k++)
        cr_assert(eq(u32, w[1].order[k], k));
    cr_assert(not(loop_post(&w[1].loop, note, NULL)), "a retired loop takes no mail");
    close_zero();
}

/* The others tick every millisecond: stopped, they tick no more until
 * the stop is over; each is visited, and cur_loop comes back. */
Test(loops, a_world_stop_parks_every_other_loop_until_it_is_over)
{
    for (uint32_t i = 0; i < NLOOPS; i++)
        make(i);
    start(1);
    start(2);
    uint64_t t0 = ms_now(), a1, a2;
    do {
        loop_world_stop();
        a1 = w[1].ticks;
        a2 = w[2].ticks;
        loop_world_go();
    } while ((a1 < 5 || a2 < 5) && ms_now() - t0 < 5000);
    cr_assert(a1 >= 5 && a2 >= 5, "both loops ticking");
    loop_world_stop();
    a1 = w[1].ticks;
    a2 = w[2].ticks;
    struct timespec pause = {.tv_nsec = 30 * 1000000};
    nanosleep(&pause, NULL);
    cr_assert(eq(u64, w[1].ticks, a1), "loop 1 parked");
    cr_assert(eq(u64, w[2].ticks, a2), "loop 2 parked");
    loop_world_go();
    atomic_uint seen = 0;
    loop_each(visit, &seen);
    cr_assert(eq(u32, atomic_load(&seen), (1u << NLOOPS) - 1), "every loop visited");
    cr_assert(cur_loop == &w[0].loop, "cur_loop back");
    cr_assert(loop_post(&w[1].loop, retire, &w[1]));
    finish(1);
    /* A retired loop is not waited for, nor visited. */
    seen = 0;
    loop_each(visit, &seen);
    cr_assert(eq(u32, atomic_load(&seen), 1u | 4u), "loops 0 and 2 visited");
    cr_assert(loop_post(&w[2].loop, retire, &w[2]));
    finish(2);
    close_zero();
}

/* Three threads stopping the world 100 times each, at once: each stop
 * has every loop to itself, and none waits for another for ever. */
Test(loops, loops_stopping_the_world_at_once_take_turns, .timeout = 30)
{
    for (uint32_t i = 0; i < NLOOPS; i++) {
        make(i);
        w[i].want_stops = 100;
    }
    start(1);
    start(2);
    for (unsigned k = 0; k < 100; k++) {
        atomic_uint seen = 0;
        loop_each(visit, &seen);
        cr_assert(eq(u32, atomic_load(&seen), (1u << NLOOPS) - 1));
    }
    bool done = false;
    for (uint64_t t0 = ms_now(); !done && ms_now() - t0 < 20000;) {
        loop_world_stop();
        done = w[1].stops == 100 && w[2].stops == 100;
        loop_world_go();
    }
    cr_assert(done, "both loops made their 100 stops");
    loop_world_stop();
    uint32_t visits = w[0].visits + w[1].visits + w[2].visits;
    loop_world_go();
    cr_assert(eq(u32, visits, 3 * 300), "each stop visited each loop once");
    cr_assert(loop_post(&w[1].loop, retire, &w[1]));
    cr_assert(loop_post(&w[2].loop, retire, &w[2]));
    finish(1);
    finish(2);
    close_zero();
}
