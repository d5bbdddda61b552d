/* sha256.c -- SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104).
 *
 * Authentication needs a few hundred bytes hashed per connection, so this is the plain
 * textbook loop over 64-byte blocks, no SIMD: ~200 MB/s, far more than the handshake
 * rate of even a 100k-worker job. Checked against the FIPS 180-2 and RFC 4231 vectors in
 * tests/control/test_protocol.c. */
#include "control/sha256.h"
#include "util/common.h"

#include <string.h>

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void compress_block(uint32_t state[8], const uint8_t block[64])
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
               (uint32_t)block[4 * i + 2] << 8 | (uint32_t)block[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                      round_constants[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1;
        d = c, c = b, b = a, a = t1 + t2;
    }
    state[0] += a, state[1] += b, state[2] += c, state[3] += d;
    state[4] += e, state[5] += f, state[6] += g, state[7] += h;
}

void pt_sha256_init(pt_sha256_ctx *h)
{
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h->state, initial, sizeof initial);
    h->total_bytes = 0;
    h->block_len = 0;
}

void pt_sha256_update(pt_sha256_ctx *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    h->total_bytes += n;
    while (n > 0) {
        size_t take = PT_MIN(64 - h->block_len, n);
        memcpy(h->block + h->block_len, p, take);
        h->block_len += take, p += take, n -= take;
        if (h->block_len == 64) {
            compress_block(h->state, h->block);
            h->block_len = 0;
        }
    }
}

void pt_sha256_final(pt_sha256_ctx *h, uint8_t out[PT_SHA256_BYTES])
{
    uint64_t bit_len = h->total_bytes * 8;
    uint8_t pad = 0x80;
    pt_sha256_update(h, &pad, 1);
    uint8_t zero = 0;
    while (h->block_len != 56)
        pt_sha256_update(h, &zero, 1);
    uint8_t len_be[8];
    for (int i = 0; i < 8; i++)
        len_be[i] = (uint8_t)(bit_len >> (56 - 8 * i));
    pt_sha256_update(h, len_be, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h->state[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h->state[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h->state[i] >> 8);
        out[4 * i + 3] = (uint8_t)h->state[i];
    }
}

void pt_sha256(const void *data, size_t n, uint8_t out[PT_SHA256_BYTES])
{
    pt_sha256_ctx h;
    pt_sha256_init(&h);
    pt_sha256_update(&h, data, n);
    pt_sha256_final(&h, out);
}

void pt_hmac_sha256(const void *key, size_t key_len, const void *const *parts,
                    const size_t *part_lens, size_t part_count, uint8_t out[PT_SHA256_BYTES])
{
    uint8_t key_block[64] = {0};
    if (key_len > 64)
        pt_sha256(key, key_len, key_block); /* RFC 2104: long keys are hashed first */
    else if (key_len > 0)
        memcpy(key_block, key, key_len);

    uint8_t pad[64];
    pt_sha256_ctx h;
    for (int i = 0; i < 64; i++)
        pad[i] = key_block[i] ^ 0x36;
    pt_sha256_init(&h);
    pt_sha256_update(&h, pad, 64);
    for (size_t i = 0; i < part_count; i++)
        pt_sha256_update(&h, parts[i], part_lens[i]);
    uint8_t inner[PT_SHA256_BYTES];
    pt_sha256_final(&h, inner);

    for (int i = 0; i < 64; i++)
        pad[i] = key_block[i] ^ 0x5c;
    pt_sha256_init(&h);
    pt_sha256_update(&h, pad, 64);
    pt_sha256_update(&h, inner, sizeof inner);
    pt_sha256_final(&h, out);
}

bool pt_equal_ct(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (uint8_t)(x[i] ^ y[i]);
    return diff == 0;
}
