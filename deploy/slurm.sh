#!/usr/bin/env bash
# `nas sweep` on a Slurm allocation: a Ray head on the first node, a Ray worker on each of the
# others, token authentication, an MLflow server on the head unless MLFLOW_TRACKING_URI is given.
#
#   sbatch deploy/slurm.sh residual_ablation --concurrency 8 --cpus-per-trial 4 --gpus-per-trial 1
#
# The arguments are `nas sweep`'s own (space, then options); the script adds --address and
# --storage-path. An example, not tested on a real cluster: adjust the #SBATCH lines (and add
# --partition/--account as your site requires).
#
# Environment (optional, except that the MLflow store needs one of the two MLflow lines):
#   NAS_SHARED       a folder every node sees at the same path (default $HOME/nas-shared):
#                    Tune state and checkpoints ($NAS_SHARED/ray_results), MLflow's artifacts
#                    and the Ray token. Keep it the same across jobs: resubmitting the same
#                    command resumes the sweep from there.
#   NAS_VENV         a virtual environment with the project installed (nas, ray, mlflow on PATH)
#   MLFLOW_TRACKING_URI  an MLflow server (or postgresql:// database) every node can reach;
#                    if unset, a server is started on the head (below)
#   NAS_MLFLOW_BACKEND   the run store of that server: a postgresql:// URL of your site's
#                    database (required when the script starts the server: SQLite on a shared
#                    file system corrupts under concurrent writers)
#   NAS_MLFLOW_HOST  where that server listens: 127.0.0.1 (default) or `head` for the head's
#                    address. Trials log to MLflow from the node they run on, so with
#                    127.0.0.1 only trials placed on the head can log; use `head` on a trusted
#                    cluster network (the server has no authentication).
#   NAS_HEAD_IP      the head's address on the cluster network, if the first address of
#                    `hostname -I` is on the wrong interface
#
# Preemption and the job's time limit: Slurm sends SIGTERM to the job's processes, and
# `nas sweep` handles it as Ctrl-C (trials' runs marked killed, state saved, exit status 143);
# resubmitting the same command (or `#SBATCH --requeue`) resumes it. To end cleanly before the
# limit instead, pass `--time-budget HOURS` a little under it (exit status 75).
#
# Ray binds its ports on all interfaces; token authentication (RAY_AUTH_MODE=token, one token
# shared by head, workers and driver) keeps other users on the network out of the cluster.
#
#SBATCH --job-name=nas-sweep
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --gpus-per-task=1
#SBATCH --time=08:00:00
#SBATCH --output=nas-sweep-%j.out

set -euo pipefail

if [[ -n "${NAS_VENV:-}" ]]; then
    export PATH="$NAS_VENV/bin:$PATH"
fi
for tool in nas ray mlflow python3 scontrol srun; do
    command -v "$tool" >/dev/null || { echo "slurm.sh: $tool not on PATH" >&2; exit 2; }
done

SHARED="${NAS_SHARED:-$HOME/nas-shared}"
(umask 077 && mkdir -p "$SHARED")

# One token, generated once, readable only by you; every node reads it through the shared
# folder (srun passes the environment on, so RAY_AUTH_TOKEN_PATH reaches the workers).
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH="$SHARED/ray_auth_token"
if [[ ! -s "$RAY_AUTH_TOKEN_PATH" ]]; then
    (
        umask 077
        python3 -c 'import secrets, sys; sys.stdout.write(secrets.token_hex(32))' \
            >"$RAY_AUTH_TOKEN_PATH"
    )
fi
chmod 600 "$RAY_AUTH_TOKEN_PATH"

mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node="${nodes[0]}"
workers=("${nodes[@]:1}")
head_ip="${NAS_HEAD_IP:-$(hostname -I | awk '{print $1}')}"
cpus="${SLURM_CPUS_PER_TASK:-1}"
gpus="${SLURM_GPUS_ON_NODE:-0}"
# Each worker step asks for its node's share explicitly: recent Slurm versions do not pass
# the job's --cpus-per-task on to srun, and a step sees only the CPUs and GPUs it asked for.
step=(--nodes=1 --ntasks=1 --cpus-per-task="$cpus")
if ((gpus > 0)); then
    step+=(--gpus-per-task="$gpus")
fi
# Not Ray's default 6379: that is Redis's port, often taken on a shared node. A port free on the
# head now, unless NAS_RAY_PORT names one.
port="${NAS_RAY_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')}"
mlflow_pid=""

cleanup() {
    set +e
    for node in "${workers[@]}"; do
        srun --overlap --nodes=1 --ntasks=1 -w "$node" ray stop >/dev/null 2>&1
    done
    ray stop >/dev/null 2>&1
    if [[ -n "$mlflow_pid" ]]; then
        kill "$mlflow_pid" 2>/dev/null
    fi
    wait
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

echo "head $head_node ($head_ip), workers: ${workers[*]:-none}"

# This script runs on the first node of the allocation: the head starts here.
ray start --head --node-ip-address="$head_ip" --port="$port" \
    --num-cpus="$cpus" --num-gpus="$gpus" --block &
for _ in $(seq 60); do
    ray status --address "$head_ip:$port" >/dev/null 2>&1 && break
    sleep 2
done
ray status --address "$head_ip:$port" >/dev/null 2>&1 || {
    echo "slurm.sh: the Ray head did not come up" >&2
    exit 1
}

for node in "${workers[@]}"; do
    srun "${step[@]}" -w "$node" \
        ray start --address="$head_ip:$port" --num-cpus="$cpus" --num-gpus="$gpus" --block &
done

if [[ -z "${MLFLOW_TRACKING_URI:-}" ]]; then
    mlflow_host="${NAS_MLFLOW_HOST:-127.0.0.1}"
    if [[ "$mlflow_host" == head ]]; then
        mlflow_host="$head_ip"
    fi
    if [[ "$mlflow_host" == 127.0.0.1 && ${#workers[@]} -gt 0 ]]; then
        echo "slurm.sh: MLflow listens on 127.0.0.1: trials on ${workers[*]} cannot log to it;" \
            "set NAS_MLFLOW_HOST=head (trusted network) or MLFLOW_TRACKING_URI" >&2
    fi
    backend="${NAS_MLFLOW_BACKEND:?set NAS_MLFLOW_BACKEND to a postgresql:// URL for the MLflow server (or MLFLOW_TRACKING_URI to an existing store)}"
    # The store in the server's environment (MLflow reads MLFLOW_BACKEND_STORE_URI), not its
    # arguments: every user of the node reads those, password included, with `ps`.
    MLFLOW_BACKEND_STORE_URI="$backend" mlflow server --host "$mlflow_host" --port 5000 \
        --artifacts-destination "$SHARED/mlartifacts" --workers 1 \
        >"$SHARED/mlflow-$SLURM_JOB_ID.log" 2>&1 &
    mlflow_pid=$!
    export MLFLOW_TRACKING_URI="http://$mlflow_host:5000"
    for _ in $(seq 60); do
        python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)' \
            "$MLFLOW_TRACKING_URI" >/dev/null 2>&1 && break
        sleep 2
    done
fi

status=0
nas sweep "$@" --address "$head_ip:$port" --storage-path "$SHARED/ray_results" || status=$?
exit "$status"
