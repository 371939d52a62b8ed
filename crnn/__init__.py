"""crnn-ocr: CRNN text recognition with first-class multi-GPU training."""

__version__ = "0.1.0"
