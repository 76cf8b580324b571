#!/usr/bin/env bash
# Issue 11: the cost of the Laplace field E = -grad u and its two far-field methods. For each
# periodicity runs `parki-dist run` on one generated set three times: the potential alone, the
# field with the window's derivative in G2P ("window") and with -i k in CNV ("spectral"); prints
# the last of REPEAT evaluations, the stages the methods change (FFT+IFFT, CNV, G2P) and the
# ratio against the potential alone measured in this script (these machines are noisy: compare
# ratios). With CHECK=K each run also checks K targets against the reference.
#
#   N=100000 TOL=1e-6 REPEAT=3 bash bench/field.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100000}
TOL=${TOL:-1e-6}
REPEAT=${REPEAT:-3}
CHECK=${CHECK:-0}
DIST=${DIST:-uniform}
PERIODIC=${PERIODIC:-"ttt tff fff"}
BIN=${BIN:-./target/release/parki-dist}
[ -x "$BIN" ] || cargo build --release -p parki-app
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf "%-4s %-9s %9s %7s %8s %8s %8s %8s %-12s %-10s %-10s\n" \
  per method eval_s ratio P2P fft+ifft CNV G2P grid err_u err_E
for tag in $PERIODIC; do
  per=$(echo "$tag" | sed 's/t/true, /g; s/f/false, /g; s/, $//')
  base=""
  for method in none window spectral; do
    out=""
    ewald=""
    if [ "$method" != none ]; then
      out="field = \"e.npy\""
      ewald="[ewald]
field_method = \"$method\""
    fi
    cat > "$work/$tag-$method.toml" <<TOML
[problem]
kernel = "laplace"
box = [1.0, 1.0, 1.0]
periodic = [$per]
tolerance = $TOL
[sources]
generate = { distribution = "$DIST", count = $N, seed = 3 }
[output]
report = "$tag-$method.json"
$out
$ewald
[run]
repeat = $REPEAT
check = $CHECK
TOML
    "$BIN" run "$work/$tag-$method.toml" > "$work/$tag-$method.log" 2>&1 || { cat "$work/$tag-$method.log"; exit 1; }
    read -r ev p2p fft cnv g2p grid eu ee < <(python3 - "$work/$tag-$method.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["timings"]
a = lambda s: t[s]["avg"]
c = r.get("check") or {}
f = c.get("field") or {}
eu = c.get("relative_rms_error", float("nan"))
ee = f.get("relative_rms_error", float("nan"))
print(r["total_seconds"], a("P2P"), a("FFT") + a("IFFT"), a("CNV"), a("G2P"), "x".join(map(str, r["parameters"]["grid"])), f"{eu:.2e}", f"{ee:.2e}")
PY
)
    [ -z "$base" ] && base=$ev
    ratio=$(python3 -c "print(f'{$ev/$base:.2f}')")
    printf "%-4s %-9s %9.4f %7s %8.4f %8.4f %8.4f %8.4f %-12s %-10s %-10s\n" \
      "$tag" "$method" "$ev" "$ratio" "$p2p" "$fft" "$cnv" "$g2p" "$grid" "$eu" "$ee"
  done
done
