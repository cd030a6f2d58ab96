"""A wheel built from the repository carries the configs it serves (and none of the
experiments of eval/configs), its walks and the store's migrations: installed in a fresh
virtualenv and run from another folder, ``memkit eval`` finds its default config and scores
the demo set, refuses an experiment's name saying where it looked, the walks are read from
the installed package, and the service makes a new store."""

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from memkit.cli import DEMO
from memkit.evaluation.walks import walk_names

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def run(*cmd, cwd=None, ok=True) -> str:
    # Without PYTHONPATH: a checkout put there (PYTHONPATH=$PWD) would be imported before
    # the wheel's memkit, and the test would read the checkout's files; without
    # MEMKIT_CONFIG_PATH (the tests' conftest names the checkout's eval/configs there).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MEMKIT_CONFIG_PATH")}
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    assert (done.returncode == 0) == ok, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout if ok else done.stderr


@pytest.mark.heavy
def test_a_wheel_in_a_fresh_virtualenv_runs_eval_with_its_own_default_config(tmp_path):
    # Build from a copy, so the build's own files never land in the working tree.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv",
            ".git",
            "__pycache__",
            "*.egg-info",
            "build",
            "eval",
            "notebooks",
            "tests",
            "instance",
            "mlruns*",
        ),
    )
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        tmp_path / "dist",
        source,
    )
    (wheel,) = (tmp_path / "dist").glob("memkit-*.whl")
    # the config package's data: the served configs and the schema beside its modules
    configs = sorted(
        n
        for n in zipfile.ZipFile(wheel).namelist()
        if n.startswith("memkit/config/") and not n.endswith(".py")
    )
    assert configs == [
        f"memkit/config/{n}"
        for n in ("default.toml", "postgres.toml", "reader.toml", "schema.json")
    ]
    assert not any(n.startswith("eval/") for n in zipfile.ZipFile(wheel).namelist())

    # A fresh virtualenv that sees this one's dependencies (torch, polars, ...) but not its
    # editable memkit: a plain path line, so the .pth files there (the editable finder) are not run.
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    (purelib,) = (venv / "lib").glob("python3.*/site-packages")
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        venv / "bin" / "python",
        "install",
        "--no-deps",
        "--no-index",
        wheel,
    )

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run(
        venv / "bin" / "python",
        "-c",
        "import memkit.config as c; print(c.CONFIG_DIR)",
        cwd=elsewhere,
    )
    assert Path(where.strip()).is_relative_to(purelib)  # the wheel's memkit, not the repository's
    out = run(
        venv / "bin" / "memkit",
        "eval",
        "--dataset",
        DEMO,
        "--no-mlflow",
        "--no-answers",
        "--out",
        tmp_path / "out",
        cwd=elsewhere,
    )
    assert "| default |" in out
    refused = run(
        venv / "bin" / "memkit",
        "eval",
        "--dataset",
        DEMO,
        "--config",
        "bm25",
        "--no-mlflow",
        cwd=elsewhere,
        ok=False,
    )
    assert "nor a config of that name in" in refused and str(purelib) in refused
    walks = run(
        venv / "bin" / "python",
        "-c",
        "from memkit.evaluation.walks import WALKS, walk_events, walk_names; print(WALKS); "
        "names = walk_names(); print(len(names)); "
        "print(walk_events(WALKS / f'{names[0]}-posts.txt').height)",
        cwd=elsewhere,
    ).split()
    assert Path(walks[0]).is_relative_to(purelib)
    assert int(walks[1]) == len(walk_names()) and int(walks[2]) > 0
    assert (tmp_path / "out" / "demo" / "report.md").exists()
    store = run(
        venv / "bin" / "python",
        "-c",
        "import sqlalchemy as sa; from server.store import connect; "
        "print(sa.inspect(connect('sqlite:///new.db')).get_table_names())",
        cwd=elsewhere,
    )
    assert "alembic_version" in store and "events" in store
