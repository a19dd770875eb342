"""The CLI's cluster commands: ``submit`` a sweep as a Ray job, then its ``status``,
``logs`` and ``cancel`` (orchestrator/jobs.py talks to the job server)."""

from __future__ import annotations

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
