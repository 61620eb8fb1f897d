#include "pto/pto-inst.hpp"
using namespace pto;
// matmul_relu_incore_0_aic (cube core): c[M, N] = a[M, K] @ b[K, N]; fp32, row-major, contiguous.
// Plain C++ in place of the PTO-ISA tile code real ptoas emits (TLOAD / TMATMUL / TSTORE),
// so the kernel compiles and runs on the host platform.
__global__ AICORE void matmul_relu_incore_0_aic(__gm__ float* a, __gm__ float* b, __gm__ float* c, int64_t M, int64_t N, int64_t K)
{
#if defined(__DAV_CUBE__)
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) {
                acc += a[i * K + k] * b[k * N + j];
            }
            c[i * N + j] = acc;
        }
    }
#endif
}
