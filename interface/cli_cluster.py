"""The CLI's cluster commands: ``submit`` a sweep as a Ray job, then its ``status``,
``logs`` and ``cancel`` (orchestrator/jobs.py talks to the job server); ``head start`` and
``head stop``, a Ray head of your own on a shared machine (orchestrator/local_head.py)."""

from __future__ import annotations

import getpass
import re
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from attnsweep.cli_options import (
    DEFAULT_JOB_ADDRESS,
    DEFAULT_PROGRESS_INTERVAL,
    DEFAULT_TIMEOUT,
    JobAddressOpt,
    JobArg,
    SetOpt,
    SpecArg,
    TimeoutOpt,
    err,
    out,
    user_errors,
)
from attnsweep.presentation.console_text import log_text, visible


@user_errors
def submit(
    spec: SpecArg,
    address: JobAddressOpt = DEFAULT_JOB_ADDRESS,
    store: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            help="results store as the cluster sees it (shared path or URI); default: the cluster's ATTNSWEEP_STORE",
        ),
    ] = None,
    job_id: Annotated[str | None, typer.Option("--job-id", metavar="JOB_ID", help="a job id of your own")] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            metavar="",
            help="follow the job's log to its end; exit 0 only if it succeeded",
        ),
    ] = False,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    progress_interval: Annotated[
        float,
        typer.Option(
            "--progress-interval",
            min=0.1,
            max=86_400,
            metavar="SECONDS",
            help="seconds between the progress lines in the job's log",
        ),
    ] = DEFAULT_PROGRESS_INTERVAL,
    set_: SetOpt = None,
) -> None:
    """Submit a sweep as a Ray job to a cluster's job server; prints the job id."""
    from attnsweep.orchestrator import jobs

    jid = jobs.submit(
        spec,
        address,
        store,
        job_id,
        timeout_s=timeout,
        progress_interval_s=progress_interval,
        overrides=set_ or (),
    )
    out.print(visible(jid), markup=False, highlight=False)
    if wait:
        jobs.logs(
            address,
            jid,
            follow=True,
            write=lambda chunk: err.print(log_text(chunk), end="", markup=False, highlight=False),
            timeout_s=timeout,
        )
        state, message = jobs.status(address, jid, timeout_s=timeout)
        err.print(
            visible(f"job {jid}: {state}{': ' + message if message else ''}"),
            markup=False,
            highlight=False,
        )
        if state != "SUCCEEDED":
            raise typer.Exit(1)


@user_errors
def status(
    job_id: JobArg,
    address: JobAddressOpt = DEFAULT_JOB_ADDRESS,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
) -> None:
    """Print a submitted job's status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED)."""
    from attnsweep.orchestrator import jobs

    state, message = jobs.status(address, job_id, timeout_s=timeout)
    out.print(visible(f"{state}{': ' + message if message else ''}"), markup=False, highlight=False)


@user_errors
def logs(
    job_id: JobArg,
    address: JobAddressOpt = DEFAULT_JOB_ADDRESS,
    follow: Annotated[bool, typer.Option("--follow", "-f", metavar="", help="stream until the job ends")] = False,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
) -> None:
    """Print a submitted job's log."""
    from attnsweep.orchestrator import jobs

    jobs.logs(
        address,
        job_id,
        follow,
        write=lambda chunk: typer.echo(log_text(chunk), nl=False),
        timeout_s=timeout,
    )


@user_errors
def cancel(
    job_id: JobArg,
    address: JobAddressOpt = DEFAULT_JOB_ADDRESS,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
) -> None:
    """Stop a submitted job (finished trials stay in the store; resume the run later)."""
    from attnsweep.orchestrator import jobs

    stopped = jobs.cancel(address, job_id, timeout_s=timeout)
    out.print(
        visible(f"job {job_id}: {'stopping' if stopped else 'had already ended'}"),
        markup=False,
        highlight=False,
    )


head_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="A Ray head of your own on a shared machine: every port free, its own temp folder, stopped by that folder.",
)


def _default_head_dir() -> str:
    # Per user and short (Ray's socket paths live under it); /tmp, as Ray's own default /tmp/ray.
    return f"/tmp/attnsweep-head-{re.sub(r'[^A-Za-z0-9._-]', '_', getpass.getuser())}"


HeadDirOpt = Annotated[
    str | None,
    typer.Option(
        "--dir",
        metavar="DIR",
        help="the head's temp folder (Ray's --temp-dir, RAY_TMPDIR), at most 40 characters; default /tmp/attnsweep-head-$USER",
    ),
]


@head_app.command("start")
@user_errors
def head_start(
    dir: HeadDirOpt = None,  # noqa: A002 - the option is --dir
    num_cpus: Annotated[
        int | None, typer.Option("--num-cpus", min=1, metavar="N", help="CPUs the head offers (default: all)")
    ] = None,
    num_gpus: Annotated[
        int | None, typer.Option("--num-gpus", min=0, metavar="N", help="GPUs the head offers (default: all)")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=1, max=3600, metavar="SECONDS", help="how long the head may take to come up"),
    ] = 180.0,
) -> None:
    """Start a Ray head on this machine with every port it opens free, in a temp folder of its own;
    prints the job server's address (for submit --address), then how to stop it."""
    from attnsweep.orchestrator import local_head

    head = local_head.start(dir or _default_head_dir(), num_cpus=num_cpus, num_gpus=num_gpus, timeout_s=timeout)
    out.print(head.job_address, markup=False, highlight=False)
    err.print(
        visible(
            f"Ray head in {head.temp_dir}: submit with `attnsweep submit SPEC --address {head.job_address}`, "
            f"run on it with `attnsweep run SPEC --address {head.gcs_address}`; "
            f"stop it with `attnsweep head stop --dir {head.temp_dir}`"
        ),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@head_app.command("stop")
@user_errors
def head_stop(
    dir: HeadDirOpt = None,  # noqa: A002 - the option is --dir
    grace: Annotated[
        float,
        typer.Option("--grace", min=0, max=600, metavar="SECONDS", help="seconds between SIGTERM and SIGKILL"),
    ] = 15.0,
) -> None:
    """Stop the Ray whose temp folder is DIR (a head, or a worker node's Ray): every process of it,
    Ray's renamed agents and workers included, and no other Ray on the machine (unlike `ray stop`)."""
    from attnsweep.orchestrator import local_head

    folder = Path(dir or _default_head_dir())
    stopped = local_head.stop(folder, grace_s=grace)
    where = folder.expanduser().resolve()
    if not stopped.processes:
        out.print(visible(f"no Ray runs in {where}: nothing to stop"), markup=False, highlight=False)
        return

    def listed(procs: list[tuple[int, str]]) -> str:
        return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in Counter(name for _, name in procs).items())

    killed = f"; killed after the {grace:g} s grace: {listed(stopped.killed)}" if stopped.killed else ""
    out.print(
        visible(f"stopped Ray in {where}: {len(stopped.processes)} processes ({listed(stopped.processes)}){killed}"),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
