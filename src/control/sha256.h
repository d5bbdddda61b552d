/* sha256.h -- SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104), for the control plane's
 * challenge-response authentication. Small and dependency-free so the collector's Python
 * extension does not pull in libssl. */
#ifndef PT_CONTROL_SHA256_H
#define PT_CONTROL_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_SHA256_BYTES 32

typedef struct pt_sha256 {
    uint32_t state[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_len;
} pt_sha256_ctx;

void pt_sha256_init(pt_sha256_ctx *h);
void pt_sha256_update(pt_sha256_ctx *h, const void *data, size_t n);
void pt_sha256_final(pt_sha256_ctx *h, uint8_t out[PT_SHA256_BYTES]);
void pt_sha256(const void *data, size_t n, uint8_t out[PT_SHA256_BYTES]);

/* HMAC over the concatenation of `parts` (so callers need not build one buffer). */
void pt_hmac_sha256(const void *key, size_t key_len, const void *const *parts,
                    const size_t *part_lens, size_t part_count, uint8_t out[PT_SHA256_BYTES]);

/* Compares in time independent of where the first difference is. */
bool pt_equal_ct(const void *a, const void *b, size_t n);

#endif
