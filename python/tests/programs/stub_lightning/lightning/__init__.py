"""A stand-in for PyTorch Lightning's top-level package (tests/test_framework.py): just enough of
its shape for the recorder's framework instrumentor, nothing of Lightning itself."""
