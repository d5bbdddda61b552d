/* fake_workers -- a process of simulated workers for the multi-process control tests.
 *
 *   fake_workers --world W --first F --count C [--step-ms S] [--special-rank R
 *                [--hang-at N] [--die-in-window] [--faulty-profile] [--window-error TEXT]
 *                [--slow-from N --slow-factor X]] [--auto-trigger] [--seconds T]
 *                [--job-secret-file PATH] [--tree] [--ranks-per-node N] [--driven] [--poll-ms P]
 *                [--kill-relay-of-node N [--kill-relay-in-window K]]
 *
 * Ranks F..F+C-1 of a job of W workers, each a real agent (fake_fleet.c). The job is
 * found as a worker finds it -- MASTER_ADDR/MASTER_PORT, PERFTRACKER_* -- and the process
 * that holds rank 0 hosts the coordinator, as the collector's rank 0 does. A worker told
 * to die in its window kills this whole process with SIGKILL, as a crash would. Prints
 * "ready N" on stdout once its N agents have joined.
 *
 * The job secret: without PERFTRACKER_SECRET, rank 0's process makes it, as a real job's
 * rank 0 does; a real job hands it to the other ranks through torch.distributed's store,
 * and these processes, which have none, through the file --job-secret-file names (0600,
 * in the test's private folder): rank 0's process writes it, the others wait for it.
 *
 * A large fleet (fake_fleet.h): --tree gives every node of --ranks-per-node ranks a real
 * relay on a Unix socket of its own (fake_fleet_relay_host; each process must hold whole nodes),
 * --driven drives every agent and relay from one thread (--poll-ms, default 250, is how
 * often each agent samples its fake collector). The process raises its open-file limit to
 * the hard limit, and in those modes refuses to start, saying so, when that is too low for
 * what it holds.
 * On exit it prints "peak_rss_kb N" (VmHWM): for rank 0's process, the coordinator's. */
#define _POSIX_C_SOURCE 200809L
#include "control/coordinator.h"
#include "control/agent_instance.h"
#include "control/relay.h"
#include "fake_fleet.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void die_now(int32_t rank)
{
    fprintf(stderr, "fake_workers: rank %d dies in its window (SIGKILL)\n", rank);
    raise(SIGKILL);
}

static int usage(void)
{
    fprintf(stderr, "usage: fake_workers --world W --first F --count C [--step-ms S] [--special-rank R "
                    "[--hang-at N] [--die-in-window] [--faulty-profile] [--window-error TEXT] [--slow-from N "
                    "--slow-factor X]] [--auto-trigger] [--seconds T] [--job-secret-file PATH] [--tree] "
                    "[--ranks-per-node N] [--driven] [--poll-ms P] [--kill-relay-of-node N [--kill-relay-in-window K]]\n");
    return 2;
}

/* Rank 0's process: the job secret, for the other processes (what the store does). */
static int publish_secret(const char *path, const char *hex)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    bool ok = write(fd, hex, strlen(hex)) == (ssize_t)strlen(hex);
    ok = close(fd) == 0 && ok && rename(tmp, path) == 0;
    if (!ok)
        unlink(tmp);
    return ok ? 0 : -1;
}

/* Any other process: waits (at most 60 s) until rank 0's process has written it. */
static int receive_secret(const char *path, pt_key *key, pt_error *err)
{
    for (int i = 0; i < 3000 && !stop_requested; i++) {
        char hex[128];
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, hex, sizeof hex) : -1;
        if (fd >= 0)
            close(fd);
        if (n > 0 && pt_auth_agent_key_from_job_secret(hex, (size_t)n, key, err) == 0)
            return 0;
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    pt_error_set(err, "no job secret from rank 0's process in %s", path);
    return -1;
}

/* Sockets: one per agent, in tree mode one more per agent (its relay's end) and three per
 * relay, and rank 0's coordinator one per node (or per worker, flat). */
static int raise_fd_limit(const fake_fleet_config *fc, bool coordinator)
{
    int64_t nodes = (fc->count + fc->ranks_per_node - 1) / fc->ranks_per_node + 1;
    int64_t peers = fc->tree ? (fc->world_size + fc->ranks_per_node - 1) / fc->ranks_per_node : fc->world_size;
    int64_t need = (int64_t)fc->count * (fc->tree ? 2 : fc->driven ? 1 : 2) + (fc->tree ? nodes * 3 : 0) +
                   (coordinator ? peers + 16 : 0) + 64;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    /* Only a large fleet is refused: a small one may run at a low limit on purpose (the
     * coordinator's own shedding is tested that way). */
    if ((fc->tree || fc->driven) && rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur < need) {
        fprintf(stderr, "fake_workers: %d workers%s need about %lld open files, and this process may have only "
                "%llu (the hard limit, ulimit -Hn): run more processes with fewer workers each (--count)\n",
                fc->count, coordinator ? " and the coordinator" : "", (long long)need,
                (unsigned long long)rl.rlim_cur);
        return -1;
    }
    return 0;
}

static void print_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            printf("peak_rss_kb %lld\n", atoll(line + 6));
    if (f)
        fclose(f);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    fake_fleet_config fc;
    fake_fleet_config_init(&fc, 0);
    fc.count = -1;
    double seconds = 600;
    const char *secret_file = NULL;
    double poll_ms = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--die-in-window") == 0) fc.special.die_in_window = true;
        else if (strcmp(a, "--faulty-profile") == 0) fc.special.faulty_profile = true;
        else if (strcmp(a, "--auto-trigger") == 0) fc.auto_trigger = true;
        else if (strcmp(a, "--tree") == 0) fc.tree = true;
        else if (strcmp(a, "--driven") == 0) fc.driven = true;
        else if (!v) return usage();
        else if (strcmp(a, "--world") == 0) fc.world_size = atoi(v), i++;
        else if (strcmp(a, "--first") == 0) fc.first_rank = atoi(v), i++;
        else if (strcmp(a, "--count") == 0) fc.count = atoi(v), i++;
        else if (strcmp(a, "--step-ms") == 0) fc.normal.step_ns = (int64_t)(atof(v) * 1e6), i++;
        else if (strcmp(a, "--special-rank") == 0) fc.special_rank = atoi(v), i++;
        else if (strcmp(a, "--hang-at") == 0) fc.special.hang_at_step = atoll(v), i++;
        else if (strcmp(a, "--slow-from") == 0) fc.special.slow_from_step = atoll(v), i++;
        else if (strcmp(a, "--slow-factor") == 0) fc.special.slow_factor = atof(v), i++;
        else if (strcmp(a, "--seconds") == 0) seconds = atof(v), i++;
        else if (strcmp(a, "--window-error") == 0) fc.special.window_error = v, i++;
        else if (strcmp(a, "--job-secret-file") == 0) secret_file = v, i++;
        else if (strcmp(a, "--ranks-per-node") == 0) fc.ranks_per_node = atoi(v), i++;
        else if (strcmp(a, "--poll-ms") == 0) poll_ms = atof(v), i++;
        else if (strcmp(a, "--kill-relay-of-node") == 0) fc.kill_relay_node = atoi(v), i++;
        else if (strcmp(a, "--kill-relay-in-window") == 0) fc.kill_relay_window = atoi(v), i++;
        else return usage();
    }
    if (fc.world_size <= 0 || fc.count <= 0 || fc.first_rank < 0 || fc.first_rank + fc.count > fc.world_size ||
        fc.ranks_per_node <= 0 || (fc.tree && fc.first_rank % fc.ranks_per_node != 0))
        return usage();
    if (poll_ms > 0 || fc.driven)
        fc.poll_ns = (int64_t)((poll_ms > 0 ? poll_ms : 250) * 1e6);
    if (raise_fd_limit(&fc, fc.first_rank == 0) != 0)
        return 1;
    fc.special.step_ns = fc.normal.step_ns;
    /* unset: the product's own default for this world (tests set theirs) */
    fc.heartbeat_ns = pt_env_int("PERFTRACKER_HEARTBEAT_MS", pt_agent_default_heartbeat_ns(fc.world_size) / 1000000, 10,
                                 60000) * 1000000LL;
    fc.hang_floor_ns = pt_env_int("PERFTRACKER_HANG_MIN_MS", 400, 10, 600000) * 1000000LL;
    fc.die = die_now;

    pt_job_env env;
    pt_error err;
    if (pt_job_env_read(&env, false, &err) != 0) {
        fprintf(stderr, "fake_workers: %s\n", err.message);
        return 1;
    }
    env.world_size = fc.world_size;
    env.rank = fc.first_rank;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    pt_coordinator *coordinator = NULL;
    bool published = false;
    if (fc.first_rank == 0) {
        pt_coordinator_config cc;
        if (pt_coordinator_config_from_env(&cc, &env, &err) != 0) {
            fprintf(stderr, "fake_workers: coordinator: %s\n", err.message);
            return 1;
        }
        cc.auto_trigger = fc.auto_trigger;
        fc.key = cc.agent_key;
        if (cc.job_secret[0] && secret_file) {
            if (publish_secret(secret_file, cc.job_secret) != 0) {
                fprintf(stderr, "fake_workers: cannot write %s: %s\n", secret_file, strerror(errno));
                return 1;
            }
            published = true;
        }
        if (!(coordinator = pt_coordinator_start(&cc, &err))) {
            fprintf(stderr, "fake_workers: coordinator: %s\n", err.message);
            return 1;
        }
    } else {
        int configured = pt_auth_agent_key(&fc.key, &err);
        if (configured == 0 && !secret_file)
            pt_error_set(&err, "ranks outside rank 0's process need the job secret: give every process "
                         "--job-secret-file PATH, or set PERFTRACKER_SECRET");
        if (configured < 0 || (configured == 0 && (!secret_file || receive_secret(secret_file, &fc.key, &err) != 0))) {
            fprintf(stderr, "fake_workers: %s\n", err.message);
            return 1;
        }
    }
    /* As a real worker: through the coordinator's Unix socket when it is on this machine
     * (on the kernel's word), over TCP with the job key when it is on another. */
    if (pt_agent_coordinator_is_here(&env)) {
        pt_coordinator_socket_for(env.coordinator_port, fc.coordinator_host, sizeof fc.coordinator_host);
        fc.coordinator_port = 0;
    } else {
        snprintf(fc.coordinator_host, sizeof fc.coordinator_host, "%s", env.coordinator_host);
        fc.coordinator_port = env.coordinator_port;
    }
    fc.relay_port = pt_relay_port_for(env.coordinator_port);
    fake_fleet *fleet = fake_fleet_start(&fc);
    bool ready = false;
    int64_t end = pt_now_ns() + (int64_t)(seconds * 1e9);
    pt_coordinator_stats most = {0}; /* rank 0's process: how many agents and relays its coordinator held */
    int64_t next_join_check = 0;
    while (!stop_requested && pt_now_ns() < end) {
        if (coordinator) {
            pt_coordinator_stats st;
            pt_coordinator_stats_get(coordinator, &st);
            most.agents = PT_MAX(most.agents, st.agents);
            most.relays = PT_MAX(most.relays, st.relays);
        }
        /* Counting the joined walks every agent: every 20 ms it took a quarter of a
         * 100k fleet's CPU while it joined. */
        if (!ready && pt_now_ns() >= next_join_check) {
            next_join_check = pt_now_ns() + 250000000LL;
            if (fake_fleet_joined(fleet) == fc.count) {
                printf("ready %d\n", fc.count);
                fflush(stdout);
                ready = true;
            }
        }
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    fake_fleet_stop(fleet);
    pt_coordinator_stop(coordinator);
    if (coordinator)
        printf("coordinator_peak agents %d relays %d\n", most.agents, most.relays);
    print_peak_rss();
    if (published)
        unlink(secret_file);
    return 0;
}
