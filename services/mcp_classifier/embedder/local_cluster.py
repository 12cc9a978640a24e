"""Embedded single-node Ray running the same Serve application as the cluster (for `serve --backend ray`)."""

from __future__ import annotations

import ipaddress
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenacity import RetryCallState, Retrying, retry_if_exception, retry_if_result, stop_after_attempt, stop_after_delay, wait_fixed

from ..settings import RaySettings, Settings
from ..util.omp import apply_omp_wait_policy
from .ingress_ports import bind_grpc_servers_to_node_ip, node_port_env
from .ray_console import quiet_driver_logs, ray_logs_dir
from .serve_config import SERVICER_FUNCTION, route_prefix

if TYPE_CHECKING:
    import psutil

log = logging.getLogger(__name__)
THROUGHPUT_OPTIMIZED_ENV = "RAY_SERVE_THROUGHPUT_OPTIMIZED"
DIRECT_INGRESS_ENV = "RAY_SERVE_ENABLE_DIRECT_INGRESS"
DIRECT_INGRESS_DRAIN_ENV = "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"
RAY_START_ATTEMPTS = 2  # one more try where the node's first start timed out
RAY_START_RETRY_WAIT_S = 1.0
_NODE_START_TIMEOUT = "timed out during startup"  # Ray's message when its raylet or GCS misses the node's start deadline
_PROXY_START_TIMEOUT = "proxies not available"  # serve.start's message when its proxy misses Ray's fixed wait
_PROXY_ACTOR = "class_name: ProxyActor"  # in the error of a call to a proxy actor that died (ray.exceptions.ActorDiedError)
# How long Serve's controller lets a starting proxy get ready before it kills it and starts another (its own
# default, 5 s, grows by 5 s per restart). A busy 2-core host took longer than that to start the proxy's worker.
PROXY_READY_CHECK_ENV = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"
PROXY_READY_CHECK_S = 30.0
# Read by the raylet when it starts each worker: Ray lowers its workers' priority (nice 15) unless told otherwise.
WORKER_NICENESS_ENV = "RAY_worker_niceness"
PROXY_POLL_S = 1.0  # how often a late proxy's state is read while the start waits on it
LOOPBACK_NODE_IP = "127.0.0.1"  # where the gateway reaches Serve's proxy, and the replicas' address in Serve's target groups
# Ray turns a loopback node IP into the host's routable one unless cluster mode is off: the switch it
# uses for single-host platforms (macOS, Windows), read from the environment on every platform.
SINGLE_HOST_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
# Run by every worker of a loopback node before its actor starts (Ray's worker_process_setup_hook).
GRPC_BIND_HOOK = f"{bind_grpc_servers_to_node_ip.__module__}.{bind_grpc_servers_to_node_ip.__name__}"


def is_loopback_host(host: str) -> bool:
    """A gateway that admits only callers on this machine (127.0.0.0/8, ::1, localhost) wants a node that admits no one else."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def loopback_node_options() -> dict[str, Any]:
    """ray.init's arguments for a node whose every socket listens on loopback; its environment is set here too.

    The node IP decides where Ray's own servers listen (GCS, raylet, object manager, every worker's
    core-worker server, the dashboard, metrics and runtime-env agents, the autoscaler's metrics), so
    it is the loopback address, kept as such by turning cluster mode off. Serve's gRPC servers bind
    every address whatever the node IP; the setup hook makes each worker bind them to the node IP.
    """
    os.environ[SINGLE_HOST_ENV] = "0"  # read when Ray is imported: set before start_local_serve imports it
    return {"_node_ip_address": LOOPBACK_NODE_IP, "runtime_env": {"worker_process_setup_hook": GRPC_BIND_HOOK}}


class NodeNotOnLoopbackError(RuntimeError):
    """The embedded node came up on a routable address although the gateway listens on loopback only."""


def require_loopback_node(node_ip: str) -> None:
    """Refuse a node that would listen beyond loopback: the replicas would take calls past the gateway's checks.

    Happens where Ray was imported before its environment was set (its cluster-mode switch is read once).
    """
    if not is_loopback_host(node_ip):
        raise NodeNotOnLoopbackError(
            f"the embedded Ray node came up on {node_ip}, not on loopback: its replicas would be reachable past the "
            f"gateway. Was ray imported before the service set {SINGLE_HOST_ENV}=0?"
        )


def _is_node_start_timeout(exc: BaseException) -> bool:
    return _NODE_START_TIMEOUT in str(exc)


def init_ray_retrying(
    init: Callable[[], object], shutdown: Callable[[], object], attempts: int = RAY_START_ATTEMPTS, wait_s: float = RAY_START_RETRY_WAIT_S
) -> None:
    """Start the embedded node, once more where its start timed out.

    Ray gives a new node's raylet and GCS a fixed time to come up; on a loaded host (a busy 2-core
    node, a CI runner) that deadline can pass once while a second start succeeds. What the failed
    start left running is shut down before the next try. Any other failure is raised at once.
    """

    def clear_up(state: RetryCallState) -> None:
        log.warning(
            "the embedded Ray node timed out while starting (attempt %d): shutting it down and starting again", state.attempt_number
        )
        shutdown()

    for attempt in Retrying(
        stop=stop_after_attempt(attempts),
        retry=retry_if_exception(_is_node_start_timeout),
        wait=wait_fixed(wait_s),
        before_sleep=clear_up,
        reraise=True,
    ):
        with attempt:
            init()


class ProxyStartTimeoutError(TimeoutError):
    """Serve's proxy was not up within ray_proxy_start_timeout_s."""


def start_serve_waiting_for_proxy(
    start: Callable[[], object],
    proxies_up: Callable[[], bool],
    budget_s: float,
    poll_s: float = PROXY_POLL_S,
) -> None:
    """Start Serve and return once its proxy is up, waiting on past Ray's own fixed waits where needed.

    serve.start gives its proxy actor a hard-coded 60 s (HTTP_PROXY_TIMEOUT, not a setting), and Serve's
    controller kills a proxy that is not ready within its ready check and starts another. On a busy 2-core
    host the actor's worker can take longer to start than either: serve.start then raises (a timeout, or the
    killed actor's ActorDiedError) although the controller it created goes on starting a proxy. That is a slow
    start, not a failed one: the wait goes on up to ``budget_s`` from the start, reading the proxy's state
    through Serve's public status.
    """
    began = time.monotonic()
    try:
        start()
    except Exception as exc:
        if not _is_late_proxy(exc):
            raise
        log.warning(
            "Serve's proxy was not up within Ray's own wait (%s; a busy host?): waiting on, up to %g s from the start "
            "(ray_proxy_start_timeout_s)",
            str(exc).splitlines()[0],
            budget_s,
        )
    wait_for_proxy = Retrying(
        stop=stop_after_delay(max(0.0, budget_s - (time.monotonic() - began))),
        wait=wait_fixed(poll_s),
        retry=retry_if_result(lambda up: not up),
        retry_error_callback=lambda _state: False,
    )
    if not wait_for_proxy(proxies_up):
        raise ProxyStartTimeoutError(f"Serve's proxy was not up within {budget_s:g} s of its start (ray_proxy_start_timeout_s)")


def _is_late_proxy(exc: BaseException) -> bool:
    """serve.start's failures while its proxy is still starting: its own wait ran out, or the controller killed
    a proxy that missed its ready check (the controller then starts another)."""
    text = str(exc)
    return (isinstance(exc, TimeoutError) and _PROXY_START_TIMEOUT in text) or _PROXY_ACTOR in text


def serve_proxies_up() -> bool:
    """Every proxy Serve runs reports healthy (the embedded node has one: its gRPC doorway)."""
    from ray import serve
    from ray.serve.schema import ProxyStatus

    proxies = serve.status().proxies
    return bool(proxies) and all(state == ProxyStatus.HEALTHY for state in proxies.values())


# Ports a Ray node binds by default when it starts (ray_constants: DEFAULT_DASHBOARD_AGENT_LISTEN_PORT,
# DEFAULT_DASHBOARD_PORT, DEFAULT_PORT). A port picked here before the node starts must not be one of
# them: the metrics port once came out as 52365, inside the kernel's ephemeral range, and ray.init refused it.
RAY_DEFAULT_PORTS = frozenset({52365, 8265, 6379})
# Where ports picked before the node starts come from: below the kernel's ephemeral range, which it
# hands to every outgoing connection (Ray opens dozens while it starts), so a port free when picked
# stays free until Ray binds it. A port picked inside that range once went to one of those
# connections in between, and Serve's gRPC proxy failed to start ("Failed to bind to address
# [::]:38397"). Above Ray's worker ports (10002-19999), below Serve's direct-ingress ports (30000+).
PICKED_PORTS = range(20000, 30000)
PORT_PROBES = 64  # random tries in PICKED_PORTS before falling back to a port the kernel picks
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LINUX_EPHEMERAL_LOW = 32768  # the kernel's default first ephemeral port, where the file cannot be read


def ephemeral_low(path: Path = EPHEMERAL_RANGE_FILE) -> int:
    """The first port the kernel may hand to an outgoing connection."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return LINUX_EPHEMERAL_LOW


def bindable_everywhere(port: int) -> bool:
    """Nothing holds the port on any address: bound without SO_REUSEADDR on the wildcard, as Serve's proxy binds [::]."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def free_port(
    host: str = "127.0.0.1",
    avoid: frozenset[int] = RAY_DEFAULT_PORTS,
    window: range = PICKED_PORTS,
) -> int:
    """A free port below the kernel's ephemeral range, other than those in ``avoid``; else one the kernel picks."""
    low = ephemeral_low()
    candidates = [port for port in window if port < low and port not in avoid]
    for port in random.SystemRandom().sample(candidates, min(len(candidates), PORT_PROBES)):
        if bindable_everywhere(port):
            return port
    log.warning("no free port below the ephemeral range (%d) in %d-%d: taking one the kernel picks", low, window.start, window.stop - 1)
    return kernel_port(host, avoid)


def kernel_port(host: str = "127.0.0.1", avoid: frozenset[int] = RAY_DEFAULT_PORTS) -> int:
    """A port the kernel reports free, other than those in ``avoid``."""
    held: list[socket.socket] = []  # kept bound until the end, so each new bind gets another port
    try:
        while True:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
            if port not in avoid:
                return port
    finally:
        for sock in held:
            sock.close()


def start_local_serve(settings: Settings) -> int:
    """Start Ray (explicit CPUs, small object store, no dashboard), Serve's gRPC proxy and the app.

    With a loopback ``--host`` every socket of the node listens on loopback (loopback_node_options).
    Returns the gRPC port. Blocks until the replicas have loaded and warmed up the model.
    """
    cluster, serving = settings.ray, settings.serving
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Read by Serve's constants in every Ray process, which inherit the environment of the node this starts.
    os.environ[THROUGHPUT_OPTIMIZED_ENV] = "1" if cluster.ray_throughput_optimized else "0"
    # Set either way: throughput-optimized mode would otherwise turn direct ingress on by itself.
    os.environ[DIRECT_INGRESS_ENV] = "1" if cluster.ray_direct_ingress else "0"
    # A stopping replica keeps serving until the gateway has re-read the list (Serve's default waits 30 s for a load balancer).
    os.environ[DIRECT_INGRESS_DRAIN_ENV] = f"{2 * cluster.replica_refresh_s:g}"
    os.environ.setdefault(PROXY_READY_CHECK_ENV, f"{PROXY_READY_CHECK_S:g}")
    os.environ[WORKER_NICENESS_ENV] = str(cluster.ray_worker_niceness)
    apply_omp_wait_policy(settings.engine.omp_wait_policy, settings.engine.omp_spin_count)  # the replicas' torch threads
    if cluster.ray_direct_ingress:  # the replicas' own ports: a block no other node on this host uses (ingress_ports)
        os.environ.update(node_port_env(cluster.max_replicas, bindable_everywhere, os.environ))
    # A gateway on loopback keeps the node there too: otherwise the replicas answer anyone who reaches
    # the host, past the gateway's keys, Host/Origin checks and rate limit. Any other --host: Ray's defaults.
    loopback = is_loopback_host(serving.host)
    node_options = loopback_node_options() if loopback else {}
    import ray
    from ray import serve
    from ray.serve.config import HTTPOptions, gRPCOptions

    quiet_driver_logs(serving.verbose)
    grpc_port = free_port()
    metrics_port = cluster.ray_metrics_port or free_port()
    init_ray_retrying(
        lambda: ray.init(
            num_cpus=cluster.ray_num_cpus,
            num_gpus=None if cluster.replica_num_gpus else 0,
            object_store_memory=cluster.ray_object_store_mb * 2**20,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=serving.verbose,  # off: actors' and replicas' output stays in Ray's log files
            namespace="mcp-classifier",
            _metrics_export_port=metrics_port,
            **node_options,
        ),
        lambda: (ray.shutdown(), end_processes_under(os.path.dirname(ray.__file__))),
    )
    node_ip = str(ray.util.get_node_ip_address())
    log.info(
        "the embedded Ray node's own logs (its actors and replicas): %s%s",
        ray_logs_dir() or "Ray's session folder",
        "" if serving.verbose else " (--verbose shows them on this console)",
    )
    if loopback:
        try:
            require_loopback_node(node_ip)
        except NodeNotOnLoopbackError:
            stop_local_serve()
            raise
    try:
        start_serve_waiting_for_proxy(
            lambda: serve.start(
                http_options=HTTPOptions(host="127.0.0.1", port=free_port()),
                grpc_options=gRPCOptions(port=grpc_port, grpc_servicer_functions=[SERVICER_FUNCTION]),
            ),
            serve_proxies_up,
            cluster.ray_proxy_start_timeout_s,
        )
    except ProxyStartTimeoutError:
        stop_local_serve()
        raise
    deploy_app(settings)
    log.info(
        "embedded Ray Serve is up: gRPC on 127.0.0.1:%d, app %s, throughput-optimized %s, direct ingress %s; Ray metrics on "
        "http://%s:%d/metrics; the node listens on %s",
        grpc_port,
        cluster.serve_app_name,
        "on" if cluster.ray_throughput_optimized else "off",
        "on" if cluster.ray_direct_ingress else "off",
        node_ip,
        metrics_port,
        "loopback only" if loopback else "the addresses Ray and Serve choose (--host is not loopback)",
    )
    return grpc_port


def fit_replicas_to_node(ray: RaySettings) -> RaySettings:
    """On the embedded single node, never ask for more CPU replicas than its CPUs hold
    (Serve would wait for resources forever)."""
    if ray.replica_num_gpus or not ray.replica_num_cpus:
        return ray
    fits = max(1, int(ray.ray_num_cpus // ray.replica_num_cpus))
    if ray.max_replicas <= fits:
        return ray
    log.warning("embedded Ray has %d CPUs: using at most %d replicas of %g CPU", ray.ray_num_cpus, fits, ray.replica_num_cpus)
    return ray.model_copy(update={"min_replicas": min(ray.min_replicas, fits), "max_replicas": fits})


def deploy_app(settings: Settings, reload_generation: int = 0) -> None:
    """(Re)deploy the app. Changing only user_config (reload_generation) reconfigures the running
    replicas in place: each re-reads its categories file, no replica restarts (the deployment's
    version is fixed by what the replicas are built from: deployment.build_app_with_options)."""
    from ray import serve

    from .deployment import build_app_with_options

    settings = settings.model_copy(update={"ray": fit_replicas_to_node(settings.ray)})
    app = build_app_with_options(settings, reload_generation)
    serve.run(app, name=settings.ray.serve_app_name, route_prefix=route_prefix(settings.ray), blocking=False)


def stop_local_serve(timeout_s: float = 20.0) -> None:
    """Stop the embedded node, bounded in time; then end any process under this one that outlived it.

    The whole node goes away, and the gateway has already drained, so no replica has a call in flight:
    Serve's own shutdown (serve.shutdown) is left out. It drains each replica for direct ingress's draining
    period and ends with its controller killing itself under the call the driver waits on, which Ray's
    raylet reports on the console ("Task ServeController.graceful_shutdown failed ... killed by ray.kill");
    the stop took 8-9 s on a 2-core host. ray.shutdown disconnects the driver first, so nothing of Ray's
    reaches the console while its processes end. Ctrl-C in a terminal signals the whole process group, so
    Ray's processes may already be dying and the shutdown could wait on them: it gets a deadline, and the
    processes found under this one before it started (a worker its raylet no longer parents) are ended after.
    """
    import threading

    import psutil
    import ray

    me = psutil.Process()
    before = me.children(recursive=True)
    began = time.monotonic()
    worker = threading.Thread(target=_quietly, args=(ray.shutdown,), daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        log.warning("ray.shutdown did not finish in %.0f s; ending Ray processes directly", timeout_s)
    pids = {p.pid for p in before}
    left = [p for p in [*before, *(p for p in me.children(recursive=True) if p.pid not in pids)] if p.is_running()]
    end_processes(left)
    log.debug("the embedded Ray node stopped in %.1f s", time.monotonic() - began)


def end_processes_under(package_dir: str) -> int:
    """End this process's children that run a program of ``package_dir``: what a failed Ray start left behind.

    Ray raises its start timeout from inside the node's constructor, before ray.shutdown() knows the
    node, so its GCS, raylet and agents would run on beside the next start. Other children (an
    embedded Redis) are left alone. Returns how many were ended.
    """
    import psutil

    inside = os.path.join(package_dir, "")  # the folder's own files, not a sibling sharing its name's start

    def runs_from_package(proc: psutil.Process) -> bool:
        try:
            return any(part.startswith(inside) for part in [proc.exe(), *proc.cmdline()])
        except psutil.Error:
            return False

    orphans = [p for p in psutil.Process().children(recursive=True) if runs_from_package(p)]
    end_processes(orphans)
    return len(orphans)


def end_processes(processes: list[psutil.Process], grace_s: float = 5.0) -> None:
    """SIGTERM, ``grace_s``, then SIGKILL for what is still running, and as long again for those to go."""
    import psutil

    for proc in processes:
        _quietly(proc.terminate)
    _, alive = psutil.wait_procs(processes, timeout=grace_s)
    for proc in alive:
        _quietly(proc.kill)
    psutil.wait_procs(alive, timeout=grace_s)


def _quietly(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:
        log.debug("shutdown step %s failed", getattr(fn, "__qualname__", fn), exc_info=True)
