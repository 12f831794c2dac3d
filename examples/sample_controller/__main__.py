"""Run the sample controller: ``python -m examples.sample_controller --kubeconfig PATH [--master URL]``.

``--demo`` needs no cluster: it starts an API server emulator, applies ``artifacts/crd.yaml`` and
``artifacts/example-foo.yaml``, runs the controller and prints the Deployment appearing and the
Foo's status following it, through a scale from 1 to 3 replicas.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from kubernetes.client import ApiClient, Configuration

from examples.sample_controller.controller import DEPLOYMENTS, FOOS, Controller
from mcm.runtime import logs
from mcm.runtime.cache import SharedInformerFactory
from mcm.runtime.client import ClusterClient, Object, load_config
from mcm.runtime.client.config import new_connection

ARTIFACTS = Path(__file__).with_name("artifacts")
NAME = "example-foo"
RESYNC_SECONDS = 30.0
WORKERS = 2


def build_client(kubeconfig: str, master: str) -> ClusterClient:
    """``clientcmd.BuildConfigFromFlags``: ``master`` overrides the kubeconfig's server."""
    if not master:
        return load_config(kubeconfig or None)
    if not kubeconfig:
        return ClusterClient(ApiClient(configuration=Configuration(host=master)))
    connection, _ = new_connection(kubeconfig)
    connection.host = master.rstrip("/")
    return ClusterClient(connection)


def run_controller(client: ClusterClient, stop: threading.Event) -> None:
    """Start the informers and the controller; return once ``stop`` is set."""
    informers = SharedInformerFactory(client, resync=RESYNC_SECONDS)
    controller = Controller(client, informers)
    informers.start(stop)
    controller.run(WORKERS, stop)
    informers.shutdown()


def _wait(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _available(obj: Object) -> int:
    return int((obj.get("status") or {}).get("availableReplicas") or 0)


def _follow(client: ClusterClient, replicas: int) -> None:
    """Wait until the Foo reports ``replicas`` available and print what the controller did."""
    foos, deployments = client.resource(FOOS), client.resource(DEPLOYMENTS)
    _wait("the Foo's status", lambda: _available(foos.get(NAME, namespace="default")) == replicas)
    deployment = deployments.get(NAME, namespace="default")
    owner = deployment["metadata"]["ownerReferences"][0]
    print(
        f"  Deployment {NAME} (controlled by {owner['kind']} {owner['name']}):"
        f" spec.replicas={deployment['spec']['replicas']}, status.availableReplicas={_available(deployment)}"
    )
    print(f"  Foo {NAME}: status.availableReplicas={replicas}")


def demo() -> None:
    """Show the controller at work against an in-process emulator."""
    from mcm.emulator import Emulator

    with Emulator() as emulator, tempfile.TemporaryDirectory() as tmp:
        emulator.install_crds(ARTIFACTS / "crd.yaml")
        print("applied artifacts/crd.yaml")
        client = load_config(str(emulator.write_kubeconfig(Path(tmp) / "kubeconfig")))
        stop = threading.Event()
        thread = threading.Thread(target=run_controller, args=(client, stop), daemon=True)
        thread.start()
        foo = yaml.safe_load((ARTIFACTS / "example-foo.yaml").read_text(encoding="utf-8"))
        client.resource(FOOS).create(foo, namespace="default")
        print(f"applied artifacts/example-foo.yaml (Foo {NAME}, replicas 1)")
        _follow(client, 1)
        client.resource(FOOS).patch(NAME, {"spec": {"replicas": 3}}, namespace="default")
        print(f"scaled Foo {NAME} to 3 replicas")
        _follow(client, 3)
        stop.set()
        thread.join(timeout=10)
        client.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.sample_controller", description=__doc__)
    parser.add_argument(
        "--kubeconfig", default="", help="Path to a kubeconfig. Only required if out-of-cluster."
    )
    parser.add_argument(
        "--master",
        default="",
        help="The address of the Kubernetes API server. Overrides any value in kubeconfig. "
        "Only required if out-of-cluster.",
    )
    parser.add_argument("--demo", action="store_true", help="Run against a throw-away API server emulator.")
    args = parser.parse_args(argv)
    logs.configure("console", level=logging.INFO)  # tracebacks without local variables
    if args.demo:
        demo()
        return 0
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    run_controller(build_client(args.kubeconfig, args.master), stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
