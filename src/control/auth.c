/* auth.c -- key derivation, the job secret, the control key file, and the handshake proofs.
 *
 * Keys are always 32 bytes: a secret of any length (configured, or the job secret rank 0
 * makes) is stretched by HMAC with a per-role label, so the agent key never equals the
 * control key and an agent key -- which every worker holds -- cannot trigger rounds.
 * Nothing here derives a key from facts another process can see (addresses, ports, world
 * sizes, job ids): the job secret is random and reaches the other ranks only through the
 * job's own store. The key file is written
 * with mkstemp (0600) and renamed into place inside a directory we own with mode 0700
 * (jobfile.h's runtime directory), and read back only if nobody else could have written
 * or read it.
 *
 * The cryptography is nettle's (HMAC-SHA256, and memeql_sec for comparing proofs in
 * constant time): a maintained library Debian ships, and already in the process wherever
 * GnuTLS is. Only the concatenation of parts and the key handling are ours. */
#define _GNU_SOURCE
#include "control/auth.h"
#include "control/jobfile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#define SECRET_MAX 4096

void pt_hmac_sha256(const void *key, size_t key_len, const void *const *parts, const size_t *part_lens,
                    size_t part_count, uint8_t out[PT_SHA256_BYTES])
{
    struct hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, key_len, key);
    for (size_t i = 0; i < part_count; i++)
        hmac_sha256_update(&ctx, part_lens[i], parts[i]);
    hmac_sha256_digest(&ctx, PT_SHA256_BYTES, out);
    memset(&ctx, 0, sizeof ctx); /* it holds the key's pads */
}

bool pt_equal_ct(const void *a, const void *b, size_t n)
{
    return memeql_sec(a, b, n) != 0;
}

int pt_random_bytes(void *buf, size_t n, pt_error *err)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            pt_error_set(err, "getrandom: %s", strerror(errno));
            return -1;
        }
        p += got, n -= (size_t)got;
    }
    return 0;
}

static void derive(const void *secret, size_t len, const char *label, uint8_t out[PT_KEY_BYTES])
{
    const void *parts[] = {"perftracker/v1/", label};
    size_t lens[] = {15, strlen(label)};
    pt_hmac_sha256(secret, len, parts, lens, 2, out);
}

/* Opens path for reading only if it is a regular file of this user's that nobody else can
 * read or write: a secret someone else may write is theirs to choose (root included: a
 * file another user owns is one that user can rewrite). */
static int open_private_file(const char *path, pt_error *err)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        pt_error_set(err, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_error_set(err, "%s is not a regular file", path);
    } else if (st.st_mode & 077) {
        pt_error_set(err, "%s can be read or written by other users (chmod 600 it)", path);
    } else if (st.st_uid != geteuid()) {
        pt_error_set(err, "%s belongs to another user", path);
    } else {
        return fd;
    }
    close(fd);
    return -1;
}

static ssize_t read_small_file(const char *path, char *buf, size_t cap, pt_error *err)
{
    int fd = open_private_file(path, err);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            pt_error_set(err, "cannot read %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        len--;
    return (ssize_t)len;
}

/* PERFTRACKER_SECRET or PERFTRACKER_SECRET_FILE: 1 (found), 0 (none configured), -1. */
static int configured_secret(char *buf, size_t *len, char *source, size_t source_cap, pt_error *err)
{
    const char *secret = pt_env_str("PERFTRACKER_SECRET", NULL);
    if (secret) {
        *len = PT_MIN(strlen(secret), (size_t)SECRET_MAX);
        memcpy(buf, secret, *len);
        snprintf(source, source_cap, "PERFTRACKER_SECRET");
        return 1;
    }
    const char *file = pt_env_str("PERFTRACKER_SECRET_FILE", NULL);
    if (!file)
        return 0;
    ssize_t n = read_small_file(file, buf, SECRET_MAX, err);
    if (n <= 0) {
        if (n == 0)
            pt_error_set(err, "PERFTRACKER_SECRET_FILE %s is empty", file);
        return -1;
    }
    *len = (size_t)n;
    snprintf(source, source_cap, "PERFTRACKER_SECRET_FILE (%s)", file);
    return 1;
}

/* The key for `role` from a configured secret: 1 derived, 0 none configured, -1 error. */
static int key_from_configured_secret(pt_key *key, const char *role, pt_error *err)
{
    char secret[SECRET_MAX];
    size_t len = 0;
    key->file[0] = '\0';
    int found = configured_secret(secret, &len, key->source, sizeof key->source, err);
    if (found > 0)
        derive(secret, len, role, key->bytes);
    return found;
}

int pt_auth_agent_key(pt_key *key, pt_error *err)
{
    return key_from_configured_secret(key, "agent", err);
}

static void to_hex(const uint8_t *bytes, size_t n, char *out);
static int from_hex(const char *text, size_t len, uint8_t *out, size_t n);

int pt_auth_new_job_secret(char hex[PT_JOB_SECRET_HEX + 1], pt_key *agent_key, pt_error *err)
{
    uint8_t secret[PT_JOB_SECRET_BYTES];
    if (pt_random_bytes(secret, sizeof secret, err) != 0)
        return -1;
    to_hex(secret, sizeof secret, hex);
    derive(secret, sizeof secret, "agent", agent_key->bytes);
    memset(secret, 0, sizeof secret);
    agent_key->file[0] = '\0';
    snprintf(agent_key->source, sizeof agent_key->source, "the job secret rank 0 made");
    return 0;
}

int pt_auth_agent_key_from_job_secret(const char *hex, size_t len, pt_key *agent_key, pt_error *err)
{
    uint8_t secret[PT_JOB_SECRET_BYTES];
    if (!hex || from_hex(hex, len, secret, sizeof secret) != 0) {
        pt_error_set(err, "the job secret handed over is not %d hex digits (%zu characters)", PT_JOB_SECRET_HEX,
                     hex ? len : 0);
        return -1;
    }
    derive(secret, sizeof secret, "agent", agent_key->bytes);
    memset(secret, 0, sizeof secret);
    agent_key->file[0] = '\0';
    snprintf(agent_key->source, sizeof agent_key->source, "the job secret from rank 0");
    return 0;
}

void pt_auth_key_file_path(const pt_job_env *env, char *dst, size_t cap)
{
    char dir[1024], host[PT_HOST_MAX];
    pt_runtime_dir(dir, sizeof dir);
    pt_runtime_safe_host(env->coordinator_host, host, sizeof host);
    snprintf(dst, cap, "%s/control-%s-%u.key", dir, host, (unsigned)env->coordinator_port);
}

static void to_hex(const uint8_t *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++)
        out[2 * i] = digits[bytes[i] >> 4], out[2 * i + 1] = digits[bytes[i] & 15];
    out[2 * n] = '\0';
}

static int from_hex(const char *text, size_t len, uint8_t *out, size_t n)
{
    if (len != 2 * n)
        return -1;
    for (size_t i = 0; i < 2 * n; i++) {
        char c = text[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return -1;
        out[i / 2] = (uint8_t)(i % 2 ? (out[i / 2] | v) : v << 4);
    }
    return 0;
}

int pt_auth_create_control_key(const pt_job_env *env, pt_key *key, pt_error *err)
{
    int found = key_from_configured_secret(key, "control", err);
    if (found != 0)
        return found < 0 ? -1 : 0;
    if (pt_random_bytes(key->bytes, PT_KEY_BYTES, err) != 0)
        return -1;
    pt_auth_key_file_path(env, key->file, sizeof key->file);
    snprintf(key->source, sizeof key->source, "key file %s", key->file);
    return 0;
}

int pt_auth_write_key_file(const pt_key *key, pt_error *err)
{
    if (!key->file[0])
        return 0;
    char hex[2 * PT_KEY_BYTES + 2];
    to_hex(key->bytes, PT_KEY_BYTES, hex);
    strcat(hex, "\n");
    return pt_runtime_write_private(key->file, hex, strlen(hex), err);
}

int pt_auth_read_key_file(const char *path, pt_key *key, pt_error *err)
{
    char text[256];
    ssize_t n = read_small_file(path, text, sizeof text, err);
    if (n < 0)
        return -1;
    if (from_hex(text, (size_t)n, key->bytes, PT_KEY_BYTES) != 0) {
        pt_error_set(err, "%s does not hold a perftracker key", path);
        return -1;
    }
    snprintf(key->source, sizeof key->source, "key file %s", path);
    snprintf(key->file, sizeof key->file, "%s", path);
    return 0;
}

int pt_auth_load_control_key(const pt_job_env *env, pt_key *key, pt_error *err)
{
    int found = key_from_configured_secret(key, "control", err);
    if (found != 0)
        return found < 0 ? -1 : 0;
    char path[1400];
    pt_auth_key_file_path(env, path, sizeof path);
    if (pt_auth_read_key_file(path, key, err) == 0) /* this user's own: root gets no other user's key */
        return 0;
    char why[sizeof err->message];
    snprintf(why, sizeof why, "%.400s", err ? err->message : path);
    pt_error_set(err, "no job key (%s). Is the job running, with PerfTracker() in its training script? "
                 "Run this in the job's master (rank 0) container as the job's user, or set "
                 "PERFTRACKER_SECRET as the job does", why);
    return -1;
}

static void proof(const pt_key *key, const char *side, uint8_t role, const uint8_t *first,
                  const uint8_t *second, uint8_t out[PT_SHA256_BYTES])
{
    const void *parts[] = {"pt-ctl-v1 ", side, &role, first, second};
    size_t lens[] = {10, strlen(side), 1, PT_CTL_NONCE_BYTES, PT_CTL_NONCE_BYTES};
    pt_hmac_sha256(key->bytes, PT_KEY_BYTES, parts, lens, 5, out);
}

void pt_auth_client_proof(const pt_key *key, uint8_t role, const uint8_t server_nonce[PT_CTL_NONCE_BYTES],
                          const uint8_t client_nonce[PT_CTL_NONCE_BYTES], uint8_t out[PT_SHA256_BYTES])
{
    proof(key, "client", role, server_nonce, client_nonce, out);
}

void pt_auth_server_proof(const pt_key *key, uint8_t role, const uint8_t server_nonce[PT_CTL_NONCE_BYTES],
                          const uint8_t client_nonce[PT_CTL_NONCE_BYTES], uint8_t out[PT_SHA256_BYTES])
{
    proof(key, "server", role, client_nonce, server_nonce, out);
}

int pt_auth_answer_challenge(const pt_key *key, uint8_t role, const pt_ctl_msg *challenge,
                             uint8_t server_nonce[PT_CTL_NONCE_BYTES], uint8_t client_nonce[PT_CTL_NONCE_BYTES],
                             pt_ctl_msg *reply)
{
    pt_error err;
    if (challenge->version != PT_CTL_VERSION || pt_random_bytes(client_nonce, PT_CTL_NONCE_BYTES, &err) != 0)
        return -1;
    memcpy(server_nonce, challenge->nonce, PT_CTL_NONCE_BYTES);
    pt_ctl_msg_init(reply, PT_CTL_AUTH);
    reply->role = role;
    memcpy(reply->nonce, client_nonce, PT_CTL_NONCE_BYTES);
    pt_auth_client_proof(key, role, server_nonce, client_nonce, reply->mac);
    return 0;
}

bool pt_auth_server_proven(const pt_key *key, uint8_t role, const uint8_t server_nonce[PT_CTL_NONCE_BYTES],
                           const uint8_t client_nonce[PT_CTL_NONCE_BYTES], const uint8_t mac[PT_SHA256_BYTES])
{
    uint8_t expected[PT_SHA256_BYTES];
    pt_auth_server_proof(key, role, server_nonce, client_nonce, expected);
    return pt_equal_ct(expected, mac, sizeof expected);
}
