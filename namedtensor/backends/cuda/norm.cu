// LayerNorm (CENTERED) and RMSNorm over the rows of a (rows, n) matrix, forward and backward.
//
// Row kernels: a group of threads per row (a warp, or the whole block for long rows; see softmax.cu).
// The forward is two-pass for accuracy: mean, then the mean of squared deviations (the row is in
// L1/L2 for the second read), then the output ((x - mean) * rstd * w + b); it writes the statistics
// mean and rstd as float.  The input's gradient is rstd (u - mean(u) - xhat mean(u xhat)), u = g w
// (RMSNorm: without mean(u)).
//
// A residual add joined to the norm (nt.compile's add+layer_norm): given res, the forward first writes
// h = x + res (rounded to T, as the add alone rounds it) and normalises h; given g_add (the gradient h
// gets from its other readers), the backward adds it to the input's gradient (each rounded to T, as
// the add of the two gradients rounds).  Each thread reads back only the elements it wrote.
//
// The weight's and bias's gradients (sums over rows of g xhat and of g) are a second, deterministic
// column reduction, no atomics: norm_param_partial (blockDim (32, 8)) gives each block 32 columns and
// a chunk of rows, reduces its 8 warps' sums in shared memory and writes one float partial per chunk
// and column; the launcher sums the (chunks, n) partials over chunks.
#include "common.cuh"

using namespace nt;

// w, b: (n,) or null.  mean: (rows,) float, written when CENTERED.  rstd: (rows,) float.  res, h: null,
// or the residual and the sum written (rows, n).
template <typename T, bool CENTERED, bool WARP>
__global__ void norm_fwd(const T* __restrict__ x0, const T* __restrict__ res, T* __restrict__ h, const T* __restrict__ w,
                         const T* __restrict__ b, T* __restrict__ y, float* __restrict__ mean,
                         float* __restrict__ rstd, long long rows, int n, float eps) {
    __shared__ float red[32];
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;  // see softmax_rows
    const long long off = row * n;
    const float inv_n = 1.f / n;
    if (res)
        for (int i = threadIdx.x; i < n; i += blockDim.x) h[off + i] = from_f<T>(to_f(x0[off + i]) + to_f(res[off + i]));
    const T* x = res ? h : x0;
    float mu = 0.f;
    if (CENTERED) {
        float acc = 0.f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) acc += to_f(x[off + i]);
        mu = group_sum<WARP>(acc, red) * inv_n;
    }
    float acc = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = to_f(x[off + i]) - mu;
        acc += d * d;
    }
    const float r = rsqrtf(group_sum<WARP>(acc, red) * inv_n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = (to_f(x[off + i]) - mu) * r;
        if (w) v *= to_f(w[i]);
        if (b) v += to_f(b[i]);
        y[off + i] = from_f<T>(v);
    }
    if (threadIdx.x == 0) {
        if (CENTERED) mean[row] = mu;
        rstd[row] = r;
    }
}

// gx only (the launcher skips this kernel when gx is not wanted).  w may be null; mean is read when CENTERED.
// g_add: null, or (rows, n) added to gx.
template <typename T, bool CENTERED, bool WARP>
__global__ void norm_bwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ g,
                         const float* __restrict__ mean, const float* __restrict__ rstd, const T* __restrict__ g_add,
                         T* __restrict__ gx, long long rows, int n) {
    __shared__ float red[32];
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    const long long off = row * n;
    const float inv_n = 1.f / n;
    const float mu = CENTERED ? mean[row] : 0.f, r = rstd[row];
    float su = 0.f, sux = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float u = to_f(g[off + i]);
        if (w) u *= to_f(w[i]);
        su += u;
        sux += u * (to_f(x[off + i]) - mu) * r;
    }
    const float mean_ux = group_sum<WARP>(sux, red) * inv_n;
    const float mean_u = CENTERED ? group_sum<WARP>(su, red) * inv_n : 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float u = to_f(g[off + i]);
        if (w) u *= to_f(w[i]);
        const float xhat = (to_f(x[off + i]) - mu) * r;
        const T d = from_f<T>(r * (u - mean_u - xhat * mean_ux));
        gx[off + i] = g_add ? from_f<T>(to_f(d) + to_f(g_add[off + i])) : d;
    }
}

// blockDim (32, 8); grid: ncb * chunks blocks (ncb = ceil(n / 32)); chunk c covers rows
// [c * rows_per_chunk, (c + 1) * rows_per_chunk).  pw, pb: (chunks, n) float; either may be null.
template <typename T, bool CENTERED>
__global__ void norm_param_partial(const T* __restrict__ x, const T* __restrict__ g, const float* __restrict__ mean,
                                   const float* __restrict__ rstd, float* __restrict__ pw, float* __restrict__ pb,
                                   long long rows, int n, long long rows_per_chunk, int ncb) {
    __shared__ float sw[8][33], sb[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long chunk = blockIdx.x / ncb;
    const int col = (int)(blockIdx.x % ncb) * 32 + tx;
    const long long r0 = chunk * rows_per_chunk;
    const long long r1 = min(rows, r0 + rows_per_chunk);
    float aw = 0.f, ab = 0.f;
    if (col < n)
        for (long long r = r0 + ty; r < r1; r += 8) {
            const float gv = to_f(g[r * n + col]);
            const float xhat = (to_f(x[r * n + col]) - (CENTERED ? mean[r] : 0.f)) * rstd[r];
            aw += gv * xhat;
            ab += gv;
        }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && col < n) {
        float tw = 0.f, tb = 0.f;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            tw += sw[k][tx];
            tb += sb[k][tx];
        }
        if (pw) pw[chunk * n + col] = tw;
        if (pb) pb[chunk * n + col] = tb;
    }
}
