#!/usr/bin/env bash
# Strong scaling of the distributed FMM: the same problem on 1, 2, 3 and 4 MPI ranks (one
# thread each), with the LET's bytes, and one rank on as many threads as the machine has cores
# (same cores, no MPI), for comparison.
#
#   bash bench/fmm_scaling.sh [N] [extra parki-bench-fmm flags]
#
# Defaults: N = 1e6, Laplace with the gradient, uniform cube, the order of tolerance 1e-6 and the
# cost model's leaf. Ranks beyond the machine's cores are oversubscribed: their times measure
# correctness and traffic, not speed. Prints the bench's table rows and json lines.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release -q -p parki-bench --bin parki-bench-fmm
bin=target/release/parki-bench-fmm
args=(--n "$n" --tolerance 1e-6 --sample 1000 "$@")
cores=$(nproc)
for ranks in 1 2 3 4; do
  note=""
  [ "$ranks" -gt "$cores" ] && note=" (oversubscribed: $ranks ranks on $cores cores)"
  echo "# $ranks rank(s), 1 thread each$note"
  mpirun -n "$ranks" --oversubscribe "$bin" "${args[@]}" --threads 1 | grep -v '^#'
done
echo "# 1 rank, $cores threads (the same cores without MPI)"
"$bin" "${args[@]}" --threads "$cores" | grep -v '^#'
