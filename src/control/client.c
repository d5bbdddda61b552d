/* client.c -- the CLI's side of a round: connect, authenticate, trigger, collect, report.
 *
 * One blocking connection driven by poll(). The coordinator sends progress at least once
 * a second, so 30 s of silence means it is gone; the round then ends with what arrived
 * (every summary is already on disk) and the rest counted as missing. Memory: the decoded
 * summaries, which the diagnosis needs anyway. */
#define _POSIX_C_SOURCE 200809L
#include "control/client.h"
#include "control/net.h"
#include "control/round.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 3000
#define HANDSHAKE_TIMEOUT_MS 10000
#define SILENCE_LIMIT_MS 30000

/* Waits up to timeout_ms for the next message: 1, 0 (timeout), -1 (closed/bad; err). */
static int receive(pt_conn *c, pt_ctl_msg *m, int timeout_ms, pt_error *err)
{
    int64_t deadline = pt_now_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int got = pt_conn_next(c, m, err);
        if (got != 0)
            return got;
        int64_t left = (deadline - pt_now_ns()) / 1000000;
        if (left <= 0)
            return 0;
        struct pollfd p = {c->fd, POLLIN, 0};
        int rc = poll(&p, 1, (int)left);
        if (rc < 0 && errno != EINTR) {
            pt_error_set(err, "poll: %s", strerror(errno));
            return -1;
        }
        if (rc > 0 && pt_conn_read(c, err) < 0)
            return -1;
    }
}

static int send_all(pt_conn *c, const pt_ctl_msg *m, pt_error *err)
{
    if (pt_conn_send(c, m, err) != 0)
        return -1;
    while (pt_conn_pending(c) > 0) {
        if (pt_conn_flush(c, err) != 0)
            return -1;
        struct pollfd p = {c->fd, POLLOUT, 0};
        if (pt_conn_pending(c) > 0 && poll(&p, 1, 1000) < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

static int find_job(const pt_trigger_request *req, pt_job_env *env, pt_error *err)
{
    pt_error env_err;
    int rc = pt_job_env_read(env, false, &env_err);
    if (req->coordinator) {
        const char *colon = strrchr(req->coordinator, ':');
        long port = colon ? strtol(colon + 1, NULL, 10) : 0;
        if (!colon || colon == req->coordinator || port <= 0 || port > 65535 ||
            (size_t)(colon - req->coordinator) >= sizeof env->coordinator_host) {
            pt_error_set(err, "--coordinator wants host:port, not '%s'", req->coordinator);
            return -1;
        }
        snprintf(env->coordinator_host, sizeof env->coordinator_host, "%.*s", (int)(colon - req->coordinator),
                 req->coordinator);
        env->coordinator_port = (uint16_t)port;
        return 0;
    }
    if (rc != 0) {
        pt_error_set(err, "cannot find the job: %s. Run this in the shell of the job's master (rank 0) container, "
                     "where MASTER_ADDR and MASTER_PORT are set, or pass --coordinator HOST:PORT", env_err.message);
        return -1;
    }
    return 0;
}

/* MASTER_ADDR first; a single-node job's coordinator listens on loopback only. */
static int connect_to_job(const pt_job_env *env, char *name, size_t cap, pt_error *err)
{
    int fd = pt_net_connect(env->coordinator_host, env->coordinator_port, CONNECT_TIMEOUT_MS, err);
    const char *host = env->coordinator_host;
    if (fd < 0 && strcmp(host, "127.0.0.1") != 0 && pt_net_is_local_address(host)) {
        pt_error first = *err;
        host = "127.0.0.1";
        fd = pt_net_connect(host, env->coordinator_port, CONNECT_TIMEOUT_MS, err);
        if (fd < 0)
            *err = first;
    }
    if (fd < 0)
        pt_error_set(err, "%s (is the job running, with PerfTracker() in its training script?)", err->message);
    snprintf(name, cap, "%s:%u", host, (unsigned)env->coordinator_port);
    return fd;
}

static int authenticate(pt_conn *c, const pt_key *key, pt_error *err)
{
    pt_ctl_msg m;
    int got = receive(c, &m, HANDSHAKE_TIMEOUT_MS, err);
    if (got <= 0 || m.type != PT_CTL_CHALLENGE || m.version != PT_CTL_VERSION) {
        if (got >= 0)
            pt_error_set(err, "the peer did not greet like a perftracker coordinator");
        return -1;
    }
    uint8_t server_nonce[PT_CTL_NONCE_BYTES];
    memcpy(server_nonce, m.nonce, sizeof server_nonce);
    pt_ctl_msg auth;
    pt_ctl_msg_init(&auth, PT_CTL_AUTH);
    auth.role = PT_CTL_ROLE_CONTROL;
    if (pt_random_bytes(auth.nonce, sizeof auth.nonce, err) != 0)
        return -1;
    pt_auth_client_proof(key, PT_CTL_ROLE_CONTROL, server_nonce, auth.nonce, auth.mac);
    uint8_t client_nonce[PT_CTL_NONCE_BYTES];
    memcpy(client_nonce, auth.nonce, sizeof client_nonce);
    if (send_all(c, &auth, err) != 0)
        return -1;
    got = receive(c, &m, HANDSHAKE_TIMEOUT_MS, err);
    if (got > 0 && m.type == PT_CTL_REFUSED) {
        char why[256];
        pt_ctl_copy_str(why, sizeof why, m.text);
        pt_error_set(err, "the coordinator refused this CLI: %s (key from %s)", why, key->source);
        return -1;
    }
    uint8_t expected[PT_SHA256_BYTES];
    pt_auth_server_proof(key, PT_CTL_ROLE_CONTROL, server_nonce, client_nonce, expected);
    if (got <= 0 || m.type != PT_CTL_WELCOME || !pt_equal_ct(expected, m.mac, sizeof expected)) {
        if (got >= 0)
            pt_error_set(err, "the coordinator could not prove it holds the job's key");
        return -1;
    }
    return 0;
}

static void worker_event(const pt_trigger_observer *obs, const pt_ctl_msg *m, int kind)
{
    if (!obs || !obs->worker)
        return;
    char host[PT_HOST_MAX], text[PT_CTL_MAX_TEXT + 1], path[PT_CTL_MAX_PATH];
    pt_ctl_copy_str(host, sizeof host, m->worker.host);
    pt_ctl_copy_str(text, sizeof text, kind ? m->text : (pt_ctl_bytes){NULL, 0});
    pt_ctl_copy_str(path, sizeof path, kind ? (pt_ctl_bytes){NULL, 0} : m->path);
    pt_trigger_worker_event e = {m->worker.rank, host, m->worker.pid, kind, text, path};
    obs->worker(obs->ctx, &e);
}

/* Reads the round's messages into r until ROUND_DONE. 0, or -1 when the coordinator said
 * no (err) -- losing the coordinator midway is not an error, it is recorded. */
static int collect(pt_conn *c, pt_round **r, const char *dir, const pt_trigger_observer *obs,
                   pt_trigger_result *out, pt_error *err)
{
    int64_t last_heard = pt_now_ns();
    for (;;) {
        pt_ctl_msg m;
        pt_error rerr;
        int got = receive(c, &m, 1000, &rerr);
        int64_t now = pt_now_ns();
        if (got == 0 && now - last_heard < (int64_t)SILENCE_LIMIT_MS * 1000000)
            continue;
        if (got <= 0) {
            if (!*r) {
                pt_error_set(err, "the coordinator went away before the round started: %s",
                             got < 0 ? rerr.message : "no answer");
                return -1;
            }
            out->coordinator_lost = true;
            pt_round_add_warning(*r, "the connection to the coordinator was lost before the round ended (%s); "
                                     "workers not heard from are missing", got < 0 ? rerr.message : "silence");
            return 0;
        }
        last_heard = now;
        char text[PT_CTL_MAX_TEXT + 1], path[PT_CTL_MAX_PATH], stack[PT_CTL_MAX_STACK + 1];
        switch (m.type) {
        case PT_CTL_ERROR:
            pt_ctl_copy_str(text, sizeof text, m.text);
            pt_error_set(err, "the coordinator refused the round: %s", text);
            return -1;
        case PT_CTL_ROUND_STARTED:
            out->world_size = m.progress.world_size;
            *r = pt_round_new(dir, m.progress.world_size);
            if (obs && obs->started)
                obs->started(obs->ctx, m.round, m.start_step, m.steps, &m.progress);
            break;
        case PT_CTL_PROGRESS:
            if (obs && obs->progress)
                obs->progress(obs->ctx, &m.progress);
            break;
        case PT_CTL_WORKER_SUMMARY:
            if (!*r)
                break;
            pt_ctl_copy_str(path, sizeof path, m.path);
            if (pt_round_add_summary(*r, &m.worker, path, m.blob.data, m.blob.len, &rerr) != 0) {
                m.text = pt_ctl_str(rerr.message);
                worker_event(obs, &m, PT_FAIL_BAD_SUMMARY);
            } else {
                worker_event(obs, &m, 0);
            }
            break;
        case PT_CTL_WORKER_FAILED:
            if (!*r)
                break;
            pt_ctl_copy_str(text, sizeof text, m.text);
            pt_ctl_copy_str(stack, sizeof stack, m.stack);
            pt_round_add_failure(*r, &m.worker, m.kind, m.steps_done, m.stalled_ns, text, stack);
            worker_event(obs, &m, m.kind);
            break;
        case PT_CTL_ROUND_DONE:
            if (obs && obs->progress)
                obs->progress(obs->ctx, &m.progress);
            return *r ? 0 : -1;
        default:
            break;
        }
    }
}

int pt_trigger_run(const pt_trigger_request *req, const pt_trigger_observer *obs, pt_trigger_result *out,
                   pt_error *err)
{
    memset(out, 0, sizeof *out);
    pt_job_env env;
    pt_key key;
    char name[PT_HOST_MAX + 16];
    if (find_job(req, &env, err) != 0 || pt_auth_load_control_key(&env, &key, err) != 0)
        return -1;
    int fd = connect_to_job(&env, name, sizeof name, err);
    if (fd < 0)
        return -1;
    pt_conn conn;
    pt_conn_init(&conn, fd, 1u << 20);
    pt_round *r = NULL;
    int rc = -1;
    if (authenticate(&conn, &key, err) != 0 ||
        pt_round_make_dir(req->output_dir ? req->output_dir : "/tmp/perftracker/output", out->round_dir,
                          sizeof out->round_dir, err) != 0)
        goto done;
    if (obs && obs->connected)
        obs->connected(obs->ctx, name, out->round_dir);

    char raw_dir[sizeof out->round_dir + 16];
    snprintf(raw_dir, sizeof raw_dir, "%s/raw_trace", out->round_dir);
    pt_ctl_msg trigger;
    pt_ctl_msg_init(&trigger, PT_CTL_TRIGGER);
    trigger.wait = req->wait;
    trigger.steps = req->steps;
    trigger.save_raw = (uint8_t)req->save_raw;
    trigger.timeout_ms = req->timeout_ms;
    trigger.path = pt_ctl_str(req->save_raw == PT_SAVE_RAW_NONE ? "" : raw_dir);
    if (send_all(&conn, &trigger, err) != 0 || collect(&conn, &r, out->round_dir, obs, out, err) != 0) {
        rmdir(out->round_dir); /* nothing was collected: leave no empty round behind */
        goto done;
    }
    out->summaries = (int32_t)pt_round_summary_count(r);
    out->failed = (int32_t)pt_round_failure_count(r);
    if (req->auto_analyze && !(out->report = pt_round_report(r, err)))
        goto done;
    rc = 0;
done:
    pt_round_free(r);
    pt_conn_close(&conn);
    return rc;
}
