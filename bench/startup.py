"""Start-up time of the CLI's light commands, this checkout against an earlier commit.

Checks the earlier commit out in a temporary git worktree and runs each command there and
here, alternating (before, after, before, ...) so that load on the machine hits both alike;
reports the median wall time of ``--repeat`` runs of each, with ``python -c "import typer"``
(the CLI library alone) and ``python -c "import polars, pyarrow"`` as baselines. Every run is
a fresh interpreter with the same virtual environment; ``PYTHONPATH`` picks the checkout.

    python bench/startup.py [--before 0b120a6] [--repeat 7] [--out bench-startup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from worktree import checkout, prefix

ROOT = Path(__file__).resolve().parents[1]
# The CLI of the checkout at hand: attnsweep.cli from the namespace on (issue 27), orchestrator.cli before.
ENTRY = "import sys; from {module} import main; sys.argv[0] = 'attnsweep'; main()"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def commands(store: Path) -> dict[str, list[str]]:
    address = f"http://127.0.0.1:{_closed_port()}"
    return {
        "attnsweep --help": ["--help"],
        "attnsweep validate sweeps/quickstart.yaml": ["validate", "sweeps/quickstart.yaml"],
        "attnsweep query (count, csv)": [
            "query",
            "SELECT count(*) AS n FROM trials",
            "--store",
            str(store),
            "--format",
            "csv",
        ],
        "attnsweep store check": ["store", "check", "--store", str(store)],
        "attnsweep status (no server)": [
            "status",
            "raysubmit_x",
            "--address",
            address,
            "--timeout",
            "5",
        ],
    }


def _time(argv: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(cwd), "ATTNSWEEP_CACHE_DIR": "off"}
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return time.perf_counter() - t0


def _store(root: Path) -> Path:
    """A small store: one run of 1,000 rows with a run record, written by this checkout."""
    import pyarrow as pa

    from attnsweep.results import ResultsStore, TrialWriter

    store = ResultsStore(root)
    schema = pa.schema([("trial_id", pa.string()), ("T", pa.int64()), ("test_acc", pa.float64())])
    writer = TrialWriter(store, "bench", "20261201-000000-000000", schema, flush_rows=10_000, flush_s=60)
    writer.append([dict(trial_id=f"t{i}", T=8 * (1 + i % 6), test_acc=0.5) for i in range(1000)])
    writer.flush()
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="0b120a6", help="the earlier commit (default: before issue 15)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("bench-startup.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, checkout(args.before) as before:
        store = _store(Path(tmp) / "store")
        rows = {}
        py = sys.executable
        base = {
            "python -c 'import typer'": [py, "-c", "import typer"],
            "python -c 'import polars, pyarrow'": [py, "-c", "import polars, pyarrow"],
        }
        for name, argv in base.items():
            rows[name] = dict(after=statistics.median(_time(argv, ROOT) for _ in range(args.repeat)))
        for name, cli_args in commands(store).items():
            times: dict[str, list[float]] = {"before": [], "after": []}
            for _ in range(args.repeat):
                for label, cwd in (("before", before), ("after", ROOT)):
                    entry = ENTRY.format(module="attnsweep.cli" if prefix(cwd) else "orchestrator.cli")
                    times[label].append(_time([py, "-c", entry, *cli_args], cwd))
            rows[name] = {k: statistics.median(v) for k, v in times.items()}
            print(
                f"{name:45s} before {rows[name]['before']:6.2f} s  after {rows[name]['after']:6.2f} s  "
                f"({rows[name]['before'] / rows[name]['after']:.1f}x)",
                flush=True,
            )
    for name in base:
        print(f"{name:45s} {rows[name]['after']:6.2f} s")
    machine = dict(python=platform.python_version(), cpus=os.cpu_count(), platform=platform.platform())
    args.out.write_text(json.dumps(dict(before=args.before, repeat=args.repeat, machine=machine, rows=rows), indent=2))


if __name__ == "__main__":
    main()
