#!/usr/bin/env bash
# Issue 11: the same particles with 3, 2, 1 and 0 periodic axes. Runs `parki-dist run` on one
# generated set per periodicity (same kernel, box, count, seed, tolerance) and prints, per
# periodicity, the evaluation time (the fastest of REPEAT evaluations, the report's
# `evaluations.min_seconds`: the first one warms up, and on a noisy machine the fastest is the
# steadiest figure), the median evaluation, the plan time (kernel tables included), the grids,
# and two ratios against 3P measured in this script (these machines are noisy: compare ratios):
#   ratio      the fastest evaluation over 3P's: a time-stepping code's cost per step;
#   med_ratio  the same with the median evaluations;
#   run_ratio  plan + REPEAT evaluations over 3P's: the whole run, plan included.
# ROUNDS > 1 runs the four periodicities in turn ROUNDS times (alternating, so that a slow spell
# of the machine hits every periodicity) and keeps each one's fastest evaluation, median and
# run.
# The parameters come from the cost model the runs resolve (`[ewald] cost_model = "auto"`: the
# file `parki-dist calibrate` wrote, when measured on this CPU, else the built-in constants);
# COST_MODEL=builtin or a path forces one; the last column says which was used. The cost model
# prices the plan over REPEAT evaluations (`EwaldOptions::evaluations`), so REPEAT also changes
# the parameters chosen: few evaluations favour coarser grids, whose tables are cheaper.
# FFT_PLAN=measure plans the transforms with FFTW_MEASURE, FFT_PLAN=measure-lines only the y and
# z passes' blocks (`[ewald] fft_plan`); FFT_LINES=fftw runs the strided passes' complex lines on
# FFTW's plans instead of RustFFT's (`[ewald] fft_lines`); NEAR_CUTOFF=cells makes P2P sum every
# pair of the colleague cells (default sphere, `[ewald] near_cutoff`); KEEP=1 keeps the run.toml files and
# reports (the folder is printed on stderr). WISDOM sets `[run] fftw_wisdom` ("auto" by default:
# runs import this CPU's saved FFTW wisdom, and measured runs save theirs, so that later
# estimated runs plan the measured transforms; "off" plans without; or a folder); the `wisdom`
# column says whether a run imported any.
#
#   KERNEL=stokes N=100000 TOL=1e-6 REPEAT=3 bash bench/periodicity.sh
#   KERNEL=laplace TOL=1e-9 REPEAT=10 ROUNDS=3 bash bench/periodicity.sh
#   parki-dist calibrate; COST_MODEL=builtin bash bench/periodicity.sh    # against the built-in
set -euo pipefail
cd "$(dirname "$0")/.."
KERNEL=${KERNEL:-stokes}
N=${N:-100000}
TOL=${TOL:-1e-6}
REPEAT=${REPEAT:-3}
ROUNDS=${ROUNDS:-1}
DIST=${DIST:-uniform}
BIN=${BIN:-./target/release/parki-dist}
[ -x "$BIN" ] || cargo build --release -p parki-app
work=$(mktemp -d)
if [ -n "${KEEP:-}" ]; then echo "run files and reports kept in $work" >&2; else trap 'rm -rf "$work"' EXIT; fi
COST_MODEL=${COST_MODEL:-auto}
FFT_PLAN=${FFT_PLAN:-estimate}
FFT_LINES=${FFT_LINES:-rustfft}
NEAR_CUTOFF=${NEAR_CUTOFF:-sphere}
WISDOM=${WISDOM:-auto}
case "$WISDOM" in auto|off) ;; *) WISDOM=$(realpath -m "$WISDOM") ;; esac
case "$COST_MODEL" in auto|builtin) ;; *) COST_MODEL=$(realpath "$COST_MODEL") ;; esac
tags=()
for per in "true, true, true" "true, true, false" "true, false, false" "false, false, false"; do
  tag=$(echo "$per" | sed 's/true/t/g; s/false/f/g; s/[ ,]//g')
  tags+=("$tag")
  cat > "$work/$tag.toml" <<TOML
[problem]
kernel = "$KERNEL"
box = [1.0, 1.0, 1.0]
periodic = [$per]
tolerance = $TOL
[sources]
generate = { distribution = "$DIST", count = $N, seed = 3 }
[ewald]
cost_model = "$COST_MODEL"
fft_plan = "$FFT_PLAN"
fft_lines = "$FFT_LINES"
near_cutoff = "$NEAR_CUTOFF"
[run]
repeat = $REPEAT
fftw_wisdom = "$WISDOM"
TOML
done
for round in $(seq 1 "$ROUNDS"); do
  for tag in "${tags[@]}"; do
    sed "/^\[ewald\]/i [output]\nreport = \"$tag.$round.json\"" "$work/$tag.toml" > "$work/$tag.$round.toml"
    "$BIN" run "$work/$tag.$round.toml" > "$work/$tag.$round.log" 2>&1 \
      || { echo "parki-dist run failed ($tag, round $round):"; tail -5 "$work/$tag.$round.log"; exit 1; }
  done
done
python3 - "$work" "$ROUNDS" "$REPEAT" "$KERNEL tol $TOL" "${tags[@]}" <<'PY'
import json, sys
work, rounds, repeat, label, tags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
print(f"{'periodic':<8} {'kernel':<22} {'eval_s':>8} {'median_s':>8} {'plan_s':>8} {'ratio':>6} {'med_ratio':>9} {'run_ratio':>9} {'grid':<16} {'padded':<16} {'cost_model':<11} wisdom")
base, differ = None, False
def wisdom(reps):
    w = [r.get("fftw_wisdom") or {} for r in reps]
    if all(x.get("file") is None for x in w):
        return "off"
    got = sum(isinstance(x.get("loaded"), dict) and "imported_bytes" in x["loaded"] for x in w)
    return "imported" if got == len(w) else ("none" if got == 0 else f"imported {got}/{len(w)}")
for tag in tags:
    reps = [json.load(open(f"{work}/{tag}.{r}.json")) for r in range(1, rounds + 1)]
    evals = [r.get("evaluations") or {"min_seconds": r["total_seconds"], "median_seconds": r["total_seconds"],
                                      "seconds": [r["total_seconds"]] * repeat} for r in reps]
    ev = min(e["min_seconds"] for e in evals)
    med = min(e["median_seconds"] for e in evals)
    plan = min(r["plan_seconds"] for r in reps)
    run = min(r["plan_seconds"] + sum(e["seconds"]) for r, e in zip(reps, evals))
    p = reps[0]["parameters"]
    grids = {tuple(r["parameters"]["grid"]) for r in reps}
    free = p.get("free_axes") or {}
    base = base or (ev, med, run)
    differ = differ or len(grids) > 1
    grid = "x".join(map(str, p["grid"])) + ("" if len(grids) == 1 else "*")
    padded = "x".join(map(str, free.get("padded_grid") or p["grid"]))
    print(f"{tag:<8} {label:<22} {ev:8.4f} {med:8.4f} {plan:8.3f} {ev / base[0]:6.2f} {med / base[1]:9.2f} {run / base[2]:9.2f} {grid:<16} {padded:<16} {reps[0]['cost_model']['source']:<11} {wisdom(reps)}")
if differ:
    print("* the rounds chose different grids (the occupancy and the cost model are measured per run); the first round's is shown")
PY
