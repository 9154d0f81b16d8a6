// Helpers shared by the kernels of namedtensor/backends/cuda/*.cu.
//
// Every .cu file starts with `#include "common.cuh"`.  nvcc finds it beside the file; the CuPy loader
// (namedtensor/backends/cuda_kernels.py) pastes this text in place of that line before handing the
// source to NVRTC, so CuPy's kernel cache, keyed on the source text, sees changes made here.
//
// Element types: float and __half.  Arithmetic is always float: loads convert with to_f, stores round
// with from_f<T>.
#pragma once

#include <cuda_fp16.h>

namespace nt {

// +inf without <math_constants.h> or INFINITY (which NVRTC does not always define)
#define NT_INF __int_as_float(0x7f800000)
#define NT_LOG2E 1.4426950408889634f
#define NT_LN2 0.6931471805599453f

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Reductions over the group of threads that owns one row: a warp (WARP: blockDim.x == 32, each
// threadIdx.y a row) or the whole block (blockDim.x a multiple of 32, blockDim.y == 1).  Every thread
// of the group gets the result.  `red` is __shared__ float[32]; in block mode every thread of the
// block must call (the function holds two barriers).
template <bool WARP>
__device__ __forceinline__ float group_sum(float v, float* red) {
    v = warp_sum(v);
    if (WARP) return v;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();  // an earlier reduction may still be reading red
    if (lane == 0) red[w] = v;
    __syncthreads();
    return warp_sum(lane < nw ? red[lane] : 0.f);
}

template <bool WARP>
__device__ __forceinline__ float group_max(float v, float* red) {
    v = warp_max(v);
    if (WARP) return v;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    return warp_max(lane < nw ? red[lane] : -NT_INF);
}

// One step of the online (max, sum of exp) pair of a row: after the loop, s = sum(exp(x - m)).
// -inf entries add nothing (and never make -inf - -inf = NaN); a NaN entry makes s NaN.
__device__ __forceinline__ void online_add(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v) + 1.f;  // m = -inf: exp(-inf) = 0
        m = v;
    } else if (v != -NT_INF) {
        s += expf(v - m);
    }
}

// The row's (max, sum of exp(x - max)) from each thread's online pair (m, s).  A thread that saw no
// finite entry (m = -inf) adds 0.  A row of -inf only gives (-inf, 0).
template <bool WARP>
__device__ __forceinline__ void group_max_sum(float m, float s, float* red, float& M, float& S) {
    M = group_max<WARP>(m, red);
    S = group_sum<WARP>(m == -NT_INF ? 0.f : s * expf(m - M), red);
}

}  // namespace nt
