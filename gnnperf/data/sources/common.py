"""Helpers shared by the public-table adapters: the import report, file discovery, CSV rows, spreads.

Every adapter reads what it can and reports what it cannot: a problem is one line ``file:row: reason``
(``file: reason`` where no row applies), and the rest of the table is still imported.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnperf.data.schema import INT64_MAX
from gnnperf.errors import GnnperfError


@dataclass(frozen=True)
class Problem:
    """Something in a table that was not imported, and why."""

    file: str
    row: int | None
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.file}:{self.row}: {self.reason}"
            if self.row is not None
            else f"{self.file}: {self.reason}"
        )


@dataclass
class ImportReport:
    """Counts and problems of one import.

    Attributes:
        source: the adapter's name (the samples' ``source`` column).
        files: table files read (skipped ones included).
        files_skipped: files not imported at all (unparseable name, unknown column layout, unreadable).
        rows: table rows (CSV data rows, JSON files) looked at.
        samples: samples produced.
        problems: everything not imported, one :class:`Problem` each.
        hardware: samples per hardware name.
        limit_reached: the import stopped early at the caller's limit.
    """

    source: str
    files: int = 0
    files_skipped: int = 0
    rows: int = 0
    samples: int = 0
    problems: list[Problem] = field(default_factory=list)
    hardware: Counter = field(default_factory=Counter)
    limit_reached: bool = False

    def problem(self, file: str, row: int | None, reason: str) -> None:
        # a folder name may not be UTF-8: printed and stored escaped
        self.problems.append(Problem(printable(file), row, printable(reason)))

    def skip_file(self, file: str, reason: str, row: int | None = None) -> None:
        self.files_skipped += 1
        self.problem(file, row, reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "files": self.files,
            "files_skipped": self.files_skipped,
            "rows": self.rows,
            "samples": self.samples,
            "hardware": dict(sorted(self.hardware.items())),
            "limit_reached": self.limit_reached,
            "problems": [str(p) for p in self.problems],
        }

    def summary(self) -> str:
        """One line of counts."""
        hw = ", ".join(f"{k} {v}" for k, v in sorted(self.hardware.items()))
        limit = " (stopped at --limit)" if self.limit_reached else ""
        return (
            f"{self.source}: {self.samples} samples from {self.rows} rows in {self.files} files "
            f"({self.files_skipped} skipped), {len(self.problems)} problems{limit}; hardware: {hw or '-'}"
        )


class Collector:
    """Gathers an adapter's samples: keeps sample ids unique and stops at ``limit``.

    Two rows with the same identity fields would be one sample in the store, the second silently dropped;
    here the second is reported (with the first one's ``source_ref``) instead.
    """

    def __init__(self, report: ImportReport, limit: int | None = None) -> None:
        if limit is not None and limit < 1:
            raise GnnperfError(f"bad limit {limit}: expected a positive number of samples")
        self.report = report
        self.limit = limit
        self.rows: list[dict[str, Any]] = []
        self._refs: dict[str, str] = {}

    @property
    def full(self) -> bool:
        return self.limit is not None and len(self.rows) >= self.limit

    def add(self, row: dict[str, Any], file: str, row_no: int | None) -> None:
        """Add a sample made by :func:`~gnnperf.data.schema.make_sample`, or report its duplicate."""
        first = self._refs.get(row["sample_id"])
        if first is not None:
            self.report.problem(file, row_no, f"same identity fields as {first}; not imported twice")
            return
        self._refs[row["sample_id"]] = row["source_ref"]
        self.rows.append(row)
        self.report.samples += 1
        self.report.hardware[row["hardware"]] += 1
        if self.full:
            self.report.limit_reached = True


def existing_path(path: str | Path, what: str) -> Path:
    """``path`` as a Path; a missing one is a user error."""
    p = Path(path)
    if not p.exists():
        raise GnnperfError(f"{what} path {path} does not exist")
    return p


def table_files(path: Path, pattern: str) -> list[Path]:
    """``path`` itself if it is a file, else the files under it matching ``pattern``, sorted."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob(pattern) if p.is_file())


def ref_name(file: Path, parts: int) -> str:
    """The last ``parts`` components of ``file`` joined by ``/``: a ``source_ref`` that does not depend on
    which folder level the user pointed at (``head/benchmark-...csv``)."""
    return printable("/".join(file.parts[-parts:]))


def printable(text: str) -> str:
    """``text`` with the bytes of a name that is not UTF-8 (``os.fsdecode``'s surrogates) written as ``\\xff``: as it
    is, such a name can be neither printed nor stored in a shard."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def csv_rows(
    file: Path, ref: str, report: ImportReport
) -> tuple[list[str], Iterator[tuple[int, list[str]]]] | None:
    """The header and ``(row number, cells)`` of the data rows (row 1 = first line after the header).

    Each line is one row, parsed on its own: the public tables quote nothing across lines, so a stray quote
    spoils its own row only, not every row after it, and row numbers stay line numbers. Rows with a different
    number of cells than the header (a file cut mid-row, a stray comma), that are not UTF-8 text (a damaged byte)
    or do not parse, or a last row without a line end are reported and left out. An unreadable or empty file, or one
    whose header is not UTF-8, is reported as skipped and gives ``None``.
    """
    try:
        data = Path(file).read_bytes()
    except OSError as e:
        report.skip_file(ref, f"cannot read: {e}")
        return None
    # Decoded line by line in effect: a byte that is not UTF-8 spoils its own row, not the whole file. A byte-order
    # mark would otherwise become part of the first column's name. Lines end at \n, \r\n or \r only:
    # str.splitlines() also breaks at form feeds and U+2028, and row numbers would drift.
    text = data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")  # a last empty line is skipped as blank
    # Every published table ends with a line end; a last row without one may be a copy cut mid-number (a time
    # "12.3" cut to "12" still parses), so it is reported and left out.
    cut_row = len(lines) - 1 if not text.endswith("\n") else None

    def parse(line: str) -> list[str]:
        return next(csv.reader([line]), [])

    if not is_utf8(lines[0]):
        report.skip_file(ref, "cannot read: the header is not UTF-8 text (another encoding?)")
        return None
    try:
        header = [c.strip() for c in parse(lines[0])]  # str.split gives at least one line
    except csv.Error as e:
        report.skip_file(ref, f"header does not parse: {e}")
        return None
    if not any(header):
        report.skip_file(ref, "empty file or no header")
        return None

    def rows() -> Iterator[tuple[int, list[str]]]:
        for i, line in enumerate(lines[1:], start=1):
            if not is_utf8(line):
                report.rows += 1
                report.problem(ref, i, "row is not UTF-8 text (a damaged byte?); left out")
                continue
            try:
                cells = parse(line)
            except csv.Error as e:
                report.rows += 1
                report.problem(ref, i, f"row does not parse: {e}")
                continue
            if not any(c.strip() for c in cells):
                continue  # blank line
            report.rows += 1
            if i == cut_row:
                report.problem(
                    ref,
                    i,
                    "last row has no line end (a truncated copy? if the file is whole, end it with a line break); left out",
                )
                continue
            if len(cells) != len(header):
                report.problem(
                    ref, i, f"{len(cells)} cells for {len(header)} columns (truncated or malformed row)"
                )
                continue
            yield i, [c.strip() for c in cells]

    return header, rows()


def is_utf8(line: str) -> bool:
    """Whether ``line`` (decoded with ``surrogateescape``) holds only UTF-8 text: no byte escaped as a surrogate."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Plain decimal notation, as the public tables write numbers. float() would also take "nan", "inf", "1_000" and
# surrounding whitespace; a cell like those is a damaged or hand-edited table, not a measurement.
_DECIMAL_RE = re.compile(r"\+?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER_RE = re.compile(r"\+?\d+(?:\.0*)?")  # "512" or "512.0"; not "5.12e2"


def positive_number(text: str | float) -> float | None:
    """A table cell in decimal notation (or a number) as a positive finite float, else None."""
    if isinstance(text, str) and not _DECIMAL_RE.fullmatch(text):
        return None
    try:
        x = float(text)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int too large for a float
        return None
    return x if math.isfinite(x) and x > 0 else None


def positive_int(text: str, maximum: int = INT64_MAX) -> int | None:
    """``"512"`` or ``"512.0"`` -> 512; anything else (fractions, exponents, blanks, <= 0, > ``maximum``) -> None."""
    if not _INTEGER_RE.fullmatch(text):
        return None
    digits = text.lstrip("+").split(".")[0]
    if len(digits) > 19:  # past int64 (and int() refuses strings past 4,300 digits)
        return None
    x = int(digits)
    return x if 0 < x <= maximum else None


def spread(times_ms: list[float]) -> dict[str, Any]:
    """Median, p10, p90, CV and count of per-iteration times, computed as the harness computes them."""
    import numpy as np

    ms = np.asarray(times_ms, dtype=np.float64)
    p10, p50, p90 = np.percentile(ms, [10, 50, 90])
    mean = float(ms.mean())
    return {
        "iteration_time_ms": float(p50),
        "time_p10_ms": float(p10),
        "time_p90_ms": float(p90),
        "time_cv": float(ms.std(ddof=1) / mean) if len(ms) > 1 and mean > 0 else 0.0,
        "n_iters": len(ms),
    }
