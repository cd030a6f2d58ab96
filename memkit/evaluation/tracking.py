"""MLflow tracking of eval runs. The default store is ``sqlite:///mlflow.db`` in the
project folder (git-ignored; ``mlflow ui --backend-store-uri sqlite:///mlflow.db`` shows
the runs); ``MLFLOW_TRACKING_URI`` overrides it. Telemetry is off."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import polars as pl

from memkit.config import flatten

PROJECT = Path(__file__).resolve().parents[2]


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI", f"sqlite:///{PROJECT / 'mlflow.db'}")


@functools.cache
def git_commit() -> str:
    """The checkout's commit (with ``-dirty`` when it has changes), asked of git once a
    process: an eval logs a hundred runs."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PROJECT, capture_output=True, text=True, timeout=5
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=PROJECT, capture_output=True, text=True, timeout=5
        )
        return (
            out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
            if out.returncode == 0
            else "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def metric_key(name: str) -> str:
    """MLflow metric names allow letters, digits, ``_ - . / `` and spaces: ``@`` becomes
    ``_at_``, ``:`` a ``/``, anything else ``_``."""
    return re.sub(r"[^\w\-. /]", "_", name.replace("@", "_at_").replace(":", "/"))


def log_result(result, artifacts: list[Path] = (), experiment: str | None = None) -> str:
    """Log one EvalResult as an MLflow run; returns the run id. One run is four writes to
    the store (the run, its params, tags and metrics in one batch, its artifacts, its end):
    ``memkit eval --all`` logs about a hundred."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.entities import Metric, Param
    from mlflow.tracking.context.registry import resolve_tags

    client = _client(tracking_uri())
    tags = {
        "dataset": result.dataset,
        "git_commit": git_commit(),
        "config": result.name,
        **({"encoder": result.encoder} if getattr(result, "encoder", None) else {}),
    }
    run = client.create_run(
        _experiment_id(client, experiment or f"memkit/{result.dataset}"),
        run_name=result.name,
        tags=resolve_tags(tags),  # and the user, source and entry point, as start_run adds
    )
    run_id = run.info.run_id
    params = {
        k: json.dumps(v) if isinstance(v, (list, dict)) else v
        for k, v in flatten(result.config).items()
    }
    metrics = {}
    for group, values in result.summary.items():
        prefix = "" if group == "all" else metric_key(group) + "/"
        for m, v in values.items():
            metrics[prefix + metric_key(m)] = float(v)
    for group, values in getattr(result, "answer_summary", {}).items():
        for m, v in values.items():
            metrics[f"answers/{metric_key(group)}/{metric_key(m)}"] = float(v)
    for group, values in getattr(result, "turn_summary", {}).items():
        for m, v in values.items():
            metrics[f"turns/{metric_key(group)}/{metric_key(m)}"] = float(v)
    metrics["seconds"] = result.seconds
    now = int(time.time() * 1000)
    try:
        client.log_batch(
            run_id,
            metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
            params=[Param(k, str(v)[:6000]) for k, v in params.items()],
        )
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            result.write_run(tmp / f"{result.name}.run")
            result.per_query.write_csv(tmp / "per_query.csv")
            if getattr(result, "answers", None) is not None:
                answers = result.answers
                if (
                    "quoted" in answers.columns
                ):  # CSV holds no lists: the quoted ids, space-separated
                    answers = answers.with_columns(pl.col("quoted").list.join(" "))
                answers.write_csv(tmp / "answers.csv")
            if getattr(result, "turns", None) is not None:
                result.turns.write_csv(tmp / "turns.csv")
            (tmp / "summary.json").write_text(json.dumps(result.summary, indent=2))
            for p in artifacts:
                shutil.copy(p, tmp / Path(p).name)
            client.log_artifacts(run_id, str(tmp))
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id)
    return run_id


@functools.cache
def _client(uri: str):
    import mlflow

    return mlflow.MlflowClient(uri)


def _experiment_id(client, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    # Artifacts beside the database, wherever the command is run from.
    return client.create_experiment(name, artifact_location=(PROJECT / "mlartifacts").as_uri())
