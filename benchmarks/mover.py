"""Benchmark: ``DataMover`` copying a table, against a raw PyArrow copy (the limit) and the naive copy.

Three ways to copy an unpartitioned source table into a fresh target table on a SQLite catalog:

- *mover*: ``DataMover(catalog, source, target, create_target=False).run()`` (target created first);
- *naive*: ``target.append(source.scan().to_arrow())``, what a PyIceberg user writes today;
- *raw*: the same source files read and rewritten with PyArrow alone (row group by row group, with
  PyIceberg's Parquet settings), one process per core taking files from a shared queue; no Iceberg,
  no commit: the machine's limit for this job.

Source tables (ints, a timestamp, strings, a decimal, a double) are generated once into a cache
folder at two sizes 4x apart (default 1 and 4 GiB of Arrow data) and two file sizes (default 8 and
128 MiB Parquet files on storage). Every measurement runs in a fresh process after an idle pause,
in shuffled order, for several rounds; each copy is checked by row count outside the timed part.
Each copy waits for the machine to be quiet first; one during which other processes used much of
the CPU is measured again, and a round with a timing far slower than the other rounds' is reported
and rerun. Besides wall-clock throughput the report gives each copy's CPU seconds.

    .venv/bin/python benchmarks/mover.py --output results.md   # full run
    .venv/bin/python benchmarks/mover.py --file-mib 8 --rounds 5  # one file size, more rounds
    .venv/bin/python benchmarks/mover.py --quick               # small smoke run (about 1 minute)

A full run takes 20-35 minutes on a quiet 2-core machine (4 more the first time, to generate the
data), about 5 GiB of disk (3.4 GiB of cached source tables, one copy at a time) and 6 GiB of
memory (the naive copy of the 4 GiB table).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mover_child import machine_busy_seconds

CHILD = Path(__file__).with_name("mover_child.py")
DATA_VERSION = 1  # bump when the generated data changes, so stale caches are rebuilt
METHODS = ("raw", "naive", "mover", "rewrite")
LABELS = {
    "raw": "raw PyArrow, 1 process per core",
    "naive": "naive `append(scan().to_arrow())`",
    "mover": "`DataMover.run()`",
    "rewrite": "`DataMover(rewrite=True).run()`",
}
MOVERS = ("mover", "rewrite")  # the two ways the mover copies: files as they are where possible, or re-encoded
SIZES = ("small", "large")
TARGET_VS_RAW, TARGET_VS_NAIVE, TARGET_PEAK_MIB, TARGET_GROWTH = 0.8, 1.15, 600, 1.1

Cell = tuple[str, str, int]  # (method, size label, file size in MiB)


@dataclass
class Round:
    """One pass over every cell in shuffled order."""

    number: int
    samples: dict[Cell, dict[str, Any]] = field(default_factory=dict)
    excluded: str = ""  # why the round was left out of the medians, if it was


def _child(*arguments: str, nice: int = 0) -> dict[str, Any]:
    command = [sys.executable, str(CHILD), *arguments]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    completed = subprocess.run(command, check=False, capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"mover_child.py {' '.join(arguments[:3])} failed:\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _table_name(size: str, file_mib: int) -> str:
    return f"src.{size}_f{file_mib}mib"


def _folder_bytes(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def _check_disk(path: Path, needed: int, what: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    usage = shutil.disk_usage(path)
    print(f"disk at {path}: {usage.free / 2**30:.1f} GiB free of {usage.total / 2**30:.1f} GiB", flush=True)
    if usage.free < needed:
        raise SystemExit(
            f"{what} needs about {needed / 2**30:.1f} GiB at {path} but only {usage.free / 2**30:.1f} GiB is free: "
            "free some space or point --cache/--scratch elsewhere."
        )


def prepare_data(cache_root: Path, small_gib: float, file_mibs: list[int]) -> tuple[Path, dict[str, Any]]:
    """Generate (or reuse) the source tables; returns the cache folder and each table's shape."""
    cache = cache_root / f"v{DATA_VERSION}-{small_gib:g}gib"  # one table per (size, file size), added as needed
    shapes_file = cache / "shapes.json"
    shapes: dict[str, Any] = json.loads(shapes_file.read_text()) if shapes_file.exists() else {}
    missing = [(size, mib) for size in SIZES for mib in file_mibs if _table_name(size, mib) not in shapes]
    if missing:
        calibration = _child("calibrate")
        small_rows = math.ceil(small_gib * 2**30 / calibration["arrow_bytes_per_row"])
        rows = {"small": small_rows, "large": 4 * small_rows}
        needed = sum(rows[size] for size, _ in missing) * calibration["parquet_bytes_per_row"] * 1.2
        _check_disk(cache_root, int(needed), "generating the source tables")
        cache.mkdir(parents=True, exist_ok=True)
    for size, mib in missing:
        name = _table_name(size, mib)
        print(f"generating {name}: {rows[size]:,} rows in files of about {mib} MiB ...", flush=True)
        started = time.perf_counter()
        shapes[name] = _child("build", str(cache), name, str(rows[size]), str(mib))
        shapes_file.write_text(json.dumps(shapes, indent=2))
        print(f"  done in {time.perf_counter() - started:.0f} s", flush=True)
    return cache, shapes


@dataclass(frozen=True)
class Settings:
    """How each measurement is run."""

    cache: Path
    scratch: Path
    options: dict[str, Any]
    pause: float
    quiet: float
    max_wait: float
    disturbed_share: float
    retries: int
    nice: int


def _cpu_share(seconds: float) -> float:
    """The share of the machine's CPU capacity in use over the next ``seconds``."""
    busy, started = machine_busy_seconds(), time.monotonic()
    time.sleep(seconds)
    return (machine_busy_seconds() - busy) / ((time.monotonic() - started) * (os.cpu_count() or 1))


def wait_for_quiet(settings: Settings) -> float:
    """Sleep the idle pause, then until the machine is quiet (or ``max_wait`` has passed); returns the wait."""
    started = time.monotonic()
    time.sleep(settings.pause)
    while _cpu_share(1.0) > settings.quiet and time.monotonic() - started < settings.max_wait:
        pass
    return time.monotonic() - started


def measure(cell: Cell, settings: Settings) -> dict[str, Any]:
    """One copy in a fresh process once the machine is quiet, measured again if other work disturbed it."""
    method, size, mib = cell
    attempts: list[dict[str, Any]] = []
    for attempt in range(settings.retries + 1):
        os.sync()  # write back the previous copy's files now, not during this one
        waited = wait_for_quiet(settings)
        scratch = Path(tempfile.mkdtemp(prefix=f"{method}-", dir=settings.scratch))
        try:
            table, options = _table_name(size, mib), json.dumps(settings.options)
            sample = _child("measure", method, str(settings.cache), table, str(scratch), options, nice=settings.nice)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if sample["rows_copied"] != sample["rows"]:
            copied, rows = sample["rows_copied"], sample["rows"]
            raise RuntimeError(f"{method} copied {copied:,} of {rows:,} rows ({size}, {mib} MiB files)")
        sample["waited"] = waited
        attempts.append(sample)
        if sample["others_share"] <= settings.disturbed_share:
            break
        if attempt < settings.retries:
            print(
                f"    {method} {size} {mib} MiB: other processes used {sample['others_share']:.0%} of the CPU "
                f"during the copy ({sample['seconds']:.2f} s): measuring again",
                flush=True,
            )
    # With every attempt disturbed, the least disturbed one is kept.
    kept = min(attempts, key=lambda item: item["others_share"])
    kept["discarded"] = [
        {"seconds": item["seconds"], "others_share": item["others_share"]} for item in attempts if item is not kept
    ]
    return kept


def run_round(rounds: list[Round], cells: list[Cell], shapes: dict[str, Any], run: Any) -> None:
    """Append a round to ``rounds`` and measure every cell once in it, in shuffled order."""
    result = Round(len(rounds) + 1)
    number = result.number
    rounds.append(result)
    order = list(cells)
    random.shuffle(order)
    for cell in order:
        method, size, mib = cell
        sample = run(cell)
        result.samples[cell] = sample
        rate = shapes[_table_name(size, mib)]["arrow_bytes"] / sample["seconds"] / 2**20
        print(
            f"  round {number}: {method:<6} {size:<5} {mib:>4} MiB files {sample['seconds']:7.2f} s "
            f"{rate:7.1f} MiB/s  peak +{sample['peak_above_start'] / 2**20:6.0f} MiB  "
            f"cpu {sample['cpu_seconds']:6.1f} s  others {sample['others_share']:4.0%}  "
            f"waited {sample['waited']:.0f} s",
            flush=True,
        )


def disturbed(rounds: list[Round], threshold: float) -> dict[int, tuple[float, str]]:
    """Kept rounds with a timing more than ``threshold`` times slower than that cell's median over the kept rounds.

    Only slow outliers count: other work can only slow a copy down, and dropping a method's fast
    rounds would bias its median (the naive copy of the 1 GiB table runs fast in some rounds).
    """
    kept = [r for r in rounds if not r.excluded]
    if len(kept) < 3:
        return {}
    flagged: dict[int, tuple[float, str]] = {}
    for cell in kept[0].samples:
        median = statistics.median(r.samples[cell]["seconds"] for r in kept)
        for r in kept:
            factor = r.samples[cell]["seconds"] / median
            if factor > threshold and factor > flagged.get(r.number, (0.0, ""))[0]:
                flagged[r.number] = (factor, f"{'/'.join(map(str, cell))} MiB {factor:.2f}x slower than its median")
    return flagged


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(rounds: list[Round], cells: list[Cell], shapes: dict[str, Any]) -> dict[str, Any]:
    """Medians over the kept rounds: throughput, peak memory, per-round ratios and memory growth."""
    kept = [r for r in rounds if not r.excluded]
    medians: dict[str, Any] = {}
    for method, size, mib in cells:
        shape = shapes[_table_name(size, mib)]
        seconds = _median([r.samples[(method, size, mib)]["seconds"] for r in kept])
        medians[f"{method}/{size}/{mib}"] = {
            "seconds": seconds,
            "mib_per_second": shape["arrow_bytes"] / seconds / 2**20,
            "rows_per_second": shape["rows"] / seconds,
            "peak_mib": _median([r.samples[(method, size, mib)]["peak_above_start"] / 2**20 for r in kept]),
            "cpu_seconds": _median([r.samples[(method, size, mib)]["cpu_seconds"] for r in kept]),
        }
    methods = sorted({c[0] for c in cells}, key=METHODS.index)
    file_mibs = sorted({c[2] for c in cells})
    ratios, cpu_ratios, spreads = _ratios(kept, "mover", methods, file_mibs)
    rewrite_ratios, _, rewrite_spreads = _ratios(kept, "rewrite", methods, file_mibs)
    growth = {
        f"{method}/{mib}": medians[f"{method}/large/{mib}"]["peak_mib"] / medians[f"{method}/small/{mib}"]["peak_mib"]
        for method in methods
        for mib in file_mibs
    }
    return {
        "medians": medians,
        "mover_ratio": ratios,
        "mover_cpu_ratio": cpu_ratios,
        "mover_ratio_range": spreads,
        "rewrite_ratio": rewrite_ratios,
        "rewrite_ratio_range": rewrite_spreads,
        "growth": growth,
        "methods": methods,
        "file_mibs": file_mibs,
    }


def _ratios(
    kept: list[Round], ours: str, methods: list[str], file_mibs: list[int]
) -> tuple[dict[str, float], dict[str, float], dict[str, tuple[float, float]]]:
    """Per-cell medians of the per-round throughput and CPU ratios of ``ours`` against each baseline."""
    ratios: dict[str, float] = {}
    cpu_ratios: dict[str, float] = {}
    spreads: dict[str, tuple[float, float]] = {}
    if ours not in methods:
        return ratios, cpu_ratios, spreads
    for other in (m for m in methods if m not in MOVERS):
        for size in SIZES:
            for mib in file_mibs:
                pairs = [(r.samples[(other, size, mib)], r.samples[(ours, size, mib)]) for r in kept]
                # Ratios within a round (minutes apart) are steadier than ratios of medians on a shared VM.
                per_round = [theirs["seconds"] / mine["seconds"] for theirs, mine in pairs]
                ratios[f"{other}/{size}/{mib}"] = _median(per_round)
                spreads[f"{other}/{size}/{mib}"] = (min(per_round), max(per_round))
                cpu_ratios[f"{other}/{size}/{mib}"] = _median(
                    [theirs["cpu_seconds"] / mine["cpu_seconds"] for theirs, mine in pairs]
                )
    return ratios, cpu_ratios, spreads


def _shape_label(shape: dict[str, Any]) -> str:
    return (
        f"{shape['arrow_bytes'] / 2**30:.2f} GiB, {shape['rows'] / 1e6:.1f} M rows, "
        f"{shape['files']} x {shape['mean_file_bytes'] / 2**20:.0f} MiB files"
    )


def _targets(summary: dict[str, Any]) -> list[tuple[str, float, str, float]]:
    checks: list[tuple[str, float, str, float]] = []
    if "mover" not in summary["methods"]:
        return checks
    for mib in summary["file_mibs"]:
        for size in SIZES:
            where = f"{size}, {mib} MiB files"
            if "raw" in summary["methods"]:
                ratio = summary["mover_ratio"][f"raw/{size}/{mib}"]
                checks.append((f"throughput vs raw ({where})", ratio, ">=", TARGET_VS_RAW))
            if "naive" in summary["methods"]:
                ratio = summary["mover_ratio"][f"naive/{size}/{mib}"]
                checks.append((f"throughput vs naive ({where})", ratio, ">=", TARGET_VS_NAIVE))
            peak = summary["medians"][f"mover/{size}/{mib}"]["peak_mib"]
            checks.append((f"peak RSS above start, MiB ({where})", peak, "<=", TARGET_PEAK_MIB))
        growth = summary["growth"][f"mover/{mib}"]
        checks.append((f"memory growth large / small ({mib} MiB files)", growth, "<=", TARGET_GROWTH))
    return checks


def report(
    command: str,
    rounds: list[Round],
    summary: dict[str, Any],
    shapes: dict[str, Any],
    cache: Path,
    environment: dict[str, str],
    settings_share: float,
) -> str:
    """The results as markdown: command, setup, throughput, memory, targets, every round."""
    methods, file_mibs, medians = summary["methods"], summary["file_mibs"], summary["medians"]
    kept = [r for r in rounds if not r.excluded]
    niced = f"; copies run under `nice -n {environment['nice']}`" if environment.get("nice", "0") != "0" else ""
    lines = [
        "```sh",
        command,
        "```",
        "",
        f"{environment['date']}, commit {environment['commit']}; {environment['machine']}; "
        f"load average at the start {environment['load']}{niced}. Median of {len(kept)} rounds; every "
        "measurement in a fresh process after an idle pause and a wait for the machine to be quiet, in shuffled "
        "order, each copy checked by row count. Throughput is MiB of Arrow data (as generated) and rows per "
        "second; memory is the peak resident size above the process's size just before the copy (`ru_maxrss` minus "
        "`VmRSS`), for the raw copy the larger of its processes'.",
        "",
        f"Source tables (cache `{cache}`, {_folder_bytes(cache) / 2**30:.2f} GiB on disk):",
        "",
    ]
    for mib in file_mibs:
        for size in SIZES:
            lines.append(f"- {size}, {mib} MiB files: {_shape_label(shapes[_table_name(size, mib)])}")
    header = "| source | " + " | ".join(LABELS[m] for m in methods)
    others = [m for m in methods if m not in MOVERS]
    movers = [m for m in MOVERS if m in methods]
    has_ratios = bool(others and movers)
    if has_ratios:
        header += " | " + " | ".join(f"{ours} / {m}" for ours in movers for m in others)
    lines += [
        "",
        "**Throughput** (MiB/s of Arrow data, M rows/s; ratios: medians of per-round ratios, their range in brackets)",
        "",
    ]
    lines += [header + " |", "|" + "---|" * (header.count("|"))]
    for mib in file_mibs:
        for size in SIZES:
            cells = [
                f"{medians[f'{m}/{size}/{mib}']['mib_per_second']:.1f} MiB/s, "
                f"{medians[f'{m}/{size}/{mib}']['rows_per_second'] / 1e6:.2f} M rows/s"
                for m in methods
            ]
            if has_ratios:
                for ours in movers:
                    for m in others:
                        low, high = summary[f"{ours}_ratio_range"][f"{m}/{size}/{mib}"]
                        ratio = summary[f"{ours}_ratio"][f"{m}/{size}/{mib}"]
                        cells.append(f"{ratio:.2f} ({low:.2f}-{high:.2f})")
            lines.append(f"| {size}, {mib} MiB files | " + " | ".join(cells) + " |")
    header = "| source | " + " | ".join(LABELS[m] for m in methods)
    if has_ratios:
        header += " | " + " | ".join(f"{m} / mover" for m in others)
    lines += [
        "",
        "**CPU seconds of the copy** (all threads and processes; ratios: medians of per-round ratios, above 1 means "
        "the mover used less CPU; steadier than wall time when other work shares the machine)",
        "",
        header + " |",
        "|" + "---|" * header.count("|"),
    ]
    for mib in file_mibs:
        for size in SIZES:
            cells = [f"{medians[f'{m}/{size}/{mib}']['cpu_seconds']:.1f}" for m in methods]
            if has_ratios:
                cells += [f"{summary['mover_cpu_ratio'][f'{m}/{size}/{mib}']:.2f}" for m in others]
            lines.append(f"| {size}, {mib} MiB files | " + " | ".join(cells) + " |")
    header = "| source | " + " | ".join(LABELS[m] for m in methods) + " |"
    lines += ["", "**Peak RSS above start** (MiB; growth: large / small)", "", header]
    lines.append("|" + "---|" * (len(methods) + 1))
    for mib in file_mibs:
        for size in SIZES:
            cells = [f"+{medians[f'{m}/{size}/{mib}']['peak_mib']:,.0f}" for m in methods]
            lines.append(f"| {size}, {mib} MiB files | " + " | ".join(cells) + " |")
        cells = [f"{summary['growth'][f'{m}/{mib}']:.2f}x" for m in methods]
        lines.append(f"| growth for 4x data, {mib} MiB files | " + " | ".join(cells) + " |")
    checks = _targets(summary)
    if checks:
        lines += ["", "**Targets**", ""]
        for name, value, sense, bound in checks:
            met = value >= bound if sense == ">=" else value <= bound
            lines.append(f"- {name}: {value:.2f} (target {sense} {bound:g}): {'met' if met else '**NOT MET**'}")
    lines += [
        "",
        "**Every round** (seconds, peak MiB above start, CPU seconds of the copy, share of the machine's CPU "
        "other processes used meanwhile)",
        "",
    ]
    header = "| method | source | " + " | ".join(f"round {r.number}" for r in rounds) + " |"
    lines += [header, "|" + "---|" * (len(rounds) + 2)]
    for method in methods:
        for mib in file_mibs:
            for size in SIZES:
                cells = []
                for r in rounds:
                    s = r.samples[(method, size, mib)]
                    cells.append(
                        f"{s['seconds']:.2f} s, +{s['peak_above_start'] / 2**20:.0f}, {s['cpu_seconds']:.1f}, "
                        f"{s['others_share']:.0%}"
                    )
                lines.append(f"| {method} | {size}, {mib} MiB | " + " | ".join(cells) + " |")
    remeasured = [(r, cell, s) for r in rounds for cell, s in r.samples.items() if s["discarded"]]
    if remeasured:
        lines.append(
            f"\n{len(remeasured)} measurement(s) were repeated because other processes used more than "
            f"{settings_share:.0%} of the CPU during the copy (the table shows the kept one):"
        )
        for r, (method, size, mib), s in remeasured:
            tries = ", ".join(f"{d['seconds']:.2f} s with {d['others_share']:.0%}" for d in s["discarded"])
            lines.append(f"- round {r.number}, {method} {size} {mib} MiB: {tries}")
    for r in rounds:
        if r.excluded:
            lines.append(f"\nRound {r.number} left out of the medians and rerun: {r.excluded}.")
    return "\n".join(lines) + "\n"


def _mover_options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, _, text = pair.partition("=")
        try:
            options[key] = json.loads(text)
        except json.JSONDecodeError:
            options[key] = text
    return options


def _environment() -> dict[str, str]:
    versions = subprocess.run(
        [sys.executable, "-c", "import pyarrow, pyiceberg; print(pyarrow.__version__, pyiceberg.__version__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    root = Path(__file__).resolve().parent.parent
    git = ["git", "-C", str(root)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True)
    mover = "iceberg_ops_provider/data_migration"
    dirty = subprocess.run([*git, "status", "--porcelain", mover], check=False, capture_output=True, text=True)
    commit = head.stdout.strip() or "unknown"
    return {
        "commit": commit + (" with uncommitted changes to the mover" if dirty.stdout.strip() else ""),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, PyArrow {versions[0]}, "
        f"PyIceberg {versions[1]}",
        "load": " / ".join(f"{value:.1f}" for value in os.getloadavg()),
    }


def _save(path: Path, shapes: dict[str, Any], rounds: list[Round], summary: dict[str, Any] | None) -> None:
    """Every sample so far (and the summary once there is one) as JSON."""
    samples = [
        {"round": r.number, "excluded": r.excluded, "method": c[0], "size": c[1], "file_mib": c[2], **s}
        for r in rounds
        for c, s in r.samples.items()
    ]
    path.write_text(json.dumps({"shapes": shapes, "summary": summary, "samples": samples}, indent=2, default=str))


def _code_fingerprint() -> str:
    """A hash of the mover's source files, to tell whether they changed while the benchmark ran."""
    package = Path(__file__).resolve().parent.parent / "iceberg_ops_provider" / "data_migration"
    digest = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


def main() -> None:
    """Parse arguments, prepare the data, run the rounds and print (and write) the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB and 256 MiB of data, 2 and 8 MiB files, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pause", type=float, default=3.0, help="idle seconds before each measurement")
    parser.add_argument("--small-gib", type=float, default=1.0, help="Arrow GiB of the smaller size (4x: the larger)")
    parser.add_argument("--file-mib", type=int, nargs="+", default=[8, 128], help="source file sizes on storage")
    parser.add_argument("--methods", default=",".join(METHODS), help="subset of raw,naive,mover,rewrite")
    parser.add_argument("--mover-option", action="append", default=[], metavar="KEY=VALUE", help="DataMover keyword")
    parser.add_argument("--raw-processes", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "iceberg-ops-mover-bench")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()), help="where copies are written")
    parser.add_argument("--quiet", type=float, default=0.1, help="start once the machine's CPU use is below this")
    parser.add_argument("--max-wait", type=float, default=300.0, help="seconds to wait for quiet at most")
    parser.add_argument(
        "--disturbed-share", type=float, default=0.15, help="measure again when others used this share of the CPU"
    )
    parser.add_argument("--retries", type=int, default=3, help="measurements of a disturbed copy at most, again")
    parser.add_argument(
        "--nice", type=int, default=0, help="run each copy under `nice -n N` (negative: ahead of other work; root only)"
    )
    parser.add_argument("--disturbed", type=float, default=1.3, help="a round with a timing this many times slower")
    parser.add_argument("--max-reruns", type=int, default=3, help="disturbed rounds rerun at most this many times")
    parser.add_argument("--output", type=Path, help="also write the markdown report here")
    parser.add_argument("--json", type=Path, help="also write every sample and the medians here")
    args = parser.parse_args()
    if args.quick:
        args.small_gib, args.file_mib, args.rounds, args.pause = 1 / 16, [2, 8], 1, 0.5
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if unknown := set(methods) - set(METHODS):
        parser.error(f"unknown method(s) {sorted(unknown)}: use a subset of {','.join(METHODS)}")
    if "mover" in methods:
        check = [sys.executable, "-c", "from iceberg_ops_provider.data_migration import DataMover"]
        if subprocess.run(check, check=False, capture_output=True).returncode != 0:
            raise SystemExit(
                "DataMover is not importable from iceberg_ops_provider.data_migration yet: "
                "run with --methods raw,naive, or once the mover is in place"
            )
    command = shlex.join(sys.orig_argv)
    environment = _environment()
    fingerprint = _code_fingerprint()
    cache, shapes = prepare_data(args.cache, args.small_gib, args.file_mib)
    scratch_root = Path(tempfile.mkdtemp(prefix="mover-bench-", dir=args.scratch))
    largest = max(shape["arrow_bytes"] for shape in shapes.values())
    _check_disk(scratch_root, largest // 2, "a copy of the larger table")
    settings = Settings(
        cache=cache,
        scratch=scratch_root,
        options={"processes": args.raw_processes, "mover": _mover_options(args.mover_option)},
        pause=args.pause,
        quiet=args.quiet,
        max_wait=args.max_wait,
        disturbed_share=args.disturbed_share,
        retries=args.retries,
        nice=args.nice,
    )
    cells: list[Cell] = [(m, size, mib) for m in methods for size in SIZES for mib in args.file_mib]

    rounds: list[Round] = []

    def run(cell: Cell) -> dict[str, Any]:
        sample = measure(cell, settings)
        if args.json:  # progress survives a failure later in the run
            rounds[-1].samples[cell] = sample
            _save(args.json, shapes, rounds, None)
        return sample

    try:
        for _ in range(args.rounds):
            run_round(rounds, cells, shapes, run)
        reruns = 0
        while reruns < args.max_reruns and (flagged := disturbed(rounds, args.disturbed)):
            worst = max(flagged, key=lambda number: flagged[number][0])
            next(r for r in rounds if r.number == worst).excluded = flagged[worst][1]
            print(f"round {worst} looks disturbed ({flagged[worst][1]}): rerunning it", flush=True)
            run_round(rounds, cells, shapes, run)
            reruns += 1
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)
    for number, (_, reason) in disturbed(rounds, args.disturbed).items():
        print(f"round {number} still looks disturbed ({reason}); kept: the rerun budget is spent", flush=True)
    summary = summarize(rounds, cells, shapes)
    environment["nice"] = str(args.nice)
    text = report(command, rounds, summary, shapes, cache, environment, args.disturbed_share)
    if _code_fingerprint() != fingerprint:
        text += "\n**The mover's source files changed while this ran: its rounds mix versions; run again.**\n"
    else:
        text += f"\nMover source fingerprint (sha256 of `iceberg_ops_provider/data_migration/*.py`): {fingerprint}.\n"
    print("\n" + text)
    if args.output:
        args.output.write_text(text)
    if args.json:
        _save(args.json, shapes, rounds, summary)


if __name__ == "__main__":
    main()
