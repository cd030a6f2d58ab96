"""The README's Python quick start ("The library in five minutes") runs as written, on the
demo set, from the repository's folder; its MLflow runs go to the store it prints."""

from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]


@pytest.mark.heavy  # two configs scored with answers, and logged to MLflow (seconds)
def test_the_readme_quick_start_runs(tmp_path, monkeypatch, capsys):
    import mlflow

    readme = (PROJECT / "README.md").read_text()
    section = readme[readme.index("## The library in five minutes") :]
    code = section[section.index("```python\n") + 10 : section.index("\n```\n")]
    assert 8 <= len(code.splitlines()) <= 14  # about ten lines
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)  # not the checkout's own store
    monkeypatch.chdir(PROJECT)  # "from the repository's folder"
    scope = {"__name__": "readme_quick_start"}
    exec(compile(code, "README.md (the library in five minutes)", "exec"), scope)
    out = capsys.readouterr().out
    assert "| bm25 |" in out and "| hybrid |" in out and f"MLflow runs: {store}" in out
    runs = mlflow.MlflowClient(store).search_runs(
        [mlflow.MlflowClient(store).get_experiment_by_name("memkit/demo").experiment_id]
    )
    assert {r.info.run_id for r in runs} == set(scope["run_ids"])
