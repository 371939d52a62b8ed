"""crnn-ocr as OCRmyPDF's OCR engine: scanned PDFs and images made searchable, each page
read by the one reader (``Recognizer.read_page``, as ``crnn-predict`` reads it) and handed
to OCRmyPDF as hOCR (``crnn.reading.writers.to_hocr``), which lays the invisible text
over the page::

    pip install "crnn-ocr[ocrmypdf]"
    ocrmypdf --plugin crnn.ocrmypdf scan.pdf searchable.pdf
    ocrmypdf --plugin crnn.ocrmypdf --crnn-model zh 扫描件.pdf 可搜索.pdf

Options (after ``--plugin``): ``--crnn-model`` (a bundled model, ``word``, ``line`` or
``zh``, default ``line``; or a checkpoint or ``.onnx`` path), ``--crnn-layout`` (``auto``,
``page``, ``line``) and ``--crnn-threads``. OCRmyPDF's own options (``--jobs``, ``--output-type``,
``--skip-text``, ``--force-ocr``...) work as with Tesseract, which this plugin replaces:
it need not be installed. OCRmyPDF runs pages in parallel (``--jobs``), so each reader
keeps to one thread by default; ``-l``/``--language`` is ignored (the model decides what it
reads). Page rotation and deskew are left to crnn-ocr's reader (a turned page is read
turned), so OCRmyPDF's ``--rotate-pages`` and ``--deskew`` do nothing here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ocrmypdf import hookimpl
from ocrmypdf.pluginspec import OcrEngine, OrientationConfidence

log = logging.getLogger(__name__)

TESSERACT_PLUGIN = "ocrmypdf.builtin_plugins.tesseract_ocr"
DEFAULT_MODEL = "line"
_READERS: dict[tuple[str, int], Any] = {}  # one reader per model and thread count, per process


@hookimpl
def initialize(plugin_manager: Any) -> None:
    # The built-in Tesseract plugin checks for the tesseract program even when another
    # engine reads: blocked, this one is the engine and Tesseract need not be installed.
    plugin_manager.set_blocked(TESSERACT_PLUGIN)


@hookimpl
def register_options() -> dict[str, Any]:
    # OCRmyPDF's core still reads the Tesseract options' defaults (timeouts, page
    # segmentation), so they stay registered while the plugin itself is blocked.
    from ocrmypdf.builtin_plugins.tesseract_ocr import TesseractOptions

    return {"tesseract": TesseractOptions}


@hookimpl
def add_options(parser: Any) -> None:
    from ocrmypdf.builtin_plugins import tesseract_ocr

    tesseract_ocr.add_options(parser)
    group = parser.add_argument_group("crnn-ocr", "crnn-ocr reads the pages (crnn.ocrmypdf)")
    group.add_argument(
        "--crnn-model",
        default=DEFAULT_MODEL,
        help="the model that reads: a bundled one (word, line or zh; default line) or a "
        "checkpoint or .onnx file",
    )
    group.add_argument(
        "--crnn-layout",
        default="auto",
        choices=("auto", "page", "line"),
        help="auto: the reader decides whether a page image is a page or one line (default)",
    )
    group.add_argument(
        "--crnn-threads",
        type=int,
        default=1,
        help="threads each page's reader uses (default 1: OCRmyPDF reads --jobs pages at once)",
    )


def _option(options: Any, name: str, default: Any) -> Any:
    value = getattr(options, name, None)
    if value is None:
        value = getattr(options, "extra_attrs", {}).get(name)
    return default if value is None else value


def _model(options: Any) -> str:
    return str(_option(options, "crnn_model", DEFAULT_MODEL))


@hookimpl
def check_options(options: Any) -> None:
    from ocrmypdf.exceptions import BadArgsError

    from crnn.bundled import BUNDLED

    model = _model(options)
    if model not in BUNDLED and not Path(model).is_file():
        raise BadArgsError(
            f"--crnn-model {model!r}: no such file and no bundled model of that name; "
            f"expected one of {', '.join(sorted(BUNDLED))} or a checkpoint / .onnx path"
        )
    if int(_option(options, "crnn_threads", 1)) < 1:
        raise BadArgsError("--crnn-threads must be at least 1")


def reader(model: str, threads: int = 1) -> Any:
    """The process's reader for ``model`` (built on first use: OCRmyPDF's workers are
    threads or processes, each page a call)."""
    key = (model, threads)
    if key not in _READERS:
        from crnn.bundled import model_file
        from crnn.reading.options import ReadOptions

        _READERS[key] = ReadOptions(threads=threads).reader(model_file(model))
    return _READERS[key]


def read_to_hocr(
    image_file: Path, hocr: Path, text: Path, model: str, layout: str, threads: int
) -> None:
    """One page image read and written as hOCR and plain text."""
    from PIL import Image

    from crnn.reading.writers import to_hocr, to_text

    with Image.open(image_file) as im:
        size = im.size
        page = reader(model, threads).read_page(im.convert("RGB"), layout)
    hocr.write_text(to_hocr(page, size, Path(image_file).name), encoding="utf-8")
    text.write_text(to_text(page), encoding="utf-8")


class CrnnOcrEngine(OcrEngine):
    """OCRmyPDF's OcrEngine over crnn-ocr's reader."""

    @staticmethod
    def version() -> str:
        from crnn import __version__

        return __version__

    @staticmethod
    def creator_tag(options: Any) -> str:
        return f"crnn-ocr {CrnnOcrEngine.version()} ({_model(options)})"

    def __str__(self) -> str:
        return f"crnn-ocr {self.version()}"

    @staticmethod
    def languages(options: Any) -> set[str]:
        # OCRmyPDF checks -l against this; the model decides what it reads.
        return {"eng", "chi_sim", "chi_tra", "osd"} | set(getattr(options, "languages", None) or [])

    @staticmethod
    def get_orientation(input_file: Path, options: Any) -> OrientationConfidence:
        return OrientationConfidence(angle=0, confidence=0.0)

    @staticmethod
    def get_deskew(input_file: Path, options: Any) -> float:
        return 0.0

    @staticmethod
    def generate_hocr(input_file: Path, output_hocr: Path, output_text: Path, options: Any) -> None:
        read_to_hocr(
            Path(input_file),
            Path(output_hocr),
            Path(output_text),
            _model(options),
            str(_option(options, "crnn_layout", "auto")),
            int(_option(options, "crnn_threads", 1)),
        )

    @staticmethod
    def generate_pdf(input_file: Path, output_pdf: Path, output_text: Path, options: Any) -> None:
        raise NotImplementedError(
            "crnn-ocr writes hOCR, which OCRmyPDF lays over the page: use --pdf-renderer auto "
            "or fpdf2 (the default), not sandwich"
        )


@hookimpl
def get_ocr_engine(options: Any) -> OcrEngine | None:
    if options is not None and getattr(options, "ocr_engine", "auto") == "none":
        return None
    return CrnnOcrEngine()
