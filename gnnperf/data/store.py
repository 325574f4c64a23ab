"""The sample store: a directory of small, immutable Parquet shards of sample rows.

Writers never modify a shard: each :meth:`SampleStore.write_shard` writes a new file to a temporary name in the
same directory, fsyncs it and renames it into place, so a reader sees a whole shard or none, and a killed
writer leaves only a ``*.tmp`` file that readers ignore and :meth:`SampleStore.compact` later removes. Any
number of processes may write to one store at once (names carry time, pid and a random part).

Reading deduplicates by ``sample_id``: the first ``ok`` row wins (a measurement is not replaced by a later
one), otherwise the latest row (a retried failure replaces the earlier failure).
"""

from __future__ import annotations

import os
import time
import uuid
import warnings
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from gnnperf.data.schema import COLUMNS, SCHEMA, make_sample
from gnnperf.errors import GnnperfError, GnnperfWarning

SHARD_GLOB = "shard-*.parquet"
TMP_SUFFIX = ".tmp"
STALE_TMP_S = 3600.0  # a .tmp this old belongs to a dead writer, not a slow one
# Shards of older schema versions may lack columns; those read as nulls.
_READ_SCHEMA = pa.schema([f.with_nullable(True) for f in SCHEMA])


class SampleStore:
    """Samples under ``root``.

    Args:
        root: the store's directory, created if missing; an unwritable one raises :class:`GnnperfError`.
        readonly: only read (e.g. a store to merge from): the directory must exist and is never written.
    """

    def __init__(self, root: str | os.PathLike, readonly: bool = False) -> None:
        self.root = Path(root)
        self.readonly = readonly
        if readonly:
            if self.root.is_file():
                raise GnnperfError(
                    f"sample store {self.root} is a file: a store is a directory of shard-*.parquet files"
                )
            if not self.root.is_dir():
                raise GnnperfError(f"sample store {self.root} does not exist")
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            # Probe with a unique name: nothing already stored is touched.
            probe = self.root / f".probe-{os.getpid()}-{uuid.uuid4().hex[:8]}{TMP_SUFFIX}"
            with open(probe, "wb") as f:
                f.write(b"probe")
                f.flush()
                os.fsync(f.fileno())
            probe.unlink()
        except OSError as e:
            raise GnnperfError(f"sample store {self.root} is not writable: {e.strerror or e}") from None

    def __repr__(self) -> str:
        return f"SampleStore({str(self.root)!r})"

    def shards(self) -> list[Path]:
        """Complete shard files, oldest name first (names start with a UTC timestamp)."""
        return sorted(self.root.glob(SHARD_GLOB))

    def write_shard(self, rows: Iterable[Mapping[str, Any]]) -> Path:
        """Validate ``rows`` (see :func:`gnnperf.data.schema.make_sample`) and write them as one new shard."""
        self._check_writable()
        samples = [make_sample(**row) for row in rows]
        if not samples:
            raise ValueError("write_shard needs at least one row")
        table = pa.Table.from_pylist(samples, schema=SCHEMA)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        path = self.root / f"shard-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = path.with_name(path.name + TMP_SUFFIX)
        try:
            with open(tmp, "wb") as f:
                pq.write_table(table, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.root)  # make the rename itself durable
        return path

    def read(self, status: str | Iterable[str] | None = None, dedup: bool = True) -> pd.DataFrame:
        """All samples as a DataFrame with the schema's columns, deduplicated by ``sample_id``.

        Args:
            status: keep only rows with this status (or these statuses), applied after deduplication.
            dedup: ``False`` returns every stored row, duplicates included.

        An unreadable (corrupt, truncated) shard is skipped with a warning naming the file.
        """
        df = _to_frame(self._tables(self.shards()))
        if dedup:
            df = deduplicate(df)
        if status is not None:
            wanted = [status] if isinstance(status, str) else list(status)
            df = df[df["status"].isin(wanted)].reset_index(drop=True)
        return df

    def existing_ids(self, status: str | Iterable[str] | None = None) -> set[str]:
        """The sample ids already stored (with ``status`` after deduplication, when given): those a read returns,
        so a shard that cannot be read whole does not count as holding its samples."""
        return set(self.read(status=status, dedup=status is not None)["sample_id"])

    def merge(self, other_roots: Iterable[str | os.PathLike]) -> int:
        """Copy rows from other stores that this one lacks; returns the rows added (0 when run again).

        A row counts as present when a row with the same ``sample_id``, ``status`` and ``created_at`` is
        stored, so merging twice, or merging stores that share rows, adds nothing new.
        """
        self._check_writable()
        have = self._row_keys(self.read(dedup=False))
        new: list[dict[str, Any]] = []
        for root in other_roots:
            if Path(root).resolve() == self.root.resolve():
                continue
            other = SampleStore(root, readonly=True)
            for row in other.read(dedup=False).to_dict("records"):
                key = (row["sample_id"], row["status"], row["created_at"])
                if key not in have:
                    have.add(key)
                    new.append(_plain(row))
        if new:
            self.write_shard(new)
        return len(new)

    def compact(self) -> Path | None:
        """Rewrite all readable shards as one deduplicated shard; removes the old ones and stale ``.tmp`` files.

        Safe against concurrent writers (shards written meanwhile are left alone) and against being killed
        (the new shard is in place before any old one is removed; duplicates are resolved on read). Corrupt
        shards are left where they are, for a person to look at. Returns the new shard, or ``None`` if empty.
        """
        self._check_writable()
        self._remove_stale_tmp()
        old = self.shards()
        readable: list[Path] = []
        tables = self._tables(old, readable=readable)
        df = deduplicate(_to_frame(tables))
        new = self.write_shard(_plain(r) for r in df.to_dict("records")) if len(df) else None
        for path in readable:
            path.unlink(missing_ok=True)
        if readable:
            _fsync_dir(self.root)
        return new

    def _check_writable(self) -> None:
        if self.readonly:
            raise GnnperfError(f"sample store {self.root} was opened read-only")

    def _tables(self, paths: list[Path], readable: list[Path] | None = None) -> list[pa.Table]:
        """The shards at ``paths`` in the current schema (:func:`_aligned`); ``readable`` collects those read."""
        tables = []
        for path in paths:
            try:
                table = _aligned(pq.read_table(path))
            except FileNotFoundError:
                continue  # removed by a concurrent compact()
            except (OSError, pa.ArrowException, ValueError) as e:
                # left on disk (compact() keeps it): a shard that cannot be read is no reason to lose it
                message = f"skipping unreadable sample shard {path}: {e}"
                warnings.warn(message, GnnperfWarning, stacklevel=3)
                continue
            tables.append(table)
            if readable is not None:
                readable.append(path)
        return tables

    def _remove_stale_tmp(self) -> None:
        cutoff = time.time() - STALE_TMP_S
        for tmp in self.root.glob(f"*{TMP_SUFFIX}"):
            try:
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
            except FileNotFoundError:
                pass

    @staticmethod
    def _row_keys(df: pd.DataFrame) -> set[tuple[str, str, str]]:
        return set(zip(df["sample_id"], df["status"], df["created_at"], strict=True))


def deduplicate(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ``sample_id``: the first ``ok`` row by ``created_at``, else the latest row."""
    if df.empty:
        return df
    df = df.sort_values("created_at", kind="stable")
    ok = df[df["status"] == "ok"].drop_duplicates("sample_id", keep="first")
    rest = df[~df["sample_id"].isin(ok["sample_id"])].drop_duplicates("sample_id", keep="last")
    return pd.concat([ok, rest]).sort_values("created_at", kind="stable").reset_index(drop=True)


def _aligned(table: pa.Table) -> pa.Table:
    """A shard of any schema version -> the current columns (missing ones null, extra dropped).

    Raises:
        ValueError: no ``sample_id`` column (not a sample shard); pyarrow's error for a column that does not cast.
    """
    if "sample_id" not in table.column_names:
        raise ValueError("no sample_id column: not a sample shard")
    columns = []
    for field in SCHEMA:
        if field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=_READ_SCHEMA)


def _to_frame(tables: list[pa.Table]) -> pd.DataFrame:
    """Aligned tables (:func:`_aligned`) -> one DataFrame."""
    if not tables:
        return _READ_SCHEMA.empty_table().to_pandas()
    return pa.concat_tables(tables).to_pandas()


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """A DataFrame record back to plain Python values (NaN/NA -> None, numpy scalars -> Python)."""
    out = {}
    for k in COLUMNS:
        v = row.get(k)
        if v is not None and pd.isna(v):
            v = None
        elif hasattr(v, "item"):
            v = v.item()
        out[k] = v
    return out


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems do not support fsync on directories
    finally:
        os.close(fd)


def selection(query: str | None, exclude: Mapping[str, str | None] | None = None) -> str | None:
    """One ``DataFrame.query`` expression: the rows ``query`` selects (all when ``None``) that no ``exclude`` one does.

    ``exclude`` names expressions of rows never to use (a ``None`` value switches one off), so a config adds to the
    exclusions it inherits instead of repeating them: Hydra merges mappings where it replaces strings and lists.
    """
    left = " or ".join(f"({' '.join(e.split())})" for e in (exclude or {}).values() if e)
    if not left:
        return query or None
    return f"({query}) and not ({left})" if query else f"not ({left})"


def select_samples(samples: pd.DataFrame, query: str) -> pd.DataFrame:
    """The rows of ``samples`` that ``query`` (a ``DataFrame.query`` expression) selects; a bad one is a user error."""
    try:
        selected = samples.query(" ".join(query.split()))  # a YAML block may hold line breaks pandas rejects
    except Exception as e:  # pandas raises many types for a bad expression
        raise GnnperfError(f"bad sample query {query!r}: {type(e).__name__}: {e}") from None
    if not isinstance(selected, pd.DataFrame):
        raise GnnperfError(f"bad sample query {query!r}: it does not select rows")
    return selected
