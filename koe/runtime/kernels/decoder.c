/* A whole Qwen3-style decoder stack, one step at a time, for the opt-in int8 / int4 modes.

   Why: in those modes a decoded frame's products take half of its time; the other half was the
   ~1,000 small torch ops around them (norms, q/k norms, rotary, cache concatenation, attention,
   SwiGLU, residuals: each a dispatch, an allocation and a Python call) for the talker's 28 layers
   and the code predictor's 5 layers x 15 steps. `koe_stack_step` runs every layer of a stack for
   T new positions of B rows in one call, on buffers it reuses, with the keys and values in a
   cache the caller preallocates (koe/nn/kernel_stack.py).

   Per layer: h = x + o(attn(rope(qnorm(q)), rope(knorm(k)), v)) where q|k|v = qkv(norm(x)), then
   out = h + down(silu(gate) * up) where gate|up = gate_up(norm(h)). Products: koe_qlinear (qgemv.c),
   inputs zero-padded to the quantized width. Norms: koe_rmsnorm. Rotary: x * cos + rotate_half(x)
   * sin, two roundings per element as torch's unfused ops. Attention: scores q.k * D^-0.5 over the
   keys [start[b], position] (causal; start skips a row's left padding), softmax with the max taken
   off, exp from libm, the weighted sum of values in key order. A query with no visible key (a
   padding position) gets zeros.

   Numerics: deterministic and independent of the thread count and of the batch: each product
   output, each attention (row, kv head, query) and each norm is computed by one thread in one
   order; a row's result does not depend on the other rows. Compiled with -ffp-contract=off, so the
   spelled-out float steps are the ones that run. The bits differ from the torch modules' (which
   sum softmax and norms in other orders), within float rounding.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qgemv.h"

/* One quantized product: what koe_q8_linear / koe_q4_linear take, plus the unpadded input width. */
typedef struct {
    const uint8_t *w;
    const float *ws;
    const float *bias; /* NULL: none */
    int64_t n, k, padded_k, group, bits;
} koe_qmat;

typedef struct {
    const float *input_norm, *post_norm;
    const float *q_norm, *k_norm; /* NULL: no q/k norm */
    koe_qmat qkv, o, gate_up, down;
} koe_qlayer;

typedef struct {
    int64_t layers, hidden, heads, kv_heads, head_dim, intermediate;
    const koe_qlayer *layer;
    const float *final_norm;
    float eps;
} koe_qstack;

static void product(const koe_qmat *m, const float *x, int64_t M, float *y, float *pad, int64_t threads) {
    const float *in = x;
    if (m->padded_k != m->k) {
        for (int64_t r = 0; r < M; r++) {
            memcpy(pad + r * m->padded_k, x + r * m->k, (size_t)m->k * sizeof(float));
            memset(pad + r * m->padded_k + m->k, 0, (size_t)(m->padded_k - m->k) * sizeof(float));
        }
        in = pad;
    }
    koe_qlinear((int)m->bits, in, M, m->padded_k, m->w, m->ws, m->n, m->group, m->bias, y, threads);
}

/* x (D) rotated in place by the tables' row (D): x * cos + rotate_half(x) * sin. */
static void rotate(float *x, const float *cos, const float *sin, int64_t D) {
    float r[512];
    int64_t half = D / 2;
    for (int64_t i = 0; i < half; i++) r[i] = -x[i + half];
    for (int64_t i = half; i < D; i++) r[i] = x[i - half];
    for (int64_t i = 0; i < D; i++) {
        float a = x[i] * cos[i];
        float b = r[i] * sin[i];
        x[i] = a + b;
    }
}

static float dot(const float *a, const float *b, int64_t n) {
    float lane[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] += a[i + l] * b[i + l];
    for (; i < n; i++) lane[i % 16] += a[i] * b[i];
    float s = 0.0f;
    for (int l = 0; l < 16; l++) s += lane[l];
    return s;
}

/* Attention of the T new queries of every row against its cached keys/values of layer `keys`,
   `values` (B, Hkv, cap, D); q rows of `qkv_width` floats (queries first), out (M, H*D). */
static void attention(const koe_qstack *s, const float *qkv, int64_t qkv_width, int64_t B, int64_t T, const float *keys,
                      const float *values, int64_t cap, int64_t past, const int64_t *start, float *out, int64_t threads) {
    int64_t H = s->heads, Hkv = s->kv_heads, D = s->head_dim, groups = H / Hkv;
    float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for schedule(static) num_threads((int)threads)
    for (int64_t task = 0; task < B * Hkv; task++) {
        int64_t b = task / Hkv, kv = task % Hkv;
        const float *K = keys + (b * Hkv + kv) * cap * D;
        const float *V = values + (b * Hkv + kv) * cap * D;
        int64_t first = start ? start[b] : 0;
        float *score = malloc((size_t)(past + T) * sizeof(float));
        for (int64_t t = 0; t < T; t++) {
            int64_t last = past + t; /* the query's own position: causal */
            for (int64_t g = 0; g < groups; g++) {
                int64_t h = kv * groups + g;
                const float *q = qkv + (b * T + t) * qkv_width + h * D;
                float *o = out + (b * T + t) * H * D + h * D;
                memset(o, 0, (size_t)D * sizeof(float));
                if (first > last) continue;
                float top = -INFINITY;
                for (int64_t j = first; j <= last; j++) {
                    score[j] = dot(q, K + j * D, D) * scale;
                    top = score[j] > top ? score[j] : top;
                }
                float total = 0.0f;
                for (int64_t j = first; j <= last; j++) {
                    score[j] = expf(score[j] - top);
                    total += score[j];
                }
                for (int64_t j = first; j <= last; j++) {
                    float p = score[j] / total;
                    const float *v = V + j * D;
                    for (int64_t d = 0; d < D; d++) o[d] += p * v[d];
                }
            }
        }
        free(score);
    }
}

/* h += branch, then y = the norm of h (weight `norm`), row by row: the rows on `threads` threads
   when there are several (each row's bits are the same on any thread). */
static void residual_norm(float *h, const float *branch, int64_t M, int64_t C, const float *norm, float eps, float *y, int64_t threads) {
#pragma omp parallel for schedule(static) num_threads((int)threads) if (M > 1)
    for (int64_t r = 0; r < M; r++) {
        float *hr = h + r * C;
        const float *br = branch + r * C;
        for (int64_t i = 0; i < C; i++) hr[i] = hr[i] + br[i];
        koe_rmsnorm(hr, 1, C, norm, eps, y + r * C);
    }
}

/* Largest input width of the stack's products (the padding buffer's row). */
static int64_t widest(const koe_qstack *s) {
    int64_t w = s->hidden;
    for (int64_t l = 0; l < s->layers; l++) {
        const koe_qlayer *L = s->layer + l;
        const koe_qmat *m[4] = {&L->qkv, &L->o, &L->gate_up, &L->down};
        for (int i = 0; i < 4; i++) w = m[i]->padded_k > w ? m[i]->padded_k : w;
    }
    return w;
}

/* x (B, T, C) at cache positions [past, past + T) -> out (B, T, C), the final norm's output.
   cos, sin (B, T, D): each new position's rotary tables. keys, values (layers, B, Hkv, cap, D):
   positions [0, past) hold earlier steps; this step writes [past, past + T) (cap >= past + T).
   start (B) or NULL: each row's first real position (left padding before it is never attended). */
void koe_stack_step(const koe_qstack *s, const float *x, int64_t B, int64_t T, const float *cos, const float *sin, float *keys,
                    float *values, int64_t cap, int64_t past, const int64_t *start, float *out, int64_t threads) {
    int64_t C = s->hidden, H = s->heads, Hkv = s->kv_heads, D = s->head_dim, I = s->intermediate, M = B * T;
    int64_t qkv_width = (H + 2 * Hkv) * D, layer_cache = B * Hkv * cap * D;
    float *h = malloc((size_t)(M * C) * sizeof(float));
    float *normed = malloc((size_t)(M * C) * sizeof(float));
    float *qkv = malloc((size_t)(M * qkv_width) * sizeof(float));
    float *att = malloc((size_t)(M * H * D) * sizeof(float));
    float *branch = malloc((size_t)(M * C) * sizeof(float));
    float *gate_up = malloc((size_t)(M * 2 * I) * sizeof(float));
    float *act = malloc((size_t)(M * I) * sizeof(float));
    float *pad = malloc((size_t)(M * widest(s)) * sizeof(float));
    memcpy(h, x, (size_t)(M * C) * sizeof(float));
    if (s->layers > 0) koe_rmsnorm(h, M, C, s->layer[0].input_norm, s->eps, normed);
    else koe_rmsnorm(h, M, C, s->final_norm, s->eps, out);
    for (int64_t l = 0; l < s->layers; l++) {
        const koe_qlayer *L = s->layer + l;
        float *lk = keys + l * layer_cache, *lv = values + l * layer_cache;
        product(&L->qkv, normed, M, qkv, pad, threads);
#pragma omp parallel for schedule(static) num_threads((int)threads) if (M > 1)
        for (int64_t row = 0; row < M; row++) { /* the rows' q/k norms and rotary, on the threads when there are several */
            int64_t b = row / T, pos = past + row % T;
            float *q = qkv + row * qkv_width, *k = q + H * D, *v = k + Hkv * D;
            for (int64_t i = 0; i < H; i++) {
                if (L->q_norm) koe_rmsnorm(q + i * D, 1, D, L->q_norm, s->eps, q + i * D);
                rotate(q + i * D, cos + row * D, sin + row * D, D);
            }
            for (int64_t i = 0; i < Hkv; i++) {
                if (L->k_norm) koe_rmsnorm(k + i * D, 1, D, L->k_norm, s->eps, k + i * D);
                rotate(k + i * D, cos + row * D, sin + row * D, D);
                memcpy(lk + ((b * Hkv + i) * cap + pos) * D, k + i * D, (size_t)D * sizeof(float));
                memcpy(lv + ((b * Hkv + i) * cap + pos) * D, v + i * D, (size_t)D * sizeof(float));
            }
        }
        attention(s, qkv, qkv_width, B, T, lk, lv, cap, past, start, att, threads);
        product(&L->o, att, M, branch, pad, threads);
        residual_norm(h, branch, M, C, L->post_norm, s->eps, normed, threads);
        product(&L->gate_up, normed, M, gate_up, pad, threads);
#pragma omp parallel for schedule(static) num_threads((int)threads) if (M > 1)
        for (int64_t r = 0; r < M; r++)
            for (int64_t i = 0; i < I; i++) {
                float g = gate_up[r * 2 * I + i];
                act[r * I + i] = (g / (1.0f + expf(-g))) * gate_up[r * 2 * I + I + i];
            }
        product(&L->down, act, M, branch, pad, threads);
        residual_norm(h, branch, M, C, l + 1 < s->layers ? s->layer[l + 1].input_norm : s->final_norm, s->eps, l + 1 < s->layers ? normed : out, threads);
    }
    free(h);
    free(normed);
    free(qkv);
    free(att);
    free(branch);
    free(gate_up);
    free(act);
    free(pad);
}
