"""Serving a model over HTTP: ``batcher`` (dynamic batching, no HTTP), ``app`` (the
FastAPI routes and the web page). Needs the ``serve`` extra (FastAPI, uvicorn); never
imports the training engine, and starts without PyTorch when the model is ONNX."""
