"""Where a question's CPU goes: the query endpoint in this process, under cProfile, on the
store the speed guard leaves (run ``eval/bench/guard.py`` first).

    .venv/bin/python eval/bench/profile_query.py 0   # items only (summary_needed "0")
    .venv/bin/python eval/bench/profile_query.py 1   # answers on

It asks 400 of the benchmark's questions through Flask's test client on one thread: 50 to
warm up, 100 timed without the profiler (CPU ms a question), 250 profiled; then prints the
profile by cumulative and by own time, and the callees of the main stages.
"""

import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "eval" / "bench"))
sys.path.insert(0, str(ROOT))
import service  # noqa: E402

c, floors = service.guard_client(
    ROOT / "eval" / "out" / "bench-guard", ROOT / "memkit" / "config" / "default.toml"
)
bodies = service.query_bodies(400, floors, 20, seed=11)
summary = sys.argv[1] if len(sys.argv) > 1 else "0"


def run(bs):
    service.ask_all(c, bs, summary)


run(bodies[:50])  # warm
t = time.process_time()
run(bodies[50:150])
print("CPU ms a query:", (time.process_time() - t) * 10)
pr = cProfile.Profile()
pr.enable()
run(bodies[150:400])
pr.disable()
st = pstats.Stats(pr)
st.sort_stats("cumulative").print_stats(45)
st.sort_stats("tottime").print_stats(30)
st.sort_stats("cumulative").print_callees("memory.py:26\\(query\\)")
st.sort_stats("cumulative").print_callees("memory.py:292\\(prepare\\)")
st.sort_stats("cumulative").print_callees("encoders.py:356")
st.sort_stats("cumulative").print_callees("encoders.py:858")
st.sort_stats("cumulative").print_callees("extractive.py:300")
