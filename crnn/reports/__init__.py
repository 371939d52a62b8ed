"""Pictures and tables of what a model did: evaluation errors and calibration
(``errors``), the trainer's TensorBoard grid (``training``), pages drawn with their reads
(``pages``) and a run's training curves (``curves``)."""
