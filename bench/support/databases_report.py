"""The ``databases`` scenario's figures and its report (bench/databases-results.md)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from bench.scenarios.latency import percentile
from bench.support.callgrind import commit
from bench.support.database import machine
from bench.support.results import command
from bench.support.timing import Figure, load

TITLES = {"postgresql": "PostgreSQL", "sqlite": "SQLite", "mariadb": "MariaDB"}
#: Issues 38/39/42: a lease drain's share of the raw loop at the worker's batch size.
TARGET = 0.75
#: The concurrency of the drain beside done jobs (one worker process on each database).
BESIDE = {"postgresql": 16, "sqlite": 1, "mariadb": 16}


@dataclass
class Results:
    """Everything one run measured, by database (or peer) and case."""

    reps: int
    jobs: int
    #: Done jobs ahead of the drain beside them (0: none measured).
    beside: int = 0
    load_start: str = field(default_factory=load)
    minutes: float = 0.0
    figures: dict[tuple[str, str], Figure] = field(default_factory=dict)
    #: (database, concurrency) -> (processes, jobs claimed per transaction by each).
    shapes: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    peer_jobs: dict[tuple[str, int], int] = field(default_factory=dict)
    wakes: dict[str, list[float]] = field(default_factory=dict)
    wake_notes: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    #: (database, concurrency) -> per repetition, the drain's statements, commits... per job.
    statements: dict[tuple[str, int], list[dict[str, float]]] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)
    #: (database or peer, concurrency) -> per repetition, (CPU µs per job of every worker
    #: process, the first worker process's peak RSS in KiB).
    costs: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)

    def cost(self, who: str, concurrency: int) -> tuple[float, float] | None:
        """Median CPU µs per job and median peak RSS (MiB) of `who`'s drains, if measured."""
        runs = self.costs.get((who, concurrency))
        if not runs:
            return None
        return statistics.median(c for c, _ in runs), statistics.median(r for _, r in runs) / 1024

    def figure(self, who: str, case: str) -> Figure:
        """The figure of `who`'s `case`, made on first use."""
        return self.figures.setdefault((who, case), Figure(f"{who} {case}"))


def cell(figure: Figure | None) -> str:
    """A rate's cell: median (min-max), or what kept it from being measured."""
    if figure is None:
        return "-"
    if figure.rates:
        return figure.cell()
    return figure.note or "-"


def share(ours: Figure | None, limit: Figure | None, goal: float = TARGET) -> str:
    """`ours` as a share of `limit`, and whether it reaches `goal`."""
    if ours is None or limit is None or not ours.rates or not limit.rates:
        return "-"
    ratio = ours.median / limit.median
    return f"**{ratio:.1%}** {'held' if ratio >= goal else 'NOT held'}"


def beside_cell(f: Any, name: str, case: str = "drain beside") -> str:
    """The drain beside done jobs, and its share of the same drain on an empty table."""
    beside, empty = f((name, case)), f((name, f"drain {BESIDE[name]}"))
    if beside is None or not beside.rates:
        return cell(beside)
    if empty is None or not empty.rates:
        return beside.cell()
    return f"{beside.cell()}: {beside.median / empty.median:.0%}"


def wake_cell(results: Results, who: str) -> str:
    ms = results.wakes.get(who)
    if not ms:
        return results.wake_notes.get(who, "-")
    return f"{percentile(ms, 50):.1f} / {percentile(ms, 99):.1f} ({len(ms)} samples)"


def fixed_cell(figure: Figure | None, jobs: int) -> str:
    """A drain of `jobs` jobs as milliseconds: the drain's fixed cost."""
    if figure is None or not figure.rates:
        return cell(figure)
    ms = sorted(jobs / rate * 1000 for rate in figure.rates)
    return f"{jobs / figure.median * 1000:.0f} ms ({ms[0]:.0f}-{ms[-1]:.0f})"


#: Statements of one raw loop transaction (BEGIN and COMMIT not counted): claim + done;
#: MariaDB's claim is three (the locked ids, the UPDATE by id, the read of the rows).
RAW_STATEMENTS = {"postgresql": 2, "sqlite": 2, "mariadb": 4}


def count_cell(results: Results, name: str, concurrency: int) -> str:
    """The drain's statements and commits per 100 jobs (median rep), beside the raw loop's."""
    counted = results.statements.get((name, concurrency))
    how = results.shapes.get((name, concurrency))
    if not counted or how is None:
        return "-"
    middle = sorted(counted, key=lambda c: c.get("statements", 0))[len(counted) // 2]
    batches = 100 / how[1]
    raw = f"{RAW_STATEMENTS[name] * batches:.1f} / {batches:.1f}"
    return f"{100 * middle.get('statements', 0):.1f} / {100 * middle.get('commits', 0):.1f} ({raw})"


def cpu_cell(results: Results, f: Any, name: str, concurrency: int) -> str:
    """The workers' CPU µs per job (median rep) beside the raw loop's wall µs per job."""
    counted = results.statements.get((name, concurrency))
    raw = f((name, f"raw {concurrency}"))
    if not counted or raw is None or not raw.rates:
        return "-"
    cpu = sorted(c.get("cpu_us", 0.0) for c in counted)[len(counted) // 2]
    return f"{cpu:.0f} µs ({1e6 / raw.median:.0f} µs)"


def report(results: Results, names: list[str], fixed_jobs: int) -> str:
    """The markdown report of a run over `names` (databases)."""
    f = results.figures.get
    cols = [n for n in names if n not in results.unreachable]
    concurrencies = sorted({c for (n, c) in results.shapes if n in cols})
    head = "| per second | " + " | ".join(TITLES[n] for n in cols) + " |"
    rows = [head, "|---|" + "---|" * len(cols)]

    def row(label: str, cells: list[str]) -> None:
        rows.append(f"| {label} | " + " | ".join(cells) + " |")

    row("enqueue, 1 per transaction", [cell(f((n, "enqueue 1"))) for n in cols])
    row("enqueue_many, 1,000 per transaction", [cell(f((n, "enqueue batch"))) for n in cols])
    row(
        "raw multi-row INSERT, 1,000 per transaction",
        [cell(f((n, "raw insert batch"))) for n in cols],
    )
    for c in concurrencies:
        row(f"**drain, concurrency {c}**: sa-jobqueue", [cell(f((n, f"drain {c}"))) for n in cols])
        raws = []
        for n in cols:
            how = results.shapes.get((n, c))
            raws.append(cell(f((n, f"raw {c}"))) + (f" [{how[0]} x {how[1]}/tx]" if how else ""))
        row("raw claim-and-complete loop [processes x jobs per transaction]", raws)
        row(
            f"sa-jobqueue / raw at {c} (target >= {TARGET:.0%})",
            [share(f((n, f"drain {c}")), f((n, f"raw {c}"))) for n in cols],
        )
        row(
            f"statements / commits per 100 jobs at {c}: sa-jobqueue (raw)",
            [count_cell(results, n, c) for n in cols],
        )
        row(
            f"worker CPU per job at {c}, all processes (raw loop's wall time per job)",
            [cpu_cell(results, f, n, c) for n in cols],
        )
    if any(f((n, "drain beside")) for n in cols):
        row(
            f"drain beside {results.beside:,} done jobs ahead in claim order, concurrency "
            + " / ".join(f"{BESIDE[n]}" for n in cols)
            + " (share of the drain at that concurrency on an empty table)",
            [beside_cell(f, n) for n in cols],
        )
        row(
            "the same, MySQL's claim index as before `sajq_0013` (no status in its key)",
            [beside_cell(f, n, "drain beside, index before sajq_0013") for n in cols],
        )
    row(
        f"a drain's fixed cost: {fixed_jobs} jobs at concurrency 1, go -> drained",
        [fixed_cell(f((n, f"drain {fixed_jobs}")), fixed_jobs) for n in cols],
    )
    row("wake-up p50 / p99 ms (commit -> handler start)", [wake_cell(results, n) for n in cols])
    lines = [
        "# PostgreSQL, SQLite and MariaDB side by side (issues 38, 39, 42)",
        "",
        f"`{command()}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{results.minutes:.1f} min; load average at start {results.load_start}, at end {load()}; "
        f"commit `{commit()}`. {results.jobs:,} no-op jobs per drain (lease mode); jobs/s, "
        f"median of {results.reps} interleaved repetitions (min-max).",
        "",
        *[f"- {k}: {v}" for k, v in machine().items() if not k.startswith("load")],
        *[f"- {TITLES[n]}: {results.settings.get(n, '')}" for n in cols],
        *[f"- {TITLES[n]}: not measured ({why})" for n, why in results.unreachable.items()],
        "",
        *rows,
    ]
    if "sqlite" in cols and any(who in ("huey", "dbos") for who, _ in results.figures):
        lines += ["", *peers_table(results)]
    lines += [
        "",
        "The raw loops claim and complete in one transaction per batch (the fenced done of",
        "the batch before COMMIT), on one connection per process, with the worker's batch:",
        "its concurrency plus `WorkerConfig.prefetch`. SQLite's drains above concurrency 1",
        "run over several worker processes on one file, and so does its raw loop. Wake-up:",
        "one idle worker process at its defaults (PostgreSQL: LISTEN/NOTIFY; SQLite: its",
        "watch of the file's commits; MariaDB: its watch of the table's highest id). A drain's",
        "rate is go -> the last worker's drain() returning, so it includes a fixed cost",
        f"(the row of {fixed_jobs} jobs) that the raw loop does not pay.",
    ]
    return "\n".join(lines) + "\n"


def peers_table(results: Results) -> list[str]:
    """SQLite beside huey (``SqliteHuey``) and DBOS on SQLite, each at its defaults."""
    f = results.figures.get
    rows = [
        "| SQLite, per second | sa-jobqueue | huey (SqliteHuey) | DBOS "
        "| sa-jobqueue / faster peer (drains: target >= 1x) |",
        "|---|---|---|---|---|",
    ]
    for label, case in [
        ("enqueue, 1 per transaction", "enqueue 1"),
        *[(f"drain, concurrency {c}", f"drain {c}") for c in (1, 8)],
    ]:
        ours = f(("sqlite", case))
        peers = [f((who, case)) for who in ("huey", "dbos")]
        measured = [p for p in peers if p is not None and p.rates]
        best = max(measured, key=lambda p: p.median) if measured else None
        ratio = "-"
        if ours is not None and ours.rates and best is not None:
            x = ours.median / best.median
            held = "" if case.startswith("enqueue") else (" held" if x >= 1 else " NOT held")
            ratio = f"**{x:.2f}x** ({best.name.split()[0]}){held}"
        rows.append(f"| {label} | {cell(ours)} | {cell(peers[0])} | {cell(peers[1])} | {ratio} |")
    rows.append(
        "| wake-up p50 / p99 ms | "
        + " | ".join(wake_cell(results, who) for who in ("sqlite", "huey", "dbos"))
        + " | - |"
    )
    for label, concurrency, index in (
        ("CPU per job drained at 8, µs (every worker process)", 8, 0),
        ("peak RSS of the worker process at 1, MiB", 1, 1),
    ):
        costs = [results.cost(who, concurrency) for who in ("sqlite", "huey", "dbos")]
        cells = [f"{c[index]:,.1f}" if c else "-" for c in costs]
        theirs = [c[index] for c in costs[1:] if c]
        ratio = "-"
        if costs[0] and theirs:
            x = costs[0][index] / min(theirs)
            ratio = f"**{x:.2f}x** of the lowest peer's {'held' if x <= 1 else 'NOT held'}"
        rows.append(f"| {label} | {' | '.join(cells)} | {ratio} |")
    counts = ", ".join(
        f"{n:,} at {c}" for (who, c), n in results.peer_jobs.items() if who == "dbos"
    )
    rows += [
        "",
        "huey: `SqliteHuey(filename=...)` and its consumer's thread workers (`workers=C`);",
        "DBOS: `system_database_url` the SQLite file, one queue registered with",
        f"`worker_concurrency=C`, its 1 s queue poll, so its drains hold fewer jobs ({counts});",
        "DBOS's enqueue is `DBOSClient.enqueue`. Both drain in one process (their consumer",
        "and queue runner), timed from start to the last job's end.",
    ]
    return rows
