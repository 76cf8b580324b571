#!/usr/bin/env bash
# A weak or strong scaling study on one machine (or an allocation mpirun sees) with mpirun:
# writes one run.toml per rank count, runs each with `mpirun -n R parki-dist run`, collects the
# JSON reports into one CSV and plots the per-stage times against the rank count.
#
#   MODE=weak   RANKS="1 2 4" PARTICLES=200000  bash launch/mpirun.sh runs/weak
#   MODE=strong RANKS="1 2 4" PARTICLES=1000000 bash launch/mpirun.sh runs/strong
#
# Other settings (environment): KERNEL (stokeslet), TOL (1e-8), THREADS (threads per rank, 1),
# DECOMPOSITION (auto), BACKEND (alltoallv), REPEAT (2), CHECK (0), GROW (cube), RC (unset),
# MPIRUN_FLAGS (--oversubscribe --bind-to none), PARKI (./target/release/parki-dist).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash launch/mpirun.sh OUTPUT_FOLDER}
MODE=${MODE:-weak}
RANKS=${RANKS:-"1 2 4"}
PARTICLES=${PARTICLES:-200000}
KERNEL=${KERNEL:-stokeslet}
TOL=${TOL:-1e-8}
THREADS=${THREADS:-1}
DECOMPOSITION=${DECOMPOSITION:-auto}
BACKEND=${BACKEND:-alltoallv}
REPEAT=${REPEAT:-2}
CHECK=${CHECK:-0}
GROW=${GROW:-cube}
RC=${RC:-}
MPIRUN_FLAGS=${MPIRUN_FLAGS:-"--oversubscribe --bind-to none"}
PARKI=${PARKI:-./target/release/parki-dist}
[ -x "$PARKI" ] || cargo build --release -p parki-app
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

python3 launch/scaling.py make --mode "$MODE" --ranks "$(echo $RANKS | tr ' ' ,)" --particles "$PARTICLES" \
  --kernel "$KERNEL" --tol "$TOL" --decomposition "$DECOMPOSITION" --backend "$BACKEND" --repeat "$REPEAT" \
  --check "$CHECK" --grow "$GROW" ${RC:+--rc "$RC"} --out "$OUT" >/dev/null
for r in $RANKS; do
  dir="$OUT/$(printf 'R%04d' "$r")"
  echo "== $MODE scaling: $r rank(s), $dir"
  # shellcheck disable=SC2086
  mpirun -n "$r" $MPIRUN_FLAGS "$PARKI" run "$dir/run.toml" --threads "$THREADS" --quiet | tee "$dir/table.txt"
done
python3 launch/scaling.py collect "$OUT" --csv "$OUT/scaling.csv"
if python3 -c "import matplotlib" 2>/dev/null; then
  python3 launch/scaling.py plot "$OUT/scaling.csv" --png "$OUT/scaling.png" --cores "$(nproc)"
else
  echo "matplotlib not found (pip install matplotlib): no plot"
fi
