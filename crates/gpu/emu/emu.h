// Host emulation of the CUDA C subset used by kernels/ (test harness, not a backend).
//
// The kernels compile unchanged as C++: a launch runs the grid's blocks one after another; a
// kernel without barriers runs its block's threads in a loop, a kernel with `__syncthreads`
// runs them as fibers (ucontext) that each run to the next barrier in turn, so shared memory
// and barriers behave as on a device. `__shared__` variables are function statics (one block runs at a time), atomics are
// real atomics. Warp intrinsics are not emulated, and kernels/ does not use them.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace parki_emu {
extern thread_local dim3 tid;
extern thread_local dim3 bid;
extern dim3 bdim;
extern dim3 gdim;
void barrier();
void* dynamic_shared();
}  // namespace parki_emu

#define threadIdx parki_emu::tid
#define blockIdx parki_emu::bid
#define blockDim parki_emu::bdim
#define gridDim parki_emu::gdim
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __constant__ static const
#define __syncthreads() parki_emu::barrier()
#define PARKI_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(parki_emu::dynamic_shared())

inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline double __longlong_as_double(long long x) {
  double d;
  std::memcpy(&d, &x, sizeof d);
  return d;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

template <typename T>
inline T parki_emu_cas_add(T* p, T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4- or 8-byte atomics");
  using U = typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type;
  U* q = reinterpret_cast<U*>(p);
  U old = __atomic_load_n(q, __ATOMIC_RELAXED);
  for (;;) {
    T o;
    std::memcpy(&o, &old, sizeof(T));
    T n = o + v;
    U nb;
    std::memcpy(&nb, &n, sizeof(T));
    if (__atomic_compare_exchange_n(q, &old, nb, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return o;
  }
}
inline double atomicAdd(double* p, double v) { return parki_emu_cas_add(p, v); }
inline float atomicAdd(float* p, float v) { return parki_emu_cas_add(p, v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
  unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
