"""Evaluation metrics (toy mixtures, images); `python -m metrics RUN_DIR`."""
