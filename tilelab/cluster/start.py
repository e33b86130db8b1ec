"""Where a class run's tasks run: a local Dask cluster, or any running one.

One task at a time on each worker, and on a GPU machine one worker per GPU: a speed
verdict compares two kernels' times on one GPU, and a second grader on the same GPU
would take SMs, memory bandwidth and L2 from the kernel being timed (the instructors'
page says more). A worker that dies in the middle of a task (killed, out of memory) costs
nothing: the class run's executor runs the task again on a free worker
(:mod:`tilelab.cluster.run`). A task whose worker dies :data:`ALLOWED_FAILURES` + 1 times
is the submission's doing: it gets 0 points.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
from distributed import Client, LocalCluster

from tilelab.isolation import gpu_nodes, gpulock, scratch

#: Worker deaths a task may cause and still be run again (by the executor, on a free worker).
ALLOWED_FAILURES = 1
#: Dask's own ``allowed-failures`` on the clusters tilelab starts: the scheduler never runs a
#: task again itself. It would hand the task to any live worker, also one busy with another
#: task, and when that worker died too the waiting task would be blamed for a death it had
#: no part in (an honest submission's "worker died 2 times").
SCHEDULER_ALLOWED_FAILURES = 0
#: Seconds to wait for the first worker of a cluster given by its scheduler's address.
WORKER_WAIT = 300

CONFIG = {
    "distributed.scheduler.allowed-failures": SCHEDULER_ALLOWED_FAILURES,
    # Hand a worker a new task only when it is free: a task queued behind another on a
    # worker that dies would be blamed for a death it had no part in.
    "distributed.scheduler.worker-saturation": 1.0,
    # grading starts processes of its own (the Jupyter kernel, the grader's child)
    "distributed.worker.daemon": False,
}


class ClusterError(RuntimeError):
    """A cluster cannot be started or used; the message says why and what to do."""


def gpu_count() -> int:
    """GPUs on this machine (``nvidia-smi -L``); 0 without a driver."""
    out = gpu_nodes.nvidia_smi("-L", timeout=30)
    return sum(line.startswith("GPU ") for line in out.splitlines())


def local_cluster(workers: int, gpus: bool, tasks_per_gpu: int = 1,
                  locks: Path | None = None) -> Any:
    """A cluster of ``workers`` local worker processes, one thread each. With ``gpus``: one
    worker per GPU, ``CUDA_VISIBLE_DEVICES`` set for each (dask-cuda's LocalCUDACluster;
    where dask-cuda is not installed, the same through a worker spec per GPU); with
    ``tasks_per_gpu`` above 1, that many workers per GPU, which share the GPU's lock (a
    folder under ``locks``, see :mod:`tilelab.isolation.gpulock`): their untimed work
    overlaps, each timed step has the GPU alone."""
    if workers < 1:
        raise ClusterError(f"--workers must be at least 1 (got {workers})")
    if tasks_per_gpu < 1:
        raise ClusterError(f"--tasks-per-gpu must be at least 1 (got {tasks_per_gpu})")
    if gpus and tasks_per_gpu > 1:
        if locks is None:
            raise ClusterError("several tasks per GPU need a folder for the GPUs' locks")
        if workers > (have := gpu_count()):
            raise ClusterError(f"--workers {workers} asks for {workers} GPU(s) but this "
                               f"machine has {have}; give --workers {have} or fewer")
        return per_gpu_cluster(list(range(workers)), tasks_per_gpu, locks)
    if not gpus:
        return LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
    have = gpu_count()
    if workers > have:
        raise ClusterError(
            f"--workers {workers} asks for one worker per GPU but this machine has {have} "
            f"GPU(s); give --workers {have} or fewer (two graders on one GPU disturb each "
            "other's speed measurements)"
        )
    devices = list(range(workers))
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        return per_gpu_cluster(devices)
    return LocalCUDACluster(
        CUDA_VISIBLE_DEVICES=devices,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=None,
    )


def per_gpu_cluster(devices: list[int], tasks_per_gpu: int = 1,
                    locks: Path | None = None) -> Any:
    """``tasks_per_gpu`` nanny-managed workers per GPU, each seeing only its own device
    (and, several to a GPU, sharing that GPU's lock folder under ``locks``)."""
    from distributed import Nanny, Scheduler, SpecCluster

    def env(i: int) -> dict[str, str]:
        shared = {gpulock.ENV: str(gpulock.make(locks, str(i)))} if locks is not None else {}
        return {"CUDA_VISIBLE_DEVICES": str(i), **shared}

    return SpecCluster(
        scheduler={"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": None}},
        workers={
            f"gpu{i}" + (f"-{k}" if tasks_per_gpu > 1 else ""): {
                "cls": Nanny, "options": {"nthreads": 1, "env": env(i)},
            }
            for i in devices for k in range(tasks_per_gpu)
        },
    )


def check_workers(client: Client) -> None:
    """Every worker must run one task at a time (one grader per GPU)."""
    many = {addr: n for addr, n in client.nthreads().items() if n != 1}
    if many:
        addr, n = next(iter(many.items()))
        raise ClusterError(
            f"the worker {addr} runs {n} threads; a class run needs one task at a time per "
            "worker (one grader per GPU): start the workers with `dask worker --nthreads 1`"
        )


@contextlib.contextmanager
def open_client(
    workers: int = 1, scheduler: str | None = None, gpus: bool = False, tasks_per_gpu: int = 1
) -> Iterator[Client]:
    """A client of a local cluster (``workers``, on GPUs with ``gpus``, ``tasks_per_gpu``
    graded at once on each) or of the running cluster whose scheduler is at ``scheduler``
    (``tcp://HOST:PORT``; workers started elsewhere that share a GPU are given its lock
    folder in ``TILELAB_GPU_LOCK``)."""
    with dask.config.set(CONFIG), contextlib.ExitStack() as stack:
        if scheduler:
            try:
                client = stack.enter_context(Client(scheduler, timeout=30))
            except OSError as exc:
                raise ClusterError(
                    f"no Dask scheduler answers at {scheduler} ({exc}); start one "
                    "(`dask scheduler`) and its workers, or give --workers N for a local cluster"
                ) from None
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except TimeoutError:
                raise ClusterError(
                    f"the scheduler at {scheduler} has no worker after {WORKER_WAIT} s; "
                    "start workers with `dask worker --nthreads 1 " + scheduler + "`"
                ) from None
        else:
            locks = stack.enter_context(scratch.folder("gpu-locks")) \
                if gpus and tasks_per_gpu > 1 else None
            cluster = stack.enter_context(local_cluster(workers, gpus, tasks_per_gpu, locks))
            client = stack.enter_context(Client(cluster))
        check_workers(client)
        yield client


def allowed_failures(client: Client) -> int:
    """The scheduler's ``allowed-failures`` (a cluster started elsewhere has its own)."""
    return int(client.run_on_scheduler(_scheduler_allowed_failures))


def _scheduler_allowed_failures(dask_scheduler: Any) -> int:
    return dask_scheduler.allowed_failures


def slurm_cluster(
    queue: str | None = None,
    account: str | None = None,
    walltime: str = "02:00:00",
    memory: str = "32GB",
    prologue: list[str] | None = None,
    host: str | None = None,
) -> Any:
    """A dask-jobqueue SLURMCluster for class runs: each Slurm job is one worker with one GPU
    and one thread. Scale it with ``cluster.scale(jobs=N)``; grade with its address."""
    from dask_jobqueue import SLURMCluster

    with dask.config.set(CONFIG):
        return SLURMCluster(
            queue=queue,
            account=account,
            cores=1,
            processes=1,
            memory=memory,
            walltime=walltime,
            job_extra_directives=["--gres=gpu:1"],
            job_script_prologue=prologue or [],
            scheduler_options={"host": host} if host else {},
        )
