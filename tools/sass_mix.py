#!/usr/bin/env python3
"""The instruction mix of a kernel's innermost loop in the machine code (SASS) NVRTC makes.

A static look at a CUDA kernel without a GPU: what one trip of the hot loop issues, how much of
it the FP64 (or FP32) pipe executes, and the registers per thread that bound the occupancy.
Used for P2P (docs/performance.md §8.11): with 16 FP64 lanes per scheduler on a GH100 (H100,
H200) a warp's DFMA holds the FP64 pipe two cycles, and a scheduler issues one instruction per
cycle, so a loop trip takes at least max(issue slots, 2 x FP64 instructions) cycles per warp.

The loop is the innermost backward branch with the most FMAs; its fast path leaves out the
short regions a predicated forward branch skips that hold a CALL (the slow paths of division
and square roots) or the exponential's overflow fix-up (`+INF`).

Usage:
    cargo test --release -p parki-gpu --features cuda --test nvrtc   # the CUBIN, into the cache
    python3 tools/sass_mix.py [--cubin FILE] [--cuobjdump PATH] [--nominal FLOPS] FUNCTION...

--cubin defaults to the newest ~/.cache/parki/kernels/parki-sm_90-*.cubin (the kernel cache of
crates/gpu/src/cuda.rs). cuobjdump comes from PyPI's nvidia-cuda-cuobjdump wheel
(`pip download --no-deps nvidia-cuda-cuobjdump`, unzip: nvidia/cu13/bin/cuobjdump) or a CUDA
toolkit. --nominal: the flops one pair counts (P2pFlops::per_pair, FMA = 2); then the ceiling
of the FP64 (FP32) rate against the FMA peak, nominal / max(issue, 2 x FP64) per pair. The
pairs per loop trip (the compiler may unroll) are counted by the trip's reciprocal square
roots (`MUFU.RSQ*`, one per pair in P2P).
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

FP64 = ("DFMA", "DMUL", "DADD", "DSETP", "DMNMX")
FP32 = ("FFMA", "FMUL", "FADD", "FSETP", "FMNMX")


def sass(cuobjdump, cubin, function):
    text = subprocess.run([cuobjdump, "-sass", "-fun", function, cubin], check=True, capture_output=True,
                          text=True).stdout
    out = []
    for line in text.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2).strip()))
    if not out:
        sys.exit(f"no SASS for {function} in {cubin}")
    return out


def registers(cuobjdump, cubin):
    text = subprocess.run([cuobjdump, "-res-usage", cubin], check=True, capture_output=True, text=True).stdout
    regs, name = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"REG:(\d+)", line)
        if m and name:
            regs[name] = int(m.group(1))
    return regs


def target(ins):
    m = re.search(r"BRA (0x[0-9a-f]+)", ins)
    return int(m.group(1), 16) if m else None


def innermost_loop(code):
    index = {a: i for i, (a, _) in enumerate(code)}
    best = None
    for i, (a, t) in enumerate(code):
        to = target(t)
        if to is None or to >= a or to not in index:
            continue
        j = index[to]
        body = code[j:i + 1]
        nested = any((target(x) is not None and target(x) < b and to <= target(x)) for b, x in body[:-1])
        fmas = sum(("DFMA" in x or "FFMA" in x) for _, x in body)
        if not nested and (best is None or fmas > best[0]):
            best = (fmas, body)
    if best is None:
        sys.exit("no loop found")
    return best[1]


def fast_path(body):
    skip = set()
    end = body[-1][0]
    for a, t in body:
        if not re.match(r"@!?P\d BRA ", t):
            continue
        to = target(t)
        if to <= a or to > end:
            continue
        region = [(b, x) for b, x in body if a < b < to]
        nested = any(re.match(r"@!?P\d BRA ", x) for _, x in region)
        slow = any("CALL" in x for _, x in region) or any("+INF" in x for _, x in region)
        if not nested and len(region) <= 20 and slow:
            skip.update(b for b, _ in region)
    return [(a, t) for a, t in body if a not in skip and not t.startswith("CALL")]


def opcode(t):
    op = t.split()[1] if t.startswith("@") else t.split()[0]
    return op if op.startswith("MUFU") else op.split(".")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("functions", nargs="+")
    ap.add_argument("--cubin")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    ap.add_argument("--nominal", type=float, help="nominal flops per loop trip (FMA = 2)")
    a = ap.parse_args()
    cubin = a.cubin
    if cubin is None:
        found = glob.glob(os.path.expanduser("~/.cache/parki/kernels/parki-sm_90-*.cubin"))
        if not found:
            sys.exit("no CUBIN in ~/.cache/parki/kernels: run the nvrtc test with --features cuda, or pass --cubin")
        cubin = max(found, key=os.path.getmtime)
    regs = registers(a.cuobjdump, cubin)
    print(f"# {cubin}")
    for f in a.functions:
        body = innermost_loop(sass(a.cuobjdump, cubin, f))
        fast = fast_path(body)
        c = collections.Counter(opcode(t) for _, t in fast)
        fp64 = sum(c[k] for k in FP64)
        fp32 = sum(c[k] for k in FP32)
        # the compiler may unroll the pair loop: one reciprocal square root per pair
        pairs = max(1, sum(v for k, v in c.items() if k.startswith("MUFU.RSQ")))
        pipe = 2 * fp64 if fp64 else fp32  # FP32: 32 lanes per scheduler, one cycle a warp
        cycles = max(len(fast), pipe)
        line = (f"{f}: {regs.get(f, '?')} registers; loop {body[0][0]:#x}..{body[-1][0]:#x}, {pairs} pair(s) "
                f"per trip; per pair: {len(fast) / pairs:g} issue slots, FP64 {fp64 / pairs:g} (DFMA "
                f"{c['DFMA'] / pairs:g}), FP32 {fp32 / pairs:g}, loads {(c['LDG'] + c['LDS']) / pairs:g}, uniform "
                f"moves {c['UMOV'] / pairs:g}, local (spills) {c['LDL'] + c['STL']}; >= {cycles / pairs:g} cycles "
                f"per warp ({'issue' if len(fast) >= pipe else 'FP pipe'}-bound)")
        if a.nominal:
            line += f"; ceiling {a.nominal * pairs / cycles:.0%} of the FMA peak"
        print(line)
        print("    " + ", ".join(f"{k} {v}" for k, v in c.most_common()))


if __name__ == "__main__":
    main()
