/* SnakeBeta in one pass: y = x + sin(x * alpha[c])^2 * inv_beta[c], for the fast codec of koe's
 * opt-in modes (koe/engines/qwen3_tts/codec/fast.py).
 *
 * torch runs this activation as five passes (mul, sin, pow, mul, add), each allocating and writing a
 * tensor as large as the input, which at the codec's last stages is tens of MB per second of audio;
 * here it is one read and one write. sin is a polynomial (error below 1e-7 for the arguments a
 * codec sees), so the result is not torch's bits: this serves the modes that change bits anyway.
 * Rows are (batch, channel) pairs of a contiguous (B, C, T) tensor; the input and output may be
 * float32 or bfloat16 (the fast codec feeds its bfloat16 convolutions directly). Rows are split
 * over torch's OpenMP threads; every element is computed alone, so the bits do not depend on the
 * thread count.
 */
#include <stdint.h>
#include <string.h>

/* sin(y)^2: y - k*pi lies in [-pi/2, pi/2] (k = round(y / pi), pi in two parts), then an odd
 * Taylor polynomial of degree 11 (truncation error below 6e-8 there). Exact enough for |y| up to
 * ~1e5; the codec's arguments are activations times a per-channel scale near 1. */
static inline float sin_squared(float y) {
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding and subtracting it rounds to an integer */
    float k = (y * 0.318309886183790671f + round_magic) - round_magic;
    float r = y - k * 3.14159274101257324f;
    r = r - k * -8.74227766e-08f;
    float r2 = r * r;
    float p = -2.50521084e-08f;
    p = p * r2 + 2.75573192e-06f;
    p = p * r2 - 1.98412698e-04f;
    p = p * r2 + 8.33333333e-03f;
    p = p * r2 - 1.66666667e-01f;
    float s = r + r * r2 * p;
    return s * s;
}

static inline float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t to_bf16(float f) { /* round to nearest even, as torch's .to(bfloat16) (NaN aside) */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#define SNAKE_ROWS(IN_T, OUT_T, LOAD, STORE)                                                     \
    _Pragma("omp parallel for schedule(static)")                                                 \
    for (int64_t row = 0; row < rows; row++) {                                                   \
        const float a = alpha[row % channels], b = inv_beta[row % channels];                    \
        const IN_T *xr = (const IN_T *)x + row * n;                                              \
        OUT_T *o = (OUT_T *)out + row * n;                                                       \
        for (int64_t t = 0; t < n; t++) {                                                        \
            float v = LOAD(xr[t]);                                                               \
            o[t] = STORE(v + sin_squared(v * a) * b);                                            \
        }                                                                                        \
    }

#define SAME(v) (v)

/* x, out: (rows, n) contiguous, rows = batch * channels; in_bf16 / out_bf16 pick the element types
 * (0: float32, 1: bfloat16). alpha, inv_beta: (channels,) float32. */
void koe_snake_beta(const void *x, void *out, int64_t rows, int64_t channels, int64_t n, const float *alpha,
                    const float *inv_beta, int64_t in_bf16, int64_t out_bf16) {
    if (!in_bf16 && !out_bf16) {
        SNAKE_ROWS(float, float, SAME, SAME)
    } else if (!in_bf16) {
        SNAKE_ROWS(float, uint16_t, SAME, to_bf16)
    } else if (!out_bf16) {
        SNAKE_ROWS(uint16_t, float, from_bf16, SAME)
    } else {
        SNAKE_ROWS(uint16_t, uint16_t, from_bf16, to_bf16)
    }
}
