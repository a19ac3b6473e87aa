"""Turns run.py's cells into Markdown tables and the paper-style figures (PNG)."""

from __future__ import annotations

import os

PFOR = "pfor"
HAND = "hand-batched"
JAX = "jax.vmap (jit)"  # as in workloads.py; present only when JAX is installed
GROUP_TITLES = {"inference": "Auto-batching inference",
                "gradients": "Per-example gradients",
                "jacobians": "Jacobians"}


def _rate(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _bytes(count: int) -> str:
    # TensorFlow's CPU allocator statistics miss small allocations (a 96 KiB matmul
    # output registers as 0), so figures under 1 MiB mean little.
    return f"{count / 2 ** 20:,.1f} MiB" if count >= 2 ** 20 else "<1 MiB"


def _by_size(workload, records):
    mine = [r for r in records if r["workload"] == workload.key]
    sizes = sorted({r["size"] for r in mine})
    impls = list(dict.fromkeys(r["impl"] for r in mine))
    cells = {(r["size"], r["impl"]): r for r in mine}
    return sizes, impls, cells


def _throughput_cell(record):
    if record is None:
        return "-"
    if record["status"].startswith("fails"):
        return "fails¹"
    text = _rate(record["throughput"])
    if record["status"].startswith("mismatch"):
        text += " ≠¹"
    if record.get("fallback_ops"):
        text += " (loop)¹"
    return text


def _ratio(cells, size, top, bottom):
    a, b = cells.get((size, top)), cells.get((size, bottom))
    if not a or not b or "throughput" not in a or "throughput" not in b:
        return "-"
    return f"{a['throughput'] / b['throughput']:.2f}x"


def _ratio_columns(builtin, with_jax):
    """(heading, implementation) of pfor's ratios: to hand-batched, the built-in, JAX."""
    columns = [("pfor / hand", HAND), ("pfor / built-in", builtin)]
    return columns + ([("pfor / JAX", JAX)] if with_jax else [])


def _workload_tables(workload, records):
    sizes, impls, cells = _by_size(workload, records)
    ratios = _ratio_columns(workload.builtin, JAX in impls)
    head = [workload.size_label] + impls + [heading for heading, _ in ratios]
    lines = [f"### {workload.title} — {workload.unit} (higher is better)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for size in sizes:
        row = [str(size)] + [_throughput_cell(cells.get((size, i))) for i in impls]
        row += [_ratio(cells, size, PFOR, other) for _, other in ratios]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "First call (trace + conversion + one run) / peak memory above live "
              "tensors:", "", "| " + " | ".join([workload.size_label] + impls) + " |",
              "|" + "---|" * (len(impls) + 1)]
    for size in sizes:
        row = [str(size)]
        for impl in impls:
            r = cells.get((size, impl))
            if r is None or "first_s" not in r:
                row.append("-")
                continue
            memory = ("-" if "peak_bytes" not in r  # not TensorFlow's: JAX
                      else "?" if r["peak_bytes"] is None else _bytes(r["peak_bytes"]))
            row.append(f"{r['first_s']:.2f} s / {memory}")
        lines.append("| " + " | ".join(row) + " |")
    notes = {}  # one footnote per implementation and message, listing the sizes
    for (size, impl), r in sorted(cells.items(), key=lambda kv: (impls.index(kv[0][1]), kv[0][0])):
        parts = [] if r["status"] == "ok" else [r["status"].split(" __inference")[0][:110]]
        if r.get("fallback_ops"):
            parts.append(f"TensorFlow fell back to a loop for {', '.join(r['fallback_ops'])}")
        if parts:
            notes.setdefault((impl, "; ".join(parts)), []).append(str(size))
    notes = [f"{impl} at {', '.join(sizes)}: {text}" for (impl, text), sizes in notes.items()]
    if notes:
        lines += ["", "¹ " + "; ".join(notes) + "."]
    return lines + [""]


def _conversion_table(workloads, records):
    lines = ["### Conversion cost (largest size)", "",
             "Graph ops of the whole traced function (while-loop bodies included) per op "
             "of one iteration's body, and trace + conversion time (first call less one "
             "steady-state call).", "",
             "| workload | body ops | pfor ops/op | pfor trace+convert | built-in ops/op | "
             "built-in trace+convert |", "|---|---|---|---|---|---|"]
    for workload in workloads:
        sizes, _, cells = _by_size(workload, records)
        if not sizes:
            continue
        row = [workload.title]
        body = next((r.get("body_ops") for (s, _), r in cells.items()
                     if s == sizes[-1] and r.get("body_ops")), None)
        row.append(str(body or "-"))
        for impl in (PFOR, workload.builtin):
            r = cells.get((sizes[-1], impl))
            if not r or "first_s" not in r:
                row += ["fails", "-"]
                continue
            row.append(f"{r['graph_ops'] / body:.2f}" if body else "-")
            row.append(f"{max(r['first_s'] - r['steady_s'], 0.0):.2f} s")
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def summary(workloads, records) -> list:
    """One row per workload at its largest size: every implementation and pfor's ratios.
    The built-in is tf.vectorized_map, or GradientTape.jacobian(experimental_use_pfor=True).
    JAX's column and ratio appear when JAX ran."""
    with_jax = any(r["impl"] == JAX for r in records)
    extra = [JAX] if with_jax else []
    head = (["workload (unit, size)", HAND, "loop", "built-in", PFOR, PFOR + " (XLA)"]
            + extra + [h for h, _ in _ratio_columns(None, with_jax)]
            + ["pfor (XLA) / pfor", "hand (XLA) / hand", "peak memory pfor / built-in"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for workload in workloads:
        sizes, impls, cells = _by_size(workload, records)
        if not sizes:
            continue
        size = sizes[-1]
        loop = next(i for i in impls if i not in (HAND, PFOR, workload.builtin, JAX)
                    and "XLA" not in i)
        row = [f"{workload.title} ({workload.unit}, {size})"]
        row += [_throughput_cell(cells.get((size, impl)))
                for impl in [HAND, loop, workload.builtin, PFOR, PFOR + " (XLA)"] + extra]
        row += [_ratio(cells, size, PFOR, other)
                for _, other in _ratio_columns(workload.builtin, with_jax)]
        row += [_ratio(cells, size, impl + " (XLA)", impl) for impl in (PFOR, HAND)]
        memory = [cells.get((size, impl), {}).get("peak_bytes")
                  for impl in (PFOR, workload.builtin)]
        row.append(" / ".join("-" if m is None else _bytes(m) for m in memory))
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def markdown(meta, workloads, records) -> str:
    lines = [f"# Benchmark results ({meta['mode']})", "",
             f"- machine: {meta['machine']}", f"- command: `{meta['command']}`",
             f"- date: {meta['date']}; run time {meta['seconds']} s",
             f"- JAX: {meta['jax']}",
             "- throughput from the median steady-state call; `≠` the output differs from "
             "the reference, `(loop)` TensorFlow's vectorizer fell back to a while loop, "
             "`fails` raised (pfor runs with `fallback=\"error\"`).", "",
             "## Summary (largest size of each workload)", ""] + summary(workloads, records)
    for group, title in GROUP_TITLES.items():
        members = [w for w in workloads if w.group == group]
        if members:
            lines += [f"## {title}", ""]
            for workload in members:
                lines += _workload_tables(workload, records)
    lines += _conversion_table(workloads, records)
    return "\n".join(lines)


def plots(workloads, records, out_dir):
    """One PNG per group: throughput against size, one line per implementation."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.ticker  # pylint: disable=import-outside-toplevel
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    paths = []
    for group, title in GROUP_TITLES.items():
        members = [w for w in workloads if w.group == group]
        if not members:
            continue
        fig, axes = plt.subplots(1, len(members), figsize=(4.5 * len(members), 3.6),
                                 squeeze=False)
        names = list(dict.fromkeys(r["impl"] for r in records
                                   if r["workload"] in {w.key for w in members}))
        colors = dict(zip(names, plt.get_cmap("tab10").colors))  # one colour per name
        for ax, workload in zip(axes[0], members):
            sizes, impls, cells = _by_size(workload, records)
            for impl in impls:
                points = [(s, cells[(s, impl)]["throughput"]) for s in sizes
                          if "throughput" in cells.get((s, impl), {})]
                if points:
                    ax.plot(*zip(*points), marker="o", label=impl, color=colors[impl],
                            linewidth=2.5 if impl.startswith(PFOR) else 1.5)
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes, [str(s) for s in sizes])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_yscale("log")
            ax.set_title(workload.title, fontsize=10)
            ax.set_xlabel(workload.size_label)
            ax.set_ylabel(workload.unit)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(title)
        fig.tight_layout()
        path = os.path.join(out_dir, f"{group}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
