"""The RenderController merges as Ignition v3 does and validates as machine-config-operator's
``ValidateMachineConfig`` does, end to end on the API server: an earlier config's fields survive a
later config that names the same file, unit or user, and a config Ignition would refuse never
reaches a node."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.machineconfig import api
from mcm.machineconfig.ignition import data_url

from .fixtures import Cluster, eventually, machine_config


def _config(name: str, config: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body = machine_config(name, "worker")
    body["spec"] = {"config": {"ignition": {"version": "3.2.0"}, **config}, **spec}
    return body


def _by(items: list[dict[str, Any]], key: str, value: str) -> dict[str, Any]:
    return next(item for item in items if item[key] == value)


def test_a_later_config_changes_fields_and_keeps_the_earlier_ones(cluster: Cluster) -> None:
    cluster.setup(pools=[("worker", 1)])
    configs = cluster.client.resource(api.MACHINE_CONFIGS)
    configs.create(
        _config(
            "10-secret",
            {
                "storage": {
                    "files": [{"path": "/etc/secret", "mode": 0o600, "contents": {"source": "data:,a"}}]
                },
                "systemd": {"units": [{"name": "app.service", "enabled": True, "contents": "[Unit]\n"}]},
                "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA first"]}]},
            },
            kernelArguments=["hugepages=1", "audit=1"],
        )
    )
    configs.create(
        _config(
            "20-update",
            {
                "storage": {"files": [{"path": "/etc/secret", "contents": {"source": data_url("b")}}]},
                "systemd": {"units": [{"name": "app.service", "contents": "[Unit]\nDescription=b\n"}]},
                "passwd": {
                    "users": [
                        {"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 BBBB second"]},
                        {"name": "admin"},
                    ]
                },
            },
            kernelArguments=["hugepages=1"],
        )
    )
    cluster.start_controller()
    target = eventually(
        lambda: (
            (t := cluster.target("worker")) and "20-update" and _has_file(cluster, t, "/etc/secret") and t
        ),
        what="the merged config",
    )
    spec = (cluster.get_config(target) or {})["spec"]
    secret = _by(spec["config"]["storage"]["files"], "path", "/etc/secret")
    assert secret["mode"] == 0o600, "the earlier mode is kept (Ignition merges field by field)"
    assert secret["contents"]["source"] == data_url("b"), "the later contents win"
    unit = _by(spec["config"]["systemd"]["units"], "name", "app.service")
    assert unit["enabled"] is True and unit["contents"].endswith("Description=b\n")
    users = spec["config"]["passwd"]["users"]
    assert [u["name"] for u in users] == ["core", "admin"]
    assert users[0]["sshAuthorizedKeys"] == ["ssh-ed25519 AAAA first", "ssh-ed25519 BBBB second"]
    base = spec["kernelArguments"]
    assert base[-3:] == ["hugepages=1", "audit=1", "hugepages=1"], "concatenated, as MCO"


def _has_file(cluster: Cluster, target: str, path: str) -> bool:
    files = ((cluster.get_config(target) or {}).get("spec", {}).get("config") or {}).get("storage", {})
    return path in {f.get("path") for f in files.get("files", [])}


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ({"config": {"ignition": {"version": "9.9.9"}}}, "unknown version 9.9.9"),
        ({"config": {"ignition": {"version": "3.2"}}}, "invalid version"),
        ({"config": {"storage": {"files": []}}}, "ignition.version is required"),
        ({"kernelType": "fancy"}, "kernelType=fancy is invalid"),
        (
            {"config": {"ignition": {"version": "3.2.0"}, "systemd": {"units": [{"name": "app"}]}}},
            "invalid unit name app",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "storage": {"files": [{"path": "/etc/s", "mode": 0o4755}]},
                }
            },
            "invalid mode 04755 for /etc/s, cannot exceed 0777",
        ),
    ],
    ids=["unknown-version", "not-semver", "no-version", "kernel-type", "unit-suffix", "setuid"],
)
def test_an_invalid_machine_config_degrades_the_render_and_keeps_the_last_good_config(
    cluster: Cluster, spec: dict[str, Any], text: str
) -> None:
    cluster.setup(pools=[("worker", 1)], nodes={"worker": 1})
    cluster.start_controller()
    cluster.start_daemons()
    good = cluster.wait_for_target("worker")
    cluster.wait_updated("worker", good, 1)
    bad = machine_config("50-bad", "worker")
    bad["spec"] = spec
    cluster.client.resource(api.MACHINE_CONFIGS).create(bad)
    condition = eventually(
        lambda: (c := cluster.condition("worker", api.POOL_RENDER_DEGRADED)).get("status") == "True" and c,
        what="RenderDegraded",
    )
    assert condition["reason"] == api.Reason.INVALID_MACHINE_CONFIG
    assert text in condition["message"] and "50-bad" in condition["message"], condition["message"]
    assert cluster.target("worker") == good
    assert cluster.annotations("worker-0")[api.DESIRED_CONFIG_ANNOTATION] == good
    eventually(lambda: cluster.events(api.Reason.INVALID_MACHINE_CONFIG, kind="MachineConfig", name="50-bad"))
