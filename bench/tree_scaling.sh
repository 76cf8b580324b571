#!/usr/bin/env bash
# Strong scaling of the distributed treecode: the same problem on 1, 2, 3 and 4 MPI ranks (one
# thread each), with the LET's share of the time and its bytes, and one rank on as many
# threads as the largest run has ranks for comparison (same cores, no MPI).
#
#   bash bench/tree_scaling.sh [N] [extra parki-bench-tree flags]
#
# Defaults: N = 1e6, Coulomb, uniform cube, degree 8, theta 0.7, leaves of 2000 (the paper's
# setting). Ranks beyond the machine's cores are oversubscribed: their times measure
# correctness and traffic, not speed. Prints the bench's table rows and json lines.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release -q -p parki-bench --bin parki-bench-tree
bin=target/release/parki-bench-tree
args=(--n "$n" --degree 8 --theta 0.7 --leaf 2000 --threads 1 --sample 1000 "$@")
cores=$(nproc)
for ranks in 1 2 3 4; do
  note=""
  [ "$ranks" -gt "$cores" ] && note=" (oversubscribed: $ranks ranks on $cores cores)"
  echo "# $ranks rank(s), 1 thread each$note"
  mpirun -n "$ranks" --oversubscribe "$bin" "${args[@]}" | grep -v '^#'
done
echo "# 1 rank, $cores threads (the same cores without MPI)"
"$bin" --n "$n" --degree 8 --theta 0.7 --leaf 2000 --threads "$cores" --sample 1000 "$@" | grep -v '^#'
