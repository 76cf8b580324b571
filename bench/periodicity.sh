#!/usr/bin/env bash
# Issue 11: the same particles with 3, 2, 1 and 0 periodic axes. Runs `parki-dist run` on one
# generated set per periodicity (same kernel, box, count, seed, tolerance), prints the last of
# REPEAT evaluations (the first ones warm up), the plan time (kernel tables included), the grids
# and the ratio against 3P measured in this script (these machines are noisy: compare ratios).
# The parameters come from the cost model the runs resolve (`[ewald] cost_model = "auto"`: the
# file `parki-dist calibrate` wrote, when measured on this CPU, else the built-in constants);
# COST_MODEL=builtin or a path forces one. The last column says which was used.
#
#   KERNEL=stokes N=100000 TOL=1e-6 REPEAT=3 bash bench/periodicity.sh
#   parki-dist calibrate; COST_MODEL=builtin bash bench/periodicity.sh    # against the built-in
set -euo pipefail
cd "$(dirname "$0")/.."
KERNEL=${KERNEL:-stokes}
N=${N:-100000}
TOL=${TOL:-1e-6}
REPEAT=${REPEAT:-3}
DIST=${DIST:-uniform}
BIN=${BIN:-./target/release/parki-dist}
[ -x "$BIN" ] || cargo build --release -p parki-app
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
COST_MODEL=${COST_MODEL:-auto}
case "$COST_MODEL" in auto|builtin) ;; *) COST_MODEL=$(realpath "$COST_MODEL") ;; esac
printf "%-6s %-22s %10s %10s %10s %-16s %-16s %s\n" periodic kernel eval_s plan_s ratio grid padded cost_model
base=""
for per in "true, true, true" "true, true, false" "true, false, false" "false, false, false"; do
  tag=$(echo "$per" | sed 's/true/t/g; s/false/f/g; s/[ ,]//g')
  cat > "$work/$tag.toml" <<TOML
[problem]
kernel = "$KERNEL"
box = [1.0, 1.0, 1.0]
periodic = [$per]
tolerance = $TOL
[sources]
generate = { distribution = "$DIST", count = $N, seed = 3 }
[output]
report = "$tag.json"
[ewald]
cost_model = "$COST_MODEL"
[run]
repeat = $REPEAT
TOML
  "$BIN" run "$work/$tag.toml" > "$work/$tag.log" 2>&1
  read -r ev plan grid padded source < <(python3 - "$work/$tag.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timings"]
p = r["parameters"]
free = p.get("free_axes") or {}
print(r["total_seconds"], r["plan_seconds"], "x".join(map(str, p["grid"])), "x".join(map(str, free.get("padded_grid") or p["grid"])),
      r["cost_model"]["source"])
PY
)
  [ -z "$base" ] && base=$ev
  ratio=$(python3 -c "print(f'{$ev/$base:.2f}')")
  printf "%-6s %-22s %10.4f %10.3f %10s %-16s %-16s %s\n" "$tag" "$KERNEL tol $TOL" "$ev" "$plan" "$ratio" "$grid" "$padded" "$source"
done
