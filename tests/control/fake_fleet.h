/* fake_fleet.h -- simulated workers for the control-plane tests: real pt_agent instances
 * (real threads, sockets and protocol) whose collector is a stand-in.
 *
 * Each fake worker's step counter is a pure function of time (step_ns per step, optionally
 * slower from some step, or stopped at some step: a hang), so tests are deterministic in
 * what happens and only the timing of it varies. When armed, the fleet's driver thread
 * waits for the window to pass, writes a small raw trace if asked, and hands the agent a
 * real summary: one of a synthetic 8-worker job's (src/synth; template 7 carries a slow-GPU
 * fault), re-labelled with the fake worker's rank, host and pid.
 *
 * Two knobs make it a large fleet. `tree`: every node (ranks_per_node consecutive ranks)
 * gets a real relay (relay.h) listening on a loopback address of its own, 127.1.x.y (so
 * every node's relay takes the same port and no source ports run out), and the node's
 * agents connect to it; the fleet's processes must hold whole nodes. `driven`: no thread
 * per agent or relay -- the fleet's one driver thread turns them all from one epoll set
 * (pt_agent_create_driven), which is what lets 100k workers run in a handful of
 * processes. */
#ifndef PT_TESTS_FAKE_FLEET_H
#define PT_TESTS_FAKE_FLEET_H

#include "control/agent_instance.h"

typedef struct fake_behaviour {
    int64_t step_ns;
    int64_t hang_at_step;    /* -1: never; else steps_done stops here */
    int64_t slow_from_step;  /* -1: never; else steps take slow_factor times longer from here */
    double slow_factor;
    bool die_in_window;      /* the worker dies as its profiling window begins */
    bool faulty_profile;     /* its summary shows the slow-GPU fault */
    const char *window_error; /* non-NULL: its collector fails the window, saying this */
    const char *stack;       /* non-NULL: the training thread's stack a hang report sees */
    const char *collectives; /* non-NULL: the collective bookkeeping it reports (collectives.h) */
} fake_behaviour;

typedef struct fake_fleet_config {
    int32_t world_size, first_rank, count;
    char coordinator_host[PT_HOST_MAX];
    uint16_t coordinator_port;
    pt_key key;
    fake_behaviour normal;
    fake_behaviour special;  /* for special_rank */
    int32_t special_rank;    /* -1: none */
    int64_t heartbeat_ns, poll_ns, hang_floor_ns;
    bool auto_trigger;
    int64_t auto_interval_ns;
    /* How a worker dies: NULL = its agent vanishes without a goodbye (in-process tests);
     * the fake_workers program raises SIGKILL instead. */
    void (*die)(int32_t rank);
    int32_t ranks_per_node;  /* 8: host fakenode<rank / 8>, local rank rank % 8 */
    bool tree;               /* a relay per node */
    uint16_t relay_port;     /* in the name of every node's relay socket (fake_fleet_relay_host) */
    bool driven;             /* one driver thread for every agent and relay */
    int32_t kill_relay_node; /* -1: none; else that node's relay is destroyed (its agents live on)
                                as the first of its ranks reaches its window ... */
    int32_t kill_relay_window;  /* ... its kill_relay_window-th one (1: the first round) */
    pt_ctl_log log;
} fake_fleet_config;

typedef struct fake_fleet fake_fleet;

void fake_fleet_config_init(fake_fleet_config *cfg, int32_t world_size);
fake_fleet *fake_fleet_start(const fake_fleet_config *cfg);
/* How many of the fleet's agents have completed the handshake. */
int fake_fleet_joined(fake_fleet *f);
/* How many of the fleet's relays hold the coordinator. */
int fake_fleet_relays_up(fake_fleet *f);
/* The Unix socket ("@name") of node n's relay in tree mode. */
void fake_fleet_relay_host(uint16_t relay_port, int32_t node, char *dst, size_t cap);
/* How many of the fleet's agents were refused by the coordinator. */
int fake_fleet_refusals(fake_fleet *f);
void fake_fleet_stop(fake_fleet *f);

/* The Python stack a hung fake worker reports. */
#define FAKE_HANG_STACK "fake_train.py: <module>|fake_train.py: train|<built-in function sleep>"

#endif
