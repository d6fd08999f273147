"""One run's lifecycle, the same for every entry script.

    run = Run(cfg, convolutions=True)       # mode, device, seeds, msrun; run.rng: THE host RNG
    source = ...                             # data errors here leave no run dir behind
    run.open("train_gan", dataset, loss)     # run dir (checked, locked), checkpoint to resume from
    state = all_state(learner, ...)          # every Parameter a checkpoint holds
    meta = run.restore(state)                # before the first compiled call; {} on a fresh run
    run.begin(state, meta=lambda: {...})     # config.json, TensorBoard + tqdm logger
    code = run.train(phases, hooks=[...])    # driver loop; checkpoints, signals, non-finite stop
    run.finish(metrics)                      # metrics.json (rank 0), digest line, close; lock released

Only rank 0 writes files under --distributed. The run-dir lock (an flock on RUN_DIR/.lock) makes a
second process on the same run dir, fresh or --resume, refuse with one `error:` line instead of
interleaving its checkpoints with the first's; the lock goes with the process, so a killed run
never leaves a stale one.
"""
import fcntl
import os
import shlex
import sys

from loops import checkpoint, distributed, rundir, runtime
from loops.config import NothingToDo, UserError, WriteFailure
from loops.files import free_bytes, human
from loops.driver import Interrupted, InterruptOnSignal, train
from loops.logging import RunLogger


class Run:
    def __init__(self, cfg, convolutions=False, recipe=""):
        """recipe: the module that made this run (its dotted name), recorded in config.json and every
        checkpoint: `python -m metrics RUN_DIR` asks it to evaluate the run, --resume checks it."""
        self.cfg, self.recipe = cfg, recipe
        # first: with --distributed, the msrun scheduler process stops in here
        self.rng, self.device = runtime.setup(cfg, convolutions=convolutions)
        self.resume_from, self.start, self.logger, self.lock = None, 0, None, None
        self.script, self.what = os.path.basename(sys.argv[0]), ""  # for the start line
        self.failed_saves = 0  # consecutive checkpoint writes that failed
        self.state, self.meta_fn, self.sizes = [], dict, {}

    def open(self, script, *name_parts):
        """Resolve, check, create and lock the run dir (rank 0; the other ranks only find the
        checkpoint to resume). Name parts go into the default run dir name."""
        cfg = self.cfg
        self.what = " ".join(str(p) for p in name_parts)
        if distributed.is_main():
            if not cfg.run_dir:
                cfg.run_dir = rundir.default_run_dir(script, *name_parts, cfg.seed)
            self.lock = lock_run_dir(cfg.run_dir, cfg.resume)
        self.resume_from = distributed.prepare_run_dir(cfg, rundir.prepare, script, *name_parts)
        return self

    def restore(self, state):
        """Load the checkpoint to resume from into `state` (refusing a changed config unless --force),
        restore the host RNG; returns the checkpoint's meta ({} on a fresh run). A corrupt latest
        checkpoint is reported in one line and the newest intact one is used instead (none: exit 2)."""
        if not self.resume_from:
            return {}
        candidates = checkpoint.list_checkpoints(self.cfg.run_dir)[::-1] or [self.resume_from]
        for i, path in enumerate(candidates):
            try:
                meta = checkpoint.load_into(path, state,
                                            check=lambda meta: rundir.check_resume_config(self.cfg, meta, self.recipe))
                break
            except checkpoint.CorruptCheckpoint as e:
                more = "trying the one before" if i + 1 < len(candidates) else "no intact checkpoint left"
                print(f"warning: {e}; {more}", file=sys.stderr, flush=True)
        else:
            raise UserError(f"--resume: no intact checkpoint in {os.path.join(self.cfg.run_dir, 'checkpoints')}")
        if path != candidates[0]:
            print(f"warning: resuming from {path} (step {meta['step']}), the newest intact checkpoint",
                  file=sys.stderr, flush=True)
        self.resume_from = path
        step = meta["step"]
        if step > self.cfg.steps:  # training on would rewrite the record of the longer run as a shorter one
            raise UserError(f"--resume: {path} is at step {step}, beyond --steps {self.cfg.steps}; pass --steps "
                            f"above {step} to train on (the run is left as it is)")
        if step == self.cfg.steps:
            raise NothingToDo(f"{self.cfg.run_dir} is already trained to step {step} (--steps {self.cfg.steps}): "
                              "nothing to do; its files are left as they are")
        self.rng.bit_generator.state = meta["rng"]
        self.start = step
        return meta

    def begin(self, state, meta=dict, learners=()):
        """Check that one checkpoint fits on the run dir's disk, record the resolved config, start the
        logger. `state`: the Parameters every checkpoint saves; `meta()`: extra JSON for it;
        `learners`: the models that learn, whose sizes (`params_<name>`) go into config.json,
        metrics.json and the start line."""
        self.state, self.meta_fn = list(state), meta
        self.sizes = {f"params_{learner.name}": learner.size() for learner in learners if learner is not None}
        cfg = self.cfg
        if distributed.is_main():
            example = {"rng": self.rng.bit_generator.state, "config": cfg.to_dict(), **meta()}
            need, free = checkpoint.estimated_size(self.state, example), free_bytes(cfg.run_dir)
            if free is not None and free < need:
                raise WriteFailure(f"{cfg.run_dir}: {human(free)} free on its file system, one checkpoint needs "
                                   f"about {human(need)}; free some space or choose another --run-dir")
            made_by = {"recipe": self.recipe, "script": self.script} if self.recipe else {}
            rundir.write_config(cfg, {**made_by, **self.sizes})
        self.logger = RunLogger(cfg.run_dir, cfg.to_dict(), cfg.steps, self.start, progress=not cfg.no_progress,
                                enabled=distributed.is_main())
        steps = f"steps {self.start}->{cfg.steps} (resumed)" if self.start else f"{cfg.steps} steps"
        sizes = " / ".join(f"{k[len('params_'):]} {human_count(n)}" for k, n in self.sizes.items())
        sizes = f", parameters {sizes}" if sizes else ""
        self.logger.note(f"start: {self.script} {self.what} on {self.device}, {steps}, seed {cfg.seed}{sizes}, "
                         f"run dir {cfg.run_dir}")
        return self.logger

    def save(self, step, final=True):
        """A checkpoint at `step`. A failed write (full disk, I/O error) is reported in one line and
        retried at the next interval; the run stops (WriteFailure, exit 4) when the state could not
        be saved twice in a row, or at the end (final) after one more immediate attempt."""
        if not distributed.is_main():
            return
        meta = {"rng": self.rng.bit_generator.state, "config": self.cfg.to_dict(), **self.meta_fn()}
        if self.recipe:
            meta["recipe"], meta["script"] = self.recipe, self.script
        attempts = 2 if final and self.failed_saves == 0 else 1
        for attempt in range(attempts):
            try:
                checkpoint.save(self.cfg.run_dir, step, self.state, meta, keep=self.cfg.keep_ckpts)
                self.failed_saves = 0
                return
            except WriteFailure as e:
                self.failed_saves += 1
                if self.failed_saves >= 2:
                    latest = checkpoint.latest(self.cfg.run_dir)
                    raise WriteFailure(f"{e}; the state could not be saved twice in a row, stopped "
                                       f"(latest intact checkpoint: {latest or 'none'})") from e
                print(f"warning: {e}; {'trying once more' if final else 'retrying at the next checkpoint'}",
                      file=sys.stderr, flush=True)

    def train(self, phases, hooks=(), save=None, stop_on_nonfinite=True, fuse=False):
        """The driver loop from the restored step to cfg.steps. `save(step)` (default: run.save)
        wraps the checkpoint write, e.g. to refresh an EMA copy first. `fuse`: one compiled call per
        iteration even at --steps-per-call 1 (see loops/driver.py). Returns the exit code."""
        cfg = self.cfg
        self.last = {}
        if self.start >= cfg.steps:
            return 0
        self.last, code = train(phases, start_step=self.start, steps=cfg.steps, log_every=cfg.log_every,
                                logger=self.logger, save=save or self.save, ckpt_every=cfg.ckpt_every, hooks=hooks,
                                steps_per_call=getattr(cfg, "steps_per_call", 1), fuse=fuse,
                                stop_on_nonfinite=stop_on_nonfinite)
        if code and distributed.is_main():  # stopped by a signal, after saving
            path = checkpoint.latest(cfg.run_dir)
            step = checkpoint.PATTERN.search(path).group(1).lstrip("0") or "0" if path else "?"
            if step == str(cfg.steps):  # during the last iteration's hooks: training is done, not its evaluation
                self.stopped_evaluating(code - 128)
            else:
                self.logger.note(f"stopped at step {step} (signal {code - 128}), checkpoint saved: {path}; "
                                 f"resume with: {resume_command(cfg.run_dir)}")
        return code

    def evaluate(self, code, evaluate):
        """(results, code): `evaluate()` after training that finished (code 0), else (None, code).
        SIGINT/SIGTERM stop the evaluation as they stop training: the checkpoint is already saved, one
        line says how to evaluate it, exit status 128 + N, no metrics.json written."""
        if code != 0:
            return None, code
        try:
            with InterruptOnSignal():
                if self.logger is not None:
                    self.logger.note("evaluating the trained model...")
                return evaluate(), 0
        except Interrupted as e:
            if distributed.is_main():
                self.stopped_evaluating(e.signum)
            return None, 128 + e.signum

    def stopped_evaluating(self, signum):
        path = checkpoint.latest(self.cfg.run_dir)
        self.logger.note(f"stopped during the final evaluation (signal {signum}); training is done and its "
                         f"checkpoint saved: {path}; evaluate it with: "
                         f"{shlex.join(['python', '-m', 'metrics', self.cfg.run_dir])}")

    def write_metrics(self, metrics):
        """metrics.json (rank 0). WriteFailure if it cannot be written."""
        if distributed.is_main():
            rundir.write_metrics(self.cfg.run_dir, {**metrics, **self.sizes})

    def finish(self, metrics=None):
        """Final metrics.json (rank 0; None: leave it), one digest line per rank under --distributed,
        and where to look: TensorBoard's command (the script's summary line comes after this)."""
        if metrics is not None:
            self.write_metrics(metrics)
        distributed.report(self.state)  # equal digests: bit-identical ranks
        if self.logger is not None and metrics is not None:
            self.logger.note(f"watch it: tensorboard --logdir {os.path.dirname(os.path.abspath(self.cfg.run_dir))}")
        self.close()

    def close(self):
        if self.logger is not None:
            self.logger.close()
            self.logger = None
        if self.lock is not None:
            os.close(self.lock)  # releases the flock
            self.lock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def human_count(n):
    """12345678 -> "12.35M": a parameter count as papers print it."""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}K" if n >= 1e3 else str(n)


def resume_command(run_dir):
    """This process's command line with --run-dir set and --resume added: how to continue it."""
    args = sys.argv[1:]
    if "--run-dir" not in args and not any(a.startswith("--run-dir=") for a in args):
        args = args + ["--run-dir", run_dir]
    if "--resume" not in args:
        args = args + ["--resume"]
    return shlex.join(["python", sys.argv[0]] + args)


def lock_run_dir(run_dir, resume):
    """An exclusive, non-blocking flock on RUN_DIR/.lock; UserError if another process holds it.
    Creates the run dir only where a fresh run would (--resume of a missing dir fails later, cleanly)."""
    if resume and not os.path.isdir(run_dir):
        return None
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        return None  # rundir.prepare reports it
    try:
        os.makedirs(run_dir, exist_ok=True)
        # O_NOFOLLOW: a .lock planted as a symlink must not make the pid overwrite the file it points at
        fd = os.open(os.path.join(run_dir, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        if os.path.islink(os.path.join(run_dir, ".lock")):
            raise UserError(f"{os.path.join(run_dir, '.lock')} is a symbolic link; refusing to write through it "
                            "(remove it if the run dir is yours)")
        raise UserError(f"--run-dir {run_dir} is not writable ({e.strerror})")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise UserError(f"{run_dir} is in use by another training process (pid {holder}); "
                        "wait for it to finish or choose another --run-dir")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
