#!/usr/bin/env bash
# The Poisson solver against FLUPS, in one script, alternating the two codes ROUNDS times and
# keeping the best of the rounds (these machines are noisy). FLUPS is built from source outside
# this repository (github.com/vortexlab-uclouvain/flups, a2a variant) with a small driver that
# times flups_solve after one warm-up solve and prints one JSON line; point FLUPS_DRIVER at it.
#
#   FLUPS_DRIVER=/work/scratch/flups/driver_estimate SIZES="64 128" RANKS="1 2" ROUNDS=2 \
#     bash bench/poisson_vs_flups.sh [out.md]
#
# PLAN (estimate | measure) is parki-dist's run.fft_plan; FLUPS fixes its FFTW flag at compile
# time, so give the driver built with the matching flag: FFTW_ESTIMATE with PLAN=estimate, and
# FLUPS's production default (FFTW_PATIENT) against PLAN=measure (each code's tuned planner).
# R2R (fft | fftw) is parki-dist's run.r2r: DCT/DST-II, III, IV through FFTs (the default) or
# FFTW's r2r as FLUPS computes them.
#
# Both codes: CHAT2, cell-centred unit cube, 1 thread per rank, the
# same right-hand side family (a compact blob along unbounded axes, sines/cosines elsewhere),
# solve time = min over REPEAT solves of the slowest rank's time (both codes), copy in and out
# included in both. Cases: unb (all sides unbounded), ppu
# (periodic x, y; unbounded z), even (all sides even). Memory: both codes' heap growth over their
# setup (glibc mallinfo2: live arena and mmapped bytes), per unknown, summed over ranks; ours
# also as the plan's own count of its buffers.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
FLUPS_DRIVER=${FLUPS_DRIVER:?set FLUPS_DRIVER to the FLUPS timing driver}
SIZES=${SIZES:-64 128}
RANKS=${RANKS:-1 2}
CASES=${CASES:-unb ppu even}
ROUNDS=${ROUNDS:-2}
REPEAT=${REPEAT:-5}
PLAN=${PLAN:-estimate}
R2R=${R2R:-fft}
out=${1:-/dev/stdout}
cargo build --release -q -p parki-app
tmp=$(mktemp -d)
bcs() {
  case $1 in
    unb) echo '[["unb", "unb"], ["unb", "unb"], ["unb", "unb"]]' ;;
    ppu) echo '[["per", "per"], ["per", "per"], ["unb", "unb"]]' ;;
    even) echo '[["even", "even"], ["even", "even"], ["even", "even"]]' ;;
  esac
}
for r in $(seq "$ROUNDS"); do
  for n in $SIZES; do
    for c in $CASES; do
      for np in $RANKS; do
        echo "round $r: $n $c $np ranks" >&2
        mpirun --oversubscribe -n "$np" "$FLUPS_DRIVER" "$n" "$c" chat2 "$REPEAT" 2>/dev/null \
          | grep '^{' >> "$tmp/flups.jsonl"
        cat > "$tmp/run.toml" <<TOML
[problem]
equation = "poisson"
box = [1.0, 1.0, 1.0]
grid = [$n, $n, $n]
bc = $(bcs "$c")
green = "chat2"
[input]
generate = { field = "blob" }
[run]
threads = 1
repeat = $REPEAT
fft_plan = "$PLAN"
r2r = "$R2R"
TOML
        mpirun --oversubscribe -n "$np" ./target/release/parki-dist run "$tmp/run.toml" --quiet --json \
          | python3 -c "import json,sys; r=json.load(sys.stdin); print(json.dumps({'code':'parki','n':$n,'bc':'$c','ranks':$np,'solve':r['solve_best_seconds'],'plan':r['plan_seconds'],'bpu':r['memory']['bytes_per_unknown'],'heap':r['memory']['heap_bytes_per_unknown'],'err':r['error']['relative_max']}))" \
          >> "$tmp/parki.jsonl"
      done
    done
  done
done
python3 - "$tmp" "$(git rev-parse --short HEAD)" "$PLAN" "$FLUPS_DRIVER" "$R2R" > "$out" <<'PY'
import json, sys
tmp, head, plan, driver, r2r = sys.argv[1:6]
best = {}
for line in open(f"{tmp}/flups.jsonl"):
    d = json.loads(line); k = (d["n"], d["bc"], d["ranks"])
    v = best.setdefault(k, {})
    if "flups" not in v or d["solve_min_s"] < v["flups"]["solve_min_s"]:
        v["flups"] = d
for line in open(f"{tmp}/parki.jsonl"):
    d = json.loads(line); k = (d["n"], d["bc"], d["ranks"])
    v = best.setdefault(k, {})
    if "parki" not in v or d["solve"] < v["parki"]["solve"]:
        v["parki"] = d
print(f"parki-dist {head} (fft_plan = {plan}, r2r = {r2r}) against FLUPS ({driver}), CHAT2, 1 thread per rank, best of rounds\n")
print("| N | bc | ranks | FLUPS solve s | parki solve s | ratio parki/FLUPS | FLUPS err | parki err | FLUPS heap B/unknown | parki heap B/unknown | parki plan B/unknown |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for k in sorted(best):
    f, p = best[k].get("flups"), best[k].get("parki")
    if not f or not p:
        continue
    print(f"| {k[0]} | {k[1]} | {k[2]} | {f['solve_min_s']:.4f} | {p['solve']:.4f} | {p['solve']/f['solve_min_s']:.2f} | "
          f"{f['max_rel_error']:.2e} | {p['err']:.2e} | {f.get('heap_bytes_per_unknown', float('nan')):.0f} | "
          f"{p['heap'] if p['heap'] is not None else float('nan'):.0f} | {p['bpu']:.1f} |")
PY
rm -rf "$tmp"
