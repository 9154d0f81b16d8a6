// Softmax and log-softmax, forward and backward, over one axis of a row-major array seen as
// (outer, n, inner).
//
// inner == 1 (the last axis): *_rows kernels, a group of threads per row of n: one warp (WARP,
// blockDim (32, rows per block), for short rows) or the whole block (blockDim (threads, 1)).  The
// forward keeps an online (max, sum of exp) pair per thread in one read of the row, combines the
// pairs over the group, then reads the row again to write the output (the row is in L1/L2 by then).
//
// inner > 1: *_cols kernels, blockDim (32, 8): the 32 threads of a warp take 32 consecutive columns
// (coalesced loads at stride `inner` along the axis), the 8 warps split the axis between them and
// combine their partial results through shared memory.
//
// All arithmetic in float; T is float or __half.
#include "common.cuh"

using namespace nt;

template <typename T, bool LOG, bool WARP>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {
    __shared__ float red[32];
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    // WARP: a whole warp leaves together (no block barrier in that mode); block mode: grid == rows
    if (row >= rows) return;
    const T* xr = x + row * n;
    T* yr = y + row * n;
    float m = -NT_INF, s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) online_add(m, s, to_f(xr[i]));
    float M, S;
    group_max_sum<WARP>(m, s, red, M, S);
    // a row of -inf gives NaN (-inf - -inf), as exp(x - max(x)) / sum does
    if (LOG) {
        const float shift = M + logf(S);
        for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = from_f<T>(to_f(xr[i]) - shift);
    } else {
        const float inv = 1.f / S;
        for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = from_f<T>(expf(to_f(xr[i]) - M) * inv);
    }
}

// From the forward's output y: softmax gx = y (g - sum(g y)); log-softmax gx = g - exp(y) sum(g).
template <typename T, bool LOG, bool WARP>
__global__ void softmax_rows_bwd(const T* __restrict__ y, const T* __restrict__ g, T* __restrict__ gx,
                                 long long rows, int n) {
    __shared__ float red[32];
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    const long long off = row * n;
    float acc = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        acc += LOG ? to_f(g[off + i]) : to_f(g[off + i]) * to_f(y[off + i]);
    const float dot = group_sum<WARP>(acc, red);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float yv = to_f(y[off + i]), gv = to_f(g[off + i]);
        gx[off + i] = from_f<T>(LOG ? gv - expf(yv) * dot : yv * (gv - dot));
    }
}

// blockDim (32, 8); grid: outer * ncb blocks, ncb = ceil(inner / 32) column blocks per outer index.
template <typename T, bool LOG>
__global__ void softmax_cols(const T* __restrict__ x, T* __restrict__ y, int n, long long inner, long long ncb) {
    __shared__ float pm[8][33], ps[8][33];  // +1: the combine reads a column across the 8 rows
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long o = blockIdx.x / ncb;
    const long long c = (blockIdx.x % ncb) * 32 + tx;
    const bool active = c < inner;  // inactive threads still reach the barrier
    const long long base = o * n * inner + c;
    float m = -NT_INF, s = 0.f;
    if (active)
        for (int k = ty; k < n; k += 8) online_add(m, s, to_f(x[base + (long long)k * inner]));
    pm[ty][tx] = m;
    ps[ty][tx] = s;
    __syncthreads();
    float M = -NT_INF;
#pragma unroll
    for (int r = 0; r < 8; ++r) M = fmaxf(M, pm[r][tx]);
    float S = 0.f;
#pragma unroll
    for (int r = 0; r < 8; ++r) S += pm[r][tx] == -NT_INF ? 0.f : ps[r][tx] * expf(pm[r][tx] - M);
    if (!active) return;
    if (LOG) {
        const float shift = M + logf(S);
        for (int k = ty; k < n; k += 8) {
            const long long i = base + (long long)k * inner;
            y[i] = from_f<T>(to_f(x[i]) - shift);
        }
    } else {
        const float inv = 1.f / S;
        for (int k = ty; k < n; k += 8) {
            const long long i = base + (long long)k * inner;
            y[i] = from_f<T>(expf(to_f(x[i]) - M) * inv);
        }
    }
}

template <typename T, bool LOG>
__global__ void softmax_cols_bwd(const T* __restrict__ y, const T* __restrict__ g, T* __restrict__ gx, int n,
                                 long long inner, long long ncb) {
    __shared__ float part[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long o = blockIdx.x / ncb;
    const long long c = (blockIdx.x % ncb) * 32 + tx;
    const bool active = c < inner;
    const long long base = o * n * inner + c;
    float acc = 0.f;
    if (active)
        for (int k = ty; k < n; k += 8) {
            const long long i = base + (long long)k * inner;
            acc += LOG ? to_f(g[i]) : to_f(g[i]) * to_f(y[i]);
        }
    part[ty][tx] = acc;
    __syncthreads();
    float dot = 0.f;
#pragma unroll
    for (int r = 0; r < 8; ++r) dot += part[r][tx];
    if (!active) return;
    for (int k = ty; k < n; k += 8) {
        const long long i = base + (long long)k * inner;
        const float yv = to_f(y[i]), gv = to_f(g[i]);
        gx[i] = from_f<T>(LOG ? gv - expf(yv) * dot : yv * (gv - dot));
    }
}
