"""memkit: offline-first conversational memory.

The library holds everything that answers a query (tables, text analysis, encoders,
retrievers, fusion); the eval harness and the Flask service only feed it and read from it.
"""

import os

# Nothing reaches the network at run time: the model comes from an installed package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from memkit.core.errors import DatasetError, MemkitError, ValidationError  # noqa: E402
from memkit.retrieval.base import Filters  # noqa: E402

__all__ = ["DatasetError", "Filters", "MemkitError", "ValidationError"]
__version__ = "0.1.0"
