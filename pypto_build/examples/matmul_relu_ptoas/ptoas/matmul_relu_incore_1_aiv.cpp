#include "pto/pto-inst.hpp"
using namespace pto;
// matmul_relu_incore_1_aiv (vector core): out[M, N] = max(c[M, N] + bias[N], 0); fp32, row-major, contiguous.
// Plain C++ in place of the PTO-ISA tile code real ptoas emits (TLOAD / TADD / TRELU / TSTORE),
// so the kernel compiles and runs on the host platform.
__global__ AICORE void matmul_relu_incore_1_aiv(__gm__ float* c, __gm__ float* bias, __gm__ float* out, int64_t M, int64_t N)
{
#if defined(__DAV_VEC__)
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
            float v = c[i * N + j] + bias[j];
            out[i * N + j] = v > 0.0f ? v : 0.0f;
        }
    }
#endif
}
