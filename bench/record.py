"""Append one benchmark's table to bench/RESULTS.md, dated, with the command that produced it."""
import datetime
import os


def append(title, command, table):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
    with open(path, "a") as f:
        f.write(f"\n## {title} ({datetime.date.today()}, {os.cpu_count()} cores)\n`{command}`\n\n{table}\n")
