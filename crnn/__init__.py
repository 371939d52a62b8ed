"""crnn-ocr: CRNN text recognition with first-class multi-GPU training."""

__version__ = "0.1.0"

from crnn.charset import Charset
from crnn.ctc import Prediction

__all__ = ["Charset", "Prediction", "Recognizer", "__version__"]


def __getattr__(name: str) -> object:
    # Recognizer pulls in the engine; import it on first use so `import crnn` stays light.
    if name == "Recognizer":
        from crnn.inference import Recognizer

        return Recognizer
    raise AttributeError(f"module 'crnn' has no attribute {name!r}")
