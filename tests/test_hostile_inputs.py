"""Inputs a hostile or careless user can make, each answered with one clear error (exit 2) or
handled as documented, and nothing touched outside what was asked (issue 23): spec files and
their YAML, sizes that come from input, report folders, API arguments."""

from __future__ import annotations

import datetime as dt
import os
import resource
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
import yaml

import attnsweep
from attnsweep.orchestrator.errors import SpecError
from attnsweep.orchestrator.spec import parse_spec, trial_id
from attnsweep.orchestrator.trials_table import run_schema, trial_schema
from attnsweep.results import ResultsStore, StoreError
from attnsweep.workers import BooleanTrialConfig

ROOT = Path(__file__).resolve().parents[1]
BASE = "name: x\ngrid: {T: [8]}\nfixed: {task: and, s: 3, m: 16}\n"


def _cli(*args, cwd, env=None, preexec_fn=None, timeout=600):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", COLUMNS="200", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "attnsweep.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


# --- YAML as YAML 1.2 reads it, and strict types in every section -----------------------------


@pytest.mark.parametrize(
    "extra, field",
    [
        ("execution: {flush_s: 1:30}", "execution.flush_s"),  # YAML 1.1: 90 (sexagesimal)
        ("execution: {max_retries: 010}", "execution.max_retries"),  # YAML 1.1: 8 (octal)
        ("execution: {max_retries: '1'}", "execution.max_retries"),  # a string is no number
        ("execution: {max_retries: true}", "execution.max_retries"),  # a boolean is no count
        ("search: {mode: adaptive, m: {min: 8, max: 64}, tune: {n_trials: true}}", "n_trials"),
        ("fixed2: {reject_ambiguous: yes}", None),
    ],
)
def test_yaml_1_1_quirks_are_refused_by_name(extra, field):
    text = BASE + extra + "\n"
    if field is None:  # "yes" is a string now: a boolean setting refuses it by name
        text = BASE.replace("m: 16}", "m: 16, reject_ambiguous: yes}")
        field = "reject_ambiguous"
    with pytest.raises(SpecError) as err:
        parse_spec(text)
    assert field in str(err.value), str(err.value)


def test_keys_that_are_not_text_are_one_clear_error():
    for text in (
        BASE + "execution: {1: 2}\n",
        BASE + "resources: {[1, 2]: 3}\n",
        BASE + "? {a: 1}\n: 2\n",
    ):
        with pytest.raises(SpecError) as err:
            parse_spec(text)
        assert "Traceback" not in str(err.value)


@pytest.mark.slow
def test_duplicate_keys_are_found_among_many():
    keys = "".join(f"  k{i}: {i}\n" for i in range(20_000))
    with pytest.raises(SpecError, match=r"duplicate key\(s\) \['k7'\]"):
        parse_spec(BASE + "description:\n" + keys.replace("k19999:", "k7:"))


def test_a_file_that_is_not_a_spec_is_not_echoed(tmp_path):
    secret = tmp_path / "secrets.yaml"
    secret.write_text("password: hunter2-do-not-print\napi_key: abcdef-secret\n")
    proc = _cli("validate", str(secret), cwd=tmp_path)
    assert proc.returncode == 2 and "not a sweep spec" in proc.stderr
    assert "hunter2" not in proc.stderr and "password" not in proc.stderr and "api_key" not in proc.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nsecret-line: [hunter2-line\n")
    proc = _cli("validate", str(broken), cwd=tmp_path)
    assert proc.returncode == 2 and "not valid YAML" in proc.stderr and "hunter2" not in proc.stderr


# --- sizes from input are bounded before they are used --------------------------------------


def _limit_memory():  # 1.5 GB of address space: the bomb grew past 3 GB before
    resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))


def test_validate_counts_an_adaptive_search_before_it_lists_its_cells(tmp_path):
    (tmp_path / "bomb.yaml").write_text(
        "name: bomb\nseeds: 4\ngrid:\n  T: {start: 8, stop: 1000000, num: 10000}\n"
        "  d: {start: 4, stop: 65536, num: 10000, scale: linear}\nfixed: {task: and, s: 3, heads: 1}\n"
        "search: {mode: adaptive, m: {min: 8, max: 1024}}\n"
    )
    proc = _cli("validate", "bomb.yaml", "--max-trials", "1000000", cwd=tmp_path, preexec_fn=_limit_memory)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "may run up to" in proc.stderr and "more than the limit 1000000" in proc.stderr


def test_a_cpu_slice_below_a_tenth_is_refused():
    with pytest.raises(SpecError, match=r"resources.cpus_per_worker: value 0.01.*0.1"):
        parse_spec(BASE + "resources: {cpus_per_worker: 0.01}\n")


def test_a_deadline_too_large_to_wait_on_is_refused(monkeypatch):
    from attnsweep.orchestrator.deadline import default_timeout
    from attnsweep.orchestrator.errors import RunError

    monkeypatch.setenv("ATTNSWEEP_TIMEOUT", "1e300")
    with pytest.raises(RunError, match="at most 86400"):
        default_timeout()


# --- names and API arguments -----------------------------------------------------------------


def test_a_name_that_ends_in_a_newline_is_no_run_id(tmp_path):
    store = ResultsStore(tmp_path / "store")
    table = pa.Table.from_pylist([], schema=trial_schema())
    for sweep, run in (("s", "20261202-090000-aaaaaa\n"), ("s\n", "r"), ("s", "../r")):
        with pytest.raises(StoreError):
            store.write_trials(sweep, run, table)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: attnsweep.run(3), "spec:"),
        (
            lambda: attnsweep.run({"name": "x", "grid": {"T": [8]}, "fixed": {"f": object()}}),
            "spec.fixed.f",
        ),
        (lambda: attnsweep.run("x.yaml", run_id=5), "run_id"),
        (lambda: attnsweep.run("x.yaml", progress_interval_s=-1), "progress_interval_s"),
        (lambda: attnsweep.run("x.yaml", max_in_flight=0), "max_in_flight"),
        (lambda: attnsweep.resume(7), "run_id"),
        (lambda: attnsweep.open_store(42), "store"),
        (lambda: attnsweep.open_store("results-store").analyze(123), "run"),
        (lambda: attnsweep.open_store("results-store").trials(run=b"x"), "run"),
    ],
)
def test_api_arguments_of_the_wrong_type_raise_the_package_error(call, words):
    with pytest.raises(attnsweep.ArgumentError, match=words):
        call()


def test_numpy_numbers_and_paths_in_a_spec_dict_are_plain_values(tmp_path):
    import numpy as np

    from attnsweep.api import _plain

    spec = {
        "name": "x",
        "seeds": np.arange(2),
        "grid": {"T": np.array([8, 16])},
        "fixed": {"task": "and", "s": np.int64(3), "m": np.int32(16), "lr": np.float32(0.5)},
        "description": tmp_path,
    }
    plain = _plain(spec, "spec")
    assert plain["seeds"] == [0, 1] and plain["grid"]["T"] == [8, 16] and plain["fixed"]["s"] == 3
    assert plain["description"] == str(tmp_path) and type(plain["fixed"]["lr"]) is float
    parse_spec(yaml.safe_dump(plain))  # a valid spec


def test_a_second_run_in_one_process_is_refused_while_one_is_under_way(tmp_path):
    from attnsweep import api

    assert api._RUNNING.acquire(blocking=False)
    try:
        (tmp_path / "s.yaml").write_text(BASE)
        with pytest.raises(attnsweep.ArgumentError, match="another attnsweep run is under way"):
            attnsweep.run(tmp_path / "s.yaml", store=tmp_path / "store", local=True)
    finally:
        api._RUNNING.release()
    assert not (tmp_path / "store").exists()


# --- a report writes only where it was asked, and not into the store -------------------------


def _store_with_a_run(root: Path, spec_text: str, ok: bool = True) -> tuple[ResultsStore, str]:
    spec = parse_spec(spec_text)
    store = ResultsStore(root / "store")
    rows = []
    for m in (16, 32):
        for seed in range(4):
            cfg = BooleanTrialConfig(task="and", T=8, s=3, m=m, seed=seed, n_test=100)
            rows.append(
                {
                    **cfg.model_dump(),
                    "trial_id": trial_id(cfg),
                    "experiment": "sparse_boolean",
                    "status": "done" if ok else "failed",
                    "test_acc": 1.0 if ok else None,
                    "train_acc": 1.0 if ok else None,
                    "converged": ok,
                }
            )
    schema = trial_schema()
    store.write_trials(
        spec.name,
        "20261202-090000-aaaaaa",
        pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema),
    )
    t0 = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)
    store.write_run(
        spec.name,
        "20261202-090000-aaaaaa",
        dict(
            status="finished",
            started_at=t0,
            ended_at=t0,
            wall_s=1.0,
            n_trials=len(rows),
            n_done=len(rows) if ok else 0,
            n_failed=0 if ok else len(rows),
            n_diverged=0,
            n_lost=0,
            spec_name=spec.name,
            spec_hash=spec.spec_hash(),
            spec_yaml=spec_text,
            executor="x",
            host="x",
            code_version="x",
            packages="{}",
            experiment="sparse_boolean",
            trial_fields=None,
            cell_counts=None,
            attempts=[],
        ),
        run_schema(),
    )
    return store, "20261202-090000-aaaaaa"


SPEC = "name: tiny\nseeds: 4\ngrid: {m: [16, 32]}\nfixed: {task: and, T: 8, s: 3, n_test: 100}\n"


@pytest.mark.slow
def test_a_report_is_never_written_into_the_store(tmp_path):
    _store_with_a_run(tmp_path, SPEC)
    for out in ("store", "store/reports", "store/trials/x"):
        proc = _cli(
            "report",
            "20261202-090000-aaaaaa",
            "--store",
            "store",
            "--out",
            out,
            "--publish",
            cwd=tmp_path,
        )
        assert proc.returncode == 2 and "inside the results store" in proc.stderr, proc.stderr[-1500:]
    assert not (tmp_path / "store" / "reports").exists() and not (tmp_path / "store" / "trials.parquet").exists()


@pytest.mark.slow
def test_a_report_deletes_no_figure_it_did_not_make(tmp_path):
    _store_with_a_run(tmp_path, SPEC)
    mine = [
        tmp_path / "out/figures/mine.png",
        tmp_path / "out/figures/analyze/RUN/m_star_vs_T.png",
        tmp_path / "out/figures/20261202-090000-aaaaaa/notes.png",
    ]
    for path in mine:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"a person's file")
    proc = _cli("report", "20261202-090000-aaaaaa", "--store", "store", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert all(p.read_bytes() == b"a person's file" for p in mine)
    assert (tmp_path / "out/figures/20261202-090000-aaaaaa/m_star_vs_T.png").stat().st_size > 1000


@pytest.mark.slow
def test_replicate_refuses_a_baseline_it_cannot_analyse_before_running_anything(tmp_path):
    store, run = _store_with_a_run(tmp_path, SPEC, ok=False)  # every trial failed: nothing to analyse
    (tmp_path / "tiny.yaml").write_text(SPEC)
    proc = _cli("replicate", "tiny.yaml", "--baseline", run, "--store", "store", "--local", cwd=tmp_path)
    assert proc.returncode == 2 and "cannot be analysed" in proc.stderr, proc.stderr[-2000:]
    assert store.scan_runs().collect().height == 1  # no new run was started


# --- the second hostile trial: links in a report folder, crafted published folders ----------

RUN = "20261202-090000-aaaaaa"


def _part_files(store: ResultsStore) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(Path(store.root).rglob("*.parquet"))}


@pytest.mark.slow
def test_links_at_a_reports_file_names_are_replaced_not_written_through(tmp_path):
    store, _ = _store_with_a_run(tmp_path, SPEC)
    before = _part_files(store)
    victim = tmp_path / "victim.txt"
    victim.write_text("not the report's")
    out = tmp_path / "out"
    out.mkdir()
    part = next(p for p in before if "trials" in p.parts)
    record = next(p for p in before if "runs" in p.parts)
    links = {
        "trials.parquet": part,
        "runs.parquet": record,
        "report.html": victim,
        "verdicts.json": victim,
        "findings.md": victim,
        "SHA256SUMS": victim,
        "m_star.csv": victim,
    }
    for name, target in links.items():
        (out / name).symlink_to(target)
    proc = _cli("report", RUN, "--store", "store", "--out", "out", "--publish", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _part_files(store) == before  # the store: no file added, none changed
    assert victim.read_text() == "not the report's"
    for name in links:  # each name now the report's own regular file
        assert (out / name).is_file() and not (out / name).is_symlink(), name
    assert ResultsStore(tmp_path / "store").scan_run_trials("tiny", RUN).collect().height == 8


@pytest.mark.slow
@pytest.mark.parametrize("link", ["figures", f"figures/{RUN}"])
def test_a_figure_folder_that_is_a_link_is_refused(tmp_path, link):
    store, _ = _store_with_a_run(tmp_path, SPEC)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out" / link).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "out" / link).symlink_to(elsewhere, target_is_directory=True)
    proc = _cli("report", RUN, "--store", "store", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2 and "is a link to" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert list(elsewhere.iterdir()) == []
    assert not (tmp_path / "out" / "report.html").exists()


def _published(tmp_path) -> Path:
    _store_with_a_run(tmp_path, SPEC)
    proc = _cli("report", RUN, "--store", "store", "--out", "pub", "--publish", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp_path / "pub"


def _edit(folder: Path, name: str, change) -> None:
    """Rewrite one published Parquet file through ``change`` (a pyarrow Table -> Table) and
    checksum the folder again, as someone crafting a folder would."""
    import pyarrow.parquet as pq

    from attnsweep.presentation.publish import write_sums

    pq.write_table(change(pq.read_table(folder / name)), folder / name)
    write_sums(folder)


def _set(table: pa.Table, column: str, values: list) -> pa.Table:
    i = table.column_names.index(column)
    return table.set_column(i, table.schema.field(i).with_nullable(True), pa.array(values, table.schema.field(i).type))


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, change, words",
    [
        (
            "runs.parquet",
            lambda t: _set(t, "cell_counts", ["not json"]),
            "cell_counts is not the per-cell counts",
        ),
        (
            "runs.parquet",
            lambda t: _set(t, "cell_counts", ['{"fields": ["m"], "cells": [[16, -5], [32, 4]]}']),
            "cell_counts is not the per-cell counts",
        ),
        ("runs.parquet", lambda t: _set(t, "n_done", [-3]), "n_done is -3"),
        (
            "runs.parquet",
            lambda t: _set(t, "spec_yaml", ["analysis: {ci: 7}\n"]),
            "spec_yaml is not a spec",
        ),
        ("trials.parquet", lambda t: _set(t, "trial_id", [None] * t.num_rows), "have no trial_id"),
        (
            "trials.parquet",
            lambda t: _set(t, "test_acc", [1e300] * t.num_rows),
            "test_acc outside [0, 1]",
        ),
        (
            "trials.parquet",
            lambda t: _set(t, "train_acc", [float("nan")] * t.num_rows),
            "train_acc outside [0, 1]",
        ),
        (
            "trials.parquet",
            lambda t: pa.concat_tables([t, t.slice(0, 2)]),
            "a published run holds each trial once",
        ),
    ],
)
def test_a_crafted_and_checksummed_folder_is_refused_before_anything_is_written(tmp_path, name, change, words):
    folder = _published(tmp_path)
    _edit(folder, name, change)
    files = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.rglob("*") if p.is_file()}
    for out in (
        [],
        ["--out", "elsewhere"],
    ):  # rebuilt in place (the default) or into another folder
        proc = _cli("report", "--from", "pub", *out, cwd=tmp_path)
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.rglob("*") if p.is_file()} == files
        assert not (tmp_path / "elsewhere").exists()


def test_links_to_a_folder_with_spaces_and_brackets_stay_links(tmp_path):
    from markdown_it import MarkdownIt

    from attnsweep.presentation.markdown import md_target

    for path in (
        "docs/my findings (v1)/m_star_vs_T.png",
        "a<b>/c\\d.png",
        "x)(y/z w.png",
        "plain/path-1.png",
    ):
        tokens = MarkdownIt().parseInline(f"![fig]({md_target(path)})")[0].children
        image = [t for t in tokens if t.type == "image"]
        assert image, path  # the text is an image, not a literal "![fig](...)"
        assert image[0].attrs["src"] == MarkdownIt().normalizeLink(path), path


def test_a_job_address_that_is_no_url_or_holds_a_password(tmp_path):
    proc = _cli("status", "raysubmit_x", "--address", "[::1", "--timeout", "5", cwd=tmp_path)
    assert proc.returncode == 2 and "not a URL" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    proc = _cli(
        "status",
        "raysubmit_x",
        "--address",
        "http://user:s3cr3t@127.0.0.1:1",
        "--timeout",
        "5",
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "s3cr3t" not in proc.stderr + proc.stdout and "user:***@" in proc.stderr, (
        proc.stderr
    )


def test_local_and_an_address_together_are_refused(tmp_path):
    (tmp_path / "s.yaml").write_text(BASE)
    proc = _cli("run", "s.yaml", "--local", "--address", "1.2.3.4:1", cwd=tmp_path)
    assert proc.returncode == 2 and "--local and --address" in proc.stderr, proc.stderr
    assert not (tmp_path / "results-store").exists()
    for kwargs, words in (
        ({"local": "no"}, "local: give True or False"),
        ({"local": True, "address": "auto"}, "a run without Ray has no cluster"),
    ):
        with pytest.raises(attnsweep.ArgumentError, match=words):
            attnsweep.run(tmp_path / "s.yaml", store=tmp_path / "store", **kwargs)
    assert not (tmp_path / "store").exists()


def test_validate_counts_no_more_workers_than_trials(tmp_path):
    (tmp_path / "s.yaml").write_text(
        "name: x\nseeds: 2\ngrid: {T: [8]}\nfixed: {task: and, s: 3, m: 16}\nresources: {num_workers: 100000}\n"
    )
    proc = _cli("validate", "s.yaml", cwd=tmp_path)
    assert proc.returncode == 0 and "2 trials in 2 packs (for 2 workers here)" in proc.stdout, proc.stdout


def test_many_grid_blocks_are_counted_before_any_value_is_built(tmp_path):
    blocks = [{"T": [8 + i], "m": {"start": 8, "stop": 100000, "num": 10000}} for i in range(1000)]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"name": "a", "grid": blocks, "fixed": {"task": "and", "s": 2}}))
    # The CLI under a parent of its own, which reports the peak memory of its one child (KiB).
    parent = (
        "import resource, subprocess, sys\n"
        "proc = subprocess.run([sys.executable, '-m', 'attnsweep.cli', 'validate', 's.yaml'], "
        "capture_output=True, text=True)\n"
        "sys.stderr.write(proc.stderr)\n"
        "print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", parent],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, COLUMNS="200"),
    )
    code, peak_kib = map(int, proc.stdout.split())
    assert code == 2 and "10,001,000 axis values" in proc.stderr, proc.stderr[-2000:]
    assert peak_kib < 300_000  # it built no list of ten million values (that took 530 MB and 27 s)


def test_m_star_of_with_a_value_of_another_type_and_figures_on_a_file(tmp_path):
    _store_with_a_run(tmp_path, SPEC)
    store = attnsweep.open_store(tmp_path / "store")
    with pytest.raises(attnsweep.ArgumentError, match="figures: /dev/null exists and is not a folder"):
        store.analyze(RUN, figures="/dev/null")
    result = store.analyze(RUN, figures=tmp_path / "figs")
    for bad in ("8", [8], True):
        with pytest.raises(attnsweep.ArgumentError, match="m_star_of: T="):
            result.m_star_of(T=bad)
    assert result.m_star_of(T=8).cell["T"] == 8


@pytest.mark.slow
def test_a_folder_published_before_the_margins_existed_reads_them_as_null(tmp_path):
    folder = _published(tmp_path)
    _edit(folder, "trials.parquet", lambda t: t.drop(["input_norm", "margin", "margin_normalised"]))
    proc = _cli("report", "--from", "pub", "--out", "again", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    again = pl.read_parquet(tmp_path / "again" / "trials.parquet")
    assert again["margin"].null_count() == again.height and again["margin_normalised"].null_count() == again.height
