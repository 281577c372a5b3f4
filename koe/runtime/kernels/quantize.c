/* Quantizing a model's weights for the int8 / int4 modes at load, in one pass per row.

   Why: the same steps as torch ops (koe/runtime/quant.py: quantize_per_channel,
   quantize_groups_int4) make several full-size temporaries per matrix (float copy, abs, quotient,
   rounded, int16, ...), each a fresh allocation the kernel zeroes page by page: 6.5 s of a 1.7B
   int8 load on 2 cores. Here each row is read once (bfloat16 as released, or float32) and written
   once, rows split over the threads.

   Same bits as the torch steps (tested): with w a row as float32 (bf16 widened exactly),
   - int8: s = max(max|w|, 1e-12) / 127 (float32), q = nearest-even(w / s) clamped to [-127, 127],
     stored as the byte q + 128, the row zero-padded (byte 128) to `padded` inputs;
   - int4, per group of 64: e = the weight of largest magnitude (the first on ties), s = e / -8
     (1 when e is 0), q = nearest-even(w / s) clamped to [-8, 7], stored as the nibble q + 8 in
     128-weight blocks (byte j: weight j low, j + 64 high; see qgemv.c), groups past the row's
     end zero weights (scale 1).
*/
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float widen(const void *w, int bf16, int64_t i) {
    if (!bf16) return ((const float *)w)[i];
    uint32_t bits = (uint32_t)((const uint16_t *)w)[i] << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* w (N, K) float32 or bfloat16 (`bf16`) -> q (N, padded) bytes, scale (N,). */
void koe_quantize_int8(const void *w, int64_t bf16, int64_t N, int64_t K, int64_t padded, uint8_t *q, float *scale, int64_t threads) {
#pragma omp parallel for schedule(static) num_threads((int)threads)
    for (int64_t n = 0; n < N; n++) {
        const void *row = bf16 ? (const void *)((const uint16_t *)w + n * K) : (const void *)((const float *)w + n * K);
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            float a = fabsf(widen(row, (int)bf16, k));
            amax = a > amax ? a : amax;
        }
        float s = (amax > 1e-12f ? amax : 1e-12f) / 127.0f;
        uint8_t *out = q + n * padded;
        for (int64_t k = 0; k < K; k++) {
            float v = nearbyintf(widen(row, (int)bf16, k) / s);
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            out[k] = (uint8_t)((int32_t)v + 128);
        }
        memset(out + K, 128, (size_t)(padded - K));
        scale[n] = s;
    }
}

/* w (N, K) float32 or bfloat16 -> q (N, padded / 2) packed nibbles, scale (N, padded / 64); padded a multiple of 128. */
void koe_quantize_int4(const void *w, int64_t bf16, int64_t N, int64_t K, int64_t padded, uint8_t *q, float *scale, int64_t threads) {
    int64_t groups = padded / 64;
#pragma omp parallel for schedule(static) num_threads((int)threads)
    for (int64_t n = 0; n < N; n++) {
        const void *row = bf16 ? (const void *)((const uint16_t *)w + n * K) : (const void *)((const float *)w + n * K);
        uint8_t nib[128];
        for (int64_t g = 0; g < groups; g++) {
            float e = 0.0f, top = -1.0f;
            for (int64_t k = g * 64; k < g * 64 + 64; k++) {
                float v = k < K ? widen(row, (int)bf16, k) : 0.0f;
                if (fabsf(v) > top) {
                    top = fabsf(v);
                    e = v;
                }
            }
            float s = e == 0.0f ? 1.0f : e / -8.0f;
            for (int64_t k = g * 64; k < g * 64 + 64; k++) {
                float v = nearbyintf((k < K ? widen(row, (int)bf16, k) : 0.0f) / s);
                v = v > 7.0f ? 7.0f : v < -8.0f ? -8.0f : v;
                nib[(g % 2) * 64 + k % 64] = (uint8_t)((int32_t)v + 8);
            }
            scale[n * groups + g] = s;
            if (g % 2 == 1) {
                uint8_t *out = q + n * (padded / 2) + (g / 2) * 64;
                for (int j = 0; j < 64; j++) out[j] = (uint8_t)(nib[j] | (nib[64 + j] << 4));
            }
        }
    }
}
