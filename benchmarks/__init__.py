"""Speed benchmarks, outside the library: ``bench.py`` (data, training step, end to end,
inference, predict start-up, FLOPs), ``parallel.py`` (one training step under each
multi-GPU strategy) and ``synth.py`` (the synthetic generator), sharing ``timing.py``.

Run them as scripts from the repository root (``python benchmarks/bench.py --help``);
figures and how to read them are in docs/benchmarks.md.
"""
