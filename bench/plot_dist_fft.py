#!/usr/bin/env python3
"""Plots bench/dist_fft.sh's JSON lines: round-trip seconds of ours (both switch backends) and
FFTW-MPI against the rank count, and prints a Markdown table of the same numbers.

    python3 bench/plot_dist_fft.py bench/results/dist_fft.jsonl --png docs/img/dist_fft.png
"""
import argparse
import json


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("jsonl")
    p.add_argument("--png", default=None)
    a = p.parse_args()
    rows = [json.loads(l) for l in open(a.jsonl) if l.strip()]
    rows.sort(key=lambda r: (r["ranks"], r["process_grid"][0]))
    print("| R | process grid | ours, alltoallv (s) | ours, persistent (s) | FFTW-MPI (s) | ratio alltoallv | ratio persistent | switch bytes / minimum |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["seconds_median"]
        q = r["ratio_to_fftw_mpi"]
        sent = sum(r["switch_bytes"])
        minimum = sum(r["switch_minimum_bytes"])
        ratio = "no switch" if minimum == 0 else f"{sent / 1e6:.1f} MB / {minimum / 1e6:.1f} MB"
        print(
            f"| {r['ranks']} | {r['process_grid']} | {s['alltoallv']:.3f} | {s['persistent']:.3f} | "
            f"{s['fftw_mpi']:.3f} | {q['alltoallv']:.3f} | {q['persistent']:.3f} | {ratio} |"
        )
    if a.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ranks = [r["ranks"] for r in rows]
        x = range(len(rows))
        w = 0.27
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for k, (key, label) in enumerate(
            [("alltoallv", "ours, alltoallv"), ("persistent", "ours, persistent"), ("fftw_mpi", "FFTW-MPI")]
        ):
            ax.bar([i + (k - 1) * w for i in x], [r["seconds_median"][key] for r in rows], w, label=label)
        ax.set_xticks(list(x), [f"R = {r['ranks']}\n{r['process_grid']}" for r in rows])
        g = rows[0]["grid"]
        ax.set_ylabel("seconds per r2c + c2r round trip (median)")
        ax.set_title(f"distributed FFT, {g[0]}x{g[1]}x{g[2]} x {rows[0]['components']} components")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)
        print(f"plot -> {a.png}")


if __name__ == "__main__":
    main()
