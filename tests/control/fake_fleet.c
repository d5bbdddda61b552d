/* fake_fleet.c -- see fake_fleet.h. One agent per fake worker plus one driver thread
 * per fleet that plays the collector's writer thread (finishing windows), and in driven
 * mode also turns every agent and relay: each agent's socket is in the driver's epoll set
 * (re-registered whenever the agent reconnects), each relay's epoll descriptor too; every
 * agent is turned once per poll_ns, a slice of them per tick, and every relay every
 * 100 ms for its timers. What the idle fleet costs is what its agents' sampling and
 * heartbeats cost, not walks over the whole fleet per tick (at 100k workers on two cores
 * those walks starved the round they were simulating). */
#define _GNU_SOURCE
#include "fake_fleet.h"
#include "control/relay.h"

#include "summarize/summary_io.h"
#include "synth/synth.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TEMPLATES 8
#define FAULTY_TEMPLATE 7

typedef struct fake_worker {
    struct fake_fleet *fleet;
    int32_t rank;
    fake_behaviour b;
    pt_agent *agent;
    int64_t t0;
    pthread_mutex_t lock;
    bool armed, delivered, dead;
    int32_t windows;         /* armed so far */
    int64_t start_step;
    int32_t steps;
    char raw_path[PT_CTL_MAX_PATH];
    pt_buf summary;
    /* driven mode: what the driver's epoll set watches for it */
    int watched_fd;
    short watched_events;
} fake_worker;

struct fake_fleet {
    fake_fleet_config cfg;
    fake_worker *workers;
    pt_relay **relays;           /* tree mode: one per node the fleet holds (NULL once killed) */
    int32_t first_node, nodes;
    int epoll_fd;                /* driven mode */
    pthread_t driver;
    atomic_bool stop;
    /* Windows armed and not yet finished: the writer's walk over every worker is skipped
     * while there are none (it would cost the idle fleet more than everything else). */
    atomic_int open_windows;
    pthread_mutex_t agents_lock; /* guards fake_worker.agent against a dying worker, and relays */
};

void fake_fleet_config_init(fake_fleet_config *cfg, int32_t world_size)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->world_size = world_size;
    cfg->count = world_size;
    snprintf(cfg->coordinator_host, sizeof cfg->coordinator_host, "127.0.0.1");
    cfg->normal = (fake_behaviour){20 * 1000000LL, -1, -1, 1.0, false, false, NULL, NULL, NULL};
    cfg->special = cfg->normal;
    cfg->special_rank = -1;
    cfg->heartbeat_ns = 200 * 1000000LL;
    cfg->poll_ns = 20 * 1000000LL;
    cfg->hang_floor_ns = 400 * 1000000LL;
    cfg->auto_interval_ns = 3600 * 1000000000LL;
    cfg->ranks_per_node = 8;
    cfg->kill_relay_node = -1;
    cfg->kill_relay_window = 1;
}

/* As the product names a node's relay socket (pt_relay_socket_for), with the node in it:
 * the fleet's nodes share one machine. */
void fake_fleet_relay_host(uint16_t relay_port, int32_t node, char *dst, size_t cap)
{
    snprintf(dst, cap, "@perftracker-fleet-%lu-%u-%d", (unsigned long)geteuid(), (unsigned)relay_port, node);
}

/* ---------------------------------------------------------------- the fake collector */

/* Steps completed at `now` and when the last one ended: a pure function of time. */
static int64_t steps_at(const fake_worker *w, int64_t now, int64_t *last_end)
{
    const fake_behaviour *b = &w->b;
    int64_t elapsed = now - w->t0, n, end;
    int64_t slow_start = b->slow_from_step >= 0 ? b->slow_from_step * b->step_ns : INT64_MAX;
    if (elapsed < slow_start) {
        n = elapsed / b->step_ns;
        end = n * b->step_ns;
    } else {
        int64_t slow_step = (int64_t)((double)b->step_ns * b->slow_factor);
        int64_t extra = (elapsed - slow_start) / slow_step;
        n = b->slow_from_step + extra;
        end = slow_start + extra * slow_step;
    }
    if (b->hang_at_step >= 0 && n > b->hang_at_step) {
        n = b->hang_at_step;
        end = n * b->step_ns; /* hangs are tested without slowdowns */
    }
    *last_end = n > 0 ? w->t0 + end : 0;
    return n;
}

static void status_hook(void *ctx, int64_t *steps_done, int64_t *last_step_end_ns, int64_t *mean_step_ns)
{
    fake_worker *w = ctx;
    int64_t now = pt_now_ns();
    *steps_done = steps_at(w, now, last_step_end_ns);
    *mean_step_ns = w->b.step_ns;
}

static int arm_hook(void *ctx, int64_t start_step, int32_t steps, const char *raw_trace_path)
{
    fake_worker *w = ctx;
    pthread_mutex_lock(&w->lock);
    if (!w->armed || w->delivered)
        atomic_fetch_add(&w->fleet->open_windows, 1);
    w->armed = true;
    w->windows++;
    w->delivered = false;
    w->start_step = start_step;
    w->steps = steps;
    snprintf(w->raw_path, sizeof w->raw_path, "%s", raw_trace_path);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

static void snapshot_hook(void *ctx, pt_agent_snapshot *out)
{
    fake_worker *w = ctx;
    const char *stack = w->b.stack ? w->b.stack : w->b.hang_at_step >= 0 ? FAKE_HANG_STACK : "fake_train.py: <module>";
    snprintf(out->stack, out->stack_cap, "%s", stack);
    snprintf(out->threads, out->threads_cap, "thread\tMainThread\t%d\t1\t%s\nthread\tpin_memory\t%d\t0\t%s\n",
             1000 + w->rank, stack, 2000 + w->rank, "threading.py: _bootstrap|threading.py: run");
    snprintf(out->collectives, out->collectives_cap, "%s", w->b.collectives ? w->b.collectives : "");
}

static void write_raw_trace(const fake_worker *w, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "{\"fake raw trace\": {\"rank\": %d}}\n", w->rank);
        fclose(f);
    }
}

/* Plays the collector's writer thread: finishes windows that have passed. */
static void drive_once(fake_fleet *f)
{
    if (atomic_load(&f->open_windows) == 0)
        return;
    int64_t now = pt_now_ns();
    for (int32_t i = 0; i < f->cfg.count; i++) {
        fake_worker *w = &f->workers[i];
        int64_t last_end;
        int64_t n = steps_at(w, now, &last_end);
        pthread_mutex_lock(&w->lock);
        bool due = w->armed && !w->delivered && !w->dead && n >= w->start_step + w->steps;
        bool dies = w->armed && !w->dead && w->b.die_in_window && n >= w->start_step;
        char path[PT_CTL_MAX_PATH];
        snprintf(path, sizeof path, "%s", w->raw_path);
        bool relay_dies = w->armed && n >= w->start_step && w->windows == f->cfg.kill_relay_window;
        if ((due || dies) && !w->delivered)
            atomic_fetch_sub(&f->open_windows, 1);
        if (due || dies)
            w->delivered = true;
        if (dies)
            w->dead = true;
        pthread_mutex_unlock(&w->lock);
        int32_t node = w->rank / f->cfg.ranks_per_node;
        if (relay_dies && node == f->cfg.kill_relay_node && f->relays && f->relays[node - f->first_node]) {
            fprintf(stderr, "fake_fleet: the relay of node %d dies as rank %d's window begins\n", node, w->rank);
            pthread_mutex_lock(&f->agents_lock);
            pt_relay *r = f->relays[node - f->first_node];
            f->relays[node - f->first_node] = NULL;
            pthread_mutex_unlock(&f->agents_lock);
            pt_relay_destroy(r); /* its agents live on, and find nobody at its address */
        }
        if (dies) {
            if (f->cfg.die)
                f->cfg.die(w->rank);
            pthread_mutex_lock(&f->agents_lock);
            pt_agent *a = w->agent;
            w->agent = NULL;
            pthread_mutex_unlock(&f->agents_lock);
            pt_agent_destroy(a, false); /* gone without a goodbye */
        } else if (due && w->b.window_error) {
            pt_agent_finish_window(w->agent, NULL, 0, "", 1, w->b.window_error);
        } else if (due) {
            if (path[0])
                write_raw_trace(w, path);
            pt_agent_finish_window(w->agent, w->summary.data, w->summary.len, path, 0, NULL);
        }
    }
}

static void *driver_main(void *arg)
{
    fake_fleet *f = arg;
    while (!atomic_load(&f->stop)) {
        drive_once(f);
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    return NULL;
}

/* ---------------------------------------------------------------- driven mode */

/* Keeps the epoll set in step with the agent's socket. A closed socket leaves the set by
 * itself (and its number may be another agent's by now), so an old one is never DELeted. */
static void watch_agent(fake_fleet *f, fake_worker *w)
{
    short events = 0;
    int fd = w->agent ? pt_agent_fd(w->agent, &events) : -1;
    if (fd == w->watched_fd && events == w->watched_events)
        return;
    w->watched_fd = fd;
    w->watched_events = events;
    if (fd < 0)
        return;
    struct epoll_event ev = {(uint32_t)events, {.ptr = w}};
    if (epoll_ctl(f->epoll_fd, EPOLL_CTL_MOD, fd, &ev) != 0)
        epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, fd, &ev);
}

static void drive_agent(fake_fleet *f, fake_worker *w, short revents, int64_t now)
{
    if (!w->agent)
        return;
    pt_agent_drive(w->agent, revents, now);
    watch_agent(f, w);
}

/* Every poll_ns each agent is turned once and every relay PERIODIC times (its timers:
 * reconnects, handshake deadlines); between those only what epoll reports is touched.
 * The agents are turned a slice per tick, round robin, so a tick costs count * tick /
 * poll_ns turns, never a walk over the whole fleet. */
#define RELAY_PERIODIC_NS (100 * 1000000LL)

static void *driven_main(void *arg)
{
    fake_fleet *f = arg;
    struct epoll_event events[512];
    int64_t tick_ns = PT_MIN(20000000LL, f->cfg.poll_ns);
    int64_t next_tick = 0, next_relays = 0, last_tick = pt_now_ns();
    int32_t cursor = 0;
    double owed = 0; /* agents due in this slice, fractions carried over */
    while (!atomic_load(&f->stop)) {
        int n = epoll_wait(f->epoll_fd, events, PT_ARRAY_LEN(events), 5);
        int64_t now = pt_now_ns();
        for (int i = 0; i < n; i++) {
            void *tag = events[i].data.ptr;
            if (tag >= (void *)f->workers && tag < (void *)(f->workers + f->cfg.count))
                drive_agent(f, tag, (short)events[i].events, now);
            else if (*(pt_relay **)tag)
                pt_relay_turn(*(pt_relay **)tag, now);
        }
        if (now < next_tick)
            continue;
        next_tick = now + tick_ns;
        drive_once(f);
        /* A stall (a loaded machine) is not paid back: each agent is turned once for it. */
        owed = PT_MIN(owed + (double)f->cfg.count * (double)(now - last_tick) / (double)f->cfg.poll_ns,
                      (double)f->cfg.count);
        last_tick = now;
        for (; owed >= 1; owed--, cursor = (cursor + 1) % f->cfg.count)
            drive_agent(f, &f->workers[cursor], 0, now);
        if (now < next_relays)
            continue;
        next_relays = now + RELAY_PERIODIC_NS;
        for (int32_t i = 0; f->relays && i < f->nodes; i++)
            if (f->relays[i])
                pt_relay_turn(f->relays[i], now);
    }
    return NULL;
}

/* ---------------------------------------------------------------- summaries */

static pt_worker_summary *template_summary(const pt_synth_plan *plan, int rank)
{
    pt_error err;
    pt_worker_summary *out = pt_synth_plan_summary(plan, rank, &err);
    if (!out)
        fprintf(stderr, "fake_fleet: cannot build template %d: %s\n", rank, err.message);
    return out;
}

static void make_templates(pt_buf encoded[TEMPLATES])
{
    pt_synth_job job;
    pt_synth_job_init(&job);
    job.workers = TEMPLATES;
    job.steps = 2;
    job.layers = 2;
    job.fault = PT_FAULT_SLOW_GPU;
    job.fault_ranks[0] = FAULTY_TEMPLATE;
    job.fault_rank_count = 1;
    pt_error err;
    pt_synth_plan *plan = pt_synth_plan_new(&job, &err);
    for (int t = 0; t < TEMPLATES; t++) {
        pt_worker_summary *s = plan ? template_summary(plan, t) : NULL;
        if (s)
            pt_summary_encode(s, &encoded[t]);
        pt_summary_free(s);
    }
    pt_synth_plan_free(plan);
}

/* The template, re-labelled as this fake worker (what its collector would have said). */
static void worker_summary(fake_worker *w, const pt_buf *template, int32_t world_size)
{
    pt_error err;
    pt_worker_summary *s = template->len ? pt_summary_decode(template->data, template->len, &err) : NULL;
    if (!s)
        return;
    char host[64], name[128];
    int32_t per_node = w->fleet->cfg.ranks_per_node;
    snprintf(host, sizeof host, "fakenode%d", w->rank / per_node);
    pt_worker_file_name(name, sizeof name, host, w->rank % per_node, 100000 + w->rank, ".ptrace");
    free(s->name), free(s->host);
    s->name = pt_xstrdup(name);
    s->host = pt_xstrdup(host);
    s->rank = w->rank;
    s->rank_source = PT_RANK_FROM_TRACE;
    s->local_rank = w->rank % per_node;
    s->world_size = world_size;
    s->pid = 100000 + w->rank;
    pt_summary_free_hang_state(s); /* the template's process groups are another job's ranks */
    pt_summary_encode(s, &w->summary);
    pt_summary_free(s);
}

/* ---------------------------------------------------------------- fleet */

static pt_agent *start_agent(fake_fleet *f, fake_worker *w)
{
    pt_agent_config cfg;
    pt_agent_config_defaults(&cfg);
    cfg.rank = w->rank;
    int32_t per_node = f->cfg.ranks_per_node;
    cfg.local_rank = w->rank % per_node;
    cfg.node_rank = w->rank / per_node;
    cfg.world_size = f->cfg.world_size;
    cfg.pid = 100000 + w->rank;
    snprintf(cfg.host, sizeof cfg.host, "fakenode%d", w->rank / per_node);
    snprintf(cfg.coordinator_host, sizeof cfg.coordinator_host, "%s", f->cfg.coordinator_host);
    cfg.coordinator_port = f->cfg.coordinator_port;
    if (f->cfg.tree) {
        fake_fleet_relay_host(f->cfg.relay_port, cfg.node_rank, cfg.coordinator_host, sizeof cfg.coordinator_host);
        cfg.coordinator_port = 0;
    }
    cfg.key = f->cfg.key;
    cfg.heartbeat_ns = f->cfg.heartbeat_ns;
    cfg.poll_ns = f->cfg.poll_ns;
    cfg.hang_floor_ns = f->cfg.hang_floor_ns;
    cfg.auto_trigger = f->cfg.auto_trigger;
    cfg.auto_interval_ns = f->cfg.auto_interval_ns;
    cfg.thread_stack_bytes = 128 * 1024;
    cfg.log = f->cfg.log;
    snprintf(cfg.log.prefix, sizeof cfg.log.prefix, "fake[rank %d]: ", w->rank);
    pt_agent_hooks hooks = {w, arm_hook, status_hook, snapshot_hook, NULL};
    pt_error err;
    pt_agent *a = f->cfg.driven ? pt_agent_create_driven(&cfg, &hooks, &err) : pt_agent_create(&cfg, &hooks, &err);
    if (!a)
        fprintf(stderr, "fake_fleet: rank %d: %s\n", w->rank, err.message);
    return a;
}

/* A relay for every node whose local rank 0 the fleet holds, on that node's address. */
static void start_relays(fake_fleet *f)
{
    int32_t per_node = f->cfg.ranks_per_node;
    f->first_node = f->cfg.first_rank / per_node;
    f->nodes = (f->cfg.first_rank + f->cfg.count + per_node - 1) / per_node - f->first_node;
    f->relays = pt_xcalloc((size_t)f->nodes, sizeof *f->relays);
    for (int32_t i = 0; i < f->nodes; i++) {
        int32_t node = f->first_node + i;
        pt_relay_config rc;
        memset(&rc, 0, sizeof rc);
        rc.rank = node * per_node, rc.node_rank = node, rc.world_size = f->cfg.world_size, rc.pid = 100000 + rc.rank;
        snprintf(rc.host, sizeof rc.host, "fakenode%d", node);
        fake_fleet_relay_host(f->cfg.relay_port, node, rc.listen_host, sizeof rc.listen_host);
        snprintf(rc.coordinator_host, sizeof rc.coordinator_host, "%s", f->cfg.coordinator_host);
        rc.coordinator_port = f->cfg.coordinator_port;
        rc.key = f->cfg.key;
        rc.max_locals = per_node * 2 + 8;
        rc.beat_hold_ns = f->cfg.heartbeat_ns;
        rc.connect_timeout_ms = f->cfg.driven ? 20 : 0; /* one thread drives them all */
        rc.log = f->cfg.log;
        snprintf(rc.log.prefix, sizeof rc.log.prefix, "fake[relay %d]: ", node);
        pt_error err;
        f->relays[i] = pt_relay_create(&rc, &err);
        if (f->relays[i] && !f->cfg.driven && pt_relay_start_thread(f->relays[i], &err) != 0) {
            pt_relay_destroy(f->relays[i]);
            f->relays[i] = NULL;
        }
        if (!f->relays[i])
            fprintf(stderr, "fake_fleet: node %d: %s\n", node, err.message);
    }
}

fake_fleet *fake_fleet_start(const fake_fleet_config *cfg)
{
    fake_fleet *f = pt_xcalloc(1, sizeof *f);
    f->cfg = *cfg;
    f->workers = pt_xcalloc((size_t)cfg->count, sizeof *f->workers);
    pthread_mutex_init(&f->agents_lock, NULL);
    pt_buf templates[TEMPLATES];
    memset(templates, 0, sizeof templates);
    make_templates(templates);
    int64_t t0 = pt_now_ns();
    for (int32_t i = 0; i < cfg->count; i++) {
        fake_worker *w = &f->workers[i];
        w->fleet = f;
        w->rank = cfg->first_rank + i;
        w->b = w->rank == cfg->special_rank ? cfg->special : cfg->normal;
        w->t0 = t0;
        pthread_mutex_init(&w->lock, NULL);
        int t = w->b.faulty_profile ? FAULTY_TEMPLATE : w->rank % FAULTY_TEMPLATE;
        worker_summary(w, &templates[t], cfg->world_size);
    }
    for (int t = 0; t < TEMPLATES; t++)
        pt_buf_free(&templates[t]);
    if (cfg->tree)
        start_relays(f);
    f->epoll_fd = cfg->driven ? epoll_create1(EPOLL_CLOEXEC) : -1;
    for (int32_t i = 0; f->relays && f->epoll_fd >= 0 && i < f->nodes; i++) {
        struct epoll_event ev = {EPOLLIN, {.ptr = &f->relays[i]}};
        if (f->relays[i])
            epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, pt_relay_fd(f->relays[i]), &ev);
    }
    for (int32_t i = 0; i < cfg->count; i++) {
        fake_worker *w = &f->workers[i];
        w->agent = start_agent(f, w);
        w->watched_fd = -1;
    }
    pthread_create(&f->driver, NULL, cfg->driven ? driven_main : driver_main, f);
    return f;
}

int fake_fleet_joined(fake_fleet *f)
{
    int n = 0;
    pthread_mutex_lock(&f->agents_lock);
    for (int32_t i = 0; i < f->cfg.count; i++)
        n += f->workers[i].agent && pt_agent_is_joined(f->workers[i].agent);
    pthread_mutex_unlock(&f->agents_lock);
    return n;
}

int fake_fleet_relays_up(fake_fleet *f)
{
    int n = 0;
    pthread_mutex_lock(&f->agents_lock);
    for (int32_t i = 0; f->relays && i < f->nodes; i++)
        n += f->relays[i] && pt_relay_is_up(f->relays[i]);
    pthread_mutex_unlock(&f->agents_lock);
    return n;
}

int fake_fleet_refusals(fake_fleet *f)
{
    int n = 0;
    pthread_mutex_lock(&f->agents_lock);
    for (int32_t i = 0; i < f->cfg.count; i++)
        n += f->workers[i].agent ? pt_agent_refusals(f->workers[i].agent) : 0;
    pthread_mutex_unlock(&f->agents_lock);
    return n;
}

void fake_fleet_stop(fake_fleet *f)
{
    if (!f)
        return;
    atomic_store(&f->stop, true);
    pthread_join(f->driver, NULL);
    for (int32_t i = 0; i < f->cfg.count; i++) {
        pt_agent_destroy(f->workers[i].agent, true);
        pthread_mutex_destroy(&f->workers[i].lock);
        pt_buf_free(&f->workers[i].summary);
    }
    for (int32_t i = 0; f->relays && i < f->nodes; i++)
        pt_relay_destroy(f->relays[i]);
    free(f->relays);
    if (f->epoll_fd >= 0)
        close(f->epoll_fd);
    pthread_mutex_destroy(&f->agents_lock);
    free(f->workers);
    free(f);
}
