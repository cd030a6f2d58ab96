"""MLflow tracking of eval runs. The store is, in this order: the ``uri`` a caller gives
(``memkit eval --tracking-uri``), ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` in
the current folder (``mlflow ui --backend-store-uri sqlite:///mlflow.db`` there shows the
runs), never the folder memkit is installed in. A new experiment keeps its artifacts beside
the store (``artifact_root``). Telemetry is off."""

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
from urllib.parse import urlparse

import polars as pl

from memkit.config import flatten
from memkit.config.model import validate_config
from memkit.core.errors import ValidationError

PROJECT = Path(__file__).resolve().parents[2]
# MLflow refuses a batch of more than 100 params or 1,000 metrics
PARAMS_PER_BATCH, METRICS_PER_BATCH = 100, 1000


def tracking_uri(uri: str | None = None) -> str:
    """The tracking store: ``uri``, else ``$MLFLOW_TRACKING_URI``, else the current
    folder's ``mlflow.db`` (an absolute path, so it does not move with a later ``chdir``)."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def artifact_root(uri: str) -> str | None:
    """Where a new experiment's artifacts go: ``mlartifacts/`` beside a SQLite store's file;
    None (MLflow's own choice) for a folder store, which holds them, and for a tracking
    server, which decides; ``mlartifacts/`` in the current folder for any other database."""
    scheme = urlparse(uri).scheme
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///") :].split("?", 1)[0])
        return (db.resolve().parent / "mlartifacts").as_uri()
    if scheme in ("", "file", "http", "https", "databricks", "sqlite") or len(scheme) == 1:
        return None  # a folder (a Windows drive letter is a one-letter scheme), or a server
    return (Path.cwd() / "mlartifacts").as_uri()


def effective_settings(config: dict) -> dict:
    """A config as it is run: every setting of every table written, defaults filled in
    (the checked ``Config``, unset optional tables left out), for MLflow's params."""
    try:
        return validate_config(config).model_dump(mode="json", exclude_none=True)
    except ValidationError:  # a pipeline built by hand (no config of its own): as given
        return config


@functools.cache
def git_commit(folder: Path = PROJECT) -> str:
    """The commit of the checkout at ``folder`` (with ``-dirty`` when it has changes), asked
    of git once a process: an eval logs a hundred runs and writes a ledger; "unknown"
    outside git."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=5
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=folder, capture_output=True, text=True, timeout=5
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


def log_result(
    result,
    artifacts: list[Path] = (),
    experiment: str | None = None,
    uri: str | None = None,
) -> str:
    """Log one EvalResult as an MLflow run in ``experiment`` (default
    ``memkit/<dataset>``) of the store ``tracking_uri(uri)``; returns the run id. Its params
    are the effective settings (``effective_settings``), its tags the dataset, config,
    commit, encoder and ``in_sample`` (``true`` when the config's trained models saw this
    data set). One run is a few writes to the store (the run, its params, tags and metrics
    in batches, its artifacts, its end): ``memkit eval --all`` logs about a hundred."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.entities import Metric, Param
    from mlflow.tracking.context.registry import resolve_tags

    uri = tracking_uri(uri)
    client = _client(uri)
    tags = {
        "dataset": result.dataset,
        "git_commit": git_commit(),
        "config": result.name,
        "in_sample": "true" if getattr(result, "in_sample", False) else "false",
        "stages": result.stages_label(),  # what it does beyond its retriever
        **({"encoder": result.encoder} if getattr(result, "encoder", None) else {}),
    }
    run = client.create_run(
        _experiment_id(client, experiment or f"memkit/{result.dataset}", artifact_root(uri)),
        run_name=result.name,
        tags=resolve_tags(tags),  # and the user, source and entry point, as start_run adds
    )
    run_id = run.info.run_id
    params = {
        k: json.dumps(v) if isinstance(v, (list, dict)) else v
        for k, v in flatten(effective_settings(result.config)).items()
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
        metric_list = [Metric(k, v, now, 0) for k, v in metrics.items()]
        param_list = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(metric_list), METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=metric_list[i : i + METRICS_PER_BATCH])
        for i in range(0, len(param_list), PARAMS_PER_BATCH):
            client.log_batch(run_id, params=param_list[i : i + PARAMS_PER_BATCH])
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


def _experiment_id(client, name: str, artifacts: str | None) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:  # an experiment keeps the artifact folder it was made with
        return found.experiment_id
    # Artifacts beside the store, wherever the command is run from.
    return client.create_experiment(name, artifact_location=artifacts)
