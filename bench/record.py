"""Append one benchmark's table to bench/RESULTS.md, dated, with the command that produced it."""
import datetime
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def append(title, command, table):
    path = os.path.join(ROOT, "bench", "RESULTS.md")
    with open(path, "a") as f:
        f.write(f"\n## {title} ({datetime.date.today()}, {os.cpu_count()} cores)\n`{command}`\n\n{table}\n")


def median_cell(values, digits=2):
    """'median (v1, v2, ...)', two decimals (or `digits`): a benchmark cell that shows its spread."""
    return f"{statistics.median(values):.{digits}f} ({', '.join(f'{v:.{digits}f}' for v in values)})"


def publish(title, table, save):
    """Print a benchmark's table; with `save`, append it to RESULTS.md with the command that ran it."""
    print(table)
    if save:
        script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
        append(title, " ".join(["python", script] + sys.argv[1:]), table)
