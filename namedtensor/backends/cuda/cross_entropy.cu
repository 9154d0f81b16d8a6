// Cross-entropy from logits (rows, C), forward and backward, with ignore_index.
//
// Forward: a group of threads per row (a warp, or the whole block for long rows; see softmax.cu)
// keeps an online (max, sum of exp) pair per thread, combines them: lse = max + log(sum), and
// loss = lse - logits[target] (0 where target == ignore_index).  Outputs in T; math in float.
// Backward: elementwise over rows * C (grid-stride), (exp(logit - lse) - onehot) * g[row], rows with
// target == ignore_index zero.  lse and g come as float (the launcher converts the short vectors).
#include "common.cuh"

using namespace nt;

template <typename T, bool WARP>
__global__ void ce_fwd(const T* __restrict__ logits, const long long* __restrict__ target, T* __restrict__ loss,
                       T* __restrict__ lse, long long rows, int C, long long ignore_index) {
    __shared__ float red[32];
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;  // see softmax_rows
    const T* xr = logits + row * C;
    float m = -NT_INF, s = 0.f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) online_add(m, s, to_f(xr[i]));
    float M, S;
    group_max_sum<WARP>(m, s, red, M, S);
    if (threadIdx.x == 0) {
        const float L = M + logf(S);
        const long long t = target[row];
        float out;
        if (t == ignore_index) out = 0.f;
        else if (t < 0 || t >= C) out = __int_as_float(0x7fc00000);  // NaN: the op rejects these first; never read out of bounds
        else out = L - to_f(xr[t]);
        lse[row] = from_f<T>(L);
        loss[row] = from_f<T>(out);
    }
}

template <typename T>
__global__ void ce_bwd(const T* __restrict__ logits, const float* __restrict__ lse, const long long* __restrict__ target,
                       const float* __restrict__ g, T* __restrict__ glogits, long long rows, int C,
                       long long ignore_index) {
    const long long total = rows * C;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long r = i / C;
        const long long t = target[r];
        float out = 0.f;
        if (t != ignore_index) {
            const long long c = i - r * C;
            out = (expf(to_f(logits[i]) - lse[r]) - (c == t ? 1.f : 0.f)) * g[r];
        }
        glogits[i] = from_f<T>(out);
    }
}
