/* koe's CPU kernels for the opt-in low-precision modes: y = x W^T + b with int8 or int4 weights.

   Built on first use by koe/runtime/kernels/__init__.py with the machine's C compiler
   (-O3 -march=native -fopenmp) and called through ctypes. The library links libgomp.so.1, which
   resolves to the copy torch has already loaded, so torch's OpenMP threads run these loops too
   (the caller passes torch's thread count).

   Why: a decoded frame is matrix-vector products over every weight, so the bytes read and the
   work per byte set the speed. torch 2.13's CPU kernels for one row leave much of that unused
   here (fbgemm's dynamic int8 linear, the int4 packed kernel). These quantize the row once per
   call and multiply in integers with the CPU's 8-bit dot-product instruction where it has one
   (AVX-512 VNNI), else with AVX2's byte multiply-adds (`lanes32`), else in plain C (also when built with -DKOE_PORTABLE, which the
   tests use to check that every path gives the same bits).

   Numerics: the same bits on every path and for any thread count (each output is summed by one
   thread, in one order; integer sums are exact; the float steps below are spelled out):
   - The row x is quantized per group of `group` inputs (a multiple of 64; koe passes the whole row
     for int8 and 64 for int4): xs[g] = max|x_g| / 127, xq = nearest(x * (127 / max|x_g|)) in
     [-127, 127] (0 for an all-zero group).
   - int8 weights w[n][k] in [-127, 127], one float scale per output channel ws[n], stored as the
     byte w + 128.
     int4 weights q in [-8, 7], one float scale per output row and group ws[n][g], stored as the
     nibble q + 8; in each 128-weight block (two groups), byte j holds weight j (low nibble) and
     j + 64 (high), so the row length K is a multiple of 128 (koe pads it).
   - Integer products are summed in 16 lanes: lane l of a group holds the products at positions
     64c + 4l + {0..3} of the group's 64-wide chunks c (for int4, in unpacked weight order).
   - Per group, each lane: f[l] = fma((float)lane[l], s, f[l]) with s = xs[g] (int8) or
     ws[n][g] * xs[g] (int4); f starts at 0.
   - The 16 lanes are added as a tree: f[i] + f[i+8], then + [i+4], + [i+2], + [i+1]: r.
   - y = r * ws[n] + b[n] (int8; two roundings) or y = r + b[n] (int4); without a bias, no add.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qgemv.h"
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && !defined(KOE_PORTABLE)
#define KOE_VNNI 1
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__) && !defined(KOE_PORTABLE)
#define KOE_AVX2 1
#include <immintrin.h>
#endif

#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 8192
#endif

int koe_qgemv_has_vnni(void) {
#ifdef KOE_VNNI
    return 1;
#else
    return 0;
#endif
}

int koe_qgemv_has_avx2(void) {
#ifdef KOE_AVX2
    return 1;
#else
    return 0;
#endif
}

/* Input rows, quantized: xq, scale per group, and where each group's 16 lanes start: the weights
   are stored offset to unsigned bytes, so -offset * (the lane's sum of xq) is taken off. */
typedef struct {
    int8_t *q;
    float *s;
    int32_t *init;
} qrow;

static void quantize_row(const float *x, int64_t K, int64_t group, int32_t offset, qrow r) {
#ifdef KOE_VNNI
    /* The same steps 16 floats at a time: max is exact in any order, the rounding is the default
       mode's nearest-even (as nearbyintf), and each lane's sum is one dpbusd of ones with the bytes. */
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t g = 0; g < K / group; g++) {
        const float *xg = x + g * group;
        __m512 m = _mm512_setzero_ps();
        for (int64_t k = 0; k < group; k += 16) m = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(xg + k)), m); /* NaN: keeps m, as the C loop */
        float amax = _mm512_reduce_max_ps(m);
        float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        __m512 vinv = _mm512_set1_ps(inv);
        __m512i sums = _mm512_setzero_si512();
        for (int64_t k = 0; k < group; k += 64) {
            __m512i q4[4];
            for (int c = 0; c < 4; c++) {
                __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + k + 16 * c), vinv));
                q4[c] = _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
            }
            __m128i b[4];
            for (int c = 0; c < 4; c++) b[c] = _mm512_cvtepi32_epi8(q4[c]);
            __m512i bytes = _mm512_inserti64x2(_mm512_inserti64x2(_mm512_inserti64x2(_mm512_castsi128_si512(b[0]), b[1], 1), b[2], 2), b[3], 3);
            _mm512_storeu_si512((void *)(r.q + g * group + k), bytes);
            sums = _mm512_dpbusd_epi32(sums, ones, bytes);
        }
        _mm512_storeu_si512((void *)(r.init + g * 16), _mm512_mullo_epi32(sums, _mm512_set1_epi32(-offset)));
        r.s[g] = amax / 127.0f;
    }
#else
    for (int64_t g = 0; g < K / group; g++) {
        const float *xg = x + g * group;
        float amax = 0.0f;
        for (int64_t k = 0; k < group; k++) {
            float v = fabsf(xg[k]);
            amax = v > amax ? v : amax;
        }
        float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        int32_t *ls = r.init + g * 16;
        for (int l = 0; l < 16; l++) ls[l] = 0;
        for (int64_t k = 0; k < group; k++) {
            int32_t q = (int32_t)nearbyintf(xg[k] * inv);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            r.q[g * group + k] = (int8_t)q;
            ls[(k % 64) / 4] += q;
        }
        for (int l = 0; l < 16; l++) ls[l] *= -offset;
        r.s[g] = amax / 127.0f;
    }
#endif
}

static inline float tree16(const float *f) {
    float a[8], b[4], c[2];
    for (int i = 0; i < 8; i++) a[i] = f[i] + f[i + 8];
    for (int i = 0; i < 4; i++) b[i] = a[i] + a[i + 4];
    for (int i = 0; i < 2; i++) c[i] = b[i] + b[i + 2];
    return c[0] + c[1];
}

#ifdef KOE_VNNI
static inline float tree16_ps(__m512 f) {
    float v[16];
    _mm512_storeu_ps(v, f);
    return tree16(v);
}
#endif

static qrow quantize_rows(const float *x, int64_t M, int64_t K, int64_t group, int32_t offset) {
    qrow r;
    r.q = malloc((size_t)(M * K));
    r.s = malloc((size_t)(M * (K / group)) * sizeof(float));
    r.init = malloc((size_t)(M * (K / group) * 16) * sizeof(int32_t));
    for (int64_t m = 0; m < M; m++) {
        qrow o = {r.q + m * K, r.s + m * (K / group), r.init + m * (K / group) * 16};
        quantize_row(x + m * K, K, group, offset, o);
    }
    return r;
}

static void free_rows(qrow r) {
    free(r.q);
    free(r.s);
    free(r.init);
}

#ifdef KOE_AVX2
/* AVX2: the integer lanes of 32 weights, lanes 8h..8h+7 for the half h of a 64-wide chunk, in
   order: maddubs (unsigned bytes times signed bytes, adjacent pairs summed to 16 bits) then madd
   with ones (adjacent 16-bit pairs summed to 32 bits) gives the sums of 4 consecutive products.
   maddubs saturates past 16 bits, so its unsigned operand must stay small: int4's nibbles (0..15)
   are used as they are (a pair at most 2 * 15 * 127); int8's weights are taken signed (the byte
   minus 128, -127..127) and the input's sign moved onto them, so the unsigned operand is |x| (a pair
   at most 2 * 127 * 127): those lanes are the offset ones plus -128 times the inputs' sums, which is
   what `init` adds on the other paths, so int8 leaves init out. Integer sums are exact: the lanes
   are the plain-C path's, and so are the float steps after them (`lanes_fma`). */
static inline __attribute__((always_inline)) __m256i lanes32(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* f = fma(lane, s, f) per lane, lanes 0-7 in `lo` and 8-15 in `hi` (plus `init` where given), as the plain-C path. */
static inline __attribute__((always_inline)) void lanes_fma(__m256i lo, __m256i hi, const int32_t *init, float s, __m256 f[2]) {
    if (init) {
        lo = _mm256_add_epi32(lo, _mm256_loadu_si256((const __m256i *)init));
        hi = _mm256_add_epi32(hi, _mm256_loadu_si256((const __m256i *)(init + 8)));
    }
    __m256 vs = _mm256_set1_ps(s);
    f[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), vs, f[0]);
    f[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), vs, f[1]);
}

static inline float tree16_avx2(const __m256 f[2]) {
    float v[16];
    _mm256_storeu_ps(v, f[0]);
    _mm256_storeu_ps(v + 8, f[1]);
    return tree16(v);
}
#endif

#if !defined(KOE_VNNI) && !defined(KOE_AVX2)
/* The plain-C path of both widths, the reference the vector paths match bit for bit: input k of
   weight row i is the byte w[k] (int8) or, in 128-weight blocks, nibble k % 64 of group k / 64
   (int4); per group, integer lanes, then f = fma(lane, s, f) with s = xs (int8) or ws * xs (int4). */
static void portable_dot(int bits, const uint8_t *w, int64_t row_bytes, const float *ws, int64_t G, int64_t group, int64_t K, qrow r,
                         int64_t x0, int ms, int rows, float out[4][4]) {
    for (int j = 0; j < ms; j++) {
        const int8_t *xq = r.q + (x0 + j) * K;
        for (int i = 0; i < rows; i++) {
            const uint8_t *wi = w + i * row_bytes;
            float f[16] = {0};
            for (int64_t g = 0; g < G; g++) {
                int32_t lane[16];
                for (int l = 0; l < 16; l++) lane[l] = r.init[((x0 + j) * G + g) * 16 + l];
                for (int64_t k = g * group; k < (g + 1) * group; k++) {
                    int32_t wk = bits == 8 ? wi[k] : (wi[(g / 2) * 64 + k % 64] >> ((g % 2) * 4)) & 15;
                    lane[(k % 64) / 4] += wk * (int32_t)xq[k];
                }
                float xs = r.s[(x0 + j) * G + g];
                float s = bits == 8 ? xs : ws[i * G + g] * xs;
                for (int l = 0; l < 16; l++) f[l] = fmaf((float)lane[l], s, f[l]);
            }
            out[j][i] = tree16(f);
        }
    }
}
#endif

/* int8: the weights of `rows` (<= 4) consecutive outputs (row bytes K, offset 128, one scale per
   row, applied after the tree) against `ms` (<= 4) quantized input rows x0, x0 + 1, ...: out[j][i].
   One weight load feeds all `ms` input rows (prefill and batches read the weights once per block). */
static inline __attribute__((always_inline)) void block_dot8(const uint8_t *w, int64_t row_bytes, int64_t G, int64_t group, int64_t K,
                                                             qrow r, int64_t x0, int ms, int rows, float out[4][4]) {
#ifdef KOE_VNNI
    __m512 f[4][4];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) f[j][i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; g++) {
        __m512i lane[4][4];
        for (int j = 0; j < ms; j++) {
            __m512i init = _mm512_loadu_si512((const void *)(r.init + ((x0 + j) * G + g) * 16));
            for (int i = 0; i < 4; i++) lane[j][i] = init;
        }
        for (int64_t k = g * group; k < (g + 1) * group; k += 64) {
            __m512i wv[4];
            for (int i = 0; i < rows; i++) {
                /* a few KB ahead in the weight stream (rows lie one after another) */
                _mm_prefetch((const char *)(w + i * row_bytes + k + PREFETCH_BYTES), _MM_HINT_T0);
                wv[i] = _mm512_loadu_si512((const void *)(w + i * row_bytes + k));
            }
            for (int j = 0; j < ms; j++) {
                __m512i xv = _mm512_loadu_si512((const void *)(r.q + (x0 + j) * K + k));
                for (int i = 0; i < rows; i++) lane[j][i] = _mm512_dpbusd_epi32(lane[j][i], wv[i], xv);
            }
        }
        for (int j = 0; j < ms; j++) {
            __m512 s = _mm512_set1_ps(r.s[(x0 + j) * G + g]);
            for (int i = 0; i < rows; i++) f[j][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane[j][i]), s, f[j][i]);
        }
    }
    for (int j = 0; j < ms; j++)
        for (int i = 0; i < rows; i++) out[j][i] = tree16_ps(f[j][i]);
#elif defined(KOE_AVX2)
    __m256 f[4][4][2];
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int j = 0; j < ms; j++)
        for (int i = 0; i < rows; i++) f[j][i][0] = f[j][i][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; g++) {
        __m256i lanes[4][4][2];
        for (int j = 0; j < ms; j++)
            for (int i = 0; i < rows; i++) lanes[j][i][0] = lanes[j][i][1] = _mm256_setzero_si256();
        for (int64_t k = g * group; k < (g + 1) * group; k += 64) {
            for (int h = 0; h < 2; h++) { /* the chunk's halves: lanes 0-7, then 8-15 */
                __m256i wv[4];
                for (int i = 0; i < rows; i++) {
                    if (h == 0) _mm_prefetch((const char *)(w + i * row_bytes + k + PREFETCH_BYTES), _MM_HINT_T0);
                    wv[i] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + i * row_bytes + k + 32 * h)), flip); /* the byte minus 128, signed */
                }
                for (int j = 0; j < ms; j++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(r.q + (x0 + j) * K + k + 32 * h)), ax = _mm256_abs_epi8(xv);
                    for (int i = 0; i < rows; i++) lanes[j][i][h] = _mm256_add_epi32(lanes[j][i][h], lanes32(ax, _mm256_sign_epi8(wv[i], xv)));
                }
            }
        }
        for (int j = 0; j < ms; j++)
            for (int i = 0; i < rows; i++) lanes_fma(lanes[j][i][0], lanes[j][i][1], NULL, r.s[(x0 + j) * G + g], f[j][i]);
    }
    for (int j = 0; j < ms; j++)
        for (int i = 0; i < rows; i++) out[j][i] = tree16_avx2(f[j][i]);
#else
    portable_dot(8, w, row_bytes, NULL, G, group, K, r, x0, ms, rows, out);
#endif
}

#ifdef KOE_VNNI
/* block_dot8 for 4 weight rows and 4 input rows, the 16 sums as named variables (GCC kept the
   array form's sums in registers only with a copy of each per step). Same steps, same bits. */
static void block_dot8_4x4(const uint8_t *w, int64_t row_bytes, int64_t G, int64_t group, int64_t K, qrow r, int64_t x0, float out[4][4]) {
    __m512 f[4][4];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) f[j][i] = _mm512_setzero_ps();
    const uint8_t *w0 = w, *w1 = w + row_bytes, *w2 = w + 2 * row_bytes, *w3 = w + 3 * row_bytes;
    for (int64_t g = 0; g < G; g++) {
        const int8_t *x[4];
        __m512i init[4];
        for (int j = 0; j < 4; j++) {
            x[j] = r.q + (x0 + j) * K;
            init[j] = _mm512_loadu_si512((const void *)(r.init + ((x0 + j) * G + g) * 16));
        }
        __m512i a00 = init[0], a01 = init[0], a02 = init[0], a03 = init[0], a10 = init[1], a11 = init[1], a12 = init[1], a13 = init[1];
        __m512i a20 = init[2], a21 = init[2], a22 = init[2], a23 = init[2], a30 = init[3], a31 = init[3], a32 = init[3], a33 = init[3];
        for (int64_t k = g * group; k < (g + 1) * group; k += 64) {
            _mm_prefetch((const char *)(w0 + k + PREFETCH_BYTES), _MM_HINT_T0);
            _mm_prefetch((const char *)(w1 + k + PREFETCH_BYTES), _MM_HINT_T0);
            _mm_prefetch((const char *)(w2 + k + PREFETCH_BYTES), _MM_HINT_T0);
            _mm_prefetch((const char *)(w3 + k + PREFETCH_BYTES), _MM_HINT_T0);
            __m512i v0 = _mm512_loadu_si512((const void *)(w0 + k)), v1 = _mm512_loadu_si512((const void *)(w1 + k));
            __m512i v2 = _mm512_loadu_si512((const void *)(w2 + k)), v3 = _mm512_loadu_si512((const void *)(w3 + k));
            __m512i xv = _mm512_loadu_si512((const void *)(x[0] + k));
            a00 = _mm512_dpbusd_epi32(a00, v0, xv), a01 = _mm512_dpbusd_epi32(a01, v1, xv), a02 = _mm512_dpbusd_epi32(a02, v2, xv), a03 = _mm512_dpbusd_epi32(a03, v3, xv);
            xv = _mm512_loadu_si512((const void *)(x[1] + k));
            a10 = _mm512_dpbusd_epi32(a10, v0, xv), a11 = _mm512_dpbusd_epi32(a11, v1, xv), a12 = _mm512_dpbusd_epi32(a12, v2, xv), a13 = _mm512_dpbusd_epi32(a13, v3, xv);
            xv = _mm512_loadu_si512((const void *)(x[2] + k));
            a20 = _mm512_dpbusd_epi32(a20, v0, xv), a21 = _mm512_dpbusd_epi32(a21, v1, xv), a22 = _mm512_dpbusd_epi32(a22, v2, xv), a23 = _mm512_dpbusd_epi32(a23, v3, xv);
            xv = _mm512_loadu_si512((const void *)(x[3] + k));
            a30 = _mm512_dpbusd_epi32(a30, v0, xv), a31 = _mm512_dpbusd_epi32(a31, v1, xv), a32 = _mm512_dpbusd_epi32(a32, v2, xv), a33 = _mm512_dpbusd_epi32(a33, v3, xv);
        }
        __m512i done[4][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23}, {a30, a31, a32, a33}};
        for (int j = 0; j < 4; j++) {
            __m512 sc = _mm512_set1_ps(r.s[(x0 + j) * G + g]);
            for (int i = 0; i < 4; i++) f[j][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(done[j][i]), sc, f[j][i]);
        }
    }
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) out[j][i] = tree16_ps(f[j][i]);
}
#endif

/* int4: the weights of `rows` (<= 4) consecutive outputs (row bytes K/2 in 128-weight blocks,
   offset 8, one scale per row and group of 64, inside the per-group step) against `ms` (<= 2)
   input rows: out[j][i]. One 64-byte load and two masks give two groups of 64 weights in order. */
static inline __attribute__((always_inline)) void block_dot4(const uint8_t *w, int64_t row_bytes, const float *ws, int64_t G, int64_t K,
                                                             qrow r, int64_t x0, int ms, int rows, float out[4][4]) {
#ifdef KOE_VNNI
    __m512 f[2][4];
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 4; i++) f[j][i] = _mm512_setzero_ps();
    const __m512i low = _mm512_set1_epi8(15);
    for (int64_t g = 0; g < G; g += 2) {
        __m512i xv[2][2], init[2][2];
        float xs[2][2];
        for (int j = 0; j < ms; j++)
            for (int h = 0; h < 2; h++) {
                xv[j][h] = _mm512_loadu_si512((const void *)(r.q + (x0 + j) * K + (g + h) * 64));
                init[j][h] = _mm512_loadu_si512((const void *)(r.init + ((x0 + j) * G + g + h) * 16));
                xs[j][h] = r.s[(x0 + j) * G + g + h];
            }
        for (int i = 0; i < rows; i++) {
            const uint8_t *p = w + i * row_bytes + g * 32;
            _mm_prefetch((const char *)(p + PREFETCH_BYTES), _MM_HINT_T0);
            __m512i packed = _mm512_loadu_si512((const void *)p);
            __m512i wv[2] = {_mm512_and_si512(packed, low), _mm512_and_si512(_mm512_srli_epi16(packed, 4), low)};
            for (int j = 0; j < ms; j++)
                for (int h = 0; h < 2; h++) {
                    __m512i lane = _mm512_dpbusd_epi32(init[j][h], wv[h], xv[j][h]);
                    float s = ws[i * G + g + h] * xs[j][h];
                    f[j][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane), _mm512_set1_ps(s), f[j][i]);
                }
        }
    }
    for (int j = 0; j < ms; j++)
        for (int i = 0; i < rows; i++) out[j][i] = tree16_ps(f[j][i]);
#elif defined(KOE_AVX2)
    __m256 f[2][4][2];
    for (int j = 0; j < ms; j++)
        for (int i = 0; i < rows; i++) f[j][i][0] = f[j][i][1] = _mm256_setzero_ps();
    const __m256i low = _mm256_set1_epi8(15);
    for (int64_t g = 0; g < G; g += 2) {
        for (int i = 0; i < rows; i++) {
            const uint8_t *p = w + i * row_bytes + g * 32;
            _mm_prefetch((const char *)(p + PREFETCH_BYTES), _MM_HINT_T0);
            __m256i wv[2][2]; /* [group g (low nibbles), g + 1 (high)][weights 0-31, 32-63] */
            for (int c = 0; c < 2; c++) {
                __m256i packed = _mm256_loadu_si256((const __m256i *)(p + 32 * c));
                wv[0][c] = _mm256_and_si256(packed, low);
                wv[1][c] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
            }
            for (int j = 0; j < ms; j++)
                for (int hg = 0; hg < 2; hg++) {
                    const int8_t *x = r.q + (x0 + j) * K + (g + hg) * 64;
                    __m256i lo = lanes32(wv[hg][0], _mm256_loadu_si256((const __m256i *)x));
                    __m256i hi = lanes32(wv[hg][1], _mm256_loadu_si256((const __m256i *)(x + 32)));
                    lanes_fma(lo, hi, r.init + ((x0 + j) * G + g + hg) * 16, ws[i * G + g + hg] * r.s[(x0 + j) * G + g + hg], f[j][i]);
                }
        }
    }
    for (int j = 0; j < ms; j++)
        for (int i = 0; i < rows; i++) out[j][i] = tree16_avx2(f[j][i]);
#else
    portable_dot(4, w, row_bytes, ws, G, 64, K, r, x0, ms, rows, out);
#endif
}

/* One block of block_dot8 / block_dot4 with `ms` input rows a constant (inlined into each call site). */
static inline __attribute__((always_inline)) void block_dot(int bits, const uint8_t *w, int64_t row_bytes, const float *ws, int64_t G,
                                                            int64_t group, int64_t K, qrow r, int64_t x0, int ms, int rows, float out[4][4]) {
    if (bits == 8) {
        if (ms == 4) {
#ifdef KOE_VNNI
            if (rows == 4) {
                block_dot8_4x4(w, row_bytes, G, group, K, r, x0, out);
                return;
            }
#endif
            block_dot8(w, row_bytes, G, group, K, r, x0, 4, rows, out);
        }
        else if (ms == 2) block_dot8(w, row_bytes, G, group, K, r, x0, 2, rows, out);
        else block_dot8(w, row_bytes, G, group, K, r, x0, 1, rows, out);
    } else if (ms == 2) block_dot4(w, row_bytes, ws, G, K, r, x0, 2, rows, out);
    else block_dot4(w, row_bytes, ws, G, K, r, x0, 1, rows, out);
}

void koe_qlinear(int bits, const float *x, int64_t M, int64_t K, const uint8_t *w, const float *ws, int64_t N, int64_t group,
                   const float *bias, float *y, int64_t threads) {
    int64_t G = K / group;
    int64_t row_bytes = bits == 8 ? K : K / 2;
    qrow r = quantize_rows(x, M, K, group, bits == 8 ? 128 : 8);
    int64_t blocks = (N + 3) / 4;
#pragma omp parallel for schedule(static) num_threads((int)threads)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t n0 = b * 4;
        int rows = (int)(N - n0 < 4 ? N - n0 : 4);
        const float *wsb = bits == 8 ? ws + n0 : ws + n0 * G;
        const uint8_t *wb = w + n0 * row_bytes;
        /* input rows in blocks of 4 (int8) or 2 (int4, whose per-group sums need more registers) */
        for (int64_t m = 0; m < M;) {
            float out[4][4];
            int ms = M - m >= 4 && bits == 8 ? 4 : M - m >= 2 ? 2 : 1;
            /* every block but the last has 4 weight rows: compiled with that constant, the sums stay in registers */
            if (rows == 4) block_dot(bits, wb, row_bytes, wsb, G, group, K, r, m, ms, 4, out);
            else block_dot(bits, wb, row_bytes, wsb, G, group, K, r, m, ms, rows, out);
            for (int j = 0; j < ms; j++)
                for (int i = 0; i < rows; i++) {
                    float v = bits == 8 ? out[j][i] * wsb[i] : out[j][i];
                    y[(m + j) * N + n0 + i] = bias ? v + bias[n0 + i] : v;
                }
            m += ms;
        }
    }
    free_rows(r);
}

/* x (M, K) float32, w (N, K) int8 + 128 as bytes, ws (N,), bias (N,) or NULL, y (M, N); `threads` OpenMP threads. */
void koe_q8_linear(const float *x, int64_t M, int64_t K, const uint8_t *w, const float *ws, int64_t N, int64_t group,
                   const float *bias, float *y, int64_t threads) {
    koe_qlinear(8, x, M, K, w, ws, N, group, bias, y, threads);
}

/* x (M, K) float32, w (N, K/2) packed nibbles, ws (N, K/group), bias (N,) or NULL, y (M, N); `threads` as above. */
void koe_q4_linear(const float *x, int64_t M, int64_t K, const uint8_t *w, const float *ws, int64_t N, int64_t group,
                   const float *bias, float *y, int64_t threads) {
    koe_qlinear(4, x, M, K, w, ws, N, group, bias, y, threads);
}

/* RMSNorm of M rows of K floats (the int8 / int4 modes' norms): y = (x * (1 / sqrt(mean(x^2) + eps))) * w.
   The sum of squares runs in 16 lanes (element k in lane k % 16), added as tree16; one thread
   (the rows are short: a call costs less than waking a team). */
void koe_rmsnorm(const float *x, int64_t M, int64_t K, const float *w, float eps, float *y) {
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * K;
        float *ym = y + m * K;
        float lane[16] = {0};
        int64_t k = 0;
        for (; k + 16 <= K; k += 16)
            for (int l = 0; l < 16; l++) lane[l] = fmaf(xm[k + l], xm[k + l], lane[l]);
        for (; k < K; k++) lane[k % 16] = fmaf(xm[k], xm[k], lane[k % 16]);
        float inv = 1.0f / sqrtf(tree16(lane) / (float)K + eps);
        for (k = 0; k < K; k++) ym[k] = (xm[k] * inv) * w[k];
    }
}
