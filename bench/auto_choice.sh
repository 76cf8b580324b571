#!/usr/bin/env bash
# method = "auto" against the methods it chooses from: for each case (cloud, N, kernel,
# tolerance) the same particles (.npy files in a box) run with method = "auto", "fmm",
# "treecode" and "ewald" (free space), and the table shows each method's estimate (from the
# auto report) and its measured time, the choice, and whether it was the fastest of those
# measured. The time is the run's: its plan (the Ewald sum's kernel tables of the free axes)
# and REPEAT (default 1) evaluations, from each report (Ewald: plan_seconds + REPEAT x
# total_seconds; FMM and treecode: REPEAT x evaluation_seconds, the last evaluation's). A
# method estimated above SKIP (default 8) times the cheapest is not run.
#
#   bash bench/auto_choice.sh [THREADS]        # cases below; SCRATCH (default /tmp/parki-auto)
#   CASES="uniform:100000:laplace:1e-6 ..." REPEAT=10 SKIP=8
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
scratch=${SCRATCH:-/tmp/parki-auto}
cargo build --release -q -p parki-bench --bin parki-bench-fmm
cargo build --release -q -p parki-app
bench=$PWD/target/release/parki-bench-fmm
bin=$PWD/target/release/parki-dist
cases=${CASES:-"uniform:100000:laplace:1e-6 plummer:100000:laplace:1e-6 uniform:1000000:laplace:1e-6 plummer:1000000:laplace:1e-6 uniform:100000:laplace:1e-3 uniform:100000:stokeslet:1e-6 plummer:100000:stokeslet:1e-6 uniform:100000:stresslet:1e-6 uniform:100000:laplace:1e-9"}
printf "%-9s %8s %-9s %6s | %-8s | %-17s %-17s %-17s | %s\n" cloud N kernel tol chosen "fmm est/meas" "treecode est/meas" "ewald est/meas" fastest
for c in $cases; do
  IFS=: read -r cloud n kernel tol <<< "$c"
  dir=$scratch/$cloud-$n
  [ -f "$dir/x.npy" ] || "$bench" --write-points "$dir" --n "$n" --cloud "$cloud" > /dev/null
  box=$(cat "$dir/box.txt")
  case $kernel in
    laplace) strengths='charges = "q.npy"' ;;
    stokeslet) strengths='forces = "f.npy"' ;;
    stresslet) strengths='dipoles = "f.npy"
normals = "f.npy"' ;;
  esac
  for m in auto fmm treecode ewald; do
    cat > "$dir/$m.toml" <<TOML
[problem]
method = "$m"
kernel = "$kernel"
tolerance = $tol
box = $box
periodic = [false, false, false]

[sources]
positions = "x.npy"
$strengths

[output]
report = "$m.json"
TOML
    rm -f "$dir/$m.json"
  done
  repeat=${REPEAT:-1}
  "$bin" run "$dir/auto.toml" --quiet --threads "$threads" --repeat "$repeat" > /dev/null 2>&1 || true
  for m in fmm treecode ewald; do
    # a method estimated above SKIP (default 8) times the cheapest is not run (its row says so)
    run=$(python3 -c "
import json, sys
e = {x['method']: x['seconds'] for x in json.load(open('$dir/auto.json'))['auto']['estimates']}
print(int('$m' in e and e['$m'] <= ${SKIP:-8} * min(e.values())))" 2>/dev/null || echo 0)
    if [ "$run" = 1 ]; then
      "$bin" run "$dir/$m.toml" --quiet --threads "$threads" --repeat "$repeat" > /dev/null 2>&1 || true
    fi
  done
  python3 - "$dir" "$cloud" "$n" "$kernel" "$tol" "$repeat" <<'PY'
import json, os, sys
d, cloud, n, kernel, tol, repeat = sys.argv[1:]
repeat = int(repeat)
def load(m):
    p = os.path.join(d, m + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
auto = load("auto")
est = {e["method"]: e["seconds"] for e in auto["auto"]["estimates"]} if auto else {}
meas = {}
for m in ["fmm", "treecode", "ewald"]:
    r = load(m)
    if r:
        if m == "ewald":
            meas[m] = r["plan_seconds"] + repeat * r["total_seconds"]
        else:
            meas[m] = repeat * r["evaluation_seconds"]
cell = lambda m: (f"{est[m]:.3g}/" if m in est else "-/") + (f"{meas[m]:.3g}" if m in meas else "-")
fastest = min(meas, key=meas.get) if meas else "-"
chosen = auto["auto"]["chosen"] if auto else "-"
print(f"{cloud:<9} {n:>8} {kernel:<9} {tol:>6} | {chosen:<8} | {cell('fmm'):<17} {cell('treecode'):<17} {cell('ewald'):<17} | {fastest}{'' if chosen == fastest else '  (auto missed)'}")
print("json " + json.dumps({"cloud": cloud, "n": int(n), "kernel": kernel, "tol": float(tol), "repeat": repeat, "chosen": chosen, "estimates": est, "measured": meas}))
PY
done
