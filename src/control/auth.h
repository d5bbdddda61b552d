/* auth.h -- the job's keys and the challenge-response that proves a peer holds one.
 *
 * Two keys, because two kinds of peer exist:
 *   agent key    every worker of the job (join, heartbeats, summaries);
 *   control key  whoever may trigger a round (the CLI in the master's shell).
 * With PERFTRACKER_SECRET (or PERFTRACKER_SECRET_FILE, a 0600 file) both derive from that
 * secret. Without it, rank 0 makes the job's secret at start -- 32 random bytes, never
 * derived from anything another process can see -- and the other ranks receive it from
 * rank 0 through the job's own torch.distributed store (python/perftracker/tracer.py
 * hands it to agent.h's pt_agent_set_job_secret); the agent key derives from it. The
 * control key is then 32 other random bytes that rank 0 writes to a 0600 file in a 0700
 * directory (PERFTRACKER_KEY_DIR, default /tmp/perftracker-<uid>/): only the job's user on
 * the master's node can read it, which is exactly who runs the CLI. docs/control-plane.md
 * discusses what each choice protects against.
 *
 * The handshake: the coordinator sends a random nonce Ns; the peer answers with its own
 * nonce Nc and HMAC(key, "client", role, Ns, Nc); the coordinator answers with
 * HMAC(key, "server", role, Nc, Ns). Neither side sends the key, a replayed answer
 * fails on a fresh nonce, and the peer also learns that the coordinator is genuine. */
#ifndef PT_CONTROL_AUTH_H
#define PT_CONTROL_AUTH_H

#include "control/job_env.h"
#include "control/protocol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_KEY_BYTES 32
#define PT_SHA256_BYTES 32
#define PT_JOB_SECRET_BYTES 32
#define PT_JOB_SECRET_HEX (2 * PT_JOB_SECRET_BYTES) /* its text form, as the store carries it */

typedef struct pt_key {
    uint8_t bytes[PT_KEY_BYTES];
    char source[1536]; /* where it came from, for log lines */
    char file[1400];   /* the key file it was read from or written to; "" for a configured secret */
} pt_key;

/* HMAC-SHA256 (nettle's) over the concatenation of `parts`, so callers need not build
 * one buffer. */
void pt_hmac_sha256(const void *key, size_t key_len, const void *const *parts, const size_t *part_lens,
                    size_t part_count, uint8_t out[PT_SHA256_BYTES]);
/* Compares in time independent of the contents (nettle's memeql_sec). */
bool pt_equal_ct(const void *a, const void *b, size_t n);

/* Fills buf with cryptographically random bytes (getrandom). 0 or -1. */
int pt_random_bytes(void *buf, size_t n, pt_error *err);

/* The agent key from a configured secret: 1 (PERFTRACKER_SECRET or _FILE: key filled),
 * 0 (none configured: the key comes from the job's secret, below), -1 (an unreadable or
 * unsafe PERFTRACKER_SECRET_FILE; err says why). */
int pt_auth_agent_key(pt_key *key, pt_error *err);
/* Rank 0 without a configured secret: a fresh job secret (getrandom), as text (64 hex
 * digits and a NUL, for the other ranks), and the agent key it gives. 0 or -1. */
int pt_auth_new_job_secret(char hex[PT_JOB_SECRET_HEX + 1], pt_key *agent_key, pt_error *err);
/* Any other rank: the agent key from the job secret's text as rank 0 handed it over.
 * -1 (err) unless it is exactly 64 hex digits. */
int pt_auth_agent_key_from_job_secret(const char *hex, size_t len, pt_key *agent_key, pt_error *err);
/* Rank 0: makes a fresh control key (unless a secret is configured) and names its key file
 * in key->file ("" with a secret). 0 or -1. */
int pt_auth_create_control_key(const pt_job_env *env, pt_key *key, pt_error *err);
/* Publishes the key in key->file (0600, in the private runtime directory); nothing for a
 * configured secret. The coordinator does this once it listens, so a job that cannot
 * start never replaces another job's key, and removes the file when it stops. 0 or -1. */
int pt_auth_write_key_file(const pt_key *key, pt_error *err);
/* The CLI: the configured secret, else the key file rank 0 wrote. 0 or -1. */
int pt_auth_load_control_key(const pt_job_env *env, pt_key *key, pt_error *err);
/* The control key from a key file named by a job file (private to its owner). 0 or -1. */
int pt_auth_read_key_file(const char *path, pt_key *key, pt_error *err);
/* Where the control key file lives for this job (dst of cap bytes). */
void pt_auth_key_file_path(const pt_job_env *env, char *dst, size_t cap);

/* The two proofs of the handshake. */
void pt_auth_client_proof(const pt_key *key, uint8_t role, const uint8_t server_nonce[PT_CTL_NONCE_BYTES],
                          const uint8_t client_nonce[PT_CTL_NONCE_BYTES], uint8_t out[PT_SHA256_BYTES]);
void pt_auth_server_proof(const pt_key *key, uint8_t role, const uint8_t server_nonce[PT_CTL_NONCE_BYTES],
                          const uint8_t client_nonce[PT_CTL_NONCE_BYTES], uint8_t out[PT_SHA256_BYTES]);

/* The connecting side's two steps, for agents and relays alike: answering the server's
 * CHALLENGE (keeps both nonces, fills the AUTH reply; -1 on a version it does not speak
 * or no randomness) and checking the WELCOME's proof that the server knows the key. */
int pt_auth_answer_challenge(const pt_key *key, uint8_t role, const pt_ctl_msg *challenge,
                             uint8_t server_nonce[PT_CTL_NONCE_BYTES], uint8_t client_nonce[PT_CTL_NONCE_BYTES],
                             pt_ctl_msg *reply);
bool pt_auth_server_proven(const pt_key *key, uint8_t role, const uint8_t server_nonce[PT_CTL_NONCE_BYTES],
                           const uint8_t client_nonce[PT_CTL_NONCE_BYTES], const uint8_t mac[PT_SHA256_BYTES]);

#endif
