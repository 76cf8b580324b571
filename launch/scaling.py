#!/usr/bin/env python3
"""Weak and strong scaling studies of `parki-dist run`.

    scaling.py make    --mode weak --ranks 1,2,4 --particles 200000 --out runs/weak
    scaling.py collect runs/weak --csv runs/weak/scaling.csv
    scaling.py plot    runs/weak/scaling.csv --png runs/weak/scaling.png

`make` writes one run.toml per rank count (runs/weak/R0004/run.toml, ...): in a weak study
`--particles` is per rank and the box grows with the rank count (same density; a cube of side
R^(1/3), or along z only with --grow z), in a strong study `--particles` is the total and the box
is fixed. `collect` reads every report.json below the given folders into one CSV row each
(per-stage seconds min/avg/max over ranks, bytes per communication stage, the process grid).
`plot` draws the slowest rank's time per stage against the rank count, with the ideal line
(flat for weak scaling, 1/R for strong; with --cores C, ranks beyond C share the cores and the
ideal grows by R/C), and the parallel efficiency. It needs matplotlib
(`pip install matplotlib`); make and collect need only the standard library.
"""

import argparse
import csv
import json
import os
import sys

STAGES = ["prepare", "sort", "ghost", "P2P", "P2G", "halo", "FFT", "CNV", "IFFT", "grid_ghost", "G2P", "return"]
COMM = ["sort", "ghost_sources", "halo", "fft_switch1", "fft_switch2", "grid_ghost", "return"]

KERNELS = ["laplace", "stokeslet", "stresslet", "stokes"]


def make(args):
    ranks = [int(r) for r in args.ranks.split(",")]
    for r in ranks:
        if args.mode == "weak":
            n = args.particles * r
            if args.grow == "z":
                box = [1.0, 1.0, float(r)]
            else:
                s = r ** (1.0 / 3.0)
                box = [s, s, s]
        else:
            n = args.particles
            box = [1.0, 1.0, 1.0]
        d = os.path.join(args.out, f"R{r:04d}")
        os.makedirs(d, exist_ok=True)
        parallel = f'decomposition = "{args.decomposition}"\nbackend = "{args.backend}"\n'
        check = f"check = {args.check}\n" if args.check else ""
        ewald = f"[ewald]\nrc = {args.rc}\n" if args.rc else ""
        text = (
            f"# {args.mode} scaling, {r} ranks (written by launch/scaling.py)\n"
            f'[problem]\nkernel = "{args.kernel}"\nbox = [{box[0]:.12g}, {box[1]:.12g}, {box[2]:.12g}]\n'
            f"tolerance = {args.tol:g}\n"
            f'[sources]\ngenerate = {{ distribution = "{args.distribution}", count = {n}, seed = {args.seed} }}\n'
            f'[output]\nreport = "report.json"\n'
            f"[run]\nrepeat = {args.repeat}\n{check}"
            f"{ewald}"
            f"[parallel]\n{parallel}"
        )
        with open(os.path.join(d, "run.toml"), "w") as f:
            f.write(text)
        print(os.path.join(d, "run.toml"))


def reports(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, _, files in os.walk(p):
            for name in files:
                if name == "report.json":
                    yield os.path.join(root, name)


def collect(args):
    rows = []
    for path in sorted(reports(args.paths)):
        with open(path) as f:
            r = json.load(f)
        row = {
            "report": path,
            "ranks": r["ranks"],
            "threads_per_rank": r["threads"],
            "kernel": r["kernel"],
            "precision": r["precision"],
            "tolerance": r["tolerance"],
            "sources": r["sources"],
            "targets": r["targets"],
            "box": "x".join(f"{v:g}" for v in r["box"]),
            "grid": "x".join(str(v) for v in r["parameters"]["grid"]),
            "process_grid": "x".join(str(v) for v in r["parallel"]["process_grid"]),
            "topology": r["parallel"]["topology"],
            "backend": r["parallel"]["backend"],
            "total_max_s": r["total_seconds"],
            "throughput": r["throughput_particles_per_second"],
            "check_error": (r.get("check") or {}).get("relative_rms_error", ""),
        }
        for s in STAGES:
            t = r["timings"].get(s, {"min": 0.0, "avg": 0.0, "max": 0.0})
            for k in ("min", "avg", "max"):
                row[f"{s}_{k}_s"] = t[k]
        for c in COMM:
            b = r.get("communication", {}).get(c)
            row[f"{c}_bytes_avg"] = b["bytes_per_rank"]["avg"] if b else 0.0
            row[f"{c}_bytes_total"] = b["bytes_total"] if b else 0.0
        rows.append(row)
    if not rows:
        sys.exit(f"no report.json under {args.paths}")
    rows.sort(key=lambda x: (x["ranks"], x["sources"]))
    out = open(args.csv, "w", newline="") if args.csv != "-" else sys.stdout
    w = csv.DictWriter(out, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
    if out is not sys.stdout:
        out.close()
        print(f"{len(rows)} reports -> {args.csv}")


def plot(args):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot needs matplotlib: pip install matplotlib")
    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    rows.sort(key=lambda x: int(x["ranks"]))
    ranks = [int(r["ranks"]) for r in rows]
    weak = len({r["sources"] for r in rows}) > 1
    # ranks beyond the cores share them: the ideal time grows by ranks / cores there
    share = [max(1.0, p / args.cores) if args.cores else 1.0 for p in ranks]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    colours = plt.get_cmap("tab20").colors
    for k, s in enumerate(STAGES):
        t = [float(r[f"{s}_max_s"]) for r in rows]
        if max(t) <= 0.0:
            continue
        # a stage that did not run (one rank) is left out rather than drawn at zero
        ax.plot(ranks, [v if v > 0.0 else float("nan") for v in t], marker="o", color=colours[k], label=s)
    total = [float(r["total_max_s"]) for r in rows]
    ax.plot(ranks, total, marker="s", color="black", linewidth=2, label="total")
    base = total[0] / share[0]
    ideal = [base * f if weak else base * f * ranks[0] / p for p, f in zip(ranks, share)]
    ax.plot(ranks, ideal, linestyle="--", color="gray", label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks")
    ax.set_ylabel("seconds (slowest rank)")
    ax.set_xticks(ranks, [str(p) for p in ranks])
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(args.title or ("weak" if weak else "strong") + " scaling, per-stage time")
    eff = [i / t for i, t in zip(ideal, total)]
    ax2.plot(ranks, eff, marker="o")
    ax2.set_xscale("log", base=2)
    ax2.set_ylim(0, max(1.1, max(eff) * 1.1))
    ax2.set_xticks(ranks, [str(p) for p in ranks])
    ax2.set_xlabel("ranks")
    ax2.set_ylabel("parallel efficiency")
    ax2.axhline(1.0, linestyle="--", color="gray")
    ax2.set_title("efficiency (ideal / total time)" + (f", {args.cores} cores" if args.cores else ""))
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"plot -> {args.png}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make", help="write one run.toml per rank count")
    m.add_argument("--mode", choices=["weak", "strong"], required=True)
    m.add_argument("--ranks", default="1,2,4", help="comma-separated rank counts")
    m.add_argument("--particles", type=int, required=True, help="per rank (weak) or in total (strong)")
    m.add_argument("--kernel", default="stokeslet", choices=KERNELS)
    m.add_argument("--tol", type=float, default=1e-8)
    m.add_argument("--distribution", default="uniform", choices=["uniform", "normal", "sphere"])
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--grow", choices=["cube", "z"], default="cube", help="weak: how the box grows")
    m.add_argument("--decomposition", default="auto", choices=["auto", "slab", "pencil"])
    m.add_argument("--backend", default="alltoallv", choices=["alltoallv", "persistent"])
    m.add_argument("--rc", type=float, default=None, help="fix the real-space cut-off (same cells per rank)")
    m.add_argument("--repeat", type=int, default=2, help="evaluations per run (the last is reported)")
    m.add_argument("--check", type=int, default=0, help="targets checked against the classical sum")
    m.add_argument("--out", required=True)
    m.set_defaults(func=make)
    c = sub.add_parser("collect", help="report.json files -> one CSV")
    c.add_argument("paths", nargs="+")
    c.add_argument("--csv", required=True, help="output CSV ('-' for stdout)")
    c.set_defaults(func=collect)
    g = sub.add_parser("plot", help="CSV -> PNG of stage times against rank count")
    g.add_argument("csv")
    g.add_argument("--png", required=True)
    g.add_argument("--title", default=None)
    g.add_argument(
        "--cores", type=int, default=0, help="cores available: more ranks than cores share them (ideal time grows)"
    )
    g.set_defaults(func=plot)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
