// Fused scaled-dot-product attention, FlashAttention-2 style, forward and backward, on CUDA cores
// (float FMAs; tiles in shared memory as float).
//
// q (N, Lq, D), k (N, Lk, D), v (N, Lk, Dv), dO and out (N, Lq, Dv): row-major, T = float or __half.
// lse (N, Lq) float: logsumexp of each query's scaled, masked scores (-inf where no key is allowed).
// keep: null or (N, Lk) bytes, nonzero = the key may be attended.  causal: query i sees key j <= i.
// HD: the head dim both D and Dv are padded to (32, 64 or 128); the padding is zero in shared memory,
// so it adds nothing to any dot product.  The (Lq, Lk) score matrix is never stored.
//
// Forward (attn_fwd): a block of 4 warps takes BM = 32 queries (8 per warp) and walks the keys in
// tiles of 32, one key per lane: s = q.k for its 8 rows, then per row the online softmax (running
// max m, running sum l per lane, output accumulator rescaled by exp(m_old - m_new)), and acc += P V
// with each lane owning HD/32 consecutive output columns.  Scores are kept in log2 units (q is
// pre-scaled by scale * log2(e)) so that exp is exp2.  Key tiles wholly above the causal diagonal of
// the block are never loaded; a warp skips a tile above its own rows.
//
// Backward (attn_bwd, after attn_bwd_dot has made Dvec = rowsum(dO * out)): a block takes 32 keys
// (8 per warp) and walks the query tiles of 32 (from the diagonal on, when causal): recompute
// s = scale q.k and dP = dO.v (lane = query), P = exp(s - lse) (0 where masked or lse = -inf),
// dS = P (dP - Dvec); then dV += P^T dO and dK += dS^T (scale q) (lane = column slice, accumulated in
// registers over all query tiles), and dQ += scale dS K for this block's keys, added into a float
// (N, Lq, D) buffer with atomicAdd (other key blocks add to the same rows).
//
// Shared memory is dynamic (extern): attn_fwd needs 4 * (32 HD + 32 (HD + 4) + 32 HD + 1024) bytes,
// attn_bwd 4 * (2 * 32 HD + 2 * 32 (HD + 4) + 2 * 1024 + 64) bytes (52.5 KB and 73.3 KB at HD = 128,
// above the 48 KB default: the launcher opts in).  Rows that lanes read at once are padded by 4
// floats so that float4 reads hit distinct banks.
#include "common.cuh"

using namespace nt;

namespace {

constexpr int ATT_WARPS = 4;
constexpr int ATT_THREADS = 32 * ATT_WARPS;
// without a minimum, ptxas caps registers lower (80-128) and spills; with 2 it may use up to 255
// (two blocks' worth of registers per SM), which these kernels need to hold their accumulators
constexpr int ATT_MIN_BLOCKS = 2;
constexpr int FWD_ROWS = 8;                       // query rows per warp (forward)
constexpr int FWD_BM = ATT_WARPS * FWD_ROWS;       // queries per block
constexpr int BWD_KEYS = 8;                       // keys per warp (backward)
constexpr int BWD_BN = ATT_WARPS * BWD_KEYS;       // keys per block
constexpr int TILE = 32;                          // keys per forward tile, queries per backward tile (= lanes)

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    return fmaf(a.w, b.w, acc);
}

// `rows` rows of HD floats (row stride `stride`) from src (row stride `ld`, `cols` valid columns,
// `valid` valid rows), times `mul`; zero outside.  Consecutive threads take consecutive columns.
template <typename T, int HD>
__device__ __forceinline__ void load_tile(float* dst, int stride, const T* __restrict__ src, long long ld, int rows,
                                          int valid, int cols, float mul) {
    for (int e = threadIdx.x; e < rows * HD; e += ATT_THREADS) {
        const int r = e / HD, c = e % HD;
        dst[r * stride + c] = (r < valid && c < cols) ? to_f(src[r * ld + c]) * mul : 0.f;
    }
}

// N consecutive floats from shared memory (16-byte aligned for N = 4, 8-byte for N = 2).
template <int N>
__device__ __forceinline__ void load_vec(const float* p, float (&d)[N]) {
    if (N == 4) {
        const float4 t = *reinterpret_cast<const float4*>(p);
        d[0] = t.x; d[1] = t.y; d[2] = t.z; d[3] = t.w;
    } else if (N == 2) {
        const float2 t = *reinterpret_cast<const float2*>(p);
        d[0] = t.x; d[1] = t.y;
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) d[i] = p[i];
    }
}

}  // namespace

template <typename T, int HD>
__global__ void __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS)
attn_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
         const unsigned char* __restrict__ keep, T* __restrict__ out, float* __restrict__ lse, int Lq, int Lk, int D,
         int Dv, float scale_log2, int causal, int n_qtiles) {
    constexpr int KS = HD + 4;   // padded K rows: lane j reads row j
    constexpr int CV = HD / 32;  // output columns per lane
    extern __shared__ float4 smem4[];
    float* Qs = reinterpret_cast<float*>(smem4);  // [FWD_BM][HD], pre-scaled by scale * log2(e)
    float* Ks = Qs + FWD_BM * HD;                   // [TILE][KS]
    float* Vs = Ks + TILE * KS;                     // [TILE][HD]
    float* Ps = Vs + TILE * HD;                     // [FWD_BM][TILE]: probabilities, for P V

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long bh = blockIdx.x / n_qtiles;
    const int tile = n_qtiles - 1 - (int)(blockIdx.x % n_qtiles);  // heavier causal tiles start first
    const int q0 = tile * FWD_BM;
    const int row0 = q0 + warp * FWD_ROWS;  // this warp's first query
    const T* kb = k + bh * Lk * D;
    const T* vb = v + bh * Lk * Dv;

    load_tile<T, HD>(Qs, HD, q + (bh * Lq + q0) * D, D, FWD_BM, Lq - q0, D, scale_log2);

    float acc[FWD_ROWS][CV], m[FWD_ROWS], l[FWD_ROWS];  // l: this lane's share of the row sum
#pragma unroll
    for (int r = 0; r < FWD_ROWS; ++r) {
        m[r] = -NT_INF;
        l[r] = 0.f;
#pragma unroll
        for (int c = 0; c < CV; ++c) acc[r][c] = 0.f;
    }

    const int kend = causal ? min(Lk, q0 + FWD_BM) : Lk;
    for (int k0 = 0; k0 < kend; k0 += TILE) {
        __syncthreads();  // every warp is done with the previous K/V tile (and Qs is written, first time)
        load_tile<T, HD>(Ks, KS, kb + (long long)k0 * D, D, TILE, Lk - k0, D, 1.f);
        load_tile<T, HD>(Vs, HD, vb + (long long)k0 * Dv, Dv, TILE, Lk - k0, Dv, 1.f);
        __syncthreads();
        // warp-uniform: nothing to do for rows past Lq, or for a tile above all of this warp's rows
        if (row0 >= Lq || (causal && k0 > row0 + FWD_ROWS - 1)) continue;

        const int j = k0 + lane;
        const bool key_ok = j < Lk && (keep == nullptr || keep[bh * Lk + j]);
        float s[FWD_ROWS];
#pragma unroll
        for (int r = 0; r < FWD_ROWS; ++r) s[r] = 0.f;
        const float4* kr = reinterpret_cast<const float4*>(Ks + lane * KS);
#pragma unroll 4
        for (int c4 = 0; c4 < HD / 4; ++c4) {
            const float4 kv = kr[c4];
#pragma unroll
            for (int r = 0; r < FWD_ROWS; ++r)
                s[r] = dot4(reinterpret_cast<const float4*>(Qs + (warp * FWD_ROWS + r) * HD)[c4], kv, s[r]);
        }
#pragma unroll
        for (int r = 0; r < FWD_ROWS; ++r) {
            const float sr = (key_ok && (!causal || j <= row0 + r)) ? s[r] : -NT_INF;
            const float mn = fmaxf(m[r], warp_max(sr));
            // nothing allowed so far (mn = -inf): keep acc = l = 0 and avoid -inf - -inf
            const float alpha = mn == -NT_INF ? 1.f : exp2f(m[r] - mn);
            const float p = exp2f(sr - (mn == -NT_INF ? 0.f : mn));
            m[r] = mn;
            l[r] = l[r] * alpha + p;
#pragma unroll
            for (int c = 0; c < CV; ++c) acc[r][c] *= alpha;
            Ps[(warp * FWD_ROWS + r) * TILE + lane] = p;
        }
        __syncwarp();  // Ps rows of this warp are written before its lanes read them
#pragma unroll 2
        for (int j4 = 0; j4 < TILE; j4 += 4) {
            float vv[4][CV];
#pragma unroll
            for (int t = 0; t < 4; ++t) load_vec<CV>(Vs + (j4 + t) * HD + lane * CV, vv[t]);
#pragma unroll
            for (int r = 0; r < FWD_ROWS; ++r) {
                const float4 p4 = *reinterpret_cast<const float4*>(Ps + (warp * FWD_ROWS + r) * TILE + j4);
#pragma unroll
                for (int c = 0; c < CV; ++c)
                    acc[r][c] = fmaf(p4.w, vv[3][c], fmaf(p4.z, vv[2][c], fmaf(p4.y, vv[1][c], fmaf(p4.x, vv[0][c], acc[r][c]))));
            }
        }
        // Ps is rewritten only after the next tile's first __syncthreads
    }

#pragma unroll
    for (int r = 0; r < FWD_ROWS; ++r) {
        const float L = warp_sum(l[r]);  // every lane of the warp: shuffles need the whole warp
        const int i = row0 + r;
        if (i >= Lq) continue;
        const float inv = L > 0.f ? 1.f / L : 0.f;  // no allowed key: out = 0
        T* o = out + (bh * Lq + i) * Dv;
#pragma unroll
        for (int c = 0; c < CV; ++c) {
            const int col = lane * CV + c;
            if (col < Dv) o[col] = from_f<T>(acc[r][c] * inv);
        }
        if (lane == 0) lse[bh * Lq + i] = L > 0.f ? (m[r] + log2f(L)) * NT_LN2 : -NT_INF;
    }
}

// Dvec[row] = sum(dO[row] * out[row]) over Dv, in float.  blockDim (32, 4): a warp per row.
template <typename T>
__global__ void attn_bwd_dot(const T* __restrict__ dO, const T* __restrict__ out, float* __restrict__ Dvec,
                             long long rows, int Dv) {
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    float acc = 0.f;
    for (int c = threadIdx.x; c < Dv; c += 32) acc += to_f(dO[row * Dv + c]) * to_f(out[row * Dv + c]);
    acc = warp_sum(acc);
    if (threadIdx.x == 0) Dvec[row] = acc;
}

template <typename T, int HD>
__global__ void __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS)
attn_bwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ dO,
         const float* __restrict__ lse, const float* __restrict__ Dvec, const unsigned char* __restrict__ keep,
         float* __restrict__ dq, T* __restrict__ dk, T* __restrict__ dv, int Lq, int Lk, int D, int Dv, float scale,
         int causal, int n_kblocks) {
    constexpr int QS = HD + 4;   // padded Q / dO rows: lane i reads row i
    constexpr int CD = HD / 32;  // columns per lane in the dV / dK / dQ sums
    constexpr int QPW = TILE / ATT_WARPS;  // queries per warp in the dQ sum
    extern __shared__ float4 smem4[];
    float* Ks = reinterpret_cast<float*>(smem4);  // [BWD_BN][HD]
    float* Vs = Ks + BWD_BN * HD;                   // [BWD_BN][HD]
    float* Qs = Vs + BWD_BN * HD;                   // [TILE][QS], pre-scaled by scale
    float* dOs = Qs + TILE * QS;                    // [TILE][QS]
    float* Ps = dOs + TILE * QS;                    // [BWD_BN][TILE]
    float* dSs = Ps + BWD_BN * TILE;                // [BWD_BN][TILE]
    float* Ls = dSs + BWD_BN * TILE;                // [TILE] lse
    float* Ds = Ls + TILE;                          // [TILE] Dvec

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long bh = blockIdx.x / n_kblocks;
    const int k0 = (int)(blockIdx.x % n_kblocks) * BWD_BN;
    const int jw = warp * BWD_KEYS;  // this warp's first key, in the block

    load_tile<T, HD>(Ks, HD, k + (bh * Lk + k0) * D, D, BWD_BN, Lk - k0, D, 1.f);
    load_tile<T, HD>(Vs, HD, v + (bh * Lk + k0) * Dv, Dv, BWD_BN, Lk - k0, Dv, 1.f);
    unsigned key_ok = 0;  // bit jj: key k0 + jw + jj exists and may be attended
#pragma unroll
    for (int jj = 0; jj < BWD_KEYS; ++jj) {
        const int j = k0 + jw + jj;
        if (j < Lk && (keep == nullptr || keep[bh * Lk + j])) key_ok |= 1u << jj;
    }

    float gk[BWD_KEYS][CD], gv[BWD_KEYS][CD];
#pragma unroll
    for (int jj = 0; jj < BWD_KEYS; ++jj)
#pragma unroll
        for (int c = 0; c < CD; ++c) gk[jj][c] = gv[jj][c] = 0.f;

    // queries before k0 see none of this block's keys under the causal mask
    for (int i0 = causal ? (k0 / TILE) * TILE : 0; i0 < Lq; i0 += TILE) {
        __syncthreads();  // the previous tile's Qs, dOs, Ps, dSs are no longer read
        load_tile<T, HD>(Qs, QS, q + (bh * Lq + i0) * D, D, TILE, Lq - i0, D, scale);
        load_tile<T, HD>(dOs, QS, dO + (bh * Lq + i0) * Dv, Dv, TILE, Lq - i0, Dv, 1.f);
        if (threadIdx.x < TILE) {
            const int i = i0 + threadIdx.x;
            Ls[threadIdx.x] = i < Lq ? lse[bh * Lq + i] : -NT_INF;
            Ds[threadIdx.x] = i < Lq ? Dvec[bh * Lq + i] : 0.f;
        }
        __syncthreads();

        // s = scale q.k and dP = dO.v for query i0 + lane and this warp's keys
        float s[BWD_KEYS], dp[BWD_KEYS];
#pragma unroll
        for (int jj = 0; jj < BWD_KEYS; ++jj) s[jj] = dp[jj] = 0.f;
        const float4* qr = reinterpret_cast<const float4*>(Qs + lane * QS);
        const float4* orow = reinterpret_cast<const float4*>(dOs + lane * QS);
#pragma unroll 2
        for (int c4 = 0; c4 < HD / 4; ++c4) {
            const float4 qv = qr[c4], ov = orow[c4];
#pragma unroll
            for (int jj = 0; jj < BWD_KEYS; ++jj) {
                s[jj] = dot4(qv, reinterpret_cast<const float4*>(Ks + (jw + jj) * HD)[c4], s[jj]);
                dp[jj] = dot4(ov, reinterpret_cast<const float4*>(Vs + (jw + jj) * HD)[c4], dp[jj]);
            }
        }
        const int i = i0 + lane;
        const float Li = Ls[lane], Di = Ds[lane];  // Li = -inf: no key allowed (or i >= Lq): P = 0
#pragma unroll
        for (int jj = 0; jj < BWD_KEYS; ++jj) {
            const int j = k0 + jw + jj;
            const bool ok = ((key_ok >> jj) & 1u) && Li != -NT_INF && (!causal || j <= i);
            const float p = ok ? exp2f((s[jj] - Li) * NT_LOG2E) : 0.f;
            Ps[(jw + jj) * TILE + lane] = p;
            dSs[(jw + jj) * TILE + lane] = p * (dp[jj] - Di);
        }
        __syncthreads();  // the dQ sum below reads every warp's dS

        // dV += P^T dO, dK += dS^T (scale q): this warp's keys, lane's columns lane * CD ..
#pragma unroll 2
        for (int i4 = 0; i4 < TILE; i4 += 4) {
            float o[4][CD], qq[4][CD];
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                load_vec<CD>(dOs + (i4 + t) * QS + lane * CD, o[t]);
                load_vec<CD>(Qs + (i4 + t) * QS + lane * CD, qq[t]);
            }
#pragma unroll
            for (int jj = 0; jj < BWD_KEYS; ++jj) {
                const float4 p4 = *reinterpret_cast<const float4*>(Ps + (jw + jj) * TILE + i4);
                const float4 d4 = *reinterpret_cast<const float4*>(dSs + (jw + jj) * TILE + i4);
#pragma unroll
                for (int c = 0; c < CD; ++c) {
                    gv[jj][c] = fmaf(p4.w, o[3][c], fmaf(p4.z, o[2][c], fmaf(p4.y, o[1][c], fmaf(p4.x, o[0][c], gv[jj][c]))));
                    gk[jj][c] = fmaf(d4.w, qq[3][c], fmaf(d4.z, qq[2][c], fmaf(d4.y, qq[1][c], fmaf(d4.x, qq[0][c], gk[jj][c]))));
                }
            }
        }

        // dQ[i] += scale sum_j dS[i, j] K[j]: warp takes queries i0 + warp * QPW .., lane columns lane * CD ..
        float gq[QPW][CD];
#pragma unroll
        for (int t = 0; t < QPW; ++t)
#pragma unroll
            for (int c = 0; c < CD; ++c) gq[t][c] = 0.f;
#pragma unroll 2
        for (int jb = 0; jb < BWD_BN; ++jb) {
            float kk[CD];
            load_vec<CD>(Ks + jb * HD + lane * CD, kk);
#pragma unroll
            for (int t4 = 0; t4 < QPW; t4 += 4) {
                const float4 d4 = *reinterpret_cast<const float4*>(dSs + jb * TILE + warp * QPW + t4);
#pragma unroll
                for (int c = 0; c < CD; ++c) {
                    gq[t4 + 0][c] = fmaf(d4.x, kk[c], gq[t4 + 0][c]);
                    gq[t4 + 1][c] = fmaf(d4.y, kk[c], gq[t4 + 1][c]);
                    gq[t4 + 2][c] = fmaf(d4.z, kk[c], gq[t4 + 2][c]);
                    gq[t4 + 3][c] = fmaf(d4.w, kk[c], gq[t4 + 3][c]);
                }
            }
        }
#pragma unroll
        for (int t = 0; t < QPW; ++t) {
            const int iq = i0 + warp * QPW + t;
            if (iq >= Lq) break;
            float* dqr = dq + (bh * Lq + iq) * D;
#pragma unroll
            for (int c = 0; c < CD; ++c) {
                const int col = lane * CD + c;
                if (col < D) atomicAdd(dqr + col, gq[t][c] * scale);
            }
        }
    }

#pragma unroll
    for (int jj = 0; jj < BWD_KEYS; ++jj) {
        const int j = k0 + jw + jj;
        if (j >= Lk) break;
#pragma unroll
        for (int c = 0; c < CD; ++c) {
            const int col = lane * CD + c;
            if (col < D) dk[(bh * Lk + j) * D + col] = from_f<T>(gk[jj][c]);
            if (col < Dv) dv[(bh * Lk + j) * Dv + col] = from_f<T>(gv[jj][c]);
        }
    }
}
