"""Evaluation metrics (toy mixtures, images); `python -m metrics RUN_DIR`."""
import loops  # noqa: F401  (first: caps oneDNN at AVX2 before any kernel runs, see loops/__init__.py)
