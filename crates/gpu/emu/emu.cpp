// The emulator's launcher: kernels/ compiled as C++ (see emu.h) and a table of its entry points
// by name, called through `parki_emu_launch` with the same `void** args` as cuLaunchKernel.
#include "emu.h"

#include <ucontext.h>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace parki_emu {
thread_local dim3 tid;
thread_local dim3 bid;
dim3 bdim;
dim3 gdim;
// A block of a kernel with barriers runs its threads as fibers on this OS thread: the
// scheduler resumes every live fiber in turn, each runs to its next __syncthreads (or its end)
// and swaps back, so no fiber passes barrier k before every fiber has reached it.
static ucontext_t scheduler;
static std::vector<ucontext_t> fibers;
static std::vector<std::vector<char>> stacks;
static std::vector<int> finished;
static int current = -1;
static void* current_shared = nullptr;
void barrier() {
  if (current < 0) {
    std::fprintf(stderr, "parki emulator: __syncthreads in a kernel registered without barriers\n");
    std::abort();
  }
  swapcontext(&fibers[current], &scheduler);
}
void* dynamic_shared() { return current_shared; }
}  // namespace parki_emu

#include "kernels.inc"

namespace {
using Launcher = void (*)(void**);

template <auto F, typename... A, std::size_t... I>
void call_impl(void (*)(A...), void** args, std::index_sequence<I...>) {
  F(*static_cast<std::remove_reference_t<A>*>(args[I])...);
}
template <auto F, typename... A>
void call_with(void (*f)(A...), void** args) {
  call_impl<F>(f, args, std::index_sequence_for<A...>{});
}
template <auto F>
void launcher(void** args) {
  call_with<F>(F, args);
}

struct Entry {
  Launcher run;
  bool barrier;
};

const Entry* fiber_entry = nullptr;
void** fiber_args = nullptr;

void fiber_main(int t) {
  fiber_entry->run(fiber_args);
  parki_emu::finished[t] = 1;
}

// One block of a kernel with barriers, its threads as fibers (see parki_emu::barrier). Kept
// out of the launch loop: swapcontext returns twice, which may clobber the caller's locals.
__attribute__((noinline)) void run_fibers(const Entry& e, void** args, const unsigned* b, dim3 block) {
  using namespace parki_emu;
  const unsigned nthreads = b[0] * b[1] * b[2];
  constexpr std::size_t stack_bytes = 256 * 1024;
  fibers.assign(nthreads, ucontext_t{});
  if (stacks.size() < nthreads) stacks.resize(nthreads);
  finished.assign(nthreads, 0);
  fiber_entry = &e;
  fiber_args = args;
  bid = block;
  for (unsigned t = 0; t < nthreads; ++t) {
    if (stacks[t].size() < stack_bytes) stacks[t].resize(stack_bytes);
    getcontext(&fibers[t]);
    fibers[t].uc_stack.ss_sp = stacks[t].data();
    fibers[t].uc_stack.ss_size = stack_bytes;
    fibers[t].uc_link = &scheduler;
    makecontext(&fibers[t], reinterpret_cast<void (*)()>(&fiber_main), 1, (int)t);
  }
  for (;;) {
    bool live = false;
    for (unsigned t = 0; t < nthreads; ++t) {
      if (finished[t]) continue;
      live = true;
      current = (int)t;
      tid = dim3{t % b[0], (t / b[0]) % b[1], t / (b[0] * b[1])};
      swapcontext(&scheduler, &fibers[t]);
    }
    if (!live) break;
  }
  current = -1;
}

const std::unordered_map<std::string, Entry>& table() {
  static const std::unordered_map<std::string, Entry> t = {
#define PARKI_REGISTER(name, label, uses_barrier) {label, Entry{&launcher<&name>, uses_barrier}},
#include "registry.inc"
#undef PARKI_REGISTER
  };
  return t;
}
}  // namespace

extern "C" int parki_emu_has(const char* name) { return table().count(name) ? 1 : 0; }

// Runs kernel `name` on a grid of g blocks of b threads with `shared` bytes of dynamic shared
// memory; `args` as for cuLaunchKernel. Returns 0, or 1 if the kernel is unknown.
extern "C" int parki_emu_launch(const char* name, const unsigned* g, const unsigned* b, unsigned shared,
                                void** args) {
  auto it = table().find(name);
  if (it == table().end()) return 1;
  // one launch at a time in the process: the grid and block sizes, the dynamic shared memory
  // and the fibers are process-wide, as the device's state is
  static std::mutex launch_lock;
  std::lock_guard<std::mutex> guard(launch_lock);
  const Entry& e = it->second;
  using parki_emu::bdim;
  using parki_emu::gdim;
  gdim = dim3{g[0], g[1], g[2]};
  bdim = dim3{b[0], b[1], b[2]};
  std::vector<unsigned char> smem(shared + 16, 0);
  parki_emu::current_shared = smem.data();
  const unsigned nthreads = b[0] * b[1] * b[2];
  for (unsigned bz = 0; bz < g[2]; ++bz)
    for (unsigned by = 0; by < g[1]; ++by)
      for (unsigned bx = 0; bx < g[0]; ++bx) {
        dim3 block{bx, by, bz};
        if (!e.barrier) {
          parki_emu::bid = block;
          for (unsigned tz = 0; tz < b[2]; ++tz)
            for (unsigned ty = 0; ty < b[1]; ++ty)
              for (unsigned tx = 0; tx < b[0]; ++tx) {
                parki_emu::tid = dim3{tx, ty, tz};
                e.run(args);
              }
        } else {
          run_fibers(e, args, b, block);
        }
      }
  parki_emu::current_shared = nullptr;
  return 0;
}
