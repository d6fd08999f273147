"""Shared test helpers: run an entry script as a user would, read TensorBoard events and checkpoints."""
import os
import subprocess
import sys

import loops  # noqa: F401  (caps oneDNN at AVX2 for in-process tests: loops/__init__.py)
import mindspore as ms
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_script(script, *args, check=True, timeout=600, env=None, own_process=False):
    """Run `python script args...` from the repo root as a user would; returns a CompletedProcess.
    In this worker through run_in_process (no interpreter start, no second `import mindspore`: ~3 s a
    run) unless the run needs a process of its own: own_process=True (it is compared with a killed or
    signalled process's run, or the test is about the process) or `env` (extra variables, read at start-up).
    `timeout` bounds own processes only; an in-process run that hangs holds its worker until CI's limit."""
    if not own_process and env is None and (script == "-m" or script in ENTRY_MODULES):
        return run_in_process(script, *args, check=check)
    env = loops.child_env(PYTHONUNBUFFERED="1", GLOG_v="3", **(env or {}))  # as users' runs, not with our settings
    proc = subprocess.run([sys.executable, script, *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} {args} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


ENTRY_MODULES = {"train_gan.py": "train_gan", "train_rl.py": "train_rl", "train_translate.py": "train_translate",
                 "train_regression.py": "train_regression", "generate.py": "generate"}


def run_in_process(script, *args, check=True):
    """The entry script's main through run_cli in this worker, stdout and stderr captured, the exit
    status as returncode (`script` "-m" with args[0] "metrics": python -m metrics). oneDNN stays capped
    at AVX2 for every run in the worker (loops/__init__.py)."""
    import contextlib
    import importlib
    import io
    if script == "-m":  # python -m pkg (its __main__) or python -m pkg.module
        name, args = args[0], args[1:]
        module = importlib.import_module(name)
        if hasattr(module, "__path__"):
            module = importlib.import_module(f"{name}.__main__")
    else:
        module = importlib.import_module(ENTRY_MODULES[script])
    from loops.config import run_cli
    import loops.runtime
    out, err = io.StringIO(), io.StringIO()
    argv0, lift = sys.argv[:], loops.runtime.lift_isa_cap
    sys.argv[:] = [module.__file__ if script == "-m" else script, *map(str, args)]  # as the interpreter sets it
    # oneDNN reads its instruction-set cap once, at the worker's first kernel: a run without convolutions
    # must not lift it here (loops.lift_isa_cap), or every later test's convolutions run uncapped, tens
    # of times slower (the test_inception_fid tests after a toy run: minutes instead of seconds); the
    # processes a run starts (tools.sweep's) still decide for themselves (loops.child_env)
    loops.runtime.lift_isa_cap = lambda: None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
            run_cli(module.main, [str(a) for a in args])
    except BaseException:  # a crash: show what the run printed beside pytest's traceback
        sys.stderr.write(f"{script} {' '.join(map(str, args))} printed:\n{out.getvalue()}{err.getvalue()}")
        raise
    finally:
        sys.argv[:], loops.runtime.lift_isa_cap = argv0, lift
        # MindSpore keeps every compiled graph of the process: ~21 MB a tiny GAN run, 5.6 GB in a worker by
        # the suite's end; this frees them (a function called again compiles again): ~4.5 MB a run
        ms.ms_memory_recycle()
    code = exit_info.value.code or 0
    proc = subprocess.CompletedProcess([script, *map(str, args)], code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(f"{script} {args} exited {code}:\n{proc.stderr[-3000:]}")
    return proc


def cli_error(main, argv, capsys):
    """Run an entry script's main in-process through run_cli; return (exit status, stderr lines).
    Fast: no new interpreter, and argument errors never reach MindSpore."""
    from loops.config import run_cli
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, [str(a) for a in argv])
    err = capsys.readouterr().err
    return exit_info.value.code, [l for l in err.splitlines() if l.strip()]


def assert_refused(main, argv, capsys, run_dir, message):
    """An entry script's main (in-process, as cli_error) refuses argv: exit 2, one `error:` line that
    contains message, and no run dir. One subprocess per script elsewhere covers the process-level path."""
    code, lines = cli_error(main, ["--run-dir", run_dir, *argv], capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not os.path.exists(run_dir)


def error_lines(proc):
    """stderr minus MindSpore's own warning lines."""
    return [l for l in proc.stderr.splitlines() if l.strip() and not l.startswith("[WARNING")]


def checkpoint_arrays(path):
    """name -> numpy array of every parameter in a checkpoint."""
    data = ms.load_checkpoint(str(path))
    return {k: v.asnumpy() for k, v in data.items() if hasattr(v, "asnumpy")}


def scalar_tags(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc


@pytest.fixture
def graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


def assert_same_arrays(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def cut_back_copy(run_dir, step, copy_dir):
    """A copy of a finished run dir as a run killed right after its step-`step` checkpoint leaves it:
    the later checkpoints and the final metrics.json gone. Resuming the copy must end where the whole
    run ended, with one run less than killing a third process for the same checkpoint (real SIGKILLs,
    torn files included: tests/test_reliability.py, test_rl.py's PPO, test_translate.py's CycleGAN)."""
    import shutil
    from loops.checkpoint import list_checkpoints, path_for
    shutil.copytree(run_dir, copy_dir)
    kept = path_for(str(copy_dir), step)
    assert os.path.exists(kept), f"the run wrote no step-{step} checkpoint"
    for path in list_checkpoints(str(copy_dir)):
        if path > kept:  # zero-padded step numbers: name order is step order
            os.remove(path)
    os.remove(os.path.join(copy_dir, "metrics.json"))


@pytest.fixture(autouse=True)
def restore_process_state():
    """In-process runs of the entry scripts (assert_refused, cli_error, the tiny trainers) set
    environment variables (train_rl's DNNL_MAX_CPU_ISA, GLOG_v) and MindSpore's execution mode for the
    worker process: every test leaves them as it found them."""
    env, mode = dict(os.environ), ms.get_context("mode")
    yield
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)
    if ms.get_context("mode") != mode:
        ms.set_context(mode=mode)


@pytest.fixture(scope="session", autouse=True)
def classifier_cache(tmp_path_factory):
    """Metrics classifiers are cached per test run, never in the user's home. Under pytest-xdist the
    workers share one cache (their base temp dirs have a common parent), so each classifier is
    trained once per run, not once per worker; writes to it are atomic renames."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "ganlab_cache"
        shared.mkdir(exist_ok=True)
        os.environ["GANLAB_CACHE"] = str(shared)
    else:
        os.environ["GANLAB_CACHE"] = str(tmp_path_factory.mktemp("ganlab_cache"))


def pytest_collection_modifyitems(config, items):
    """Slow tests first: under pytest-xdist the long runs then overlap the many short tests instead of
    finishing alone at the end (the order is the same on every worker, as xdist requires)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: file order otherwise
