"""Metrics, the eval harness, comparison and MLflow tracking."""
