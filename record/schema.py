"""The trial record's schema: every Tune report key, MLflow tag and metric that a sweep writes and
that the live view, the summary and the report read, and the statuses a trial can end in.

Writers (``trainers.training.module``, which logs the training metrics, ``nas.trial.run``,
``nas.store.tracking``, ``nas.trial.lightning_hooks``) and readers (``nas.sweep.live``, ``nas.sweep.summary``,
``reports.load``, ``reports.sections``) name keys through this module only, so a renamed key is
renamed everywhere; a test checks that what a real sweep writes is exactly what is named here. It
lives on the ground floor (``record``), below every package that writes or reads the record, and
imports nothing heavy: the trainer, the driver, the CLI and the report all load it.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """How a trial ended: the ``nas.status`` tag of its child run."""

    FINISHED = "finished"  # trained to its last step
    DIVERGED = "diverged"  # loss non-finite or far above its best: ended at that step
    TIMED_OUT = "timed_out"  # ran past --trial-timeout
    FAILED = "failed"  # raised (after Tune's retries)
    INFEASIBLE = "infeasible"  # the configuration rejected the point: nothing trained
    STOPPED_EARLY = "stopped_early"  # the scheduler (ASHA) stopped it
    KILLED = "killed"  # interrupted and not yet resumed


# The MLflow run status each trial status implies: the run ended normally, or it did not.
RUN_STATUS: dict[Status, str] = {
    Status.FINISHED: "FINISHED",
    Status.INFEASIBLE: "FINISHED",
    Status.STOPPED_EARLY: "FINISHED",
    Status.DIVERGED: "FAILED",
    Status.TIMED_OUT: "FAILED",
    Status.FAILED: "FAILED",
    Status.KILLED: "KILLED",
}
# Statuses that settle a trial: a later invocation does not run it again. A failed trial is
# retried on the next invocation (a crash may be the machine's fault); a killed one resumes.
SETTLED = frozenset(RUN_STATUS) - {Status.FAILED, Status.KILLED}
# Statuses whose final metrics are a trained model's: the rows a comparison may use.
COMPARABLE = frozenset({Status.FINISHED})


class Tag:
    """MLflow tags. Parent run (one per sweep, across invocations) and child runs (one per
    trial)."""

    PARENT = "mlflow.parentRunId"  # MLflow's own: the UI nests the child under it
    NOTE = "mlflow.note.content"  # MLflow's own: the run's description in the UI
    ROLE = "nas.role"  # ROLE_SWEEP or ROLE_TRIAL
    SWEEP = "nas.sweep"
    # The record's schema version (RECORD_VERSION when written); a run without it was recorded
    # before the tag existed: version 1. record.upgrade brings each version to the current one.
    SCHEMA_VERSION = "nas.schema_version"
    # parent
    SWEEP_KEY = "nas.sweep_key"  # where the sweep's Tune state lives (+ its generation)
    SPACE = "nas.space"
    COMMAND = "nas.command"  # the latest invocation's command line
    VERSIONS = "nas.versions"  # JSON: python and the stack
    SUPERSEDED = "nas.superseded"  # "true" on a parent archived by --restart
    # child
    TRIAL_KEY = "nas.trial_key"  # TrialSpec.key: a content hash of arm, point and seed
    TRIAL_ID = "nas.trial_id"  # Tune's id of the attempt that last ran it
    ARM = "nas.arm"
    SEED = "nas.seed"
    STATUS = "nas.status"  # a Status value
    REASON = "nas.reason"  # why it diverged, timed out, failed or was infeasible
    STATUS_STEP = "nas.status_step"  # the step it ended at
    CONFIG_HASH = "nas.config_hash"
    NODE = "nas.node"
    HARDWARE = "nas.hardware"
    # trainers.measure.device_cost: where final/peak_flops came from (a table row, a measured
    # matmul, or --peak-flops), and what final/device_hours counts ("GPU" or "CPU core")
    PEAK_FLOPS_SOURCE = "nas.peak_flops_source"
    DEVICE_UNIT = "nas.device_unit"
    # Where a trial ran (set by nas.trial.run): the torch device Lightning trained on (cpu,
    # cuda:0, ...), chosen from what torch sees; and the GPUs Ray assigned the trial, as Ray
    # numbers them (comma-separated, "" for none) and as CUDA_VISIBLE_DEVICES shows them to CUDA
    DEVICE = "nas.device"
    RAY_GPU_IDS = "nas.ray_gpu_ids"
    CUDA_VISIBLE_DEVICES = "nas.cuda_visible_devices"
    # What kernels a trial ran (set by nas.trial.run, trainers.training.paths): "true" where the
    # model was compiled; the depth mixing's implementation (fused, buffered, stacked, plain; ""
    # for a wiring with one) and why; the kernel packages' versions, as JSON
    COMPILED = "nas.compiled"
    DEPTH_PATH = "nas.depth_path"
    DEPTH_PATH_REASON = "nas.depth_path_reason"
    KERNELS = "nas.kernels"
    # How each step ran (set by nas.trial.run): sequences per forward on one device and the
    # activation checkpointing, as trained (train.micro_batch=auto resolved on the device)
    MICRO_BATCH = "nas.micro_batch"
    CHECKPOINTING = "nas.checkpointing"
    # How the trial's model was spread (set by nas.trial.run): "single" (one process), "ddp"
    # (replicated over its workers) or "fsdp" (sharded over them), and how many workers; of the
    # attempt that finished the trial (one resumed under another strategy names the last)
    STRATEGY = "nas.strategy"
    WORLD_SIZE = "nas.world_size"
    GIT_COMMIT = "nas.git_commit"
    VERSION = "nas.version"
    # parent, a tuned grid (search_spaces.lr_stage): one tag per arm, this prefix + the arm's
    # label (characters MLflow refuses in a tag name as "_") -> the learning rate it was picked
    CHOSEN_PREFIX = "nas.lr_stage."
    # parent, a --seeds auto sweep (search_spaces.seed_choice): the seeds per arm it chose
    SEEDS_AUTO = "nas.seeds_auto"


ROLE_SWEEP, ROLE_TRIAL = "sweep", "trial"
# The version the writer tags each run with (Tag.SCHEMA_VERSION). Raise it, and add the step
# from the old shape to record.upgrade.STEPS, when what a run records changes in a way the reader
# must know.
RECORD_VERSION = 2


class ExperimentTag:
    """Tags on a sweep's experiment, MLflow's own: what its UI opens on."""

    # The experiment's kind, "custom_model_development" for a sweep: MLflow 3 UIs before the
    # "GenAI / Model training" switch open such an experiment on its runs table; 3.17 reads
    # the switch instead (``nas.store.dashboard.runs_url`` sets it through the URL)
    KIND = "mlflow.experimentKind"
    # A saved view of the runs table (columns, order) under a share key: the tag is this prefix
    # plus the key, and the runs table's URL names the key (``?viewStateShareKey=``)
    SHARED_VIEW_PREFIX = "mlflow.sharedViewState."


EXPERIMENT_KIND = "custom_model_development"


class Metric:
    """MLflow metric names."""

    TRAIN_LOSS = "train/loss"
    VAL_LOSS = "val/loss"
    VAL_BPB = "val/bpb"
    FINAL_VAL_LOSS = "final/val_loss"  # the last validation (the last finite one if diverged)
    FINAL_WALL_S = "final/wall_s"
    FINAL_STEP_S = "final/step_s"
    FINAL_TRIAL_S = "final/trial_s"
    FINAL_TOKENS_PER_S = "final/tokens_per_s"
    # greedy decoding at batch 1 with the KV cache after training (trainers.measure.decode_cost)
    FINAL_DECODE_TOKENS_PER_S = "final/decode_tokens_per_s"
    FINAL_PREFILL_TOKENS_PER_S = "final/prefill_tokens_per_s"
    FINAL_KV_BYTES_PER_TOKEN = "final/kv_bytes_per_token"
    FINAL_PARAMS = "final/params"
    FINAL_STEPS = "final/steps"  # the steps actually trained
    # the steps the last attempt trained (fewer than final/steps when resumed): what step_s,
    # tokens_per_s and mfu are measured over
    FINAL_TIMED_STEPS = "final/timed_steps"
    # trainers.flops: training FLOPs per token (forward + backward, the wiring's included),
    # and times the tokens of the steps actually trained
    FINAL_FLOPS_PER_TOKEN = "final/flops_per_token"
    FINAL_TRAIN_FLOPS = "final/train_flops"
    # trainers.measure.device_cost: what the trial cost. Peak memory in MB of 2**20 bytes (GPU:
    # torch's allocated peak; CPU: the process's peak resident set during the fit); MFU = FLOPs per
    # token x tokens trained per second of the fit / the device's peak FLOP/s; device-hours = the
    # trial's time x its devices (GPU-hours, or CPU core-hours); mean NVML utilisation (%) and power
    # (W) only where a GPU and nvidia-ml-py are
    FINAL_PEAK_MEM_MB = "final/peak_mem_mb"
    FINAL_MFU = "final/mfu"
    FINAL_PEAK_FLOPS = "final/peak_flops"
    FINAL_DEVICE_HOURS = "final/device_hours"
    FINAL_GPU_UTIL = "final/gpu_util"
    FINAL_GPU_POWER_W = "final/gpu_power_w"
    # trainers.measure.time_plan: what the FLOP plan gave the steps trained (final/train_flops
    # at the assumed MFU of final/peak_flops), against which final/step_s is what they took
    FINAL_PLANNED_TRAIN_S = "final/planned_train_s"
    FINAL_PLANNED_MFU = "final/planned_mfu"
    DILUTION_PREFIX = "dilution/"
    # trainers.measure.diagnostics' routing summaries (docs/diagnostics.md), of each dilution
    # profile: per-token statistics of the depth-mixing weights, the worst site's (the mean over
    # sites for ROUTING_ENTROPY), and the wiring's parameters' share of the gradient norm
    ROUTING_ENTROPY = "dilution/routing_entropy"
    ROUTING_ENTROPY_MIN = "dilution/routing_entropy_min"
    ROUTING_TOP1_MAX = "dilution/routing_top1_max"
    ROUTING_SPREAD_MAX = "dilution/routing_spread_max"
    ROUTING_MARGIN_MAX = "dilution/routing_margin_max"
    # the largest share of a site's tokens that collapsed (stats.routing: top-1 mass above
    # train.routing_alarm with the runner-up beyond stats.routing.SATURATED nats, same token)
    ROUTING_COLLAPSED_MAX = "dilution/routing_collapsed_max"
    WIRING_GRAD_SHARE = "dilution/wiring_grad_share"
    # trainers.training.module.group_record, once per trial under a parametrization other than sp:
    # optim/<group>/<what>, <what> one of OPTIM_FIELDS (see optim_metric)
    OPTIM_PREFIX = "optim/"
    # parent run
    SWEEP_PREFIX = "sweep/"
    SWEEP_BEST_VAL_LOSS = "sweep/best_val_loss"


# What a parametrized trial records of each AdamW group (trainers.model.parametrization.GROUPS): its
# tensors, its elements, and its lr, weight-decay and eps as multiples of the configured ones.
OPTIM_FIELDS = ("tensors", "params", "lr_mult", "wd_mult", "eps_mult")


def optim_metric(group: str, what: str) -> str:
    """``optim/hidden_weight/lr_mult``: one group's record under ``Metric.OPTIM_PREFIX``."""
    if what not in OPTIM_FIELDS:
        raise ValueError(f"{what!r} is not an optimizer-group field; one of {OPTIM_FIELDS}")
    return f"{Metric.OPTIM_PREFIX}{group}/{what}"


# A search objective (a metric every validation reports) -> the metric holding its final value.
FINAL_OF = {
    "val/loss": Metric.FINAL_VAL_LOSS,
    "val/bpb": Metric.VAL_BPB,  # its latest value is the last validation's
    "params": Metric.FINAL_PARAMS,
    "decode/tokens_per_s": Metric.FINAL_DECODE_TOKENS_PER_S,  # measured once, after training
}

FINAL_METRICS = (
    Metric.FINAL_VAL_LOSS,
    Metric.FINAL_WALL_S,
    Metric.FINAL_STEP_S,
    Metric.FINAL_TRIAL_S,
    Metric.FINAL_TOKENS_PER_S,
    Metric.FINAL_DECODE_TOKENS_PER_S,
    Metric.FINAL_PREFILL_TOKENS_PER_S,
    Metric.FINAL_KV_BYTES_PER_TOKEN,
    Metric.FINAL_PARAMS,
    Metric.FINAL_STEPS,
    Metric.FINAL_TIMED_STEPS,
    Metric.FINAL_FLOPS_PER_TOKEN,
    Metric.FINAL_TRAIN_FLOPS,
    Metric.FINAL_PEAK_MEM_MB,
    Metric.FINAL_MFU,
    Metric.FINAL_PEAK_FLOPS,
    Metric.FINAL_DEVICE_HOURS,
    Metric.FINAL_GPU_UTIL,
    Metric.FINAL_GPU_POWER_W,
    Metric.FINAL_PLANNED_TRAIN_S,
    Metric.FINAL_PLANNED_MFU,
)


class Report:
    """Keys of the dicts a trial reports to Tune (Tune's keys cannot hold '/')."""

    VAL_LOSS = "val_loss"
    VAL_BPB = "val_bpb"
    PARAMS = "params"
    DECODE_TOKENS_PER_S = "decode_tokens_per_s"
    STEP = "step"  # ASHA's time attribute
    STATUS = "nas_status"  # on the trial's last report only: a Status value
    REASON = "nas_reason"
    KEY = "nas_key"  # the TrialSpec key
    END_STEP = "nas_end_step"  # on the last report: the step the trial ended at
    REPEAT = "nas_repeat"  # a search proposal the record had settled: reported, not run


def tune_key(metric: str) -> str:
    """A metric's name in Tune reports: ``val/loss`` -> ``val_loss``."""
    return metric.replace("/", "_")


# The Tune config key that carries a grid trial's TrialSpec key (never a list index).
GRID_PARAM = "nas_trial"

# Artifacts on the parent run.
SPACE_FILE = "space.yaml"
SKIPPED_FILE = "skipped.yaml"
PLANS_FOLDER = "plans"  # one JSON file per invocation: command, space, trial keys
# A tuned grid's learning-rate stage (JSON): the field, its grid and seeds, and per arm the
# stage's trial keys by value, the curve (value -> mean final val loss), the choice and warnings
LR_STAGE_FILE = "lr_stage.json"
# A --seeds auto sweep's choice (JSON): its inputs (pilot seeds, effect, power, cap) and, once the
# pilot is settled, per comparison its pilot pairs, their sd and the seeds it needs, and the count
SEEDS_FILE = "seeds.json"
# In the point of a learning-rate stage's trial (hashed into its key, never applied): the
# marker that keeps it apart from the final-stage trial of the same arm, value and seed
STAGE_POINT_KEY = "nas.stage"
# A sweep that trains a parametrization other than sp: the coord check of each model it trains
# (``nas.sweep.coordcheck``), one table per check (``coordcheck/<name>.csv``, the columns of
# ``trainers.measure.coordcheck_table``) and an index (JSON) saying what each checked
COORDCHECK_FOLDER = "coordcheck"
COORDCHECK_INDEX = f"{COORDCHECK_FOLDER}/checks.json"
REPORT_FOLDER = "report"  # the written report (nas report)
# Artifacts on a trial run.
PROFILE_FOLDER = "dilution"  # the dilution profiles: step-NNNNNN.json (+ the last one's PNG)
# Columns ``reports.load`` derives beside the params and metrics.
BEST_VAL_LOSS = "best_val_loss"  # the lowest val/loss over the trial's curve
