"""crnn-ocr: CRNN text recognition with first-class multi-GPU training."""

__version__ = "0.1.0"

__all__ = ["Charset", "Prediction", "Recognizer", "__version__"]


def __getattr__(name: str) -> object:
    # Imported on first use, so that `import crnn.<anything>` stays light: a tool such
    # as create_lmdb needs neither NumPy nor PyTorch, and the Recognizer pulls in both.
    if name == "Charset":
        from crnn.text.alphabet import Charset

        return Charset
    if name == "Prediction":
        from crnn.ctc import Prediction

        return Prediction
    if name == "Recognizer":
        from crnn.reading.recognizer import Recognizer

        return Recognizer
    raise AttributeError(f"module 'crnn' has no attribute {name!r}")
