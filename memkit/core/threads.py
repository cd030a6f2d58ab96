"""Numeric libraries on one thread in processes that answer one query at a time per thread.

NumPy's BLAS (OpenBLAS) splits a matrix product across the cores. For a query's products
(a 1,500 x 384 matrix of a floor's vectors times the query vector) the split costs more
than it saves, and when other processes keep the cores busy each product waits for its
slowest thread: on these two shared cores that product took 6 ms on two threads and 0.2 ms
on one (eval/RESULTS.md). The service (many requests side by side) and the eval
(one query after another) therefore run BLAS on one thread; parallelism comes from the
requests, not from inside one product.
"""

from __future__ import annotations


def single_threaded_blas() -> None:
    """Limit this process's BLAS to one thread (idempotent)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")
