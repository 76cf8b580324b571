#!/usr/bin/env bash
# Issue 13: FMM3D and parki-dist's FMM side by side, one script, the same points and charges: Laplace
# potential and gradient of N points uniform in the unit cube with standard normal charges
# (sources = targets), 2 threads each, at FMM3D's eps and at parki-dist's tolerance.
#
#   bash bench/fmm_vs_fmm3d.sh FMM3D_SRC [N ...]        (default N: 100000 1000000)
#   TOLS="1e-6 1e-9" THREADS=2 SCRATCH=/tmp/fmm3d-side-by-side
#
# FMM3D_SRC is a checkout of https://github.com/flatironinstitute/FMM3D (not part of this
# repository). It is copied and built here in a scratch folder (gfortran, -O3 -march=native,
# OpenMP: `make lib`), with a 40-line Fortran driver written below that reads the points file,
# calls lfmm3d_s_c_g (potential and gradient, sources = targets) once to warm up and once timed,
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
scratch=${SCRATCH:-/tmp/fmm3d-side-by-side}
mkdir -p "$scratch"
export OMP_NUM_THREADS=$threads

if [ ! -f "$scratch/src/lib-static/libfmm3d.a" ]; then
  command -v gfortran >/dev/null || { echo "FMM3D's build needs gfortran (apt-get install gfortran)"; exit 1; }
  rm -rf "$scratch/src" && cp -r "$(realpath "$src")" "$scratch/src"
  printf 'FFLAGS = -fPIC -O3 -march=native -funroll-loops -std=legacy -w\nOMPFLAGS = -fopenmp\n' > "$scratch/src/make.inc"
  (cd "$scratch/src" && make lib -j"$(nproc)" > "$scratch/build.log" 2>&1) || { echo "FMM3D build failed: $scratch/build.log"; exit 1; }
fi
cat > "$scratch/driver.f90" <<'F'
! Times FMM3D's lfmm3d_s_c_g on the rows (x, y, z, q) of a file; errors against the direct sum.
program driver
  use omp_lib
  implicit none
  integer(8) :: n, ier, i, j, step
  real(8) :: eps, t0, t, fpi, e(4)
  real(8), allocatable :: rows(:,:), x(:,:), q(:), pot(:), grad(:,:)
  character(len=512) :: arg
  call get_command_argument(1, arg); read(arg, *) n
  call get_command_argument(2, arg); read(arg, *) eps
  call get_command_argument(3, arg)
  allocate(rows(4, n), x(3, n), q(n), pot(n), grad(3, n))
  open(10, file=trim(arg), access='stream', form='unformatted', status='old')
  read(10) rows
  close(10)
  x = rows(1:3, :); q = rows(4, :)
  call lfmm3d_s_c_g(eps, n, x, q, pot, grad, ier)
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
cargo build --release -q -p parki-bench --bin parki-bench-fmm
bench=$(realpath target/release/parki-bench-fmm)
tol_list=$(echo "$tols" | tr ' ' ',')
for n in $sizes; do
  # the points: uniform cube, standard normal charges, from numpy-free C (seeded, portable)
  cat > "$scratch/gen.c" <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
/* N rows (x, y, z, q): uniform in [0,1)^3, q standard normal (Box-Muller), srand48(7). */
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    FILE *f = fopen(argv[2], "wb");
    srand48(7);
    for (long i = 0; i < n; ++i) {
        double r[4] = {drand48(), drand48(), drand48(), 0};
        double u1 = 1.0 - drand48(), u2 = drand48();
        r[3] = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
        fwrite(r, sizeof r, 1, f);
    }
    return fclose(f);
}
C
  cc -O2 -o "$scratch/gen" "$scratch/gen.c" -lm
  "$scratch/gen" "$n" "$scratch/points.bin"
  for eps in $tols; do
    "$scratch/driver" "$n" "$eps" "$scratch/points.bin"
  done
  "$bench" --points "$scratch/points.bin" --tolerance "$tol_list" --threads "$threads" --repeat 2 --sample 1000 | grep -v '^json'
done
