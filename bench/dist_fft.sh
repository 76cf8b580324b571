#!/usr/bin/env bash
# Distributed FFT benchmark (issue 3, acceptance 5): the r2c + c2r round trip of a 256^3 grid
# with 12 components at R = 1, 2, 4 ranks, ours with both switch backends against FFTW-MPI,
# all planned and timed in the same process. Results: one JSON line per R in $OUT.
#
#   bash bench/dist_fft.sh                    # 256^3 x 12, R = 1 2 4, 5 repetitions
#   GRID=128,128,128 RANKS="1 2" bash bench/dist_fft.sh
set -euo pipefail
cd "$(dirname "$0")/.."
GRID=${GRID:-256,256,256}
COMPS=${COMPS:-12}
RANKS=${RANKS:-"1 2 4"}
REPS=${REPS:-5}
OUT=${OUT:-bench/results/dist_fft.jsonl}
EXTRA=${EXTRA:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release -p parki-bench --bin parki-bench-dist
mkdir -p "$(dirname "$OUT")"
for r in $RANKS; do
  mpirun -n "$r" --oversubscribe --bind-to none ./target/release/parki-bench-dist fft \
    --grid "$GRID" --comps "$COMPS" --reps "$REPS" --json "$OUT" $EXTRA
done
echo "results appended to $OUT"
