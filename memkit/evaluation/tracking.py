"""MLflow tracking of eval runs. The default store is ``sqlite:///mlflow.db`` in the
project folder (git-ignored; ``mlflow ui --backend-store-uri sqlite:///mlflow.db`` shows
the runs); ``MLFLOW_TRACKING_URI`` overrides it. Telemetry is off."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import polars as pl

from memkit.config import flatten

PROJECT = Path(__file__).resolve().parents[2]


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI", f"sqlite:///{PROJECT / 'mlflow.db'}")


def git_commit() -> str:
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
    """Log one EvalResult as an MLflow run; returns the run id."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    mlflow.set_tracking_uri(tracking_uri())
    name = experiment or f"memkit/{result.dataset}"
    if mlflow.get_experiment_by_name(name) is None:
        # Artifacts beside the database, wherever the command is run from.
        mlflow.create_experiment(name, artifact_location=(PROJECT / "mlartifacts").as_uri())
    mlflow.set_experiment(name)
    with mlflow.start_run(run_name=result.name) as run:
        params = {
            k: json.dumps(v) if isinstance(v, (list, dict)) else v
            for k, v in flatten(result.config).items()
        }
        mlflow.log_params({k: str(v)[:6000] for k, v in params.items()})
        mlflow.set_tags(
            {
                "dataset": result.dataset,
                "git_commit": git_commit(),
                "config": result.name,
                **({"encoder": result.encoder} if getattr(result, "encoder", None) else {}),
            }
        )
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
        mlflow.log_metrics(metrics)
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
                artifacts = [*artifacts, tmp / "answers.csv"]
            if getattr(result, "turns", None) is not None:
                result.turns.write_csv(tmp / "turns.csv")
                artifacts = [*artifacts, tmp / "turns.csv"]
            (tmp / "summary.json").write_text(json.dumps(result.summary, indent=2))
            for p in [
                tmp / f"{result.name}.run",
                tmp / "per_query.csv",
                tmp / "summary.json",
                *artifacts,
            ]:
                mlflow.log_artifact(str(p))
        return run.info.run_id
