"""The benchmark's printed tables: rows of medians laid out to fit the terminal (every family's `table` uses these)."""

from __future__ import annotations

import shutil
import textwrap


def median(v: dict | None, scale: float = 1) -> str:
    """A summary's median, 3 significant digits ("-" when it was not measured)."""
    return "-" if v is None else f"{v['median'] * scale:.3g}"


def ratio_cells(r: dict, columns) -> list[str]:
    """A ratio row's cells for `columns` ((key, heading, scale), ...): "0.50x", or "-" where not measured."""
    return [("-" if key not in r else f"{r[key]:.2f}x") for key, _, _ in columns]


def case_rows(size: str, case: str, entry: dict, columns, sides, audio: bool = True, extra=None) -> list[list[str]]:
    """The rows of one case of a result: per side present (koe, then `sides`, the family's
    `FamilyBench.sides`) [size, case, side, precision, (audio s of the first run,) the medians of
    `columns`, `extra(side)`...]; then per compared side a ratio row koe/<its short name>."""
    rows = []
    width = 0
    for side in ("koe", *sides):
        if side not in entry:
            continue
        cells = [size, case, side, str(entry[side].get("precision", ""))]
        if audio:
            runs = entry[side]["runs"]
            cells.append(f"{runs[0]['audio_s']:.2f}" if runs else "-")
        cells += [median(entry[side]["summary"].get(key), scale) for key, _, scale in columns]
        more = list(extra(side)) if extra else []
        width = len(more)
        rows.append(cells + more)
    for side, r in side_ratios(entry).items():
        name = f"koe/{sides[side].short if side in sides else side}"
        rows.append([size, case, name, ""] + ([""] if audio else []) + ratio_cells(r, columns) + [""] * width)
    return rows


def sizes_table(results: dict, columns, sides, model_note, size_notes=None) -> tuple[list[list[str]], list[str]]:
    """The rows (header first) and notes of a family's table of sizes and cases: per size, its
    model's note (`model_note(size, model entry)`, where the entry has parameters), each case's rows
    (`case_rows`) and, where both sides ran, whether their waveforms are equal; then the size's own
    notes (`size_notes(size, per-size results)`)."""
    threads = results["options"]["threads"]
    rows = [["size", "case", "side", "prec", "audio s"] + [c[1] for c in columns]]
    notes: list[str] = []
    for size, per in results["sizes"].items():
        model = per["models"][results["family"]]
        if model.get("parameters"):
            notes.append(model_note(size, model))
        for case, entry in per["cases"].items():
            rows += case_rows(size, case, entry, columns, sides)
            if "wave_equal" in entry:
                notes.append(f"{size} {case}: waveforms {'equal' if entry['wave_equal'] else 'DIFFERENT'} at {threads} thread(s) (same seed)")
        if size_notes is not None:
            notes += size_notes(size, per)
    return rows, notes


def side_ratios(entry: dict) -> dict[str, dict]:
    """koe / side of one case for each compared side (`ratios`; results from before it, and the
    families that compare with upstream alone, have only `ratio`, upstream's)."""
    if "ratios" in entry:
        return entry["ratios"]
    return {"upstream": entry["ratio"]} if "ratio" in entry else {}


def same_cell(entry: dict, side: str) -> str:
    """Whether `side` made koe's output (its hashes, `codes_equal_to`; older results: `codes_equal`):
    "= koe", "DIFFERENT", "-" where not compared, "" for koe."""
    same = entry.get("codes_equal_to") or ({"upstream": entry["codes_equal"]} if "codes_equal" in entry else {})
    return "" if side == "koe" else "-" if side not in same else "= koe" if same[side] else "DIFFERENT"


def lay_out(title: str, rows: list[list[str]], keys: int, width: int | None = None) -> list[str]:
    """`title` (wrapped) and `rows` (the first is the header) as lines no wider than `width` where the key columns leave room.

    The first `keys` columns name a row (size, case, side, ...): one holding a single value in every
    row is said once above the table instead. A measure column no row has a value in ("-" or "") is
    left out. The measures that are left are split into as few tables as fit, each with the key columns."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    header, body = rows[0], rows[1:]
    said = [f"{header[i]} {vals.pop()}" for i in range(keys) if len(vals := {r[i] for r in body} - {""}) == 1]
    key_cols = [i for i in range(keys) if len({r[i] for r in body} - {""}) != 1]
    measures = [i for i in range(keys, len(header)) if any(r[i] not in ("-", "") for r in body)]
    widths = {i: max(len(r[i]) for r in rows) for i in range(len(header))}
    room = width - sum(widths[i] + 2 for i in key_cols)
    blocks: list[list[int]] = [[]]
    for i in measures:
        if blocks[-1] and sum(widths[j] + 2 for j in blocks[-1]) + widths[i] > room:
            blocks.append([])
        blocks[-1].append(i)
    lines = textwrap.wrap(title, width) + ([", ".join(said)] if said else [])
    for n, block in enumerate(blocks):
        if n:
            lines.append("")
        for r in rows:
            lines.append("  ".join(r[i].ljust(widths[i]) for i in key_cols + block).rstrip())
    return lines


def machine_title(m: dict, threads: int, rates: bool = True, loadavg: bool = False) -> str:
    """The table's first line: CPU, cores, torch and threads; the machine probes' rates where measured (`rates`); the load average."""
    title = f"{m['cpu']} ({m['cores']} cores), torch {m['torch']}, {threads} threads"
    if rates and "read_gbps" in m:
        title += f", read {m['read_gbps']:.1f} GB/s, fp32 matvec {m['matvec_gbps']:.1f} GB/s"
    if rates and "matmul_gflops" in m:
        title += f", fp32 matmul {m['matmul_gflops']:.0f} GFLOP/s" + (f" ({m['matmul_gflops_end']:.0f} at the end)" if "matmul_gflops_end" in m else "")
    if loadavg:
        title += f", load average {m['loadavg'][0]:.2f}"
    return title
