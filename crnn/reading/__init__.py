"""The reading wing's outputs: writers over a read :class:`crnn.layout.Page` (plain text,
hOCR, ALTO) that the command line and the server share."""
