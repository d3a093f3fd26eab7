// A probe of the W4A16 batch-1 GEMV on the int8 tensor cores (benchmarks/probes/quant_int8_probe.py): x is cut
// per group of 128 into 15-bit fixed point (x_int = rint(x 2^(13 - E)), E the group's largest exponent),
// split into two int8 parts (x_int = 256 hi + lo), and the codes go into mma.sync m16n8k32 u8 x s8 as
// they lie in the words, one mask per 4 codes (low nibbles as n, high nibbles as 16 n). B's columns
// alternate hi, lo: every lane gets both sums of its rows, integer and exact. The blocks are streamed as
// the shipped blocks kernel does (a ring of one 4256-byte slot per warp, refilled by a bulk copy as soon
// as read, evict_first).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

constexpr int NW = 8, BW = 1064, SLOT = BW * 4;

__device__ __forceinline__ void mma_u8s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ int pick(const int (&v)[4][2][4], int tig, int h, int r) {
  int a = tig & 1 ? v[1][h][r] : v[0][h][r];
  int b = tig & 1 ? v[3][h][r] : v[2][h][r];
  return tig & 2 ? b : a;
}

// MODE 0: the GEMV; 1: the same stream, every slot read and XOR-ed (no mma, no x, no sum, no store);
// 2: as 1 with the warps' sum and the store of 0; 3: the GEMV without the compute of each warp's last block;
// 4: x loaded before the first copy, cut after the first refill; 5: x cut per step after the refill
template <int MODE>
__global__ void __launch_bounds__(256, 2) int8_gemv(const int* __restrict__ blocks, const __nv_bfloat16* __restrict__ x,
                                                     __nv_bfloat16* __restrict__ y, int NG, unsigned* flag) {
  extern __shared__ __align__(128) char smem[];
  const int o = blockIdx.x;
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
  const int steps = (NG + NW - 1) / NW;
  char* ring = smem + w * SLOT;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + NW * SLOT) + w;
  char* xw = smem + NW * SLOT + 64 + w * steps * 264;  // per step: 256 bytes of x parts, X and the factor
  float* wsum = reinterpret_cast<float*>(smem + NW * SLOT + 64 + NW * steps * 264);
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  const char* src0 = reinterpret_cast<const char*>(blocks + (long)o * NG * BW);
  auto issue = [&](int g) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(bar)), "r"(SLOT) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 ::"r"(sa(ring)), "l"(src0 + (long)g * SLOT), "r"(SLOT), "r"(sa(bar)), "l"(pol) : "memory");
  };
  // this warp's groups of x: lane l takes k = 4l .. 4l + 3 of a group
  auto xload = [&](int i) { return *reinterpret_cast<const uint2*>(x + min(w + i * NW, NG - 1) * 128 + 4 * lane); };
  auto prep = [&](int i, uint2 raw) {
    float f[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xFFFF0000u), __uint_as_float(raw.y << 16),
                  __uint_as_float(raw.y & 0xFFFF0000u)};
    uint32_t eb = max(max((raw.x >> 7) & 0xFF, (raw.x >> 23) & 0xFF), max((raw.y >> 7) & 0xFF, (raw.y >> 23) & 0xFF));
    eb = __reduce_max_sync(0xFFFFFFFFu, eb);
    eb = max(eb, 18u);
    float factor = __uint_as_float((267u - eb) << 23);  // 2^(13 - E)
    uint32_t hw = 0, lw = 0;
    int sum = 0;
#pragma unroll
    for (int b = 0; b < 4; b++) {
      int xi = __float2int_rn(f[b] * factor);
      int hi = (xi + 128) >> 8, lo = xi - (hi << 8);
      hw |= (uint32_t)(hi & 0xFF) << (8 * b);
      lw |= (uint32_t)(lo & 0xFF) << (8 * b);
      sum += xi;
    }
    sum = __reduce_add_sync(0xFFFFFFFFu, sum);
    // lane l = 8q + 4r + t holds k = 32q + 16r + 4t + b: part p of (q, t) at ((2q + p) 32 + 8t + 4r)
    int q = lane >> 3, r = (lane >> 2) & 1, t = lane & 3;
    char* xs = xw + i * 264;
    *reinterpret_cast<uint32_t*>(xs + (2 * q) * 32 + 8 * t + 4 * r) = hw;
    *reinterpret_cast<uint32_t*>(xs + (2 * q + 1) * 32 + 8 * t + 4 * r) = lw;
    if (lane == 0) {
      *reinterpret_cast<int*>(xs + 256) = sum;
      *reinterpret_cast<float*>(xs + 260) = __uint_as_float((eb - 17u) << 23);  // 2^(E - 17)
    }
  };
  uint2 xr[8], xnext = {0, 0};
  if (MODE == 4) {
#pragma unroll
    for (int i = 0; i < 8; i++)
      if (i < steps) xr[i] = xload(i);
  }
  if (MODE == 5) xnext = xload(0);
  if (lane == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    if (w < NG) issue(w);
  }
  __syncwarp();
  if (MODE == 0 || MODE == 3) {  // before the first wait
    for (int i = 0; i < steps; i++) prep(i, xload(i));
    __syncwarp();
  }
  float t0 = 0.f, t1 = 0.f;
  uint32_t acc_x = 0;
  for (int i = 0; i < steps; i++) {
    int g = w + i * NW;
    bool valid = g < NG;
    if (valid) {
      uint32_t par = i & 1, done = 0;
      while (!done)
        asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                     : "=r"(done) : "r"(sa(bar)), "r"(par) : "memory");
    }
    uint4 wd[8];
#pragma unroll
    for (int c = 0; c < 8; c++) wd[c] = *reinterpret_cast<const uint4*>(ring + c * 512 + lane * 16);
    uint32_t sw = *reinterpret_cast<const uint32_t*>(ring + 4096 + 4 * lane);
    uint32_t zw = *reinterpret_cast<const uint32_t*>(ring + 4224 + 4 * gid);
    __syncwarp();
    if (lane == 0 && g + NW < NG) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      issue(g + NW);
    }
    if (MODE == 4 && i == 0) {  // after the first refill: every group of the warp
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (j < steps) prep(j, xr[j]);
      __syncwarp();
    }
    if (MODE == 5) {  // this group's, its x loaded a step ahead
      prep(i, xnext);
      __syncwarp();
      xnext = xload(i + 1);
    }
    if (!valid) continue;
    if (MODE == 3 && i == steps - 1) continue;
    if (MODE == 1 || MODE == 2) {
#pragma unroll
      for (int c = 0; c < 8; c++) acc_x ^= wd[c].x ^ wd[c].y ^ wd[c].z ^ wd[c].w;
      acc_x ^= sw ^ zw;
      continue;
    }
    const char* xs = xw + i * 264;
    uint2 bx[4];
#pragma unroll
    for (int q = 0; q < 4; q++) bx[q] = *reinterpret_cast<const uint2*>(xs + (2 * q + (gid & 1)) * 32 + 8 * tig);
    int acc[4][2][4] = {};
#pragma unroll
    for (int mb = 0; mb < 4; mb++) {
      const uint4 h0 = wd[2 * mb], h1 = wd[2 * mb + 1];  // rows gid, gid + 8: (p, r) = (0,0), (0,1), (1,0), (1,1)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const uint32_t m = h ? 0xF0F0F0F0u : 0x0F0F0F0Fu;
        mma_u8s8(acc[mb][h], h0.x & m, h1.x & m, h0.y & m, h1.y & m, bx[h].x, bx[h].y);          // q = h (p 0)
        mma_u8s8(acc[mb][h], h0.z & m, h1.z & m, h0.w & m, h1.w & m, bx[2 + h].x, bx[2 + h].y);  // q = 2 + h (p 1)
      }
    }
    int X = *reinterpret_cast<const int*>(xs + 256);
    float fs = *reinterpret_cast<const float*>(xs + 260);
    // lane tig finishes M block tig: rows gid (c0 hi, c1 lo) and gid + 8 (c2, c3)
    int s0 = 16 * (256 * pick(acc, tig, 0, 0) + pick(acc, tig, 0, 1)) + 256 * pick(acc, tig, 1, 0) + pick(acc, tig, 1, 1);
    int s1 = 16 * (256 * pick(acc, tig, 0, 2) + pick(acc, tig, 0, 3)) + 256 * pick(acc, tig, 1, 2) + pick(acc, tig, 1, 3);
    int zb = zw >> (8 * tig);
    s0 -= 16 * (zb & 0xF) * X;
    s1 -= (zb & 0xF0) * X;
    t0 += __half2float(__ushort_as_half((unsigned short)(sw & 0xFFFF))) * fs * (float)s0;
    t1 += __half2float(__ushort_as_half((unsigned short)(sw >> 16))) * fs * (float)s1;
  }
  if (MODE == 1 || MODE == 2) {
    if (acc_x == 0x9E3779B9u) flag[0] = 1;
    if (MODE == 1) return;
    t0 = (float)(acc_x & 1);
  }
  wsum[(w * 32 + lane) * 2] = t0;
  wsum[(w * 32 + lane) * 2 + 1] = t1;
  __syncthreads();
  if (w == 0) {
    float a = 0.f, b = 0.f;
    for (int v = 0; v < NW; v++) {
      a += wsum[(v * 32 + lane) * 2];
      b += wsum[(v * 32 + lane) * 2 + 1];
    }
    y[o * 64 + 16 * tig + gid] = __float2bfloat16(a);
    y[o * 64 + 16 * tig + 8 + gid] = __float2bfloat16(b);
  }
}

template <int MODE>
static int launch(const int* blocks, const void* x, void* y, int O, int NG, unsigned* flag, cudaStream_t st) {
  int steps = (NG + NW - 1) / NW;
  int smem = NW * SLOT + 64 + NW * steps * 264 + NW * 32 * 8;
  auto k = int8_gemv<MODE>;
  if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) return 1;
  k<<<O, 256, smem, st>>>(blocks, (const __nv_bfloat16*)x, (__nv_bfloat16*)y, NG, flag);
  return cudaGetLastError() != cudaSuccess;
}

extern "C" int run_int8(int mode, const void* blocks, const void* x, void* y, int O, int NG, unsigned* flag,
                        cudaStream_t st) {
  const int* b = (const int*)blocks;
  switch (mode) {
    case 0: return launch<0>(b, x, y, O, NG, flag, st);
    case 1: return launch<1>(b, x, y, O, NG, flag, st);
    case 2: return launch<2>(b, x, y, O, NG, flag, st);
    case 3: return launch<3>(b, x, y, O, NG, flag, st);
    case 4: return launch<4>(b, x, y, O, NG, flag, st);
    case 5: return launch<5>(b, x, y, O, NG, flag, st);
  }
  return 2;
}
