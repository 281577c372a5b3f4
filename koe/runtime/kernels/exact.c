/* koe's exact float32 products: y = x W^T (+ b) with the bits of torch's own CPU product.

   Why: a decoded frame reads every weight once, so the bytes read set the speed, and the exact
   path must give upstream's bits, which come from torch's float32 product (MKL's sgemm / sgemv).
   Under MKL's strict conditional reproducibility (MKL_CBWR=AUTO,STRICT, which every koe command
   sets) that product sums each output in one fixed order on a given CPU, which may depend on how
   many input rows there are. The orders measured so far, each one `order` here:

   - KOE_ORDER_CHAIN: the inputs in blocks of `kc` (384 on an Intel Xeon, 192 on an AMD EPYC for
     4 rows or more; two near-equal halves below twice that; chosen per layer by
     koe.runtime.exact), within a block one fused multiply-add per input in order starting from
     +0, and the blocks' sums added to the output in order (the first block's sum stored as it
     is, or added to the bias). MKL on Intel CPUs for any rows; on AMD for 4 rows or more.
   - KOE_ORDER_LANES / KOE_ORDER_LANES_LEAD: four interleaved partial sums, input k into sum
     (k - start) % 4, each product rounded and then added (no fused multiply-add); with LEAD the
     first input's product starts sum 0 and the interleaving starts at input 1 (MKL's matrix-vector
     product on AMD, one row), without it all four start from +0 at input 0 (2 or 3 rows on AMD);
     the whole groups of 4 only, then (s0 + s2) + (s1 + s3), then each remaining input's rounded
     product added in order, then the bias.

   Nothing in those orders depends on how the weights are stored, so koe stores them its own way
   at load:

   - panels of 16 output rows, 4 panels side by side per input position (a strip of 64 rows read
     as one linear stream), rows past N zero;
   - as bfloat16 where every weight is one (the released checkpoints hold bf16 weights, which the
     float32 path widens exactly), else as float32: a bf16 weight widened in a register is the
     float32 weight, so the products are the same, from half the bytes.

   Which order this process's torch uses for each number of rows, and whether its products follow
   one of these at all, is not assumed: koe.runtime.exact checks the kernel against torch's product
   on this machine before it is used (anything else, e.g. MKL without MKL_CBWR, keeps torch's
   product).

   The fast path needs AVX-512F; the portable C path (also with -DKOE_PORTABLE, which the tests
   compare) does the same operations one output at a time. Each output is summed by one thread,
   so the bits do not depend on the thread count or on the other rows of x. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) && !defined(KOE_PORTABLE)
#define KOE_EXACT_AVX512 1
#include <immintrin.h>
#endif

#define LANES 16
#define PANELS 4
#define STRIP (LANES * PANELS) /* output rows per strip */
#define ROWS 4                 /* input rows per pass when x has several */

enum { KOE_ORDER_CHAIN = 0, KOE_ORDER_LANES_LEAD = 1, KOE_ORDER_LANES = 2 };
#define SUMS 4 /* partial sums of the LANES orders */

int koe_exact_vectorized(void) {
#ifdef KOE_EXACT_AVX512
    return 1;
#else
    return 0;
#endif
}

/* How many of the `count` float32 values are not bfloat16 values (low 16 bits set). */
int64_t koe_exact_count_not_bf16(const float *w, int64_t count, int64_t threads) {
    const uint32_t *u = (const uint32_t *)w;
    int64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) num_threads((int)threads)
    for (int64_t i = 0; i < count; i++) bad += (u[i] & 0xFFFFu) != 0;
    return bad;
}

static inline float widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* W (N, K) row-major, float32 (src_bf16 = 0) or bfloat16 bits (1), into strips:
   out[(s * K + k) * STRIP + j] = W[s * STRIP + j][k] (0 past N), bfloat16 (dst_bf16 = 1: the
   values must be bf16 ones, i.e. the float32 source counted none by koe_exact_count_not_bf16) or
   float32. */
void koe_exact_pack(const void *w, int src_bf16, int64_t N, int64_t K, int dst_bf16, void *out, int64_t threads) {
    int64_t strips = (N + STRIP - 1) / STRIP;
    /* written in order; the 64 rows' reads stay in L1 across consecutive k */
#pragma omp parallel for schedule(static) num_threads((int)threads)
    for (int64_t s = 0; s < strips; s++) {
        int64_t rows = N - s * STRIP < STRIP ? N - s * STRIP : STRIP;
        for (int64_t k = 0; k < K; k++) {
            int64_t at = (s * K + k) * STRIP;
            if (src_bf16 && dst_bf16) {
                const uint16_t *src = (const uint16_t *)w + s * STRIP * K + k;
                uint16_t *dst = (uint16_t *)out + at;
                for (int64_t j = 0; j < rows; j++) dst[j] = src[j * K];
                for (int64_t j = rows; j < STRIP; j++) dst[j] = 0;
                continue;
            }
            for (int64_t j = 0; j < STRIP; j++) {
                int64_t n = s * STRIP + j;
                float v = 0.0f;
                if (j < rows) v = src_bf16 ? widen(((const uint16_t *)w)[n * K + k]) : ((const float *)w)[n * K + k];
                if (dst_bf16) {
                    uint32_t u;
                    memcpy(&u, &v, 4);
                    ((uint16_t *)out)[at + j] = (uint16_t)(u >> 16);
                } else {
                    ((float *)out)[at + j] = v;
                }
            }
        }
    }
}

/* One output's block sum joins the output: stored (first block, no bias) or added. */
static inline float join(float c, float a, int first) { return first ? a : c + a; }

static inline float weight_at(const void *w, int bf16, int64_t at) { return bf16 ? widen(((const uint16_t *)w)[at]) : ((const float *)w)[at]; }

/* One output in a LANES order (lead: the first product starts sum 0). The products are rounded
   before they are added (the library is built with -ffp-contract=off: no fma is formed). */
static float lanes_sum(const void *w, int bf16, int64_t K, int64_t s, int64_t j, const float *x, int lead) {
    float sum[SUMS] = {0};
    int64_t k = 0;
    if (lead && K > 0) {
        float p = weight_at(w, bf16, s * K * STRIP + j) * x[0];
        sum[0] = p;
        k = 1;
    }
    int64_t start = k, whole = start + (K - start) / SUMS * SUMS;
    for (; k < whole; k++) {
        float p = weight_at(w, bf16, (s * K + k) * STRIP + j) * x[k];
        sum[(k - start) % SUMS] += p;
    }
    float total = (sum[0] + sum[2]) + (sum[1] + sum[3]);
    for (; k < K; k++) {
        float p = weight_at(w, bf16, (s * K + k) * STRIP + j) * x[k];
        total += p;
    }
    return total;
}

static void portable_strip(const void *w, int bf16, int64_t K, int64_t kc, int order, const float *x, int64_t M, const float *bias, float *y, int64_t N,
                           int64_t s) {
    int64_t n0 = s * STRIP, rows = N - n0 < STRIP ? N - n0 : STRIP;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t j = 0; j < rows; j++) {
            if (order != KOE_ORDER_CHAIN) {
                float c = lanes_sum(w, bf16, K, s, j, x + m * K, order == KOE_ORDER_LANES_LEAD);
                y[m * N + n0 + j] = bias ? c + bias[n0 + j] : c;
                continue;
            }
            float c = bias ? bias[n0 + j] : 0.0f;
            int first = bias == NULL;
            for (int64_t b0 = 0; b0 < K; b0 += kc) {
                int64_t b1 = b0 + kc < K ? b0 + kc : K;
                float a = 0.0f;
                for (int64_t k = b0; k < b1; k++) a = fmaf(weight_at(w, bf16, (s * K + k) * STRIP + j), x[m * K + k], a);
                c = join(c, a, first);
                first = 0;
            }
            y[m * N + n0 + j] = c;
        }
    }
}

#ifdef KOE_EXACT_AVX512
static inline __m512 load16(const void *w, int bf16, int64_t at) {
    if (bf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + at))), 16));
    return _mm512_loadu_ps((const float *)w + at);
}

/* The strip's 64 outputs for R input rows: c[r][p] joined block by block. `w` is the strip (bf16 or
   float32); the weights of a block are read once and used for the R rows. */
static inline __attribute__((always_inline)) void strip_rows(const void *w, int bf16, int64_t K, int64_t kc, const float *x, int R, const float *bias,
                                                             float *y, int64_t N, int64_t n0) {
    __m512 c[ROWS][PANELS];
    int first = bias == NULL;
    if (bias) {
        float b[STRIP] = {0};
        memcpy(b, bias + n0, (N - n0 < STRIP ? N - n0 : STRIP) * sizeof(float));
        for (int r = 0; r < R; r++)
            for (int p = 0; p < PANELS; p++) c[r][p] = _mm512_loadu_ps(b + LANES * p);
    }
    const int64_t bytes = bf16 ? 2 : 4, ahead = 1024 / (STRIP * bytes); /* prefetch 1 KB ahead (measured: 4 KB ahead made the products of a decoded frame ~25% slower, none ~10%) */
    for (int64_t b0 = 0; b0 < K; b0 += kc) {
        int64_t b1 = b0 + kc < K ? b0 + kc : K;
        __m512 a[ROWS][PANELS];
        for (int r = 0; r < R; r++)
            for (int p = 0; p < PANELS; p++) a[r][p] = _mm512_setzero_ps();
        for (int64_t k = b0; k < b1; k++) {
            const char *next = (const char *)w + (k + ahead) * STRIP * bytes;
            for (int64_t line = 0; line < STRIP * bytes; line += 64) _mm_prefetch(next + line, _MM_HINT_T0);
            __m512 xb[ROWS];
            for (int r = 0; r < R; r++) xb[r] = _mm512_set1_ps(x[r * K + k]);
            for (int p = 0; p < PANELS; p++) {
                __m512 wv = load16(w, bf16, k * STRIP + LANES * p);
                for (int r = 0; r < R; r++) a[r][p] = _mm512_fmadd_ps(wv, xb[r], a[r][p]);
            }
        }
        for (int r = 0; r < R; r++)
            for (int p = 0; p < PANELS; p++) c[r][p] = first ? a[r][p] : _mm512_add_ps(c[r][p], a[r][p]);
        first = 0;
    }
    int64_t rows = N - n0 < STRIP ? N - n0 : STRIP;
    for (int r = 0; r < R; r++) {
        float out[STRIP];
        for (int p = 0; p < PANELS; p++) _mm512_storeu_ps(out + LANES * p, c[r][p]);
        memcpy(y + r * N + n0, out, rows * sizeof(float));
    }
}

/* The strip's 64 outputs for one input row in a LANES order: SUMS partial sums per panel, each
   product rounded (mul) and then added. */
static void strip_lanes(const void *w, int bf16, int64_t K, int lead, const float *x, const float *bias, float *y, int64_t N, int64_t n0) {
    __m512 sum[PANELS][SUMS];
    for (int p = 0; p < PANELS; p++)
        for (int l = 0; l < SUMS; l++) sum[p][l] = _mm512_setzero_ps();
    int64_t k = 0;
    if (lead && K > 0) {
        __m512 xb = _mm512_set1_ps(x[0]);
        for (int p = 0; p < PANELS; p++) sum[p][0] = _mm512_mul_ps(load16(w, bf16, LANES * p), xb);
        k = 1;
    }
    const int64_t bytes = bf16 ? 2 : 4, ahead = 1024 / (STRIP * bytes);
    int64_t whole = k + (K - k) / SUMS * SUMS;
    for (; k < whole; k += SUMS) {
        for (int l = 0; l < SUMS; l++) {
            const char *next = (const char *)w + (k + l + ahead) * STRIP * bytes;
            for (int64_t line = 0; line < STRIP * bytes; line += 64) _mm_prefetch(next + line, _MM_HINT_T0);
            __m512 xb = _mm512_set1_ps(x[k + l]);
            for (int p = 0; p < PANELS; p++) sum[p][l] = _mm512_add_ps(sum[p][l], _mm512_mul_ps(load16(w, bf16, (k + l) * STRIP + LANES * p), xb));
        }
    }
    __m512 total[PANELS];
    for (int p = 0; p < PANELS; p++) total[p] = _mm512_add_ps(_mm512_add_ps(sum[p][0], sum[p][2]), _mm512_add_ps(sum[p][1], sum[p][3]));
    for (; k < K; k++) {
        __m512 xb = _mm512_set1_ps(x[k]);
        for (int p = 0; p < PANELS; p++) total[p] = _mm512_add_ps(total[p], _mm512_mul_ps(load16(w, bf16, k * STRIP + LANES * p), xb));
    }
    int64_t rows = N - n0 < STRIP ? N - n0 : STRIP;
    float out[STRIP], b[STRIP] = {0};
    if (bias) memcpy(b, bias + n0, rows * sizeof(float));
    for (int p = 0; p < PANELS; p++) _mm512_storeu_ps(out + LANES * p, bias ? _mm512_add_ps(total[p], _mm512_loadu_ps(b + LANES * p)) : total[p]);
    memcpy(y + n0, out, rows * sizeof(float));
}

static void vector_strip(const void *w, int bf16, int64_t K, int64_t kc, int order, const float *x, int64_t M, const float *bias, float *y, int64_t N,
                         int64_t s) {
    const char *ws = (const char *)w + s * K * STRIP * (bf16 ? 2 : 4);
    int64_t n0 = s * STRIP, m = 0;
    if (order != KOE_ORDER_CHAIN) { /* one row at a time: 16 sums per row fill the registers */
        for (; m < M; m++) strip_lanes(ws, bf16, K, order == KOE_ORDER_LANES_LEAD, x + m * K, bias, y + m * N, N, n0);
        return;
    }
    /* compiled with each constant R, so the sums stay in registers */
    for (; m + 4 <= M; m += 4) strip_rows(ws, bf16, K, kc, x + m * K, 4, bias, y + m * N, N, n0);
    switch (M - m) {
    case 3: strip_rows(ws, bf16, K, kc, x + m * K, 3, bias, y + m * N, N, n0); break;
    case 2: strip_rows(ws, bf16, K, kc, x + m * K, 2, bias, y + m * N, N, n0); break;
    case 1: strip_rows(ws, bf16, K, kc, x + m * K, 1, bias, y + m * N, N, n0); break;
    default: break;
    }
}
#endif

/* y (M, N) = x (M, K) W^T (+ bias (N) or NULL), W packed by koe_exact_pack (bf16 = its dst_bf16),
   inputs summed in `order` (KOE_ORDER_*; CHAIN: in blocks of kc). `portable` forces the plain C
   path (tests). */
void koe_exact_linear(const float *x, int64_t M, int64_t K, const void *w, int bf16, int64_t N, int64_t kc, int order, const float *bias, float *y,
                      int64_t threads, int portable) {
    int64_t strips = (N + STRIP - 1) / STRIP;
#pragma omp parallel for schedule(static) num_threads((int)threads)
    for (int64_t s = 0; s < strips; s++) {
#ifdef KOE_EXACT_AVX512
        if (!portable) {
            vector_strip(w, bf16, K, kc, order, x, M, bias, y, N, s);
            continue;
        }
#endif
        portable_strip(w, bf16, K, kc, order, x, M, bias, y, N, s);
    }
    (void)portable;
}

/* The exact path's RMSNorm: y = w * (x * (1 / sqrt(mean(x * x) + eps))) per row of n, with the
   bits of torch's float32 ops (koe.nn.norm.RMSNorm: pow, mean, add, rsqrt, mul, mul). Each step
   rounds as torch's does; the one with an order is mean's sum, which torch's CPU reduction does
   as a cascade over vectors of `lanes` floats (8 on the Intel Xeon measured, AVX-512 or not): the row's whole
   vectors are read 4 at a time into 4 vector sums, flushed up a ladder of 4 levels every
   2^p rows of 4 (p = max(4, ceil(log2(rows)) / 4)), the levels and then the 4 sums added in
   order, the leftover vectors into the first; then, in one float, the leftover elements in order
   and then the lanes of that vector in order. mean = that sum / n. koe.runtime.exact checks this
   against torch on random rows of each width before any norm uses it. */
static int64_t ceil_log2(int64_t v) {
    int64_t p = 0;
    while (((int64_t)1 << p) < v) p++;
    return p;
}

static float torch_sum_of_squares(const float *x, int64_t n, int64_t lanes) {
    enum { LEVELS = 4, ILP = 4, MAXL = 16 };
    float acc[LEVELS][ILP][MAXL];
    memset(acc, 0, sizeof(acc));
    int64_t vectors = n / lanes, rows = vectors / ILP;
    int64_t power = ceil_log2(rows) / LEVELS;
    if (power < 4) power = 4;
    int64_t step = (int64_t)1 << power, mask = step - 1, i = 0;
    for (; i + step <= rows;) {
        for (int64_t j = 0; j < step; j++, i++)
            for (int64_t k = 0; k < ILP; k++)
                for (int64_t l = 0; l < lanes; l++) {
                    float v = x[(i * ILP + k) * lanes + l];
                    acc[0][k][l] += v * v;
                }
        for (int64_t j = 1; j < LEVELS; j++) {
            for (int64_t k = 0; k < ILP; k++)
                for (int64_t l = 0; l < lanes; l++) {
                    acc[j][k][l] += acc[j - 1][k][l];
                    acc[j - 1][k][l] = 0.0f;
                }
            if ((i & (mask << (j * power))) != 0) break;
        }
    }
    for (; i < rows; i++)
        for (int64_t k = 0; k < ILP; k++)
            for (int64_t l = 0; l < lanes; l++) {
                float v = x[(i * ILP + k) * lanes + l];
                acc[0][k][l] += v * v;
            }
    for (int64_t j = 1; j < LEVELS; j++)
        for (int64_t k = 0; k < ILP; k++)
            for (int64_t l = 0; l < lanes; l++) acc[0][k][l] += acc[j][k][l];
    for (int64_t v = rows * ILP; v < vectors; v++)
        for (int64_t l = 0; l < lanes; l++) {
            float e = x[v * lanes + l];
            acc[0][0][l] += e * e;
        }
    for (int64_t k = 1; k < ILP; k++)
        for (int64_t l = 0; l < lanes; l++) acc[0][0][l] += acc[0][k][l];
    float total = 0.0f;
    for (int64_t e = vectors * lanes; e < n; e++) total += x[e] * x[e];
    for (int64_t l = 0; l < lanes; l++) total += acc[0][0][l];
    return total;
}

/* x: `rows` rows of n floats, row r at x + r * stride; y: rows * n, contiguous. */
void koe_exact_rmsnorm(const float *x, int64_t rows, int64_t n, int64_t stride, const float *w, float eps, int64_t lanes, float *y) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * stride;
        float *yr = y + r * n;
        float variance = torch_sum_of_squares(xr, n, lanes) / (float)n;
        float inv = 1.0f / sqrtf(variance + eps);
        for (int64_t i = 0; i < n; i++) {
            float scaled = xr[i] * inv;
            yr[i] = w[i] * scaled;
        }
    }
}
