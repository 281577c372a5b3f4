/* What decoder.c uses of qgemv.c: the int8 / int4 product and the RMSNorm of the opt-in modes
   (their numerics are described in qgemv.c). */
#ifndef KOE_QGEMV_H
#define KOE_QGEMV_H
#include <stdint.h>

/* y (M, N) = x (M, K) W^T + bias; `bits` 8 or 4, W and its scales as koe_q8_linear / koe_q4_linear take them. */
void koe_qlinear(int bits, const float *x, int64_t M, int64_t K, const uint8_t *w, const float *ws, int64_t N, int64_t group,
                 const float *bias, float *y, int64_t threads);

/* RMSNorm of M rows of K floats; y may be x. */
void koe_rmsnorm(const float *x, int64_t M, int64_t K, const float *w, float eps, float *y);

#endif
