// Adam / AdamW update of many tensors of one dtype in one launch ("multi-tensor apply").
//
// `table` (int64, on the device) holds, per tensor t, five entries [param, grad, exp_avg, exp_avg_sq
// pointers, numel] at 5 t, then per chunk c two entries [tensor index, first element] at
// 5 * n_tensors + 2 c.  Block c updates elements [start, min(start + chunk_size, numel)) of its tensor.
// PyTorch's formulas (torch.optim.Adam / AdamW, not amsgrad, not maximize), in float:
//   AdamW (decoupled): p *= 1 - lr * wd            Adam: g += wd * p
//   m += (1 - beta1) (g - m)                       (m.lerp_(g, 1 - beta1))
//   v = beta2 v + (1 - beta2) g^2
//   p -= step_size * m / (sqrt(v) / bc2_sqrt + eps),  step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t)
// The state (m, v) is stored in T, like the parameter.
#include "common.cuh"

using namespace nt;

template <typename T>
__global__ void adam_multi(const long long* __restrict__ table, int n_tensors, int chunk_size, float beta1,
                           float beta2, float eps, float wd, float decay, float step_size, float bc2_sqrt,
                           int decoupled) {
    const long long* ch = table + 5LL * n_tensors + 2LL * blockIdx.x;
    const long long* e = table + 5LL * ch[0];
    const long long start = ch[1];
    const long long end = min(e[4], start + (long long)chunk_size);
    T* __restrict__ p = reinterpret_cast<T*>(e[0]);
    const T* __restrict__ g = reinterpret_cast<const T*>(e[1]);
    T* __restrict__ m = reinterpret_cast<T*>(e[2]);
    T* __restrict__ v = reinterpret_cast<T*>(e[3]);
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        float pi = to_f(p[i]), gi = to_f(g[i]), mi = to_f(m[i]), vi = to_f(v[i]);
        if (decoupled) pi *= decay;  // decay = 1 - lr * wd, rounded once on the host
        else gi += wd * pi;
        mi += (1.f - beta1) * (gi - mi);
        vi = beta2 * vi + (1.f - beta2) * gi * gi;
        pi -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
        p[i] = from_f<T>(pi);
        m[i] = from_f<T>(mi);
        v[i] = from_f<T>(vi);
    }
}
