"""Scheduled-job tools: cron_create, cron_delete, cron_list (jobs outlive the agent)."""

from __future__ import annotations

import json
import time

from ratchet.runtime.cron import CronTable, ensure_scheduler
from ratchet.runtime.tools.registry import ToolContext

TOOLS = ("cron_create", "cron_delete", "cron_list")


def _table(ctx: ToolContext) -> CronTable:
    return CronTable(ctx.run_dir / "cron")


def cron_create(ctx: ToolContext, schedule: str, command: str) -> str:
    """Run a shell command on a schedule, in the working directory, by a scheduler process that
    keeps running after this agent stops.

    Args:
        schedule: '@every 30s' (s, m or h) or five cron fields, e.g. '*/10 * * * *'.
        command: the bash command.
    """
    ctx.guard.check_command(command)
    table = _table(ctx)
    policy = ctx.guard.policy
    hidden = [str(ctx.run_dir), *policy.hidden_paths]  # what the agent's own commands do not see
    job = table.create(schedule, command, ctx.workdir, network=policy.network, readable=list(policy.readable),
                       hidden=hidden)
    ensure_scheduler(table.root)
    return f"created cron job {job['id']}, first run at {time.strftime('%H:%M:%S', time.localtime(job['next_run']))}"


def cron_delete(ctx: ToolContext, id: str) -> str:
    """Delete a scheduled job.

    Args:
        id: the job's id, as cron_list shows it.
    """
    _table(ctx).delete(id)
    return f"deleted cron job {id}"


def cron_list(ctx: ToolContext) -> str:
    """List scheduled jobs with their next run time and how often they ran."""
    jobs = _table(ctx).jobs()
    return json.dumps(jobs, indent=1) if jobs else "no cron jobs"
