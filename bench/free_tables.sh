#!/usr/bin/env bash
# Issue 11: the free-space (0P) kernel tables made by the ranks together (per-axis operators,
# crates/farfield/src/free_split.rs) against every rank transforming the whole upsampled grid
# (the construction before), both in the same process (`parki-bench-dist tables`), at 1, 2 and 4
# ranks (one rank with THREADS threads, the others one thread each, oversubscribed where the
# machine has fewer cores), then each alone for its peak memory per rank.
#
#   bash bench/free_tables.sh                                   # Stokeslet, grid 180, P 8
#   CASE="--grid 336 --kernel laplace --xi 139.712727 --p 10 --tol 3e-7" bash bench/free_tables.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CASE=${CASE:-"--grid 180 --kernel stokeslet --xi 67.93 --p 8 --tol 1e-6"}
RANKS=${RANKS:-"1 2 4"}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
BIN=./target/release/parki-bench-dist
[ -x "$BIN" ] || cargo build --release -p parki-bench
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
run() {
  local n=$1
  shift
  if [ "$n" = 1 ]; then
    "$BIN" tables $CASE --threads "$THREADS" "$@"
  else
    mpirun -n "$n" --oversubscribe "$BIN" tables $CASE --threads 1 "$@"
  fi
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for n in $RANKS; do
  run "$n" --reps "$REPS"
  for only in split whole; do
    echo "$only alone, $n rank(s): $(run "$n" --reps 1 --only "$only" | tail -1)"
  done
done
