"""Tools that drive many runs: seed sweeps (`python -m tools.sweep`)."""
