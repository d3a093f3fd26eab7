// The read floor of the W4A16 GEMV's weight words on Hopper (benchmarks/probes/quant_read_floor.py): plain
// 16-byte loads against bulk copies (cp.async.bulk, the TMA's 1-D form) into a ring of shared-memory stages.
#include <cstdint>
#include <cuda_runtime.h>

__device__ __forceinline__ uint4 ldg16(const uint4* p, int ef, uint64_t pol) {
  uint4 v;
  if (ef)
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
  else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ uint64_t policy_first() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// each block reads a contiguous range of the words, U loads in flight per thread
template <int U>
__global__ void ldg_read(const uint4* __restrict__ p, long n16, unsigned* out, int ef) {
  uint64_t pol = policy_first();
  long t0 = blockIdx.x * n16 / gridDim.x, t1 = (blockIdx.x + 1) * n16 / gridDim.x;
  uint4 acc = {0, 0, 0, 0};
  long i = t0 + threadIdx.x;
  for (; i + (U - 1) * (long)blockDim.x < t1; i += U * (long)blockDim.x) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = ldg16(p + i + u * blockDim.x, ef, pol);
#pragma unroll
    for (int u = 0; u < U; u++) { acc.x ^= v[u].x; acc.y ^= v[u].y; acc.z ^= v[u].z; acc.w ^= v[u].w; }
  }
  for (; i < t1; i += blockDim.x) { uint4 v = ldg16(p + i, ef, pol); acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w; }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9E3779B9u) out[0] = 1;
}

__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// each block streams its contiguous range of SB-byte tiles through S stages of shared memory;
// thread 0 issues the bulk copies, every thread reads the landed tile (16 bytes at a time)
template <int S, int SB>
__global__ void bulk_read(const char* __restrict__ p, long ntiles, unsigned* out, int ef) {
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) uint64_t full[S];
  uint64_t pol = policy_first();
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(&full[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  long t0 = blockIdx.x * ntiles / gridDim.x, t1 = (blockIdx.x + 1) * ntiles / gridDim.x;
  int n = (int)(t1 - t0);
  auto issue = [&](int s, long tile) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(&full[s])), "r"(SB) : "memory");
    if (ef)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                   :: "r"(sa(smem + s * SB)), "l"(p + tile * SB), "r"(SB), "r"(sa(&full[s])), "l"(pol) : "memory");
    else
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(sa(smem + s * SB)), "l"(p + tile * SB), "r"(SB), "r"(sa(&full[s])) : "memory");
  };
  if (threadIdx.x == 0)
    for (int s = 0; s < S && s < n; s++) issue(s, t0 + s);
  uint4 acc = {0, 0, 0, 0};
  for (int k = 0; k < n; k++) {
    int s = k % S;
    uint32_t par = (k / S) & 1, done = 0;
    while (!done)
      asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                   : "=r"(done) : "r"(sa(&full[s])), "r"(par) : "memory");
    const uint4* tile = reinterpret_cast<const uint4*>(smem + s * SB);
#pragma unroll 4
    for (int j = threadIdx.x; j < SB / 16; j += blockDim.x) { uint4 v = tile[j]; acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w; }
    __syncthreads();
    if (threadIdx.x == 0 && k + S < n) issue(s, t0 + k + S);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9E3779B9u) out[0] = 1;
}

__global__ void empty_kernel() {}

template <int S, int SB>
static int launch_bulk(const void* p, long nbytes, unsigned* out, int grid, int block, int ef, cudaStream_t st) {
  auto k = bulk_read<S, SB>;
  if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, S * SB) != cudaSuccess) return 1;
  k<<<grid, block, S * SB, st>>>((const char*)p, nbytes / SB, out, ef);
  return cudaGetLastError() != cudaSuccess;
}

extern "C" int run_ldg(int u, const void* p, long nbytes, unsigned* out, int grid, int block, int ef, cudaStream_t st) {
  long n16 = nbytes / 16;
  switch (u) {
    case 2: ldg_read<2><<<grid, block, 0, st>>>((const uint4*)p, n16, out, ef); break;
    case 4: ldg_read<4><<<grid, block, 0, st>>>((const uint4*)p, n16, out, ef); break;
    case 8: ldg_read<8><<<grid, block, 0, st>>>((const uint4*)p, n16, out, ef); break;
    default: return 2;
  }
  return cudaGetLastError() != cudaSuccess;
}

extern "C" int run_bulk(int s, int sb, const void* p, long nbytes, unsigned* out, int grid, int block, int ef,
                        cudaStream_t st) {
  if (s == 4 && sb == 8192) return launch_bulk<4, 8192>(p, nbytes, out, grid, block, ef, st);
  if (s == 8 && sb == 8192) return launch_bulk<8, 8192>(p, nbytes, out, grid, block, ef, st);
  if (s == 4 && sb == 16384) return launch_bulk<4, 16384>(p, nbytes, out, grid, block, ef, st);
  if (s == 6 && sb == 16384) return launch_bulk<6, 16384>(p, nbytes, out, grid, block, ef, st);
  if (s == 3 && sb == 32768) return launch_bulk<3, 32768>(p, nbytes, out, grid, block, ef, st);
  if (s == 2 && sb == 4096) return launch_bulk<2, 4096>(p, nbytes, out, grid, block, ef, st);
  if (s == 4 && sb == 4096) return launch_bulk<4, 4096>(p, nbytes, out, grid, block, ef, st);
  return 2;
}

extern "C" int run_empty(int grid, cudaStream_t st) {
  empty_kernel<<<grid, 64, 0, st>>>();
  return cudaGetLastError() != cudaSuccess;
}
