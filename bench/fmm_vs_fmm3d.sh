#!/usr/bin/env bash
# Issue 13: FMM3D and parki-dist's FMM side by side, one script, the same points and charges: Laplace
# potential and gradient of N points uniform in the unit cube with standard normal charges
# (sources = targets), 2 threads each, at FMM3D's eps and at parki-dist's tolerance.
#
#   bash bench/fmm_vs_fmm3d.sh FMM3D_SRC [N ...]        (default N: 100000 1000000)
#   TOLS="1e-6 1e-9" THREADS=2 SCRATCH=/tmp/fmm3d-side-by-side KERNEL=laplace|stokeslet
#   TREECODE=1   also parki-dist's treecode on the same points (method = "treecode", same tolerance)
#   EWALD=1      also parki-dist's free-space (0P) spectral Ewald sum on the same points (Laplace:
#                potential and field; issue 11's comparison), same tolerance, its plan timed apart
#   SIGMA=0.1    clustered points: normal of standard deviation SIGMA about the centre of the unit
#                cube (resampled inside it) instead of uniform
#   REPEAT=1     one timed call each, no warm-up (Laplace; for N = 1e7, where FMM3D takes minutes)
#   PARKI_TOLS="1e-5 1e-6 1e-8 1e-9"   parki-dist's tolerances (default TOLS; KERNEL=stokeslet), to
#                find the one whose measured error matches FMM3D's
#
# KERNEL=stokeslet: the Stokeslet velocity of N points uniform in the unit cube with standard
# normal forces (sources = targets): FMM3D's stfmm3d (ifstoklet = 1, velocity only) against
# `parki-dist run` with method = "fmm" (four harmonic FMMs) on the same points as .npy files;
# FMM3D's error against the driver's direct sum of its own kernel (I/r + r r^T/r^3)/(8 pi) on 200
# sources, parki-dist's from its report (`check = 1000` targets against its direct sum); times
# are FMM3D's call and the report's `evaluation_seconds`.
#
# FMM3D_SRC is a checkout of https://github.com/flatironinstitute/FMM3D (not part of this
# repository). It is copied and built here in a scratch folder (gfortran, -O3 -march=native,
# OpenMP: `make lib`), with a 40-line Fortran driver written below that reads the points file,
# calls lfmm3d_s_c_g (potential and gradient, sources = targets) once to warm up (unless REPEAT=1) and once timed,
# and reports the relative l2 error of the potential and of the gradient on 200 evenly spaced
# sources against its own direct sum (FMM3D's kernel is 1/(4 pi r)). parki-bench-fmm reads the
# same file (--points) and reports its errors on 1000 evenly spaced targets against its direct
# sum. Times: the evaluation only (FMM3D's call; parki-dist's `evaluate`, trees included).
# Nothing of FMM3D is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: bash bench/fmm_vs_fmm3d.sh FMM3D_SRC [N ...]}
shift
sizes=${*:-100000 1000000}
tols=${TOLS:-1e-6 1e-9}
threads=${THREADS:-2}
repeat=${REPEAT:-2}
scratch=${SCRATCH:-/tmp/fmm3d-side-by-side}
mkdir -p "$scratch"
export OMP_NUM_THREADS=$threads

if [ ! -f "$scratch/src/lib-static/libfmm3d.a" ]; then
  command -v gfortran >/dev/null || { echo "FMM3D's build needs gfortran (apt-get install gfortran)"; exit 1; }
  rm -rf "$scratch/src" && cp -r "$(realpath "$src")" "$scratch/src"
  printf 'FFLAGS = -fPIC -O3 -march=native -funroll-loops -std=legacy -w\nOMPFLAGS = -fopenmp\n' > "$scratch/src/make.inc"
  (cd "$scratch/src" && make lib -j"$(nproc)" > "$scratch/build.log" 2>&1) || { echo "FMM3D build failed: $scratch/build.log"; exit 1; }
fi
kernel=${KERNEL:-laplace}
[ "$kernel" = laplace ] || [ "$kernel" = stokeslet ] || { echo "KERNEL=$kernel: laplace or stokeslet"; exit 1; }
cargo build --release -q -p parki-bench --bin parki-bench-fmm
cargo build --release -q -p parki-app
bench=$(realpath target/release/parki-bench-fmm)
app=$(realpath target/release/parki-dist)
tol_list=$(echo "$tols" | tr ' ' ',')

# parki-dist's treecode (TREECODE=1) or FMM (Stokeslet) through the application on x.npy and
# q.npy / f.npy in $scratch: prints the method's evaluation time and its error on 1000 targets
app_run() { # method kernel tol
  local strengths='charges = "q.npy"' extra=''
  [ "$2" = stokeslet ] && strengths='forces = "f.npy"'
  local field=''
  # the Ewald sum in free space: the box is the particles' extent (the unit cube holds them);
  # Laplace with the field, as FMM3D's gradient
  if [ "$1" = ewald ]; then
    extra='box = [1.0, 1.0, 1.0]
periodic = [false, false, false]'
    [ "$2" = laplace ] && field='field = "e.npy"'
  fi
  cat > "$scratch/$1.toml" <<TOML
[problem]
method = "$1"
kernel = "$2"
tolerance = $3
$extra
[sources]
positions = "x.npy"
$strengths
[output]
report = "$1.json"
$field
[run]
check = 1000
TOML
  "$app" run "$scratch/$1.toml" --quiet --threads "$threads" > "$scratch/$1.log" 2>&1 \
    || { echo "parki-dist $1 failed: $scratch/$1.log"; return; }
  python3 - "$scratch/$1.json" "$1" "$2" "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); m, k, tol = sys.argv[2:]
p = r.get(m, {})
choice = ", ".join(f"{key} {p[key]}" for key in ("order", "max_leaf", "degree", "theta") if key in p)
if m == "ewald":
    # the Ewald report: parameters, plan_seconds, the evaluation's total, the check's RMS errors
    e = r["parameters"]
    choice = f"grid {e['grid']}, r_c {e['rc']:.4f}, cells {e['cells']}, plan {r['plan_seconds']:.3f} s"
    c = r["check"]
    fe = f" E_field {c['field']['relative_rms_error']:.3e}" if c.get("field") else ""
    print(f"parki-dist {m} {k} n {r['sources']} tol {float(tol):.0e} threads {r['threads']} seconds "
          f"{r['total_seconds']:10.3f} E {c['relative_rms_error']:.3e}{fe} ({choice})")
    sys.exit(0)
err = r["error"]
print(f"parki-dist {m} {k} n {r['sources']} tol {float(tol):.0e} threads {r['threads']} seconds "
      f"{r['evaluation_seconds']:10.3f} E {err['relative_l2']:.3e} ({choice})")
PY
}

# the points: uniform cube, standard normal strengths, from numpy-free C (seeded, portable):
# rows (x, y, z, s_1 .. s_k) in points.bin, and x.npy, q.npy (s_1) and f.npy (s_1 .. s_3) for
# parki-dist run
cat > "$scratch/gen.c" <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static FILE *npy(const char *dir, const char *name, long n, int k) {
    char path[4096], head[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (k == 1) snprintf(head, sizeof head, "{'descr': '<f8', 'fortran_order': False, 'shape': (%ld,), }", n);
    else snprintf(head, sizeof head, "{'descr': '<f8', 'fortran_order': False, 'shape': (%ld, %d), }", n, k);
    size_t len = strlen(head);
    while ((10 + len + 1) % 64) head[len++] = ' ';
    head[len++] = '\n';
    unsigned short hl = (unsigned short)len;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fwrite(&hl, 2, 1, f);
    fwrite(head, 1, len, f);
    return f;
}
static double normal(void) {
    double u1 = 1.0 - drand48(), u2 = drand48();
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
/* argv: N, points.bin, k strengths, npy folder, optional sigma; uniform in [0,1)^3 (sigma 0 or
   absent) or normal of standard deviation sigma about (0.5, 0.5, 0.5) resampled into [0,1)^3;
   strengths standard normal (Box-Muller), srand48(7): with k = 1 and no sigma the rows of earlier
   runs of this script */
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int k = atoi(argv[3]);
    double sigma = argc > 5 ? atof(argv[5]) : 0.0;
    FILE *f = fopen(argv[2], "wb");
    FILE *fx = npy(argv[4], "x.npy", n, 3), *fq = npy(argv[4], "q.npy", n, 1), *ff = npy(argv[4], "f.npy", n, 3);
    srand48(7);
    for (long i = 0; i < n; ++i) {
        double r[6] = {drand48(), drand48(), drand48(), 0, 0, 0};
        if (sigma > 0.0)
            for (int a = 0; a < 3; ++a)
                do r[a] = 0.5 + sigma * normal(); while (r[a] < 0.0 || r[a] >= 1.0);
        for (int j = 0; j < k; ++j) {
            double u1 = 1.0 - drand48(), u2 = drand48();
            r[3 + j] = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
        }
        fwrite(r, sizeof(double), 3 + k, f);
        fwrite(r, sizeof(double), 3, fx);
        fwrite(r + 3, sizeof(double), 1, fq);
        if (k == 3) fwrite(r + 3, sizeof(double), 3, ff);
    }
    fclose(fx); fclose(fq); fclose(ff);
    return fclose(f);
}
C
cc -O2 -o "$scratch/gen" "$scratch/gen.c" -lm

if [ "$kernel" = stokeslet ]; then
cat > "$scratch/driver_st.f90" <<'F'
! Times FMM3D's stfmm3d (Stokeslets, velocity at the sources) on the rows (x, y, z, f) of a
! file; error against the direct sum of (I/r + r r^T/r^3)/(8 pi) on 200 sources.
program driver_st
  use omp_lib
  implicit none
  integer(8) :: n, ier, i, j, step, nd, ifst, ifstr, ifpp, nt, ifppt
  integer :: ifrot, ifdbl
  real(8) :: eps, t0, t, c, e(2), targ(3, 1), ptarg(1, 3, 1), pretarg(1, 1), gtarg(1, 3, 3, 1)
  real(8), allocatable :: rows(:,:), x(:,:), f(:,:,:), dummy(:,:,:), pot(:,:,:), pre(:,:), grad(:,:,:,:)
  character(len=512) :: arg
  call get_command_argument(1, arg); read(arg, *) n
  call get_command_argument(2, arg); read(arg, *) eps
  call get_command_argument(3, arg)
  allocate(rows(6, n), x(3, n), f(1, 3, n), dummy(1, 3, n), pot(1, 3, n), pre(1, n), grad(1, 3, 3, n))
  open(10, file=trim(arg), access='stream', form='unformatted', status='old')
  read(10) rows
  close(10)
  x = rows(1:3, :); f(1, :, :) = rows(4:6, :); dummy = 0
  nd = 1; ifst = 1; ifstr = 0; ifrot = 0; ifdbl = 0; ifpp = 1; nt = 0; ifppt = 0; targ = 0
  do i = 1, 2
    t0 = omp_get_wtime()
    call stfmm3d(nd, eps, n, x, ifst, f, ifstr, dummy, dummy, ifrot, dummy, dummy, ifdbl, dummy, dummy, &
      ifpp, pot, pre, grad, nt, targ, ifppt, ptarg, pretarg, gtarg, ier)
    t = omp_get_wtime() - t0
  end do
  c = 1.0d0 / (32.0d0 * atan(1.0d0))
  e = 0; step = max(1_8, n / 200)
  do j = 1, n, step
    block
      real(8) :: u(3), dd(3), r2, r, fd
      u = 0
      do i = 1, n
        if (i == j) cycle
        dd = x(:, j) - x(:, i); r2 = sum(dd * dd); r = sqrt(r2)
        fd = sum(dd * f(1, :, i))
        u = u + f(1, :, i) / r + dd * fd / (r2 * r)
      end do
      u = u * c
      e(1) = e(1) + sum((pot(1, :, j) - u)**2); e(2) = e(2) + sum(u**2)
    end block
  end do
  write(*, '(a,i0,a,es8.1,a,i0,a,f10.3,a,es10.3,a,i0)') 'fmm3d stfmm3d n ', n, ' eps ', eps, ' threads ', &
    omp_get_max_threads(), ' seconds ', t, ' E ', sqrt(e(1) / e(2)), ' ier ', ier
end program driver_st
F
gfortran -O3 -march=native -fopenmp "$scratch/driver_st.f90" -o "$scratch/driver_st" "$scratch/src/lib-static/libfmm3d.a" -lm
for n in $sizes; do
  "$scratch/gen" "$n" "$scratch/points.bin" 3 "$scratch" "${SIGMA:-0}"
  for eps in $tols; do
    "$scratch/driver_st" "$n" "$eps" "$scratch/points.bin"
  done
  for tol in ${PARKI_TOLS:-$tols}; do
    app_run fmm stokeslet "$tol"
    if [ "${TREECODE:-0}" = 1 ]; then app_run treecode stokeslet "$tol"; fi
  done
done
exit 0
fi

cat > "$scratch/driver.f90" <<'F'
! Times FMM3D's lfmm3d_s_c_g on the rows (x, y, z, q) of a file; errors against the direct sum.
program driver
  use omp_lib
  implicit none
  integer(8) :: n, ier, i, j, step, reps
  real(8) :: eps, t0, t, fpi, e(4)
  real(8), allocatable :: rows(:,:), x(:,:), q(:), pot(:), grad(:,:)
  character(len=512) :: arg
  call get_command_argument(1, arg); read(arg, *) n
  call get_command_argument(2, arg); read(arg, *) eps
  call get_command_argument(4, arg); read(arg, *) reps
  call get_command_argument(3, arg)
  allocate(rows(4, n), x(3, n), q(n), pot(n), grad(3, n))
  open(10, file=trim(arg), access='stream', form='unformatted', status='old')
  read(10) rows
  close(10)
  x = rows(1:3, :); q = rows(4, :)
  if (reps > 1) call lfmm3d_s_c_g(eps, n, x, q, pot, grad, ier)
  t0 = omp_get_wtime()
  call lfmm3d_s_c_g(eps, n, x, q, pot, grad, ier)
  t = omp_get_wtime() - t0
  fpi = 16.0d0 * atan(1.0d0)
  e = 0; step = max(1_8, n / 200)
  do j = 1, n, step
    block
      real(8) :: u, g(3), dd(3), r
      u = 0; g = 0
      do i = 1, n
        if (i == j) cycle
        dd = x(:, j) - x(:, i); r = sqrt(sum(dd * dd))
        u = u + q(i) / r; g = g - q(i) * dd / r**3
      end do
      u = u / fpi; g = g / fpi
      e(1) = e(1) + (pot(j) - u)**2; e(2) = e(2) + u**2
      e(3) = e(3) + sum((grad(:, j) - g)**2); e(4) = e(4) + sum(g**2)
    end block
  end do
  write(*, '(a,i0,a,es8.1,a,i0,a,f10.3,a,es10.3,a,es10.3,a,i0)') 'fmm3d n ', n, ' eps ', eps, ' threads ', &
    omp_get_max_threads(), ' seconds ', t, ' E_pot ', sqrt(e(1) / e(2)), ' E_grad ', sqrt(e(3) / e(4)), ' ier ', ier
end program driver
F
gfortran -O3 -march=native -fopenmp "$scratch/driver.f90" -o "$scratch/driver" "$scratch/src/lib-static/libfmm3d.a" -lm
for n in $sizes; do
  "$scratch/gen" "$n" "$scratch/points.bin" 1 "$scratch" "${SIGMA:-0}"
  for eps in $tols; do
    "$scratch/driver" "$n" "$eps" "$scratch/points.bin" "$repeat"
  done
  "$bench" --points "$scratch/points.bin" --tolerance "$tol_list" --threads "$threads" --repeat "$repeat" --sample 1000 \
    | grep -v '^json'
  if [ "${TREECODE:-0}" = 1 ]; then
    for eps in $tols; do app_run treecode laplace "$eps"; done
  fi
  if [ "${EWALD:-0}" = 1 ]; then
    for eps in $tols; do app_run ewald laplace "$eps"; done
  fi
done
