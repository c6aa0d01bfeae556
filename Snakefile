# PAPA: tokenize -> average attention -> learn lambda -> probe with k% of heads replaced
# -> aggregate into Parquet tables -> plot.   `snakemake --cores all`
from snakemake.utils import min_version

min_version("9.0")


# the default config applies only when no --configfile is given (configs are not merged)
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"  # validates the config first (papa.checks.validate_config)
include: "workflow/rules/rehearsal.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/papa.smk"
include: "workflow/rules/report.smk"


# the Snakemake report's description (make report): what this config runs, rendered from it
report: "workflow/report/workflow.rst"


onstart:
    # a run that runs jobs holds the results folder (another run of it is refused: papa.records.hold_results) and
    # ties it to this working directory's records (papa.records.claim_results)
    records.hold_results(R)
    records.claim_results(R)
    # a report of the results this run changes is no longer theirs: kept aside (make report builds it anew)
    jobs = list(workflow.dag.needrun_jobs())
    not_prune = any(job.rule.name != "prune" for job in jobs)
    if not_prune and (aside := records.set_aside_report(R)) is not None:
        logger.warning(f"{aside}: the report of {R} as it was before this run (make report builds the new one)")
    # a closed terminal (SIGHUP), and scancel or the time limit of a Slurm job running Snakemake (SIGTERM, then
    # SIGKILL), stop the run as Ctrl-C does: its jobs cancelled, its lock removed
    interrupt_on_stop_signals(slurm_job=DRIVER_IN_SLURM_JOB)
    # the large files' digests papa keeps on disk (papa.io.file_digest) not written for a month
    prune_digests()
    # the outputs the jobs to run have now: each job deletes its old ones as it starts
    STANDING.update(f for job in jobs for f in job.output if os.path.exists(f))
    # a start of explicit targets (rule all's input, which says them, is not read): the notices before its jobs run
    if not_prune:
        start_notices(None)


onerror:
    # a job that had to run again deleted its old outputs as it started: those of the jobs this run did not finish
    # are asked for again by the next start (papa.records.lost_outputs, rule all), or the results made from them stand.
    # (An output not there as the run started, a first run's, is made by the next start as any missing output is.)
    records.note_lost(f for f in STANDING if not os.path.exists(f))
    warn_if_code_changed()  # after the records: it reads papa's code as it is now


onsuccess:
    # of the lost outputs listed, those on disk again and those under R this config no longer makes are forgotten;
    # another results folder's (another config's failed run) stay for its next run
    records.forget_found(results=R, makes=of_this_config)
    warn_if_code_changed()  # after the records: it reads papa's code as it is now


rule prune:
    """Remove the probe and lambda files of runs this config does not make (`stale_grid_files`): `make prune`."""
    localrule: True
    threads: res("prune")["threads"]
    resources:
        mem_mb=res("prune")["mem_mb"],
        runtime=res("prune")["runtime"],
    log:
        f"{R}/logs/prune.log",
    run:
        prune_stale(log[0])


rule all:
    input:
        # no probe run (every model has model_tasks: []): the MLM analysis only, no tables or figures of probes
        rules.aggregate.output if runs() else [],
        rules.plot.output if runs() else [],
        rules.mlm_table.output if mlm_files() else [],
        # outputs a failed or killed rerun lost while the results made from them stand (papa.records.lost_outputs)
        lost_targets() if workflow.is_main_process else [],
        # no input: what a start says once Snakemake has its settings (stale files, files of other papa code)
        start_notices,
    default_target: True


# per-rule settings from the command line or the Slurm profile (--set-resources, --set-threads) for a rule this
# workflow does not have, which Snakemake ignored without a word, are refused (every rule is defined by now)
checks.check_rule_overrides(
    workflow.resource_settings.overwrite_resources,
    workflow.resource_settings.overwrite_threads,
    {r.name: set(r.resources) for r in workflow.rules},
    logger.warning if workflow.is_main_process else None,
)
