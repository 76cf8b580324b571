#!/usr/bin/env bash
# The CUDA backend on a lent GPU machine (H100/H200: 16 cores, a driver, no internet, no CUDA
# toolkit guaranteed), in two steps:
#
#   bash bench/gpu.sh prepare   # HERE: builds, fills target/gpu-carry/ (ignored, < 64 MiB:
#                               # packed, pack.tar.gz; `bash bench/gpu.sh unpack` unpacks it)
#   bash bench/gpu.sh run       # THERE (run tool, carry ["target/gpu-carry"]): device tests,
#                               # then the benchmarks; everything written under $OUT
#
# prepare builds without MPI (one GPU, one process; no Open MPI to carry) into its own target
# directory target/gpu-build/, so the workspace's target/release/ binaries keep their features.
# It carries: the parki-dist binary (when parki-app has a feature "cuda"), the parki-gpu test
# binaries (feature "cuda"; the emulator's only with EMULATOR_TESTS=1), and every shared
# library they link beyond the C/C++ runtime (FFTW; Zoltan, for the treecode's RCB, with the
# Open MPI libraries it links even in a build without the "mpi" feature), debug info stripped:
# 45 MiB with the working tree (session 20), 69 MiB at ba2fc24 (over the run tool's 64), so
# prepare packs it into pack.tar.gz (22 MiB) and run unpacks it in place (`unpack` alone too).
#
# CUDA's libraries: the binaries link none (cudarc opens libcuda, NVRTC and cuFFT at run time).
# The driver is on the machine. NVRTC (libnvrtc.so.13: 141 MB) and cuFFT (libcufft.so.12:
# 237 MB) do not fit the 64 MiB carry: prepare carries them only when they fit the budget
# (never, with CUDA 13's wheels), and run relies on the machine's own: the toolkit's
# /usr/local/cuda*/lib64, else the pip wheels of the machine's python3 (nvidia/cu13/lib; the
# image has nvidia-cuda-nvrtc and nvidia-cufft), named in PARKI_CUDA_LIBS for the preload of
# crates/gpu/src/cuda.rs. run prints which it found.
#
# Environment. prepare: GPU_MPI=1 (build with MPI and carry its libraries), CARRY_BUDGET_MB
# (default 60), DEVICE_NVRTC (a folder with the lent machine's NVRTC: the kernels compiled here
# for sm_90 and carried, see prepare). run: OUT (default bench/results/gpu-<date>); SIZES (default "1000000 4000000");
# KERNELS (default "stokes stokeslet"); PRECISIONS (default "f64 f32"); TOLS (f64, default
# "1e-6 1e-9"); F32_TOLS (default "1e-5 1e-3": the app refuses f32 below its round-off, about
# 5e-6 for the Stokeslet and 4e-4 for stokes here); REPEAT (default 3); CHECK (default 50);
# CASE_TIMEOUT (seconds, default 240); EMULATOR_TESTS (default 0: the host emulator's test
# binary, which CI runs, is neither carried by prepare nor run on device time); CPU_BASELINE (default 1: the same cases on the CPU at
# the sizes in BASELINE_SIZES, default "1000000"); TEST_FILTER (a test-name filter for the
# test binaries); TEST_TIMEOUT (seconds per test binary, default 300); TEST_BINARIES (e.g.
# "cuda_treecode cuda_accuracy": only these test binaries); GPU_BENCH (default 1:
# run parki-gpu-bench, options in BENCH_ARGS, limit BENCH_TIMEOUT seconds, default 540);
# APP_BENCH (default 1: the parki-dist cases below); TREE_BENCH (default 1: the treecode's
# cases, tree_cases: TREE_SIZES default "100000 1000000 10000000", TREE_KERNELS default "laplace
# stokeslet", TREE_BASELINE_SIZES for the CPU, TREE_CLOUD default uniform); FMM_BENCH (default
# 1: the FMM's cases, fmm_cases: FMM_SIZES, FMM_KERNELS, FMM_TOLS, FMM_BASELINE_SIZES, FMM_LEAF,
# FMM_CLOUD); MPI_CASES (default
# 0; 1: mpi_cases, 1 against MPI_RANKS ranks on the device, needs prepare with GPU_MPI=1; MPI_N
# default 200000); AUTO_BENCH (default 0; 1: auto_cases, `method = "auto"` priced and run on
# the device: AUTO_CASES, AUTO_REPEATS, AUTO_TIMEOUT). The device's cost constants:
# BENCH_ARGS="--modes calibrate --sizes 1e6 --kernels laplace,stokeslet,stresslet,stokes
# --precisions f64,f32 --reps 2" (see parki-gpu-bench's doc). P2P's erfc side by side:
# BENCH_ARGS="--modes peak,eval --sizes 1e6,4e6 --erfc fitted,library --cpu 0"; P2P's cut-off
# sphere against every pair of the cells: "--modes peak,eval --sizes 1e6,4e6 --near
# sphere,cells --cpu 0"; P2P on the side stream beside the far field against the stages in
# order: "--modes peak,eval --sizes 1e6,4e6 --tols 1e-9,1e-6 --precisions f64 --overlap
# none,p2p --cpu 0". Free space and
# the field: BENCH_ARGS="--modes eval --periodic none --kernels laplace,stokeslet --field
# window --sizes 1e6 --cpu 1e6" (and --periodic xy, --field spectral). The kernels are compiled
# by NVRTC once and kept in PARKI_KERNEL_CACHE (default /tmp/parki-kernel-cache) for the
# processes after the first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
carry=target/gpu-carry
mode=${1:-}

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

# The shared libraries `ldd` resolves for $1, less the C and C++ runtime every machine has.
extra_libs() {
  ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | grep -Ev \
    '/(libc|libm|libpthread|libdl|librt|libutil|libresolv|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' || true
}

prepare() {
  local build=target/gpu-build features nompi="--no-default-features"
  [ "${GPU_MPI:-0}" = 1 ] && nompi=""
  local budget=$(( ${CARRY_BUDGET_MB:-60} * 1024 * 1024 ))
  rm -rf "$carry"
  mkdir -p "$carry/bin" "$carry/tests" "$carry/lib"
  local stage
  stage=$(mktemp -d)

  # the application, where it has the CUDA backend
  if grep -Eq '^cuda *=' crates/app/Cargo.toml; then
    features="cuda"
    echo "+ cargo build --release -p parki-app $nompi --features $features (target $build)"
    # shellcheck disable=SC2086
    CARGO_TARGET_DIR=$build cargo build --release -p parki-app $nompi --features "$features" \
      --message-format=json-render-diagnostics > "$stage/app.json"
    python3 - "$stage/app.json" > "$stage/app.list" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bin" in m["target"]["kind"]:
        print(m["executable"])
PY
    while read -r exe; do
      cp "$exe" "$carry/bin/"
    done < "$stage/app.list"
  else
    echo "parki-app has no feature \"cuda\" yet: carrying the parki-gpu tests only"
  fi

  # the parki-gpu test binaries (the device tests among them)
  echo "+ cargo test --release -p parki-gpu $nompi --features cuda --no-run (target $build)"
  # shellcheck disable=SC2086
  CARGO_TARGET_DIR=$build cargo test --release -p parki-gpu $nompi --features cuda --no-run \
    --message-format=json-render-diagnostics > "$stage/tests.json"
  python3 - "$stage/tests.json" > "$stage/tests.list" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"].get("test"):
        kind = m["target"]["kind"][0]
        name = "lib" if kind == "lib" else m["target"]["name"]
        print(name, m["executable"])
PY
  while read -r name exe; do
    # the host emulator's tests need no device (CI runs them): carried only when asked
    case "$name" in emulator*) [ "${EMULATOR_TESTS:-0}" = 1 ] || continue ;; esac
    cp "$exe" "$carry/tests/parki-gpu-$name"
    echo "$exe" >> "$carry/tests/SOURCES"
  done < "$stage/tests.list"

  # the benchmark binary (peak, whole evaluations with the CPU ratio, P2G variants)
  echo "+ cargo build --release -p parki-gpu $nompi --features cuda --bin parki-gpu-bench (target $build)"
  # shellcheck disable=SC2086
  CARGO_TARGET_DIR=$build cargo build --release -p parki-gpu $nompi --features cuda --bin parki-gpu-bench
  cp "$build/release/parki-gpu-bench" "$carry/bin/"

  # smaller: no debug info (symbols stay, for profiles)
  for f in "$carry"/bin/* "$carry"/tests/parki-gpu-*; do
    [ -f "$f" ] && strip --strip-debug "$f"
  done
  # what they link beyond the C/C++ runtime (FFTW; Open MPI where built with it)
  for f in "$carry"/bin/* "$carry"/tests/parki-gpu-*; do
    [ -f "$f" ] || continue
    extra_libs "$f"
  done | sort -u > "$stage/libs"
  while read -r lib; do
    cp -L "$lib" "$carry/lib/"
    echo "linked: $lib"
  done < "$stage/libs"

  # NVRTC (with its builtins, which must match it) and cuFFT, each only where it fits the
  # budget (CUDA 13's do not: see the header)
  local used dir group files size f
  used=$(du -sb "$carry" | cut -f1)
  for group in nvrtc cufft; do
    local extra=${PARKI_CUDA_LIBS:-}
    for dir in ${extra//:/ } "$HOME"/.cache/parki/cuda/nvidia/*/lib; do
      case $group in
        nvrtc) [ -f "$dir/libnvrtc.so.13" ] || continue; files=$(ls "$dir"/libnvrtc.so.13 "$dir"/libnvrtc-builtins.so.13*) ;;
        cufft) [ -f "$dir/libcufft.so.12" ] || continue; files="$dir/libcufft.so.12" ;;
      esac
      # shellcheck disable=SC2086
      size=$(stat -Lc %s $files | awk '{ s += $1 } END { print s }')
      if [ $(( used + size )) -le "$budget" ]; then
        for f in $files; do cp -L "$f" "$carry/lib/"; done
        used=$(( used + size ))
        echo "carried: $files ($size bytes)"
      else
        echo "not carried (over the ${CARRY_BUDGET_MB:-60} MiB budget): $group from $dir ($(( size / 1048576 )) MiB); run uses the machine's"
      fi
      break
    done
  done

  # the kernels compiled ahead for the lent machine (its NVRTC compiles them in about 100 s, on
  # every fresh machine, out of the session's device time): DEVICE_NVRTC names a folder with
  # libnvrtc.so.13 and its builtins of the machine's version (13.0 on the H100/H200 machines of
  # sessions 9 and 21: `pip download nvidia-cuda-nvrtc==13.0.88 --no-deps`, unzipped,
  # nvidia/cu13/lib). The disk cache's file names hash NVRTC's version, so a file of another
  # version is never read there; run copies them into PARKI_KERNEL_CACHE.
  if [ -n "${DEVICE_NVRTC:-}" ] && [ -x "$carry/tests/parki-gpu-nvrtc" ]; then
    mkdir -p "$carry/kernel-cache"
    echo "+ compiling kernels/ for sm_90 with the NVRTC in $DEVICE_NVRTC (cubin into $carry/kernel-cache)"
    PARKI_CUDA_LIBS="$DEVICE_NVRTC" PARKI_KERNEL_CACHE="$PWD/$carry/kernel-cache" PARKI_REQUIRE_NVRTC=1 \
      "$carry/tests/parki-gpu-nvrtc" kernels_compile_to_machine_code_for_hopper --exact --nocapture | grep -E 'bytes|result'
    rm -f "$carry"/kernel-cache/*.ptx "$carry"/kernel-cache/*.tmp*
  fi

  {
    echo "prepared $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ working tree changes)')"
    echo "build: --release $nompi, features: ${features:-none} (app), cuda (parki-gpu tests)"
    (cd "$carry" && find . -type f ! -name MANIFEST -printf '%s\t%p\n' | sort -k2)
  } > "$carry/MANIFEST"
  rm -rf "$stage"
  # packed: the binaries, libraries and cubin compress about 3x (67 MiB to 22 at ba2fc24, over
  # the run tool's 64 MiB unpacked); run unpacks them in place on the lent machine
  echo "+ packing $carry into $carry/pack.tar.gz"
  tar -C "$carry" -czf "$carry/pack.tar.gz.tmp" $(cd "$carry" && ls -d bin tests lib kernel-cache 2>/dev/null)
  (cd "$carry" && rm -rf bin tests lib kernel-cache && mv pack.tar.gz.tmp pack.tar.gz)
  local total tree
  total=$(du -sb "$carry" | cut -f1)
  # what travels besides: tracked and untracked-not-ignored files
  tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null \
    | awk '{ s += $1 } END { print s + 0 }')
  cat "$carry/MANIFEST"
  echo "carry: $(( total / 1024 )) KiB in $carry; working tree: $(( tree / 1024 )) KiB; together $(( (total + tree) / 1048576 )) MiB of 64"
  if [ $(( total + tree )) -gt $(( 64 * 1024 * 1024 )) ]; then
    echo "over the 64 MiB the run tool carries"
    exit 1
  fi
}

# Folders of the machine's NVRTC and cuFFT, for PARKI_CUDA_LIBS (carried ones first).
cuda_lib_dirs() {
  local dirs="" d py
  for d in "$PWD/$carry/lib" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64; do
    [ -e "$d/libnvrtc.so.13" ] || [ -e "$d/libcufft.so.12" ] || continue
    dirs="$dirs:$d"
  done
  for py in python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    for site in $("$py" -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
      d="$site/nvidia/cu13/lib"
      [ -d "$d" ] && case ":$dirs:" in *":$d:"*) ;; *) dirs="$dirs:$d" ;; esac
    done
  done
  echo "${dirs#:}"
}

# Runs case $2 (run.toml $3, report $4) with the application $1 under CASE_TIMEOUT, its output
# appended to the log $5 and its report, named, to the JSON lines $6.
run_case() {
  local app=$1 name=$2 toml=$3 report=$4 log=$5 lines=$6 rc
  {
    echo "== $name"
    set +e
    timeout "${CASE_TIMEOUT:-240}" "$app" run "$toml" --quiet
    rc=$?
    set -e
    echo "exit: $rc"
  } 2>&1 | tee -a "$log"
  if [ -f "$report" ]; then
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r["case"] = sys.argv[2]; print(json.dumps(r))' \
      "$report" "$name" >> "$lines" || true
  fi
}

# The treecode (issue 12) with [run] backend = "cuda" and on the CPU, the same run.toml: Coulomb
# at BaryTree's setting (degree 8, theta 0.7, leaves of 2000) and the Stokeslet at tol 1e-6, on
# uniform points, N in TREE_SIZES on the device (BaryTree on one P100: 0.219 s, 3.56 s and 44.0 s
# at 1e5, 1e6, 1e7) and TREE_BASELINE_SIZES on the CPU; reports into $1/tree-reports.jsonl, the
# log into $1/tree.log.
tree_cases() {
  local out=$1 app="$carry/bin/parki-dist" cases="${TMPDIR:-/tmp}/parki-tree-cases" n k backend name toml
  [ -x "$app" ] || { echo "no $app: treecode cases skipped"; return 0; }
  rm -rf "$cases"
  mkdir -p "$cases"
  : > "$out/tree-reports.jsonl"
  for n in ${TREE_SIZES:-100000 1000000 10000000}; do
    for k in ${TREE_KERNELS:-laplace stokeslet}; do
      for backend in cuda cpu; do
        if [ "$backend" = cpu ]; then
          case " ${TREE_BASELINE_SIZES:-100000 1000000} " in *" $n "*) ;; *) continue ;; esac
        fi
        name="tree-$k-n$n-$backend"
        toml="$cases/$name.toml"
        {
          echo "[problem]"
          echo "method = \"treecode\""
          echo "kernel = \"$k\""
          echo "periodic = [false, false, false]"
          [ "$k" = laplace ] || echo "tolerance = 1e-6"
          echo "[sources]"
          echo "generate = { distribution = \"${TREE_CLOUD:-uniform}\", count = $n, seed = 1 }"
          if [ "$k" = laplace ]; then
            echo "[treecode]"
            echo "degree = 8"
            echo "theta = 0.7"
            echo "max_leaf = 2000"
            echo "max_batch = 2000"
          fi
          echo "[output]"
          echo "report = \"$cases/$name.json\""
          echo "[run]"
          echo "repeat = ${REPEAT:-3}"
          echo "check = ${CHECK:-50}"
          echo "backend = \"$backend\""
        } > "$toml"
        run_case "$app" "$name" "$toml" "$cases/$name.json" "$out/tree.log" "$out/tree-reports.jsonl"
      done
    done
  done
}

# The FMM (issue 13) with [run] backend = "cuda" and on the CPU, the same run.toml: Laplace with
# the field and the Stokeslet at FMM_TOLS (default "1e-6 1e-9") on uniform points, N in
# FMM_SIZES on the device (default "1000000 10000000") and FMM_BASELINE_SIZES on the CPU
# (default "1000000"); the leaf size is the cost model's (the device's, CostModel::device, on
# the device; the CPU's on the CPU) unless FMM_LEAF is set; reports into $1/fmm-reports.jsonl,
# the log into $1/fmm.log.
fmm_cases() {
  local out=$1 app="$carry/bin/parki-dist" cases="${TMPDIR:-/tmp}/parki-fmm-cases" n k tol backend name toml
  [ -x "$app" ] || { echo "no $app: FMM cases skipped"; return 0; }
  rm -rf "$cases"
  mkdir -p "$cases"
  : > "$out/fmm-reports.jsonl"
  for n in ${FMM_SIZES:-1000000 10000000}; do
    for k in ${FMM_KERNELS:-laplace stokeslet}; do
      for tol in ${FMM_TOLS:-1e-6 1e-9}; do
        for backend in cuda cpu; do
          if [ "$backend" = cpu ]; then
            case " ${FMM_BASELINE_SIZES:-1000000} " in *" $n "*) ;; *) continue ;; esac
          fi
          name="fmm-$k-n$n-tol$tol-$backend"
          toml="$cases/$name.toml"
          {
            echo "[problem]"
            echo "method = \"fmm\""
            echo "kernel = \"$k\""
            echo "periodic = [false, false, false]"
            echo "tolerance = $tol"
            echo "[sources]"
            echo "generate = { distribution = \"${FMM_CLOUD:-uniform}\", count = $n, seed = 1 }"
            if [ -n "${FMM_LEAF:-}" ]; then
              echo "[fmm]"
              echo "max_leaf = $FMM_LEAF"
            fi
            echo "[output]"
            [ "$k" = laplace ] && echo "field = \"$cases/$name-e.npy\""
            echo "report = \"$cases/$name.json\""
            echo "[run]"
            echo "repeat = ${REPEAT:-3}"
            echo "check = ${CHECK:-50}"
            echo "backend = \"$backend\""
          } > "$toml"
          run_case "$app" "$name" "$toml" "$cases/$name.json" "$out/fmm.log" "$out/fmm-reports.jsonl"
          rm -f "$cases/$name-e.npy"
        done
      done
    done
  done
}

# Distributed runs on the device (issue 9: "2 ranks on one GPU equal to one rank"): with an
# application built with MPI (prepare with GPU_MPI=1) and the machine's mpirun, potentials
# compared (relative l2, bound 1e-13): the combined kernel 3P, the Stokeslet 2P and the Laplace
# field 0P (spectral Ewald) at 1 and MPI_RANKS (default 2) ranks with backend = "cuda"; Coulomb
# on Plummer points (the treecode, its LET's remote side on the device) on the CPU and the
# device at MPI_RANKS ranks. MPI_BACKEND (default cuda) replaces "cuda" (cpu: to check the
# script without a device). Into $1/mpi.log and $1/mpi.txt.
# `method = "auto"` on the device (bench/auto_choice.sh with BACKEND=cuda, the carried
# parki-dist, particles written by python3): each case priced by the device's models and run
# by every method; AUTO_CASES (default below), AUTO_REPEATS (default "1 10").
auto_cases() {
  local out=$1 r
  local cases=${AUTO_CASES:-"uniform:100000:laplace:1e-6 uniform:1000000:laplace:1e-6 uniform:1000000:laplace:1e-9 uniform:1000000:stokeslet:1e-6 plummer:1000000:laplace:1e-6"}
  for r in ${AUTO_REPEATS:-1 10}; do
    echo "== method = \"auto\" on the device, $r evaluation(s)"
    CASES=$cases REPEAT=$r BACKEND=cuda POINTS=python BIN="$PWD/$carry/bin/parki-dist" \
      SCRATCH="${TMPDIR:-/tmp}/parki-auto-cases" timeout "${AUTO_TIMEOUT:-400}" bash bench/auto_choice.sh 16 || true
  done 2>&1 | tee "$out/auto.log"
  grep '^json ' "$out/auto.log" | sed 's/^json //' > "$out/auto.jsonl" || true
}

mpi_cases() {
  local out=$1 app="$carry/bin/parki-dist" cases="${TMPDIR:-/tmp}/parki-mpi-cases" name r toml
  [ -x "$app" ] || { echo "no $app: MPI cases skipped"; return 0; }
  command -v mpirun >/dev/null || { echo "no mpirun on this machine: MPI cases skipped" | tee "$out/mpi.txt"; return 0; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  rm -rf "$cases"
  mkdir -p "$cases"
  : > "$out/mpi.txt"
  local n=${MPI_N:-200000}
  local ranks=${MPI_RANKS:-2} runs backend first
  for name in stokes-3p stokeslet-2p laplace-field-0p tree-laplace; do
    # Ewald: the device at 1 and at R ranks (the same parameters, the same sums); the
    # treecode: the CPU and the device at R ranks (the partition shapes the trees, so its
    # 1-rank result differs by the approximation error)
    case $name in
      tree-*) runs="$ranks:cpu $ranks:${MPI_BACKEND:-cuda}" ;;
      *) runs="1:${MPI_BACKEND:-cuda} $ranks:${MPI_BACKEND:-cuda}" ;;
    esac
    first=""
    for run in $runs; do
      r=${run%%:*}
      backend=${run#*:}
      toml="$cases/$name-r$r-$backend.toml"
      [ -n "$first" ] || first="$cases/$name-r$r-$backend"
      {
        echo "[problem]"
        case $name in
          stokes-3p) echo 'kernel = "stokes"'; echo 'box = [1.0, 1.0, 1.0]'; echo 'tolerance = 1e-9' ;;
          stokeslet-2p) echo 'kernel = "stokeslet"'; echo 'box = [1.0, 1.0, 1.0]'; echo 'periodic = [true, true, false]'; echo 'tolerance = 1e-8' ;;
          laplace-field-0p) echo 'kernel = "laplace"'; echo 'box = [1.0, 1.0, 1.0]'; echo 'periodic = [false, false, false]'; echo 'tolerance = 1e-8' ;;
          tree-laplace) echo 'method = "treecode"'; echo 'kernel = "laplace"'; echo 'periodic = [false, false, false]'; echo 'tolerance = 1e-8' ;;
        esac
        echo "[sources]"
        case $name in
          tree-*) echo "generate = { distribution = \"plummer\", count = $n, seed = 3 }" ;;
          *) echo "generate = { distribution = \"uniform\", count = $n, seed = 3 }" ;;
        esac
        echo "[output]"
        echo "potential = \"$cases/$name-r$r-$backend.npy\""
        [ "$name" = laplace-field-0p ] && echo "field = \"$cases/$name-r$r-$backend-field.npy\""
        echo "report = \"$cases/$name-r$r-$backend.json\""
        echo "[run]"
        echo "check = 20"
        echo "backend = \"$backend\""
      } > "$toml"
      {
        echo "== $name at $r ranks, backend $backend"
        set +e
        timeout "${CASE_TIMEOUT:-240}" mpirun --oversubscribe -n "$r" -x LD_LIBRARY_PATH -x PARKI_CUDA_LIBS \
          -x PARKI_KERNEL_CACHE "$app" run "$toml" --quiet
        echo "exit: $?"
        set -e
      } 2>&1 | tee -a "$out/mpi.log"
    done
    python3 - "$first" "$cases/$name-r$r-$backend" "$name" "${first##*/} against ${name}-r$r-$backend" <<'PY' | tee -a "$out/mpi.txt"
import ast, math, os, struct, sys
def npy(path):
    with open(path, "rb") as f:
        assert f.read(6) == b"\x93NUMPY"
        major = f.read(2)[0]
        hlen = struct.unpack("<H" if major == 1 else "<I", f.read(2 if major == 1 else 4))[0]
        header = ast.literal_eval(f.read(hlen).decode())
        data = f.read()
    fmt = {"<f8": "d", "<f4": "f"}[header["descr"]]
    return struct.unpack("<%d%s" % (len(data) // struct.calcsize(fmt), fmt), data)
one, many, name, what = sys.argv[1:5]
for suffix in ("", "-field"):
    a, b = one + suffix + ".npy", many + suffix + ".npy"
    if not (os.path.exists(a) and os.path.exists(b)):
        if suffix == "":
            print(f"{name}: missing output ({a} or {b})")
        continue
    x, y = npy(a), npy(b)
    num = sum((p - q) ** 2 for p, q in zip(x, y))
    den = sum(q * q for q in x)
    d = math.sqrt(num / den) if den > 0 else float("nan")
    verdict = "ok" if len(x) == len(y) and d <= 1e-13 else "FAILED (bound 1e-13)"
    print(f"{name}{suffix}: {what}, relative l2 {d:.2e} over {len(x)} values: {verdict}")
PY
  done
}

# Unpacks prepare's pack.tar.gz in place, once per machine (a later run on the same warm
# machine finds it unpacked).
unpack() {
  [ -f "$carry/pack.tar.gz" ] || return 0
  [ -f "$carry/.unpacked" ] && [ "$carry/.unpacked" -nt "$carry/pack.tar.gz" ] && return 0
  echo "+ unpacking $carry/pack.tar.gz"
  (cd "$carry" && rm -rf bin tests lib kernel-cache && tar -xzf pack.tar.gz && touch .unpacked)
}

run() {
  [ -d "$carry" ] || { echo "no $carry: run 'bash bench/gpu.sh prepare' here first, then carry it"; exit 1; }
  unpack
  local out=${OUT:-bench/results/gpu-$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$out"
  local log="$out/gpu.log"
  export LD_LIBRARY_PATH="$PWD/$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  PARKI_CUDA_LIBS=$(cuda_lib_dirs)
  export PARKI_CUDA_LIBS
  export PARKI_KERNEL_CACHE=${PARKI_KERNEL_CACHE:-/tmp/parki-kernel-cache}
  if [ -d "$carry/kernel-cache" ]; then
    mkdir -p "$PARKI_KERNEL_CACHE"
    cp -n "$carry"/kernel-cache/* "$PARKI_KERNEL_CACHE"/ 2>/dev/null || true
  fi
  {
    echo "== machine"
    date -u
    head -2 "$carry/MANIFEST" 2>/dev/null || true
    nvidia-smi || echo "nvidia-smi failed"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv || true
    nproc
    echo "PARKI_CUDA_LIBS=$PARKI_CUDA_LIBS"
    ls -la /usr/local/cuda*/lib64 2>/dev/null | grep -E 'nvrtc|cufft' || echo "no /usr/local/cuda*/lib64 with NVRTC or cuFFT"
    if command -v nvcc >/dev/null; then nvcc --version | tail -2; fi
    command -v mpirun >/dev/null && { echo "mpirun: $(command -v mpirun)"; mpirun --version 2>&1 | head -1; } || echo "no mpirun on this machine"
  } 2>&1 | tee "$out/machine.txt"

  # the device tests: every parki-gpu test binary, the device required
  local failed=0 t
  {
    echo "== tests"
    local list=("$carry"/tests/parki-gpu-*)
    # TEST_BINARIES (e.g. "cuda_treecode cuda_accuracy"): only these, in that order
    if [ -n "${TEST_BINARIES:-}" ]; then
      list=()
      for t in $TEST_BINARIES; do list+=("$carry/tests/parki-gpu-$t"); done
    fi
    for t in "${list[@]}"; do
      [ -x "$t" ] || { echo "no test binary $t"; failed=$((failed + 1)); continue; }
      # the emulator's tests need no device and run in CI: not on device time unless asked
      case "$(basename "$t")" in
        parki-gpu-emulator*) [ "${EMULATOR_TESTS:-0}" = 1 ] || { echo "skipped (CI runs it): $t"; continue; } ;;
      esac
      echo "+ $t"
      # shellcheck disable=SC2086
      PARKI_REQUIRE_CUDA=1 PARKI_REQUIRE_NVRTC=1 timeout "${TEST_TIMEOUT:-300}" "$t" --test-threads 1 --nocapture \
        ${TEST_FILTER:-} || failed=$((failed + 1))
    done
    echo "test binaries failed: $failed"
  } 2>&1 | tee "$out/tests.log"

  # the FMM first, then the treecode: their device paths are the newest
  if [ "${FMM_BENCH:-1}" = 1 ]; then fmm_cases "$out"; fi
  if [ "${TREE_BENCH:-1}" = 1 ]; then tree_cases "$out"; fi

  # parki-gpu-bench: FMA peak, whole evaluations (stage split, P2P rate against the peak,
  # bytes per particle, the CPU backend in the same process for the ratio), P2G variants and the
  # operator's break-even; BENCH_ARGS passes options (e.g. "--sizes 1e6 --modes peak,eval")
  if [ "${GPU_BENCH:-1}" = 1 ] && [ -x "$carry/bin/parki-gpu-bench" ]; then
    # shellcheck disable=SC2086
    timeout "${BENCH_TIMEOUT:-540}" "$carry/bin/parki-gpu-bench" ${BENCH_ARGS:-} 2>&1 | tee "$out/gpu-bench.log" || true
    grep '^{' "$out/gpu-bench.log" > "$out/gpu-bench.jsonl" || true
  fi
  [ "${MPI_CASES:-0}" = 1 ] && mpi_cases "$out"
  [ "${AUTO_BENCH:-0}" = 1 ] && auto_cases "$out"
  [ "${APP_BENCH:-1}" = 1 ] || return 0

  # ===================================================================================
  # BENCHMARKS: parki-dist with [run] backend = "cuda" (and a CPU baseline at N = 1e6)
  # ===================================================================================
  local app="$carry/bin/parki-dist"
  if [ ! -x "$app" ]; then
    echo "no $app (parki-app had no feature \"cuda\" when prepared): benchmarks skipped" | tee -a "$log"
    return 0
  fi
  local cases="${TMPDIR:-/tmp}/parki-gpu-cases"
  rm -rf "$cases"
  mkdir -p "$cases"
  local n k tol tols p backend name toml
  : > "$out/reports.jsonl"
  for n in ${SIZES:-1000000 4000000}; do
    for k in ${KERNELS:-stokes stokeslet}; do
      for p in ${PRECISIONS:-f64 f32}; do
        tols=${TOLS:-1e-6 1e-9}
        # f32: the app refuses tolerances below its round-off for the sources (uniform in the
        # unit box, found here: stokeslet >= 5e-6 at 1e6 and 6.9e-6 at 4e6, stokes >= 3.6e-4
        # and 5e-4), so f32 runs at its own tolerances; a refused one logs the limit
        [ "$p" = f32 ] && tols=${F32_TOLS:-1e-5 1e-3}
        for tol in $tols; do
          for backend in cuda cpu; do
            if [ "$backend" = cpu ]; then
              [ "${CPU_BASELINE:-1}" = 1 ] || continue
              case " ${BASELINE_SIZES:-1000000} " in *" $n "*) ;; *) continue ;; esac
            fi
            name="$k-n$n-tol$tol-$p-$backend"
            toml="$cases/$name.toml"
            {
              echo "[problem]"
              echo "kernel = \"$k\""
              echo "box = [1.0, 1.0, 1.0]"
              echo "tolerance = $tol"
              echo "precision = \"$p\""
              echo "[sources]"
              echo "generate = { distribution = \"uniform\", count = $n, seed = 1 }"
              echo "[output]"
              echo "report = \"$cases/$name.json\""
              echo "[run]"
              echo "repeat = ${REPEAT:-3}"
              echo "check = ${CHECK:-50}"
              [ "$backend" = cuda ] && echo "backend = \"cuda\""
            } > "$toml"
            run_case "$app" "$name" "$toml" "$cases/$name.json" "$log" "$out/reports.jsonl"
          done
        done
      done
    done
  done
  echo "results: $out (machine.txt, tests.log, gpu.log, reports.jsonl)"
}

case "$mode" in
  prepare) prepare ;;
  run) run ;;
  unpack) unpack ;;
  *) usage ;;
esac
