#!/usr/bin/env bash
# BaryTree and parki-dist's treecode side by side, one script, the same points and charges:
# Coulomb, uniform cube [-1,1]^3, charges in [-1,1], degree 8, theta 0.7, leaves of 2000 (the
# BLDTT paper's setting), cluster-cluster, on 1 and 2 MPI ranks with one thread each.
#
#   bash bench/barytree_side_by_side.sh BARYTREE_SRC [N ...]      (default N: 100000 1000000)
#
# BARYTREE_SRC is a checkout of https://github.com/Treecodes/BaryTree (not part of this
# repository). It is built here in a scratch folder ($SCRATCH, default /tmp/barytree-side-by-side)
# with its CPU examples (CMake, MPI, OpenMP, Zoltan; Debian's Zoltan is libtrilinos_zoltan, so a
# libzoltan.so link in the scratch folder satisfies its `-lzoltan`). Nothing of BaryTree is
# committed.
#
# The points: BaryTree's example `random_cube_reproducible` draws, with srandom(1), the quadruples
# (x, y, z, q) of a uniform cube; rank r of P holds the r-th block of N/P. A 12-line C program
# (written below) draws the same quadruples into a binary file that parki-bench-tree reads with
# --points; each rank of parki-dist takes its block of rows the same way. Both partition with
# Zoltan's RCB. Times: BaryTree's "Treedriver" (max over ranks; it excludes Zoltan), ours the whole
# evaluation (max over ranks; includes our RCB and redistribution). Errors: each code's relative
# l2 error against its own direct sum on sampled targets (BaryTree: every `slice`-th target of
# each rank; ours: 1000 evenly spaced targets).
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: bash bench/barytree_side_by_side.sh BARYTREE_SRC [N ...]}
shift
sizes=${*:-100000 1000000}
scratch=${SCRATCH:-/tmp/barytree-side-by-side}
mkdir -p "$scratch/zlib" "$scratch/build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

if [ ! -x "$scratch/build/bin/random_cube_reproducible_cpu" ]; then
  command -v cmake >/dev/null || { echo "BaryTree's build needs cmake (apt-get install cmake)"; exit 1; }
  zl=$(ls /usr/lib/*/libtrilinos_zoltan.so 2>/dev/null | head -1)
  [ -n "$zl" ] && ln -sf "$zl" "$scratch/zlib/libzoltan.so"
  (cd "$scratch/build" && cmake "$(realpath "$src")" -DENABLE_GPU_BUILD=OFF -DBUILD_EXAMPLES=ON \
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXE_LINKER_FLAGS="-L$scratch/zlib -Wl,-rpath,$scratch/zlib" >cmake.log \
     && make -j"$(nproc)" random_cube_reproducible_cpu >make.log) || { echo "BaryTree build failed: $scratch/build"; exit 1; }
fi
cat > "$scratch/gen.c" <<'C'
/* The quadruples (x, y, z, q) BaryTree's random_cube_reproducible draws (UNIFORM), as f64 rows. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    FILE *f = fopen(argv[2], "wb");
    srandom(1);
    for (long i = 0; i < 4 * n; ++i) {
        double v = ((double)random() / (double)(RAND_MAX)) * 2. - 1.;
        fwrite(&v, sizeof v, 1, f);
    }
    return fclose(f);
}
C
cc -O2 -o "$scratch/gen" "$scratch/gen.c"
cargo build --release -q -p parki-bench --bin parki-bench-tree
bench=$(realpath target/release/parki-bench-tree)

printf '%-9s %-6s %-12s %-12s %-12s %-12s %-8s\n' N ranks BaryTree_s BaryTree_E parki_s parki_E speedup
for n in $sizes; do
  for ranks in 1 2; do
    per=$((n / ranks))
    total=$((per * ranks))
    "$scratch/gen" "$total" "$scratch/points.bin"
    slice=$((per / 1000 > 0 ? per / 1000 : 1))
    cat > "$scratch/params.in" <<P
num_sources           $per
num_targets           $per
degree                8
theta                 0.7
beta                  -1.0
size_check            1.0
max_per_source_leaf   2000
max_per_target_leaf   2000
kernel_name           coulomb
kernel_params         1.0
approximation         lagrange
compute_type          cluster-cluster
distribution          uniform
run_direct            1
slice                 $slice
verbosity             1
P
    # Open MPI 4.1's default one-sided component fails BaryTree's MPI_Win_create on one rank
    # ("MPI_ERR_WIN: invalid window"); without UCX's it runs (parki-dist makes no window on one rank)
    bt=$(cd "$scratch" && mpirun -n "$ranks" --oversubscribe --mca osc ^ucx build/bin/random_cube_reproducible_cpu params.in)
    bt_s=$(echo "$bt" | awk '/\|    \|\.\.\.\.Treedriver/ { print $6; exit }')
    bt_e=$(echo "$bt" | awk '/Relative 2 norm error in potential/ { print $NF; exit }')
    ours=$(mpirun -n "$ranks" --oversubscribe "$bench" --points "$scratch/points.bin" --degree 8 --theta 0.7 \
             --leaf 2000 --threads 1 --sample 1000 | grep '^json ')
    our_s=$(echo "$ours" | sed 's/.*"total_s": \([0-9.e+-]*\).*/\1/')
    our_e=$(echo "$ours" | sed 's/.*"error": \([0-9.e+-]*\).*/\1/')
    ratio=$(awk -v a="$bt_s" -v b="$our_s" 'BEGIN { printf "%.1fx", a / b }')
    printf '%-9s %-6s %-12s %-12s %-12.4f %-12s %-8s\n' "$total" "$ranks" "$bt_s" "$bt_e" "$our_s" "$our_e" "$ratio"
    echo "json {\"n\": $total, \"ranks\": $ranks, \"barytree_s\": $bt_s, \"barytree_error\": $bt_e, \"parki_s\": $our_s, \"parki_error\": $our_e}"
  done
done
