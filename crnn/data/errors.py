"""The error bad data raises when training or evaluation cannot go on."""


class DataError(RuntimeError):
    """Data that cannot be used at all (a damaged LMDB, a source with no usable sample):
    the message names the file and says what to do. Single bad samples are skipped and
    counted instead, never raised."""
