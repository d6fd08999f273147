"""`python -m metrics.sweep` is `python -m tools.sweep`, kept for the command lines that use it."""
import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import runpy
    runpy.run_module("tools.sweep", run_name="__main__", alter_sys=True)
