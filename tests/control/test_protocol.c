/* The control plane's pure parts: HMAC-SHA256 (nettle's, as auth.c calls it) against the
 * published RFC 4231 vectors, the frame codec (round trips, partial input, malformed
 * input), the handshake proofs and keys, job files, the environment reader, and the
 * automatic trigger's step statistics. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/agent_instance.h"
#include "control/auth.h"
#include "control/coordinator.h"
#include "control/autotrigger.h"
#include "control/discover.h"
#include "control/job_env.h"
#include "control/jobfile.h"
#include "control/net.h"
#include "control/protocol.h"
#include "control/relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

static void hex(const uint8_t *bytes, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", bytes[i]);
}

static void assert_hmac(const void *key, size_t key_len, const char *data, const char *expected)
{
    const void *parts[] = {data};
    size_t lens[] = {strlen(data)};
    uint8_t mac[32];
    char text[65];
    pt_hmac_sha256(key, key_len, parts, lens, 1, mac);
    hex(mac, 32, text);
    assert_string_equal(text, expected);
}

static void test_hmac_rfc4231(void **state)
{
    (void)state;
    uint8_t key1[20];
    memset(key1, 0x0b, sizeof key1);
    assert_hmac(key1, 20, "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    uint8_t key3[20], data3[51];
    memset(key3, 0xaa, sizeof key3);
    memset(data3, 0xdd, 50);
    data3[50] = '\0';
    assert_hmac(key3, 20, (const char *)data3, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    uint8_t key4[25];
    for (int i = 0; i < 25; i++)
        key4[i] = (uint8_t)(i + 1);
    char data4[51];
    memset(data4, 0xcd, 50);
    data4[50] = '\0';
    assert_hmac(key4, 25, data4, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
    assert_hmac("Jefe", 4, "what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    uint8_t long_key[131];
    memset(long_key, 0xaa, sizeof long_key);
    assert_hmac(long_key, 131, "Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    assert_hmac(long_key, 131,
                "This is a test using a larger than block-size key and a larger than block-size data. The key "
                "needs to be hashed before being used by the HMAC algorithm.",
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
    /* Parts are concatenated. */
    const void *parts[] = {"what do ya ", "want for nothing?"};
    size_t lens[] = {11, 17};
    uint8_t mac[32];
    char text[65];
    pt_hmac_sha256("Jefe", 4, parts, lens, 2, mac);
    hex(mac, 32, text);
    assert_string_equal(text, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void test_equal_ct(void **state)
{
    (void)state;
    uint8_t a[32], b[32];
    memset(a, 7, sizeof a);
    memcpy(b, a, sizeof b);
    assert_true(pt_equal_ct(a, b, 32));
    assert_true(pt_equal_ct(a, b, 0));
    for (size_t i = 0; i < 32; i += 31) { /* a difference at either end is found */
        b[i] ^= 0x80;
        assert_false(pt_equal_ct(a, b, 32));
        b[i] ^= 0x80;
    }
}

/* ---------------------------------------------------------------- codec */

static size_t encode(const pt_ctl_msg *m, uint8_t *buf, size_t cap)
{
    size_t n = pt_ctl_encode(m, buf, cap);
    assert_true(n > 0);
    assert_int_equal(n, pt_ctl_encoded_size(m));
    return n;
}

static void test_round_trip_every_field(void **state)
{
    (void)state;
    static uint8_t blob[70000];
    for (size_t i = 0; i < sizeof blob; i++)
        blob[i] = (uint8_t)(i * 7);
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_WORKER_FAILED);
    m.worker = (pt_ctl_worker){1023, 7, 1024, 127, 4711, pt_ctl_str("node-127")};
    m.kind = PT_FAIL_HANG;
    m.steps_done = -1; /* the extremes of the ranges travel */
    m.stalled_ns = PT_CTL_MAX_DURATION_NS;
    m.text = pt_ctl_str("stopped");
    m.stack = pt_ctl_str("train.py: <module>|time.sleep");
    uint8_t *buf = malloc(200000);
    size_t n = encode(&m, buf, 200000);
    pt_ctl_msg d;
    pt_error err;
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), (ssize_t)n);
    assert_int_equal(d.type, PT_CTL_WORKER_FAILED);
    assert_int_equal(d.worker.rank, 1023);
    assert_int_equal(d.worker.local_rank, 7);
    assert_int_equal(d.worker.world_size, 1024);
    assert_int_equal(d.worker.node_rank, 127);
    assert_int_equal(d.worker.pid, 4711);
    assert_int_equal(d.kind, PT_FAIL_HANG);
    assert_int_equal(d.steps_done, -1);
    assert_true(d.stalled_ns == PT_CTL_MAX_DURATION_NS);
    assert_int_equal(d.worker.host.len, 8);
    assert_memory_equal(d.worker.host.data, "node-127", 8);
    assert_memory_equal(d.stack.data, "train.py: <module>|time.sleep", d.stack.len);

    /* A hang report's snapshot: every thread and the collectives, with the mean step. */
    static const char threads[] = "thread\tMainThread\t1\t1\ttrain.py: <module>\n";
    static const char colls[] = "group\t0\tgloo\t4\t0-3\ncall\t41\tall_reduce\t1000\tfloat32\tentered\t9\n";
    pt_ctl_msg_init(&m, PT_CTL_HANG);
    m.steps_done = 20, m.mean_step_ns = 38000000, m.since_step_ns = PT_CTL_MAX_DURATION_NS;
    m.stack = pt_ctl_str("train.py: <module>");
    m.threads = pt_ctl_str(threads);
    m.collectives = pt_ctl_str(colls);
    n = encode(&m, buf, 200000);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), (ssize_t)n);
    assert_true(d.since_step_ns == PT_CTL_MAX_DURATION_NS);
    assert_int_equal(d.threads.len, strlen(threads));
    assert_memory_equal(d.threads.data, threads, d.threads.len);
    assert_int_equal(d.collectives.len, strlen(colls));
    assert_memory_equal(d.collectives.data, colls, d.collectives.len);
    pt_ctl_msg_init(&m, PT_CTL_WORKER_FAILED);
    m.worker = (pt_ctl_worker){3, 3, 4, 0, 1, pt_ctl_str("node")};
    m.kind = PT_FAIL_EXITED;
    m.steps_done = 20, m.mean_step_ns = 38000000, m.since_step_ns = 5;
    m.collectives = pt_ctl_str(colls);
    n = encode(&m, buf, 200000);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), (ssize_t)n);
    assert_true(d.mean_step_ns == 38000000 && d.since_step_ns == 5);
    assert_memory_equal(d.collectives.data, colls, d.collectives.len);

    pt_ctl_msg_init(&m, PT_CTL_SUMMARY);
    m.round = 77;
    m.status = -1;
    m.path = pt_ctl_str("/out/raw_trace/h_0_1.ptrace");
    m.blob = pt_ctl_blob(blob, sizeof blob);
    n = encode(&m, buf, 200000);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), (ssize_t)n);
    assert_int_equal(d.round, 77);
    assert_int_equal(d.status, -1);
    assert_int_equal(d.blob.len, sizeof blob);
    assert_memory_equal(d.blob.data, blob, sizeof blob);

    pt_ctl_msg_init(&m, PT_CTL_AUTH);
    m.role = PT_CTL_ROLE_CONTROL;
    memset(m.nonce, 0xa5, sizeof m.nonce);
    memset(m.mac, 0x5a, sizeof m.mac);
    n = encode(&m, buf, 200000);
    assert_int_equal(n, 4 + 1 + 4 + 1 + 32 + 32);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), (ssize_t)n);
    assert_int_equal(d.version, PT_CTL_VERSION);
    assert_int_equal(d.role, PT_CTL_ROLE_CONTROL);
    assert_memory_equal(d.nonce, m.nonce, 32);
    assert_memory_equal(d.mac, m.mac, 32);

    pt_ctl_msg_init(&m, PT_CTL_PROGRESS);
    m.progress = (pt_ctl_progress){1024, 1000, 999, 998, 41, 43, 7, 6, 5, 4};
    n = encode(&m, buf, 200000);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), (ssize_t)n);
    assert_memory_equal(&d.progress, &m.progress, sizeof m.progress);

    pt_ctl_msg_init(&m, PT_CTL_BYE);
    n = encode(&m, buf, 200000);
    assert_int_equal(n, 5);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), 5);
    assert_int_equal(d.type, PT_CTL_BYE);
    free(buf);
}

static void test_partial_frames_need_more(void **state)
{
    (void)state;
    pt_ctl_msg m, d;
    pt_ctl_msg_init(&m, PT_CTL_ARM);
    m.round = 3;
    m.start_step = 1234567890123LL;
    m.steps = 2;
    m.path = pt_ctl_str("/mnt/data/20260101_000000/raw_trace");
    uint8_t buf[256];
    size_t n = encode(&m, buf, sizeof buf);
    pt_error err;
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(pt_ctl_decode(buf, cut, &d, &err), 0);
    /* Two frames back to back: the first decodes alone. */
    memcpy(buf + n, buf, n);
    assert_int_equal(pt_ctl_decode(buf, 2 * n, &d, &err), (ssize_t)n);
    assert_int_equal(d.start_step, 1234567890123LL);
    assert_int_equal(pt_ctl_decode(buf + n, n, &d, &err), (ssize_t)n);
    /* Too small a destination encodes nothing. */
    assert_int_equal(pt_ctl_encode(&m, buf, n - 1), 0);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_malformed_frames_rejected(void **state)
{
    (void)state;
    pt_ctl_msg d;
    pt_error err;
    uint8_t buf[64] = {0};
    put_u32(buf, 0); /* empty body */
    assert_int_equal(pt_ctl_decode(buf, 8, &d, &err), -1);
    put_u32(buf, PT_CTL_MAX_FRAME + 1); /* too long, refused before it arrives */
    assert_int_equal(pt_ctl_decode(buf, 8, &d, &err), -1);
    put_u32(buf, 1);
    buf[4] = 99; /* unknown type */
    assert_int_equal(pt_ctl_decode(buf, 5, &d, &err), -1);
    assert_non_null(strstr(err.message, "unknown message type"));
    put_u32(buf, 2);
    buf[4] = PT_CTL_BYE; /* a trailing byte */
    assert_int_equal(pt_ctl_decode(buf, 6, &d, &err), -1);
    assert_non_null(strstr(err.message, "trailing"));
    put_u32(buf, 1 + 3);
    buf[4] = PT_CTL_PROBE; /* a u32 field cut short */
    assert_int_equal(pt_ctl_decode(buf, 8, &d, &err), -1);
    /* A byte field longer than the frame / than its cap. */
    put_u32(buf, 1 + 4);
    buf[4] = PT_CTL_ERROR;
    put_u32(buf + 5, 100);
    assert_int_equal(pt_ctl_decode(buf, 9, &d, &err), -1);
    put_u32(buf + 5, PT_CTL_MAX_TEXT + 1);
    assert_int_equal(pt_ctl_decode(buf, 9, &d, &err), -1);
    assert_non_null(strstr(err.message, "limit"));
    /* The encoder refuses what the decoder would refuse. */
    static char big[PT_CTL_MAX_TEXT + 2];
    memset(big, 'x', sizeof big - 1);
    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_ERROR);
    m.text = pt_ctl_str(big);
    assert_int_equal(pt_ctl_encoded_size(&m), 0);
}

/* Encodes m bypassing the range checks (as a hostile peer would): the schema's bytes for
 * a trigger, by hand. */
static size_t raw_trigger(uint8_t *buf, int32_t wait, int32_t steps, uint8_t save_raw, int64_t timeout_ms,
                          const char *path, size_t path_len)
{
    uint8_t *p = buf + 4;
    *p++ = PT_CTL_TRIGGER;
    for (int i = 0; i < 4; i++)
        *p++ = (uint8_t)((uint32_t)wait >> (8 * i));
    for (int i = 0; i < 4; i++)
        *p++ = (uint8_t)((uint32_t)steps >> (8 * i));
    *p++ = save_raw;
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)((uint64_t)timeout_ms >> (8 * i));
    put_u32(p, (uint32_t)path_len);
    p += 4;
    memcpy(p, path, path_len);
    p += path_len;
    put_u32(buf, (uint32_t)(p - buf - 4));
    return (size_t)(p - buf);
}

/* Every number is checked against the range its message allows, before anyone uses it:
 * a TRIGGER with a timeout of -2^62 ms (whose conversion to ns overflowed) is refused by
 * the decoder with the field named, and the encoder refuses to send one. */
static void test_out_of_range_fields_refused(void **state)
{
    (void)state;
    uint8_t buf[256];
    pt_ctl_msg d;
    pt_error err;
    size_t n = raw_trigger(buf, 2, 2, PT_SAVE_RAW_NONE, 60000, "", 0);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), (ssize_t)n); /* a good one decodes */
    n = raw_trigger(buf, 2, 2, PT_SAVE_RAW_NONE, -(1LL << 62), "", 0);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), -1);
    assert_string_equal(err.message, "trigger message: timeout_ms -4611686018427387904 is outside 0..604800000");
    n = raw_trigger(buf, 2, 2, PT_SAVE_RAW_NONE, PT_CTL_MAX_TIMEOUT_MS + 1, "", 0);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), -1);
    n = raw_trigger(buf, -1, 2, PT_SAVE_RAW_NONE, 0, "", 0);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), -1);
    assert_non_null(strstr(err.message, "wait -1 is outside 0..1000000"));
    n = raw_trigger(buf, 0, 1001, PT_SAVE_RAW_NONE, 0, "", 0);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), -1);
    assert_non_null(strstr(err.message, "steps 1001 is outside 1..1000"));
    n = raw_trigger(buf, 0, 2, 3, 0, "", 0);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), -1);
    assert_non_null(strstr(err.message, "save_raw 3"));
    n = raw_trigger(buf, 0, 2, PT_SAVE_RAW_ALL, 0, "/out\0/etc", 9);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), -1);
    assert_non_null(strstr(err.message, "path holds a NUL byte"));

    pt_ctl_msg m;
    pt_ctl_msg_init(&m, PT_CTL_TRIGGER);
    m.steps = 2;
    m.timeout_ms = -(1LL << 62);
    assert_int_equal(pt_ctl_encoded_size(&m), 0);
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    assert_non_null(strstr(err.message, "timeout_ms"));

    /* The other messages' numbers, and the relations between fields. */
    pt_ctl_msg_init(&m, PT_CTL_JOIN);
    m.worker = (pt_ctl_worker){3, 0, 4, 0, 42, pt_ctl_str("node")};
    assert_int_equal(pt_ctl_check(&m, &err), 0);
    m.worker.rank = 4; /* a rank outside its world */
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    assert_non_null(strstr(err.message, "not inside its world size"));
    m.worker.rank = 0, m.worker.world_size = PT_CTL_MAX_WORLD + 1;
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    m.worker.world_size = 4, m.worker.host = pt_ctl_blob("no\0de", 5);
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    assert_non_null(strstr(err.message, "worker.host holds a NUL byte"));

    pt_ctl_msg_init(&m, PT_CTL_HEARTBEAT);
    m.mean_step_ns = -1;
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    m.mean_step_ns = 0, m.steps_done = PT_CTL_MAX_STEP + 1;
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    pt_ctl_msg_init(&m, PT_CTL_AUTO_REQUEST);
    m.kind = 7;
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    m.kind = PT_AUTO_COLLECTIVE_ERROR;
    assert_int_equal(pt_ctl_check(&m, &err), 0);
    /* A snapshot's texts: bounded, no NUL (they are parsed as lines later). */
    static char big[PT_CTL_MAX_SNAPSHOT + 2];
    memset(big, 'x', sizeof big - 1);
    pt_ctl_msg_init(&m, PT_CTL_HANG);
    m.threads = pt_ctl_blob("thread\0x", 8);
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    assert_non_null(strstr(err.message, "threads holds a NUL byte"));
    m.threads = pt_ctl_str(""), m.collectives = pt_ctl_str(big);
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    assert_non_null(strstr(err.message, "collectives is 65537 bytes, longer than its limit of 65536"));
    m.collectives = pt_ctl_str(""), m.since_step_ns = -1;
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    pt_ctl_msg_init(&m, PT_CTL_ARM);
    m.steps = 2, m.start_step = -3;
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    pt_ctl_msg_init(&m, PT_CTL_PROGRESS);
    m.progress = (pt_ctl_progress){4, 5, 0, 0, -1, -1, 0, 0, 0, 0}; /* 5 connected of 4 */
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    assert_non_null(strstr(err.message, "exceeds the world size"));
    pt_ctl_msg_init(&m, PT_CTL_AUTH);
    m.role = PT_CTL_ROLE_RELAY + 1;
    assert_int_equal(pt_ctl_check(&m, &err), -1);
}

/* Every single-byte corruption of a valid frame is refused with a reason, or asks for
 * more bytes, or decodes to a message inside every range that encodes and decodes again
 * the same; nothing reads out of bounds (ASan watches). The byte left as it was decodes
 * to the original. */
/* A relay's merged heartbeats: entries round-trip at their ranges' extremes, and the
 * decoder refuses a blob that is not whole entries, and any entry whose field a
 * heartbeat's range would refuse (the coordinator uses them as they come). */
static void test_merged_heartbeats_checked_entry_by_entry(void **state)
{
    (void)state;
    uint8_t entries[3 * PT_CTL_BEAT_BYTES], buf[512];
    pt_ctl_beat in[3] = {{0, 0, 0, 0, 0},
                         {PT_CTL_MAX_WORLD - 1, PT_CTL_MAX_STEP, PT_CTL_MAX_DURATION_NS, 5, PT_CTL_MAX_BEAT_HOLD_NS},
                         {17, 4242, 50000000, 0, 300000000}};
    for (int i = 0; i < 3; i++)
        pt_ctl_beat_put(entries + i * PT_CTL_BEAT_BYTES, &in[i]);
    pt_ctl_msg m, d;
    pt_error err;
    pt_ctl_msg_init(&m, PT_CTL_HEARTBEATS);
    m.blob = pt_ctl_blob(entries, sizeof entries);
    size_t n = encode(&m, buf, sizeof buf);
    assert_int_equal(pt_ctl_decode(buf, n, &d, &err), (ssize_t)n);
    assert_int_equal(pt_ctl_beat_count(&d), 3);
    for (size_t i = 0; i < 3; i++) {
        pt_ctl_beat b = pt_ctl_beat_get(&d, i);
        assert_int_equal(b.rank, in[i].rank);
        assert_true(b.steps_done == in[i].steps_done && b.mean_step_ns == in[i].mean_step_ns);
        assert_true(b.stalled_ns == in[i].stalled_ns && b.held_ns == in[i].held_ns);
    }

    m.blob = pt_ctl_blob(entries, sizeof entries - 1); /* not whole entries */
    assert_int_equal(pt_ctl_encoded_size(&m), 0);
    assert_int_equal(pt_ctl_check(&m, &err), -1);
    assert_non_null(strstr(err.message, "not a whole number of 36-byte entries"));

    const struct {
        pt_ctl_beat beat;
        const char *field;
    } bad[] = {
        {{-1, 0, 0, 0, 0}, "rank"},
        {{PT_CTL_MAX_WORLD, 0, 0, 0, 0}, "rank"},
        {{1, -1, 0, 0, 0}, "steps_done"},
        {{1, PT_CTL_MAX_STEP + 1, 0, 0, 0}, "steps_done"},
        {{1, 0, -1, 0, 0}, "mean_step_ns"},
        {{1, 0, 0, PT_CTL_MAX_DURATION_NS + 1, 0}, "stalled_ns"},
        {{1, 0, 0, 0, PT_CTL_MAX_BEAT_HOLD_NS + 1}, "held_ns"},
        {{1, 0, 0, 0, INT64_MIN}, "held_ns"},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(bad); i++) {
        memcpy(buf, entries, sizeof entries);
        pt_ctl_beat_put(entries + 2 * PT_CTL_BEAT_BYTES, &bad[i].beat); /* the last entry goes bad */
        pt_ctl_msg_init(&m, PT_CTL_HEARTBEATS);
        m.blob = pt_ctl_blob(entries, sizeof entries);
        assert_int_equal(pt_ctl_encoded_size(&m), 0);
        /* the same bytes, framed by hand, are refused by the decoder */
        uint8_t frame[9 + sizeof entries];
        uint32_t body = 1 + 4 + (uint32_t)sizeof entries;
        for (int k = 0; k < 4; k++)
            frame[k] = (uint8_t)(body >> (8 * k)), frame[5 + k] = (uint8_t)((uint32_t)sizeof entries >> (8 * k));
        frame[4] = PT_CTL_HEARTBEATS;
        memcpy(frame + 9, entries, sizeof entries);
        assert_int_equal(pt_ctl_decode(frame, 9 + sizeof entries, &d, &err), -1);
        char want[64];
        snprintf(want, sizeof want, "entry 2: %s is out of its range", bad[i].field);
        assert_non_null(strstr(err.message, want));
        memcpy(entries, buf, sizeof entries);
    }
}

static void test_corrupted_bytes_never_crash(void **state)
{
    (void)state;
    pt_ctl_msg m, d, again;
    pt_ctl_msg_init(&m, PT_CTL_HANG);
    m.round = 9;
    m.steps_done = 100;
    m.stack = pt_ctl_str("a|b|c");
    uint8_t good[128], bad[128], reencoded[256];
    size_t n = encode(&m, good, sizeof good);
    pt_error err;
    int refused = 0;
    for (size_t i = 0; i < n; i++)
        for (int v = 0; v < 256; v += 17) {
            memcpy(bad, good, n);
            bad[i] = (uint8_t)v;
            uint8_t *exact = malloc(n); /* exact-size copy so ASan sees any overread */
            memcpy(exact, bad, n);
            memset(&err, 0, sizeof err);
            ssize_t got = pt_ctl_decode(exact, n, &d, &err);
            assert_true(got >= -1 && got <= (ssize_t)n);
            if (got < 0) {
                assert_true(err.message[0] != '\0');
                refused++;
            } else if (got > 0) {
                pt_error check = {{0}};
                assert_int_equal(pt_ctl_check(&d, &check), 0);
                size_t k = pt_ctl_encode(&d, reencoded, sizeof reencoded);
                assert_true(k > 0);
                assert_int_equal(pt_ctl_decode(reencoded, k, &again, &check), (ssize_t)k);
                assert_int_equal(again.type, d.type);
                assert_true(again.round == d.round && again.steps_done == d.steps_done);
            }
            if (bad[i] == good[i]) {
                assert_int_equal(got, (ssize_t)n);
                assert_true(d.type == PT_CTL_HANG && d.round == 9 && d.steps_done == 100);
            }
            free(exact);
        }
    assert_true(refused > 0);
}

/* ---------------------------------------------------------------- auth */

static void test_proofs_depend_on_key_role_and_nonces(void **state)
{
    (void)state;
    pt_key a = {{1}, ""}, b = {{2}, ""};
    uint8_t ns[32] = {3}, nc[32] = {4}, p1[32], p2[32];
    pt_auth_client_proof(&a, PT_CTL_ROLE_AGENT, ns, nc, p1);
    pt_auth_client_proof(&a, PT_CTL_ROLE_AGENT, ns, nc, p2);
    assert_memory_equal(p1, p2, 32);
    pt_auth_client_proof(&b, PT_CTL_ROLE_AGENT, ns, nc, p2);
    assert_false(pt_equal_ct(p1, p2, 32));
    pt_auth_client_proof(&a, PT_CTL_ROLE_CONTROL, ns, nc, p2);
    assert_false(pt_equal_ct(p1, p2, 32));
    nc[31] = 9;
    pt_auth_client_proof(&a, PT_CTL_ROLE_AGENT, ns, nc, p2);
    assert_false(pt_equal_ct(p1, p2, 32));
    pt_auth_server_proof(&a, PT_CTL_ROLE_AGENT, ns, nc, p2); /* the server's is never the client's */
    pt_auth_client_proof(&a, PT_CTL_ROLE_AGENT, ns, nc, p1);
    assert_false(pt_equal_ct(p1, p2, 32));
}

static void clear_job_env(void)
{
    const char *vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                          "MASTER_PORT", "PERFTRACKER_PORT", "PERFTRACKER_COORDINATOR", "PERFTRACKER_SECRET",
                          "PERFTRACKER_SECRET_FILE", "PERFTRACKER_KEY_DIR", "SLURM_PROCID", "SLURM_NTASKS",
                          "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS_PER_NODE", "TORCHELASTIC_RUN_ID",
                          "SLURM_JOB_ID", "NODE_RANK", "PET_NODE_RANK", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < PT_ARRAY_LEN(vars); i++)
        unsetenv(vars[i]);
}

static void test_job_env_torchrun_and_slurm(void **state)
{
    (void)state;
    clear_job_env();
    pt_job_env env;
    pt_error err;
    assert_int_equal(pt_job_env_read(&env, true, &err), 1);
    assert_non_null(strstr(err.message, "MASTER_ADDR"));

    setenv("MASTER_ADDR", "10.0.0.7", 1);
    setenv("MASTER_PORT", "29500", 1);
    assert_int_equal(pt_job_env_read(&env, false, &err), 0); /* the CLI needs no rank */
    assert_string_equal(env.coordinator_host, "10.0.0.7");
    assert_int_equal(env.coordinator_port, 29501);
    assert_int_equal(pt_job_env_read(&env, true, &err), 1);

    setenv("RANK", "13", 1);
    setenv("WORLD_SIZE", "16", 1);
    setenv("LOCAL_RANK", "5", 1);
    setenv("LOCAL_WORLD_SIZE", "8", 1);
    setenv("GROUP_RANK", "1", 1);
    setenv("PERFTRACKER_PORT", "40000", 1);
    assert_int_equal(pt_job_env_read(&env, true, &err), 0);
    assert_int_equal(env.rank, 13);
    assert_int_equal(env.world_size, 16);
    assert_int_equal(env.local_rank, 5);
    assert_int_equal(env.node_rank, 1);
    assert_int_equal(env.coordinator_port, 40000);
    assert_false(pt_job_env_single_node(&env));

    clear_job_env();
    setenv("SLURM_PROCID", "9", 1);
    setenv("SLURM_NTASKS", "12", 1);
    setenv("SLURM_NTASKS_PER_NODE", "4(x3)", 1);
    setenv("PERFTRACKER_COORDINATOR", "[::1]:7000", 1);
    assert_int_equal(pt_job_env_read(&env, true, &err), 0);
    assert_int_equal(env.rank, 9);
    assert_int_equal(env.world_size, 12);
    assert_int_equal(env.local_rank, 1);  /* 9 % 4 */
    assert_int_equal(env.node_rank, 2);   /* 9 / 4 */
    assert_string_equal(env.coordinator_host, "::1");
    assert_int_equal(env.coordinator_port, 7000);

    setenv("RANK", "12", 1); /* rank outside the world */
    setenv("WORLD_SIZE", "12", 1);
    assert_int_equal(pt_job_env_read(&env, true, &err), -1);
    clear_job_env();

    char name[128];
    pt_worker_file_name(name, sizeof name, "../evil/host", 3, 4711, ".json");
    assert_string_equal(name, ".._evil_host_3_4711.json");
}

/* A 4-worker job on 127.0.0.1:master_port whose runtime directory is dir/keys (dir: a
 * mkdtemp template, filled in). */
static void job_in_temp_dir(char *dir, char *key_dir, size_t cap, const char *master_port, pt_job_env *env)
{
    clear_job_env();
    assert_non_null(mkdtemp(dir));
    snprintf(key_dir, cap, "%s/keys", dir);
    setenv("PERFTRACKER_KEY_DIR", key_dir, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", master_port, 1);
    setenv("WORLD_SIZE", "4", 1);
    pt_error err;
    assert_int_equal(pt_job_env_read(env, false, &err), 0);
}

static void test_keys_secret_file_and_key_dir(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt-test-keys-XXXXXX", key_dir[128];
    pt_job_env env;
    pt_error err;
    job_in_temp_dir(dir, key_dir, sizeof key_dir, "29500", &env);

    /* Without a secret: rank 0 writes a fresh random control key, the CLI reads it. */
    pt_key made, loaded, again;
    assert_int_equal(pt_auth_load_control_key(&env, &loaded, &err), -1); /* no file yet */
    assert_int_equal(pt_auth_create_control_key(&env, &made, &err), 0);
    assert_int_equal(pt_auth_load_control_key(&env, &loaded, &err), -1); /* written only once it listens */
    assert_int_equal(pt_auth_write_key_file(&made, &err), 0);
    assert_int_equal(pt_auth_load_control_key(&env, &loaded, &err), 0);
    assert_memory_equal(made.bytes, loaded.bytes, PT_KEY_BYTES);
    char path[1500];
    pt_auth_key_file_path(&env, path, sizeof path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(key_dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(pt_auth_create_control_key(&env, &again, &err), 0); /* a restart gets a new key */
    assert_int_equal(pt_auth_write_key_file(&again, &err), 0);
    assert_false(pt_equal_ct(made.bytes, again.bytes, PT_KEY_BYTES));
    /* A key file others can read is not trusted. */
    chmod(path, 0644);
    assert_int_equal(pt_auth_load_control_key(&env, &loaded, &err), -1);
    assert_non_null(strstr(err.message, "other users"));

    /* Without a configured secret no agent key derives from anything public: rank 0 makes
     * a random job secret, and another rank gets the same key from its text only. */
    pt_key k1, k2;
    assert_int_equal(pt_auth_agent_key(&k1, &err), 0);
    char hex[PT_JOB_SECRET_HEX + 1], other[PT_JOB_SECRET_HEX + 1];
    assert_int_equal(pt_auth_new_job_secret(hex, &k1, &err), 0);
    assert_int_equal(strlen(hex), PT_JOB_SECRET_HEX);
    assert_int_equal(pt_auth_agent_key_from_job_secret(hex, strlen(hex), &k2, &err), 0);
    assert_memory_equal(k1.bytes, k2.bytes, PT_KEY_BYTES);
    assert_int_equal(pt_auth_new_job_secret(other, &k2, &err), 0); /* every job its own */
    assert_false(pt_equal_ct(k1.bytes, k2.bytes, PT_KEY_BYTES));
    assert_int_equal(pt_auth_agent_key_from_job_secret(hex, PT_JOB_SECRET_HEX - 1, &k2, &err), -1);
    assert_non_null(strstr(err.message, "64 hex digits"));
    hex[7] = 'g';
    assert_int_equal(pt_auth_agent_key_from_job_secret(hex, PT_JOB_SECRET_HEX, &k2, &err), -1);
    assert_int_equal(pt_auth_agent_key_from_job_secret(NULL, 0, &k2, &err), -1);

    /* A configured secret wins, and its agent and control keys differ. */
    setenv("PERFTRACKER_SECRET", "s3cret", 1);
    assert_int_equal(pt_auth_agent_key(&k1, &err), 1);
    assert_int_equal(pt_auth_load_control_key(&env, &k2, &err), 0);
    assert_false(pt_equal_ct(k1.bytes, k2.bytes, PT_KEY_BYTES));
    unsetenv("PERFTRACKER_SECRET");
    char secret_path[160];
    snprintf(secret_path, sizeof secret_path, "%s/secret", dir);
    int fd = open(secret_path, O_CREAT | O_WRONLY, 0640);
    assert_true(write(fd, "s3cret\n", 7) == 7);
    close(fd);
    setenv("PERFTRACKER_SECRET_FILE", secret_path, 1);
    assert_int_equal(pt_auth_agent_key(&k2, &err), -1); /* group-readable: refused */
    chmod(secret_path, 0600);
    assert_int_equal(pt_auth_agent_key(&k2, &err), 1);
    assert_memory_equal(k1.bytes, k2.bytes, PT_KEY_BYTES); /* the trailing newline is not part of it */

    unlink(secret_path);
    unlink(path);
    rmdir(key_dir);
    rmdir(dir);
    clear_job_env();
}

/* Rank 0's coordinator in a child process with its job files published: `disposition` is
 * what SIGTERM does there before it starts (SIG_DFL, or SIG_IGN, which must be kept), and
 * with fork_worker the child forks a process of its own (a DataLoader worker, which
 * inherits the handler but not the files) and reports its pid. The child says 'r' when
 * the files are written, then waits for signals. */
static pid_t start_publishing_child(int report_fd, void (*disposition)(int), bool fork_worker)
{
    pid_t child = fork();
    if (child != 0)
        return child;
    signal(SIGTERM, disposition);
    pt_job_env env;
    pt_error err;
    setenv("RANK", "0", 1);
    if (pt_job_env_read(&env, true, &err) != 0)
        _exit(2);
    pt_coordinator_config cfg;
    if (pt_coordinator_config_from_env(&cfg, &env, &err) != 0)
        _exit(3);
    cfg.port = 0;
    cfg.local_socket = false;
    if (!pt_coordinator_start(&cfg, &err))
        _exit(4);
    pid_t worker = fork_worker ? fork() : 0;
    if (fork_worker && worker == 0) {
        for (;;)
            pause();
    }
    if (write(report_fd, "r", 1) != 1 || write(report_fd, &worker, sizeof worker) != (ssize_t)sizeof worker)
        _exit(5);
    for (;;)
        pause();
}

static int files_in(const char *dir, const char *prefix)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls '%s' 2>/dev/null | grep -c '^%s' >/dev/null", dir, prefix);
    return system(cmd) == 0;
}

/* A SIGTERM (a launcher's, a scheduler's) ends rank 0 without its atexit handlers: its job
 * file and control key go with it all the same, and it still dies of the signal. Not on
 * a SIGTERM to a process it forked, nor when the program ignores SIGTERM itself. */
static void test_job_files_go_with_a_terminating_signal(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt-test-sigterm-XXXXXX", key_dir[128];
    pt_job_env env;
    job_in_temp_dir(dir, key_dir, sizeof key_dir, "29800", &env);
    for (int ignore = 0; ignore <= 1; ignore++) {
        int pipe_fds[2];
        assert_int_equal(pipe(pipe_fds), 0);
        pid_t child = start_publishing_child(pipe_fds[1], ignore ? SIG_IGN : SIG_DFL, !ignore);
        char ready = 0;
        pid_t worker = 0;
        assert_int_equal(read(pipe_fds[0], &ready, 1), 1);
        assert_int_equal(read(pipe_fds[0], &worker, sizeof worker), (ssize_t)sizeof worker);
        assert_true(files_in(key_dir, "job-") && files_in(key_dir, "control-"));
        int status = 0;
        if (worker > 0) { /* the forked worker dies of it and leaves the files alone */
            assert_int_equal(kill(worker, SIGTERM), 0);
            assert_int_equal(waitpid(worker, &status, 0), -1); /* not ours: the child's */
            for (int i = 0; i < 100 && kill(worker, 0) == 0; i++)
                nanosleep(&(struct timespec){0, 10000000}, NULL);
            assert_true(files_in(key_dir, "job-") && files_in(key_dir, "control-"));
        }
        assert_int_equal(kill(child, SIGTERM), 0);
        if (ignore) { /* the program's own choice stands: still alive, files still there */
            nanosleep(&(struct timespec){0, 200000000}, NULL);
            assert_int_equal(waitpid(child, &status, WNOHANG), 0);
            assert_true(files_in(key_dir, "job-"));
            kill(child, SIGKILL);
        }
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), ignore ? SIGKILL : SIGTERM);
        assert_int_equal(files_in(key_dir, "job-"), ignore); /* SIGKILL leaves them: the CLI's stale check */
        assert_int_equal(files_in(key_dir, "control-"), ignore);
        close(pipe_fds[0]), close(pipe_fds[1]);
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -f '%s'/*", key_dir);
        assert_int_equal(system(cmd), 0);
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    clear_job_env();
}

/* The relay tree's switch at its bounds: several ranks a node and at least 256 workers
 * (PERFTRACKER_RELAY_MIN_WORLD), or forced on or off. */
static void test_relay_tree_threshold(void **state)
{
    (void)state;
    unsetenv("PERFTRACKER_RELAY");
    unsetenv("PERFTRACKER_RELAY_MIN_WORLD");
    assert_false(pt_relay_wanted(255, 8));
    assert_true(pt_relay_wanted(256, 8));
    assert_true(pt_relay_wanted(257, 8));
    assert_false(pt_relay_wanted(256, 256)); /* one node: nothing to relay */
    assert_false(pt_relay_wanted(256, 1));   /* a rank a node: a relay per rank saves nothing */
    assert_false(pt_relay_wanted(256, -1));  /* unknown: never guessed */
    setenv("PERFTRACKER_RELAY_MIN_WORLD", "4", 1);
    assert_false(pt_relay_wanted(3, 2));
    assert_true(pt_relay_wanted(4, 2));
    unsetenv("PERFTRACKER_RELAY_MIN_WORLD");
    setenv("PERFTRACKER_RELAY", "1", 1);
    assert_false(pt_relay_wanted(2, 1)); /* forced on still needs several ranks a node */
    assert_true(pt_relay_wanted(4, 2));
    setenv("PERFTRACKER_RELAY", "0", 1);
    assert_false(pt_relay_wanted(100000, 8));
    unsetenv("PERFTRACKER_RELAY");
}

static int write_file_mode(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return -1;
    close(fd);
    return chmod(path, mode);
}

/* A secret or key file others may write (even without reading it) is someone else's to
 * choose, and an empty secret would make every key derive from a public string: each is
 * refused, at the boundary of the mode bits (0600 taken, one more bit refused), and a file
 * of another user's is refused even for root. */
static void test_writable_or_empty_secrets_are_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt-test-secrets-XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/secret", dir);
    unsetenv("PERFTRACKER_SECRET");
    setenv("PERFTRACKER_SECRET_FILE", path, 1);
    pt_key key;
    pt_error err;
    static const mode_t refused[] = {0602, 0620, 0601, 0610, 0604, 0640, 0660, 0606};
    for (size_t i = 0; i < PT_ARRAY_LEN(refused); i++) {
        assert_int_equal(write_file_mode(path, "s3cret\n", refused[i]), 0);
        assert_int_equal(pt_auth_agent_key(&key, &err), -1);
        assert_non_null(strstr(err.message, "other users"));
        assert_int_equal(pt_auth_read_key_file(path, &key, &err), -1);
    }
    assert_int_equal(write_file_mode(path, "s3cret\n", 0600), 0);
    assert_int_equal(pt_auth_agent_key(&key, &err), 1);
    assert_int_equal(write_file_mode(path, "s3cret\n", 0400), 0); /* read-only for its owner: fine */
    assert_int_equal(pt_auth_agent_key(&key, &err), 1);

    static const char *empty[] = {"", "\n", " \r\n", "\n\n\n"};
    for (size_t i = 0; i < PT_ARRAY_LEN(empty); i++) {
        assert_int_equal(write_file_mode(path, empty[i], 0600), 0);
        assert_int_equal(pt_auth_agent_key(&key, &err), -1);
        assert_non_null(strstr(err.message, "is empty"));
    }
    assert_int_equal(write_file_mode(path, "x\n", 0600), 0); /* one byte is a secret (a weak one) */
    assert_int_equal(pt_auth_agent_key(&key, &err), 1);

    /* A control key file others may write is refused as the secret file is. */
    char hex[2 * PT_KEY_BYTES + 2];
    for (int i = 0; i < 2 * PT_KEY_BYTES; i++)
        hex[i] = "0123456789abcdef"[i % 16];
    hex[2 * PT_KEY_BYTES] = '\n', hex[2 * PT_KEY_BYTES + 1] = '\0';
    assert_int_equal(write_file_mode(path, hex, 0602), 0);
    assert_int_equal(pt_auth_read_key_file(path, &key, &err), -1);
    assert_int_equal(write_file_mode(path, hex, 0600), 0);
    assert_int_equal(pt_auth_read_key_file(path, &key, &err), 0);

    if (geteuid() == 0) { /* another user's 0600 file: they can rewrite it */
        assert_int_equal(write_file_mode(path, "s3cret\n", 0600), 0);
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_int_equal(pt_auth_agent_key(&key, &err), -1);
        assert_non_null(strstr(err.message, "belongs to another user"));
        assert_int_equal(pt_auth_read_key_file(path, &key, &err), -1);
    }
    unsetenv("PERFTRACKER_SECRET_FILE");
    unlink(path);
    rmdir(dir);
}

/* A job file says where the job is; a stale one (its process gone: a mismatching start
 * time stands for a reused pid) is removed with the key file beside it, and a key file
 * named elsewhere is neither offered nor removed. */
static void test_job_files_live_and_stale(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt-test-jobs-XXXXXX", key_dir[128], outside[160];
    pt_job_env env;
    pt_error err;
    job_in_temp_dir(dir, key_dir, sizeof key_dir, "29600", &env);
    snprintf(outside, sizeof outside, "%s/control-elsewhere-1.key", dir);
    pt_key key;
    assert_int_equal(pt_auth_create_control_key(&env, &key, &err), 0);
    assert_int_equal(pt_auth_write_key_file(&key, &err), 0);

    pt_job_record live, back;
    pt_job_record_for_self(&live, &env);
    snprintf(live.connect_host, sizeof live.connect_host, "127.0.0.1");
    snprintf(live.key_file, sizeof live.key_file, "%s", key.file);
    snprintf(live.command, sizeof live.command, "python3 train.py\n--evil");
    assert_int_equal(pt_job_file_write(&live, &err), 0);
    assert_int_equal(pt_job_file_read(live.file, &back, &err), 0);
    assert_int_equal(back.pid, getpid());
    assert_int_equal(back.port, 29601);
    assert_int_equal(back.master_port, 29600);
    assert_int_equal(back.world_size, 4);
    assert_string_equal(back.key_file, key.file);
    assert_string_equal(back.command, "python3 train.py?--evil"); /* one line, always */
    assert_true(pt_job_record_alive(&back));
    struct stat st;
    assert_int_equal(stat(live.file, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    pt_job_env other = env;
    other.coordinator_port = 29701;
    other.master_port = 29700;
    pt_key stale_key;
    assert_int_equal(pt_auth_create_control_key(&other, &stale_key, &err), 0);
    assert_int_equal(pt_auth_write_key_file(&stale_key, &err), 0);
    pt_job_record stale;
    pt_job_record_for_self(&stale, &other);
    stale.start_ticks += 1; /* this pid, but another process's start: gone */
    snprintf(stale.connect_host, sizeof stale.connect_host, "127.0.0.1");
    snprintf(stale.key_file, sizeof stale.key_file, "%s", stale_key.file);
    assert_int_equal(pt_job_file_write(&stale, &err), 0);
    assert_false(pt_job_record_alive(&stale));

    other.coordinator_port = 29801;
    other.master_port = 29800;
    pt_job_record foreign;
    pt_job_record_for_self(&foreign, &other);
    snprintf(foreign.connect_host, sizeof foreign.connect_host, "127.0.0.1");
    snprintf(foreign.key_file, sizeof foreign.key_file, "%s", outside);
    foreign.start_ticks += 1;
    assert_int_equal(pt_job_file_write(&foreign, &err), 0);
    int fd = open(outside, O_CREAT | O_WRONLY, 0600);
    close(fd);

    pt_job_list jobs;
    pt_jobs_list(&jobs);
    assert_int_equal(jobs.count, 1);
    assert_int_equal(jobs.jobs[0].master_port, 29600);
    assert_int_equal(jobs.stale_count, 2);
    assert_true(jobs.stale_removed[0] && jobs.stale_removed[1]);
    assert_int_equal(access(stale.file, F_OK), -1);
    assert_int_equal(access(stale_key.file, F_OK), -1);     /* its key, beside it, went too */
    assert_int_equal(access(outside, F_OK), 0);             /* a path named elsewhere is left alone */
    assert_int_equal(access(key.file, F_OK), 0);
    assert_ptr_equal(pt_jobs_find(&jobs, "29600"), &jobs.jobs[0]);
    assert_ptr_equal(pt_jobs_find(&jobs, "29601"), &jobs.jobs[0]);
    assert_null(pt_jobs_find(&jobs, "29700"));
    assert_ptr_equal(pt_jobs_match_env(&jobs, &env), &jobs.jobs[0]);
    pt_buf lines = PT_BUF_INIT;
    pt_jobs_explain(&jobs, &lines);
    assert_non_null(strstr(pt_buf_cstr(&lines), "MASTER_PORT 29700) is no longer running; its files were removed"));
    pt_buf_free(&lines);
    pt_job_list_free(&jobs);

    unlink(live.file);
    unlink(key.file);
    unlink(outside);
    rmdir(key_dir);
    rmdir(dir);
    clear_job_env();
}

/* ---------------------------------------------------------------- automatic trigger */

static int64_t feed(pt_step_tracker *t, int64_t now, int64_t *steps, int n, int64_t step_ns, bool counted)
{
    for (int i = 0; i < n; i++) {
        now += step_ns;
        ++*steps;
        pt_step_tracker_observe(t, *steps, now, counted);
    }
    return now;
}

static void test_slowdown_needs_five_percent(void **state)
{
    (void)state;
    pt_step_tracker t;
    pt_step_tracker_init(&t);
    int64_t now = 1000, steps = 0;
    now = feed(&t, now, &steps, 49, 10000000, true);
    assert_int_equal(pt_step_tracker_recent_mean(&t), 0); /* fewer than 50 steps: no opinion */
    now = feed(&t, now, &steps, 151, 10000000, true);
    assert_int_equal(pt_step_tracker_recent_mean(&t), 10000000);
    assert_int_equal(pt_step_tracker_best_mean(&t), 10000000);
    assert_false(pt_step_tracker_slowdown(&t, 0.05));
    /* 4% slower for 50 steps: not a slowdown. */
    now = feed(&t, now, &steps, 50, 10400000, true);
    assert_int_equal(pt_step_tracker_recent_mean(&t), 10400000);
    assert_false(pt_step_tracker_slowdown(&t, 0.05));
    /* 6% slower: a slowdown once enough of the window is slow. */
    now = feed(&t, now, &steps, 10, 10600000, true);
    assert_false(pt_step_tracker_slowdown(&t, 0.05)); /* mean of the last 50 still ~10.44 ms */
    now = feed(&t, now, &steps, 40, 10600000, true);
    assert_true(pt_step_tracker_slowdown(&t, 0.05));
    /* Profiled steps do not count, and a reset forgets the best. */
    pt_step_tracker_reset(&t);
    assert_false(pt_step_tracker_slowdown(&t, 0.05));
    now = feed(&t, now, &steps, 100, 30000000, false);
    assert_int_equal(pt_step_tracker_recent_mean(&t), 0);
    /* Several steps between two samples are spread evenly. */
    steps += 50;
    now += 50 * 12000000LL;
    pt_step_tracker_observe(&t, steps, now, true);
    assert_int_equal(pt_step_tracker_recent_mean(&t), 12000000);
    (void)now;
}

static void test_noise_raises_the_bar(void **state)
{
    (void)state;
    pt_step_tracker t;
    pt_step_tracker_init(&t);
    int64_t now = 1000, steps = 0;
    static const int64_t block_us[] = {10000, 10500, 9800, 10300, 10600, 9900}; /* ~4% noise */
    for (size_t b = 0; b < PT_ARRAY_LEN(block_us); b++)
        now = feed(&t, now, &steps, 50, block_us[b] * 1000, true);
    double noise = pt_step_tracker_noise(&t);
    assert_true(noise > 0.03 && noise < 0.06);
    now = feed(&t, now, &steps, 50, 10700000, true); /* 9% above the best: within this job's noise */
    assert_false(pt_step_tracker_slowdown(&t, 0.05));
    now = feed(&t, now, &steps, 50, 12250000, true); /* 25% above: a slowdown */
    assert_true(pt_step_tracker_slowdown(&t, 0.05));
    (void)now;
}

static void test_hang_is_five_mean_steps_and_a_floor(void **state)
{
    (void)state;
    const int64_t ms = 1000000;
    /* 100 ms steps: 5x = 500 ms; floor 200 ms. */
    assert_int_equal(pt_hang_stalled_ns(1000 * ms + 499 * ms, 10, 1000 * ms, 100 * ms, 5.0, 200 * ms), 0);
    assert_int_equal(pt_hang_stalled_ns(1000 * ms + 501 * ms, 10, 1000 * ms, 100 * ms, 5.0, 200 * ms), 501 * ms);
    /* 10 ms steps: 5x = 50 ms, but the floor (200 ms) decides. */
    assert_int_equal(pt_hang_stalled_ns(1000 * ms + 150 * ms, 10, 1000 * ms, 10 * ms, 5.0, 200 * ms), 0);
    assert_int_equal(pt_hang_stalled_ns(1000 * ms + 250 * ms, 10, 1000 * ms, 10 * ms, 5.0, 200 * ms), 250 * ms);
    /* Before the first step there is no hang. */
    assert_int_equal(pt_hang_stalled_ns(1000000 * ms, 0, 0, 0, 5.0, 200 * ms), 0);
}

static void on_interrupt(int sig)
{
    (void)sig;
}

/* A connect whose wait a signal interrupts waits again for the rest, then times out: a
 * signal is not a failure (SIGCHLD, a profiler's timer), and a poll that timed out after
 * one is not another interruption (errno still says EINTR then). The listener's accept
 * queue is full, so the kernel drops the SYN and connect stays in progress. */
static void test_connect_interrupted_by_a_signal_times_out(void **state)
{
    (void)state;
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    assert_int_equal(bind(listener, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(listener, 0), 0);
    assert_int_equal(getsockname(listener, (struct sockaddr *)&addr, &len), 0);
    int queued[3];
    for (int i = 0; i < 3; i++) { /* one fills a backlog of 0; the others wait in SYN_SENT */
        queued[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        connect(queued[i], (struct sockaddr *)&addr, sizeof addr);
    }

    struct sigaction on = {.sa_handler = on_interrupt}, old; /* no SA_RESTART: poll sees EINTR */
    sigemptyset(&on.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &on, &old), 0);
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
    timer_t timer;
    assert_int_equal(timer_create(CLOCK_MONOTONIC, &ev, &timer), 0);
    struct itimerspec once = {.it_value = {0, 200 * 1000000L}}; /* one signal, mid-wait */
    assert_int_equal(timer_settime(timer, 0, &once, NULL), 0);
    alarm(30); /* a connect that never returns ends the test (SIGALRM) instead of hanging it */

    pt_error err = {0};
    int fd = pt_net_connect("127.0.0.1", ntohs(addr.sin_port), 1000, &err);
    alarm(0);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(err.message, "timed out"));

    timer_delete(timer);
    sigaction(SIGUSR1, &old, NULL);
    for (int i = 0; i < 3; i++)
        close(queued[i]);
    close(listener);
}

/* The agent's defaults, as agent_instance.h documents them: a heartbeat a second, the
 * status hook sampled every 100 ms (0 would spin the agent thread on a core), a hang after
 * 5 mean steps and at least 10 s, the automatic trigger at 5% every 10 minutes. */
static void test_agent_defaults(void **state)
{
    (void)state;
    pt_agent_config cfg;
    memset(&cfg, 0x5a, sizeof cfg);
    pt_agent_config_defaults(&cfg);
    assert_int_equal(cfg.rank, -1);
    assert_int_equal(cfg.local_rank, -1);
    assert_int_equal(cfg.node_rank, -1);
    assert_int_equal(cfg.heartbeat_ns, 1000000000LL);
    assert_int_equal(cfg.poll_ns, 100000000LL);
    assert_int_equal(cfg.hang_floor_ns, 10000000000LL);
    assert_true(cfg.hang_factor == 5.0);
    assert_true(cfg.auto_threshold == 0.05);
    assert_int_equal(cfg.auto_interval_ns, 600000000000LL);
    assert_false(cfg.auto_trigger);
    assert_int_equal(cfg.thread_stack_bytes, 0);
}

/* Rank 0 hears every heartbeat: the default period is 1 s up to 20,000 workers, then
 * 50 us per worker (20,000 a second at rank 0), at most 5 s; a set PERFTRACKER_HEARTBEAT_MS
 * wins. Read through pt_agent_config_from_env, as a worker reads it. */
static int64_t heartbeat_from_env(const char *world, const char *period_ms)
{
    setenv("RANK", "3", 1);
    setenv("LOCAL_RANK", "3", 1);
    setenv("WORLD_SIZE", world, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    if (period_ms)
        setenv("PERFTRACKER_HEARTBEAT_MS", period_ms, 1);
    else
        unsetenv("PERFTRACKER_HEARTBEAT_MS");
    pt_agent_config cfg;
    pt_job_env env;
    pt_error err;
    int rc = pt_agent_config_from_env(&cfg, &env, &err);
    const char *vars[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PERFTRACKER_HEARTBEAT_MS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    assert_int_equal(rc, 0);
    return cfg.heartbeat_ns;
}

static void test_agent_heartbeat_default_scales_with_the_world(void **state)
{
    (void)state;
    const int64_t sec = 1000000000LL;
    assert_int_equal(pt_agent_default_heartbeat_ns(1), sec);
    assert_int_equal(pt_agent_default_heartbeat_ns(20000), sec);
    assert_int_equal(pt_agent_default_heartbeat_ns(40000), 2 * sec);
    assert_int_equal(pt_agent_default_heartbeat_ns(100000), 5 * sec);
    assert_int_equal(pt_agent_default_heartbeat_ns(1 << 20), 5 * sec);
    assert_int_equal(pt_agent_default_heartbeat_ns(-5), sec);
    assert_int_equal(heartbeat_from_env("8", NULL), sec);
    assert_int_equal(heartbeat_from_env("60000", NULL), 3 * sec);
    assert_int_equal(heartbeat_from_env("100000", "250"), 250000000LL);
    assert_int_equal(heartbeat_from_env("100000", "junk"), 5 * sec);
}

/* The coordinator's port at the edges of the port range: one above MASTER_PORT, one below
 * when MASTER_PORT is the last port; PERFTRACKER_PORT taken as given from 1 to 65535. */
static void test_coordinator_port_at_the_edges(void **state)
{
    (void)state;
    pt_job_env env;
    pt_error err;
    clear_job_env();
    setenv("MASTER_ADDR", "10.0.0.7", 1);
    setenv("MASTER_PORT", "65534", 1);
    assert_int_equal(pt_job_env_read(&env, false, &err), 0);
    assert_int_equal(env.coordinator_port, 65535);
    setenv("MASTER_PORT", "65535", 1);
    assert_int_equal(pt_job_env_read(&env, false, &err), 0);
    assert_int_equal(env.coordinator_port, 65534);
    setenv("PERFTRACKER_PORT", "65535", 1);
    assert_int_equal(pt_job_env_read(&env, false, &err), 0);
    assert_int_equal(env.coordinator_port, 65535);
    setenv("PERFTRACKER_PORT", "1", 1);
    assert_int_equal(pt_job_env_read(&env, false, &err), 0);
    assert_int_equal(env.coordinator_port, 1);
    unsetenv("PERFTRACKER_PORT");
    setenv("MASTER_PORT", "1", 1);
    assert_int_equal(pt_job_env_read(&env, false, &err), 0);
    assert_int_equal(env.coordinator_port, 2);
    setenv("MASTER_PORT", "65536", 1); /* no port: not a job's rendezvous */
    assert_int_equal(pt_job_env_read(&env, false, &err), 1);
    setenv("MASTER_PORT", "0", 1);
    assert_int_equal(pt_job_env_read(&env, false, &err), 1);
    clear_job_env();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_equal_ct),
        cmocka_unit_test(test_round_trip_every_field),
        cmocka_unit_test(test_partial_frames_need_more),
        cmocka_unit_test(test_malformed_frames_rejected),
        cmocka_unit_test(test_corrupted_bytes_never_crash),
        cmocka_unit_test(test_out_of_range_fields_refused),
        cmocka_unit_test(test_merged_heartbeats_checked_entry_by_entry),
        cmocka_unit_test(test_proofs_depend_on_key_role_and_nonces),
        cmocka_unit_test(test_job_env_torchrun_and_slurm),
        cmocka_unit_test(test_keys_secret_file_and_key_dir),
        cmocka_unit_test(test_writable_or_empty_secrets_are_refused),
        cmocka_unit_test(test_relay_tree_threshold),
        cmocka_unit_test(test_job_files_go_with_a_terminating_signal),
        cmocka_unit_test(test_job_files_live_and_stale),
        cmocka_unit_test(test_slowdown_needs_five_percent),
        cmocka_unit_test(test_noise_raises_the_bar),
        cmocka_unit_test(test_hang_is_five_mean_steps_and_a_floor),
        cmocka_unit_test(test_connect_interrupted_by_a_signal_times_out),
        cmocka_unit_test(test_agent_defaults),
        cmocka_unit_test(test_agent_heartbeat_default_scales_with_the_world),
        cmocka_unit_test(test_coordinator_port_at_the_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
