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
#
# On a lent GPU (bench/gpu.sh run, AUTO_BENCH=1): BACKEND=cuda writes `[run] backend = "cuda"`
# into every run.toml, so that `auto` prices on the device and each method runs there;
# BIN=<parki-dist> uses that binary (no build) and POINTS=python writes the particles with
# python3 alone (the same clouds and box rule as `parki-bench-fmm --write-points`, other
# random numbers; 1e6 points in about 10 s) instead of parki-bench-fmm.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
scratch=${SCRATCH:-/tmp/parki-auto}
points=${POINTS:-bench}
if [ -n "${BIN:-}" ]; then
  bin=$BIN
else
  cargo build --release -q -p parki-app
  bin=$PWD/target/release/parki-dist
fi
if [ "$points" = bench ]; then
  cargo build --release -q -p parki-bench --bin parki-bench-fmm
  bench=$PWD/target/release/parki-bench-fmm
fi

# python3's particles (no numpy needed): N points of the cloud moved to the box's corner,
# standard normal strengths, box.txt (the cube holding them)
write_python() {
  python3 - "$1" "$2" "$3" <<'PY'
import array, math, os, random, sys
d, n, cloud = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(7)
def point():
    if cloud == "uniform":
        return [rng.uniform(-1.0, 1.0) for _ in range(3)]
    if cloud == "plummer":
        u = rng.uniform(1e-12, 1.0)
        r = 1.0 / math.sqrt(u ** (-2.0 / 3.0) - 1.0)
        v = [rng.gauss(0.0, 1.0) for _ in range(3)]
        s = r / math.sqrt(sum(c * c for c in v))
        return [c * s for c in v]
    sys.exit(f"POINTS=python: no cloud {cloud} (uniform, plummer)")
x = [point() for _ in range(n)]
lo = [min(p[a] for p in x) for a in range(3)]
hi = [max(p[a] for p in x) for a in range(3)]
ext = max(hi[a] - lo[a] for a in range(3)) * (1.0 + 1e-6)
flat = array.array("d", (max(p[a] - lo[a], 0.0) + 1e-9 * ext for p in x for a in range(3)))
def save(name, shape, data):
    # .npy version 1.0: little-endian float64, C order
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{s}, " for s in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    if sys.byteorder != "little":
        data.byteswap()
    with open(os.path.join(d, name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        data.tofile(f)
os.makedirs(d, exist_ok=True)
save("x.npy", (n, 3), flat)
save("q.npy", (n,), array.array("d", (rng.gauss(0.0, 1.0) for _ in range(n))))
save("f.npy", (n, 3), array.array("d", (rng.gauss(0.0, 1.0) for _ in range(3 * n))))
l = ext * (1.0 + 1e-6)
open(os.path.join(d, "box.txt"), "w").write(f"[{l!r}, {l!r}, {l!r}]\n")
PY
}
cases=${CASES:-"uniform:100000:laplace:1e-6 plummer:100000:laplace:1e-6 uniform:1000000:laplace:1e-6 plummer:1000000:laplace:1e-6 uniform:100000:laplace:1e-3 uniform:100000:stokeslet:1e-6 plummer:100000:stokeslet:1e-6 uniform:100000:stresslet:1e-6 uniform:100000:laplace:1e-9"}
printf "%-9s %8s %-9s %6s | %-8s | %-17s %-17s %-17s | %s\n" cloud N kernel tol chosen "fmm est/meas" "treecode est/meas" "ewald est/meas" fastest
for c in $cases; do
  IFS=: read -r cloud n kernel tol <<< "$c"
  dir=$scratch/$cloud-$n
  if [ ! -f "$dir/x.npy" ]; then
    if [ "$points" = python ]; then
      write_python "$dir" "$n" "$cloud"
    else
      "$bench" --write-points "$dir" --n "$n" --cloud "$cloud" > /dev/null
    fi
  fi
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
    if [ -n "${BACKEND:-}" ]; then
      printf '\n[run]\nbackend = "%s"\n' "$BACKEND" >> "$dir/$m.toml"
    fi
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
