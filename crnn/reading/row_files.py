"""Rows of reads written to a file as they come, and a rerun that resumes from it:
``crnn-predict --ray ... --output FILE.jsonl|FILE.parquet``.

A row is what :class:`crnn.reading.ray_reader.RayReader` gives for one input: ``path``,
``text``, ``confidence``, ``layout``, ``result`` (the JSON record ``crnn-predict --json``
writes) and ``error`` (empty when it was read).

- **JSON lines** (``.jsonl``): one record a line, the read's own record or ``{"path",
  "error"}``, appended and flushed one by one: a killed run keeps every line it finished
  (a torn last line is cut), and a rerun skips the paths the file holds.
- **Parquet** (``.parquet``): the six columns, a row group every :data:`ROW_GROUP` rows,
  written beside the output (``FILE.parquet.partial``) and moved over it when the run
  ends. A rerun keeps the rows of a finished file and reads only the inputs it lacks; a
  killed run's partial file (no footer yet) is read again from the finished one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from crnn.sharding import JsonlLog

ROW_GROUP = 1000
SUFFIXES = (".jsonl", ".parquet")


def open_rows(path: str | os.PathLike[str]) -> JsonlRows | ParquetRows:
    """The writer for ``path`` by its suffix. ValueError for another suffix, or a file
    there that cannot be resumed from."""
    p = Path(path)
    if p.suffix == ".parquet":
        return ParquetRows(p)
    if p.suffix == ".jsonl":
        return JsonlRows(p)
    raise ValueError(
        f"--output {path}: rows are written as JSON lines (FILE.jsonl) or Parquet "
        f"(FILE.parquet), got {p.suffix or 'no suffix'!r}"
    )


class JsonlRows:
    """JSON lines appended as they come (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self._log = JsonlLog(path)
        self.path = path
        self.done = self._log.keys()

    def write(self, row: dict[str, Any]) -> None:
        if row.get("error"):
            record = json.dumps({"path": row["path"], "error": row["error"]}, ensure_ascii=False)
        else:
            record = row["result"]
        self._log.append(record)

    def close(self) -> None:
        self._log.close()


class ParquetRows:
    """Parquet row groups, the file moved into place at the end (see the module
    docstring). Needs pyarrow (Ray Data's own dependency)."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path, self.partial = path, Path(f"{path}.partial")
        self.schema = pa.schema(
            [
                ("path", pa.string()),
                ("text", pa.string()),
                ("confidence", pa.float64()),
                ("layout", pa.string()),
                ("result", pa.string()),
                ("error", pa.string()),
            ]
        )
        kept = None
        if path.is_file():
            try:
                kept = pq.read_table(path).select(self.schema.names).cast(self.schema)
            except Exception as e:  # pyarrow's errors have no common base but Exception
                raise ValueError(
                    f"--output {path} is there but is no Parquet file of reads to resume from "
                    f"({e}); move it away or name another file"
                ) from None
        self.done = set(kept.column("path").to_pylist()) if kept is not None else set()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(self.partial, self.schema)
        if kept is not None and kept.num_rows:
            self._writer.write_table(kept, row_group_size=ROW_GROUP)
        self._rows: list[dict[str, Any]] = []

    def write(self, row: dict[str, Any]) -> None:
        self._rows.append(
            {
                "path": str(row["path"]),
                "text": row.get("text") or "",
                "confidence": float(row.get("confidence") or 0.0),
                "layout": row.get("layout") or "",
                "result": row.get("result") or "",
                "error": row.get("error") or "",
            }
        )
        if len(self._rows) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self.schema))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
        os.replace(self.partial, self.path)
