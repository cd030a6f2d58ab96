"""Dataset converters to the interchange format, and the reader re-exported."""

from memkit.datasets.beir import read_beir
from memkit.tables import Dataset, read_dataset

__all__ = ["Dataset", "read_beir", "read_dataset"]
