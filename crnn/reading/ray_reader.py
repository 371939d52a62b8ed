"""Reading millions of images on a Ray cluster: the one reader as a Ray Data
``map_batches`` class (an actor pool, each actor loading the model once), and the
pipeline ``crnn-predict --ray`` runs.

    import ray
    from crnn.reading.ray_reader import RayReader

    ds = ray.data.read_binary_files("s3://bucket/scans/", include_paths=True)
    ds = ds.map_batches(RayReader, fn_constructor_kwargs={"model": "zh"},
                        compute=ray.data.ActorPoolStrategy(size=8), batch_size=32)
    ds.write_parquet("s3://bucket/ocr/")          # or ds.iter_rows(), ds.write_json(...)

Each row in: ``bytes`` (encoded image, as ``read_binary_files`` gives it) or ``path``
(a file every worker can open, or a PDF page as ``crnn-predict`` names it,
``doc.pdf#page=N``, rendered at ``dpi``) or both; rows out: ``path``, ``text``, ``confidence``,
``layout``, ``result`` (the JSON record ``crnn-predict --json`` writes for it, lines and
boxes included) and ``error`` (empty when it was read). A file that does not decode is its
own error row: it never costs the rest of its batch. Reading is the same call as
``crnn-predict``'s (``Recognizer.read_pages``), so a Ray run reads what one process reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

COLUMNS = ("path", "text", "confidence", "layout", "result", "error")


class RayReader:
    """A callable class for ``ray.data.Dataset.map_batches`` (``fn_constructor_kwargs``:
    these arguments): ``model`` a bundled name (``word``, ``line``, ``zh``) or a checkpoint
    or ``.onnx`` path; ``layout`` ``auto``, ``page`` or ``line``; ``threads`` per actor
    (1: give Ray one CPU per actor, ``num_cpus=1``); ``options``: more
    :class:`crnn.reading.options.ReadOptions` fields (``beam``, ``rotate``...)."""

    def __init__(
        self,
        model: str = "line",
        layout: str = "auto",
        threads: int = 1,
        dpi: int = 0,
        **options: Any,
    ) -> None:
        from crnn.bundled import model_file
        from crnn.reading.options import ReadOptions

        if layout not in ("auto", "page", "line"):
            raise ValueError(f"layout={layout!r}: expected 'auto', 'page' or 'line'")
        read = ReadOptions(threads=threads, **options)
        self.reader = read.reader(model_file(model, read.device))
        self.layout = layout
        self.rotate = read.rotate == "auto"
        self.dpi = dpi

    def __call__(self, batch: dict[str, Any]) -> dict[str, np.ndarray]:
        if "bytes" not in batch and "path" not in batch:
            raise KeyError(
                f"a batch with columns {sorted(batch)}: expected 'bytes' (encoded images, "
                "ray.data.read_binary_files) or 'path' (files every worker can open)"
            )
        n = len(batch["bytes"] if "bytes" in batch else batch["path"])
        paths = [str(p) for p in batch["path"]] if "path" in batch else [""] * n
        if "bytes" in batch:
            sources: list[Any] = [bytes(b) for b in batch["bytes"]]
        else:
            sources = [self._open(p) for p in paths]
        rows = read_rows(self.reader, sources, paths, self.layout, self.rotate)
        return {c: np.array([r[c] for r in rows], dtype=object) for c in COLUMNS}

    def _open(self, path: str) -> Any:
        """A path as ``crnn-predict`` opens it (a PDF page rendered), or the error."""
        from crnn.data.image import ImageDecodeError
        from crnn.data.pdf import DEFAULT_DPI
        from crnn.reading.inputs import open_input

        try:
            return open_input(path, self.reader.spec.rgb, self.dpi or DEFAULT_DPI)
        except ImageDecodeError as e:
            return e


def read_rows(
    reader: Any, sources: Sequence[Any], paths: Sequence[str], layout: str, rotate: bool = False
) -> list[dict[str, Any]]:
    """Each source read (``Recognizer.read_pages``), as a row of :data:`COLUMNS` (a source
    that is already an ``ImageDecodeError`` is its error row)."""
    from crnn.data.image import ImageDecodeError
    from crnn.reading.results import page_result

    todo = [s for s in sources if not isinstance(s, ImageDecodeError)]
    read = iter(reader.read_pages(todo, layout, errors="return"))
    pages = [s if isinstance(s, ImageDecodeError) else next(read) for s in sources]
    rows = []
    for path, page in zip(paths, pages):
        if isinstance(page, ImageDecodeError):
            rows.append(
                dict(path=path, text="", confidence=0.0, layout="", result="", error=str(page))
            )
            continue
        record = page_result(page, path, rotate)
        rows.append(
            dict(
                path=path,
                text=page.text,
                confidence=float(page.confidence),
                layout=page.layout,
                result=json.dumps(record, ensure_ascii=False),
                error="",
            )
        )
    return rows


def read_on_ray(
    files: Sequence[str],
    model: str,
    address: str = "local",
    layout: str = "auto",
    actors: int = 0,
    batch_size: int = 16,
    dpi: int = 0,
    **options: Any,
) -> Iterator[dict[str, Any]]:
    """``files`` read on the Ray cluster at ``address`` (``local``: a cluster started in
    this process; ``auto``: the one ``ray start`` runs here; ``ray://host:10001``: a
    remote one) by ``actors`` readers (0: one per CPU of the cluster), each row as
    :class:`RayReader` writes it, in the order of ``files``."""
    import ray

    ray.data.DataContext.get_current().execution_options.preserve_order = True
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, log_to_driver=False)
    actors = actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
    ds = ray.data.from_items([{"path": f} for f in files])
    ds = ds.map_batches(
        RayReader,
        fn_constructor_kwargs=dict(model=model, layout=layout, dpi=dpi, **options),
        compute=ray.data.ActorPoolStrategy(size=actors),
        batch_size=batch_size,
        num_cpus=1,
    )
    for row in ds.iter_rows():
        yield {c: row[c] for c in COLUMNS}
