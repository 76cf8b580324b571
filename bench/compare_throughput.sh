#!/usr/bin/env bash
# Throughput of whole evaluations, this tree against a baseline commit, in one script (these
# machines are noisy: the two binaries run alternately, ROUNDS times, best of the rounds kept).
#
#   BASE=8567f1a N=1000000 ROUNDS=2 bash bench/compare_throughput.sh [out.md]
#
# The baseline's parki-bench is built from a scratch worktree under target/ (not committed).
# Prints one row per kernel and tolerance: particles/s of the baseline and of this tree, and
# their ratio (this tree / baseline), plus the parameters each chose.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
BASE=${BASE:-8567f1a}
N=${N:-1000000}
TOLS=${TOLS:-1e-6,1e-9}
KERNELS=${KERNELS:-laplace,stokeslet,stresslet,stokes}
ROUNDS=${ROUNDS:-2}
EXTRA=${EXTRA:-}
out=${1:-/dev/stdout}
wt="target/baseline-$BASE"
if [ ! -d "$wt" ]; then
  git worktree add --detach "$wt" "$BASE" >/dev/null
fi
(cd "$wt" && cargo build --release -q -p parki-bench)
cargo build --release -q -p parki-bench
tmp=$(mktemp -d)
for r in $(seq "$ROUNDS"); do
  for who in base this; do
    bin=./target/release/parki-bench
    [ "$who" = base ] && bin="$wt/target/release/parki-bench"
    echo "round $r: $who" >&2
    # shellcheck disable=SC2086
    "$bin" throughput --n "$N" --tol "$TOLS" --kernel "$KERNELS" --direct-max-n 0 $EXTRA > "$tmp/$who.$r.md"
  done
done
python3 - "$tmp" "$ROUNDS" "$BASE" "$(git rev-parse --short HEAD)" "$N" > "$out" <<'PY'
import sys, glob
tmp, rounds, base, head, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def rows(who):
    best = {}
    for r in range(1, rounds + 1):
        for line in open(f"{tmp}/{who}.{r}.md"):
            c = [x.strip() for x in line.strip().strip('|').split('|')]
            if len(c) < 15 or c[0] in ('kernel',) or c[0].startswith('---'):
                continue
            key = (c[0], c[2])
            rate = float(c[11])
            if key not in best or rate > best[key][0]:
                best[key] = (rate, c[13], c[14], c[12])
    return best
b, t = rows('base'), rows('this')
print(f"Throughput, N = {n}, f64 unless stated, best of {rounds} alternating rounds: baseline {base} against {head}\n")
print("| kernel | tol | baseline particles/s | P, grid | this particles/s | P, grid | ratio |")
print("|---|---|---|---|---|---|---|")
for key in b:
    if key not in t:
        continue
    (rb, pb, gb, _), (rt, pt, gt, _) = b[key], t[key]
    print(f"| {key[0]} | {key[1]} | {rb:.3e} | {pb}, {gb} | {rt:.3e} | {pt}, {gt} | {rt / rb:.2f} |")
PY
rm -rf "$tmp"
