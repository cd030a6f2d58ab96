"""Run notebooks in place, so what is committed shows their outputs (plots, tables).

    .venv/bin/python notebooks/run.py notebooks/*.ipynb     # or: make notebooks
    .venv/bin/python path/to/notebooks/run.py              # every notebook, from any folder

Each notebook runs in a fresh kernel whose working folder is the notebook's own (as nbval
runs it), with this process's environment and what `make notebooks` sets (``kernel_env``),
so a run from any folder, with or without make, is the same run. Outputs and execution
counts are written back; no timestamps, so a rerun that prints the same changes nothing.
A cell that raises stops its notebook (its error is saved in the output) and the exit
status is 1. Uses jupyter_client and nbformat (the dev extras; nbval needs them too).
Outputs must not show the evaluation data sets' texts (their licences): print ids, lengths
and scores instead.
"""

from __future__ import annotations

import os
import queue
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbformat.v4 import output_from_msg

NOTEBOOKS = Path(__file__).resolve().parent
PROJECT = NOTEBOOKS.parent


def kernel_env() -> dict[str, str]:
    """This process's environment, with what the Makefile exports where it is not set (no
    telemetry, no model hub, no tokenizer threads), MLflow's store in the project folder
    (where the notebooks say their runs are) and ``$MEMKIT_DATA`` made absolute (a kernel
    starts in the notebook's folder, not in the one this was started from)."""
    env = dict(os.environ)
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{PROJECT / 'mlflow.db'}")
    if env.get("MEMKIT_DATA"):
        env["MEMKIT_DATA"] = str(Path(env["MEMKIT_DATA"]).resolve())
    return env


def run_cell(client, source: str, timeout: float) -> tuple[list, int | None, tuple | None]:
    """Execute one cell: its outputs, execution count and error (name, value) if any."""
    msg_id = client.execute(source, store_history=True)
    outputs, count, error, clear_pending = [], None, None, False
    while True:
        try:
            msg = client.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"a cell ran longer than {timeout:.0f} s") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            return outputs, count, error
        if kind == "execute_input":
            count = content["execution_count"]
        elif kind == "clear_output":
            clear_pending = content.get("wait", False)
            if not clear_pending:
                outputs = []
        elif kind in ("stream", "display_data", "execute_result", "error"):
            if clear_pending:
                outputs, clear_pending = [], False
            out = output_from_msg(msg)
            last = outputs[-1] if outputs else None
            if kind == "stream" and last is not None and last.get("name") == out.name:
                last.text += out.text  # one output per stream, as Jupyter shows it
            else:
                outputs.append(out)
            if kind == "error":
                error = (content["ename"], content["evalue"])


def run_notebook(path: Path, timeout: float = 1800) -> bool:
    nb = nbformat.read(path, as_version=4)
    kernel = KernelManager(kernel_name="python3")
    kernel.start_kernel(cwd=str(path.parent), env=kernel_env())
    client = kernel.client()
    client.start_channels()
    start, failed = time.time(), None
    try:
        client.wait_for_ready(timeout=120)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            cell.metadata.pop("execution", None)
            cell.outputs, cell.execution_count, failed = run_cell(client, cell.source, timeout)
            if failed:
                print(f"{path.name}: cell {i} raised {failed[0]}: {failed[1]}", flush=True)
                break
    finally:
        client.stop_channels()
        kernel.shutdown_kernel(now=True)
    nbformat.write(nb, path)
    print(f"{path.name}: {time.time() - start:.1f} s, {'FAILED' if failed else 'ok'}", flush=True)
    return failed is None


if __name__ == "__main__":
    paths = [Path(p).resolve() for p in sys.argv[1:]] or sorted(NOTEBOOKS.glob("*.ipynb"))
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"run.py: no such notebook: {', '.join(map(str, missing))}")
    sys.exit(0 if all([run_notebook(p) for p in paths]) else 1)
