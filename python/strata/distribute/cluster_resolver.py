"""strata.distribute.cluster_resolver: what hardware a job runs on (tf.distribute.cluster_resolver).

One class reads every launcher Strata knows, in this order: STRATA_CLUSTER (a JSON spec in the
spirit of TF_CONFIG), OpenMPI (mpirun), MPICH/PMI (mpiexec.hydra), Slurm (srun); without any,
the job is this host alone. Hosts talk over MPI, so a multi-worker job is started by mpirun or
srun; STRATA_CLUSTER describes it and is checked against the launch.
"""
from typing import Dict, List, Mapping, Optional

from .. import _strata
from .._device import Device

__all__ = ["ClusterResolver", "ClusterSpec"]


class ClusterSpec:
    """The job's hosts: ``hosts``, ``replicas_per_host``, ``num_replicas`` and one Device per host
    in ``host_info`` (this host first before connect(); every worker in rank order after)."""

    def __init__(self, spec: dict):
        self.hosts: int = spec["hosts"]
        self.replicas_per_host: int = spec["replicas_per_host"]
        self.host_info: List[Device] = [Device(**h) for h in spec["host_info"]]

    @property
    def num_replicas(self) -> int:
        return self.hosts * self.replicas_per_host

    def as_dict(self) -> Dict[str, List[str]]:
        """TensorFlow's form: ``{"worker": [hostname, ...]}``."""
        return {"worker": [h.hostname for h in self.host_info]}

    def num_tasks(self, job_name: str = "worker") -> int:
        """Workers in the job (``job_name`` must be ``"worker"``: Strata has no parameter servers)."""
        if job_name != "worker":
            raise ValueError("ClusterSpec.num_tasks: Strata's only job is \"worker\", got %r" % (job_name,))
        return self.hosts

    def __repr__(self) -> str:
        return "ClusterSpec(hosts=%d, replicas_per_host=%d)" % (self.hosts, self.replicas_per_host)


class ClusterResolver:
    """Resolves this job's cluster from the launch environment (or from ``environment``, a mapping
    of variable names to values that replaces the process's, for tests and tools).

    ``replicas``: replicas per worker (None: STRATA_CLUSTER's, else one per usable core).
    ``recalibrate``: measure the peak FLOP/s again instead of using the per-machine cache.
    A malformed STRATA_CLUSTER, or one that disagrees with the launcher, is an
    InvalidArgumentError (a ValueError) naming both.
    """

    def __init__(self, replicas: Optional[int] = None, recalibrate: bool = False,
                 environment: Optional[Mapping[str, str]] = None):
        variables = None if environment is None else [(str(k), str(v)) for k, v in environment.items()]
        self._cpp = _strata.distribute.ClusterResolver(bool(recalibrate), int(replicas or 0), variables)
        env = self._cpp.environment()
        self.environment: str = env["source"]
        self.task_type: str = "worker"
        self.task_id: int = env["worker_index"]
        self.num_workers: int = env["num_workers"]
        self.launched_under_mpi: bool = env["launched_under_mpi"]
        self.worker_hosts: List[str] = env["worker_hosts"]
        self.rpc_layer: str = "mpi"

    def connect(self) -> "ClusterResolver":
        """Joins the other workers (MPI_Init) and checks that every worker runs the same number of
        replicas; a no-op for one worker. Several workers without a launcher are an error."""
        self._cpp.connect()
        self._cpp.initialize()
        return self

    def cluster_spec(self) -> ClusterSpec:
        """This host before connect(); every worker's host after."""
        return ClusterSpec(self._cpp.cluster_spec())

    def num_accelerators(self, task_type: Optional[str] = None, task_id: Optional[int] = None) -> Dict[str, int]:
        """Replicas per worker, as ``{"CPU": n}`` (a Strata replica is a core)."""
        return {"CPU": self._cpp.replicas_per_worker}

    def master(self, task_type: Optional[str] = None, task_id: Optional[int] = None,
               rpc_layer: Optional[str] = None) -> str:
        """The chief's host name (worker 0), or "" before it is known."""
        hosts = self.worker_hosts or [h.hostname for h in self.cluster_spec().host_info]
        return hosts[0] if hosts else ""

    def __repr__(self) -> str:
        return "ClusterResolver(environment=%r, num_workers=%d, task_id=%d)" % (
            self.environment, self.num_workers, self.task_id)
