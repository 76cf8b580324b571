#!/usr/bin/env bash
# The Ewald sum on clustered particles: the parameters chosen with the measured occupancy of the
# cells ([ewald] occupancy = "measured", the default) against the uniform-density model alone
# ("uniform", the baseline), in the same script on the same particles.
#
#   bash bench/clustered.sh [N ...]         (default 100000)
#   env: SIGMAS="0.05 0.1 0.2 uniform"  KERNELS="laplace stokeslet"  PERIODIC=false|true
#        TOL=1e-6  THREADS=2  REPEAT=2  CHECK=400  SCRATCH=/tmp/parki-clustered
#
# Sets: normal clouds of width sigma about the centre of the unit box (folded into it), or
# uniform; random charges / forces summing to zero. Laplace with the field. Prints per run the
# last evaluation's seconds, the plan's, the chosen cells and grid, the measured errors against
# the direct sum (free space) or classical Ewald (periodic) on CHECK targets, and the speed-up.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="$here/target/release/parki-dist"
[ -x "$bin" ] || cargo build --release -p parki-app --manifest-path "$here/Cargo.toml"
sizes=("${@:-100000}")
SIGMAS=${SIGMAS:-"0.05 0.1 0.2 uniform"}
KERNELS=${KERNELS:-"laplace stokeslet"}
PERIODIC=${PERIODIC:-false}
TOL=${TOL:-1e-6}
THREADS=${THREADS:-2}
REPEAT=${REPEAT:-2}
CHECK=${CHECK:-400}
work=${SCRATCH:-/tmp/parki-clustered}
mkdir -p "$work"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $THREADS threads"
echo "| N | set | kernel | occupancy | R used | cells | grid | plan s | evaluation s | error | field error | speed-up |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for n in "${sizes[@]}"; do
  for sigma in $SIGMAS; do
    python3 - "$work" "$n" "$sigma" <<'EOF'
import sys
import numpy as np
work, n, sigma = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(7)
if sigma == "uniform":
    x = rng.random((n, 3))
else:
    x = np.mod(0.5 + float(sigma) * rng.standard_normal((n, 3)), 1.0)
q = rng.standard_normal(n)
q -= q.mean()
f = rng.standard_normal((n, 3))
f -= f.mean(axis=0)
np.save(f"{work}/x.npy", x)
np.save(f"{work}/q.npy", q)
np.save(f"{work}/f.npy", f)
EOF
    for kernel in $KERNELS; do
      if [ "$kernel" = laplace ]; then
        strengths='charges = "q.npy"'
        field='field = "e.npy"'
      else
        strengths='forces = "f.npy"'
        field=''
      fi
      base=""
      for occ in uniform measured; do
        cat > "$work/run.toml" <<EOF
[problem]
kernel = "$kernel"
box = [1.0, 1.0, 1.0]
periodic = [$PERIODIC, $PERIODIC, $PERIODIC]
tolerance = $TOL
[sources]
positions = "x.npy"
$strengths
[ewald]
occupancy = "$occ"
[output]
potential = "u.npy"
$field
report = "report.json"
[run]
repeat = $REPEAT
threads = $THREADS
check = $CHECK
EOF
        "$bin" run "$work/run.toml" --quiet > /dev/null
        row=$(python3 - "$work/report.json" "$base" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["parameters"]
t = r["total_seconds"]
c = r["check"]
fe = (c.get("field") or {}).get("relative_rms_error")
base = float(sys.argv[2]) if sys.argv[2] else None
speed = f"{base / t:.2f}x" if base else "1 (baseline)"
print(f"{p['cell_occupancy']:.1f} | {p['cells'][0]}^3 | {p['grid'][0]}^3 | {r['plan_seconds']:.2f} | {t:.3f} | "
      f"{c['relative_rms_error']:.2e} | {'' if fe is None else f'{fe:.2e}'} | {speed}|{t}")
EOF
)
        echo "| $n | $sigma | $kernel | $occ | ${row%|*} |"
        [ -n "$base" ] || base=${row##*|}
      done
    done
  done
done
