"""Evaluate a run's latest (or a given) checkpoint and write its metrics.json.

    python -m metrics RUN_DIR [flags of the run's recipe]
    python -m metrics RUN_DIR --help            # the flags this run's recipe takes

config.json names the recipe that made the run (`"recipe": "rl.sac"`, a module); the command asks
that module's EVALUATION to evaluate it: the recipe decides its flags and its numbers (GAN runs:
FID, KID, PRDC, IS or mode coverage, see gan/evaluate.py; RL runs: the deterministic policy's
returns and an episode plot, see rl/evaluate.py). metrics/ itself is a library and imports no recipe.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("GLOG_v", "4")

def main(argv):
    from loops.config import CommandLineParser
    first = CommandLineParser(prog="python -m metrics", description=__doc__, add_help=False,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    first.add_argument("run_dir", nargs="?")
    first.add_argument("-h", "--help", action="store_true")
    known, _ = first.parse_known_args(argv)
    if known.run_dir is None:
        if known.help:
            first.print_help()
            return 0
        first.error("the following arguments are required: run_dir")
    from metrics.runs import evaluation_of, recipe_of
    evaluation = evaluation_of(known.run_dir)
    parser = CommandLineParser(prog="python -m metrics", description=evaluation.description,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run directory")
    evaluation.add_flags(parser)
    parser.unknown_hint = (f"{known.run_dir} is a run of {recipe_of(known.run_dir)}, whose evaluation takes "
                           f"{', '.join(parser.flag_names())}")
    args = parser.parse_args(argv)
    print(json.dumps(evaluation(args.run_dir, args), indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from loops.config import run_cli
    run_cli(main)
