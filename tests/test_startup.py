"""The CLI's light commands answer without importing torch or Ray (or scipy, matplotlib):
what they load is listed by the interpreter itself, in a fresh process per command."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from attnsweep.results import ResultsStore, TrialWriter

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "ray", "scipy", "matplotlib", "seaborn", "optuna")
_RUN = """
import json, sys
from attnsweep.cli import main
sys.argv = ["attnsweep", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.stdin.readline())))
print(json.dumps(dict(code=code, heavy=heavy)), file=sys.stderr)
"""


def _light(*args):
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, *args],
        input=json.dumps(HEAVY) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    return result["code"], result["heavy"], proc.stdout


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("startup") / "store"
    schema = pa.schema([("trial_id", pa.string()), ("seed", pa.int64())])
    writer = TrialWriter(ResultsStore(root), "sw", "20261201-010203-abcdef", schema, flush_rows=100, flush_s=60)
    writer.append([dict(trial_id=f"t{i}", seed=i) for i in range(3)])
    writer.flush()
    return root


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("run", "--help"),
        ("validate", "sweeps/quickstart.yaml"),
        ("validate", "sweeps/symmetry.yaml"),
        ("validate", "sweeps/decades.yaml"),
    ],
)
def test_help_and_validate_load_no_heavy_package(args):
    code, heavy, out = _light(*args)
    assert code == 0 and heavy == []
    assert "valid" in out or "Usage" in out


@pytest.mark.slow
def test_query_and_store_check_load_no_heavy_package(store):
    code, heavy, out = _light("query", "SELECT count(*) AS n FROM trials", "--store", str(store), "--format", "csv")
    assert (code, heavy) == (0, []) and out.splitlines() == ["n", "3"]
    code, heavy, out = _light("query", "--schema", "--store", str(store))
    assert (code, heavy) == (0, []) and "trials" in out
    code, heavy, out = _light("store", "check", "--store", str(store))
    assert heavy == [] and code == 1 and "no run record" in out  # the fixture wrote trial rows only


def test_status_and_cancel_load_no_heavy_package():
    address = f"http://127.0.0.1:{_closed_port()}"
    for command in ("status", "cancel", "logs"):
        code, heavy, _ = _light(command, "raysubmit_x", "--address", address, "--timeout", "5")
        assert (code, heavy) == (2, []), command  # nothing answers there: one error, exit 2
