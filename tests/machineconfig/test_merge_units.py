"""The merge as Ignition v3 merges configs (``config/merge/merge.go``) and machine-config-operator
merges the rest of a spec (``MergeMachineConfigs``), and validation as ``ValidateMachineConfig``."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.machineconfig.merge import merge_configs, merge_specs
from mcm.machineconfig.validation import validate_spec


def mc(name: str, config: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body = {"config": {"ignition": {"version": "3.2.0"}, **(config or {})}, **spec}
    return {"metadata": {"name": name}, "spec": body}


def test_file_entries_merge_field_by_field_and_keep_their_place() -> None:
    merged = merge_configs(
        {
            "storage": {
                "files": [
                    {
                        "path": "/a",
                        "mode": 0o600,
                        "user": {"name": "core"},
                        "contents": {"source": "data:,1"},
                    },
                    {"path": "/b", "mode": 0o644},
                ]
            }
        },
        {"storage": {"files": [{"path": "/c"}, {"path": "/a", "contents": {"source": "data:,2"}}]}},
    )
    files = merged["storage"]["files"]
    assert [f["path"] for f in files] == ["/a", "/b", "/c"]
    assert files[0] == {
        "path": "/a",
        "mode": 0o600,
        "user": {"name": "core"},
        "contents": {"source": "data:,2"},
    }


def test_a_later_source_without_compression_is_not_compressed() -> None:
    gzipped = {"path": "/a", "contents": {"source": "data:;base64,H4sI", "compression": "gzip"}}
    plain = merge_configs(
        {"storage": {"files": [gzipped]}},
        {"storage": {"files": [{"path": "/a", "contents": {"source": "data:,x"}}]}},
    )
    assert plain["storage"]["files"][0]["contents"] == {"source": "data:,x"}
    mode_only = merge_configs(
        {"storage": {"files": [gzipped]}}, {"storage": {"files": [{"path": "/a", "mode": 384}]}}
    )
    assert mode_only["storage"]["files"][0]["contents"] == gzipped["contents"]


def test_units_users_and_their_lists_merge_by_key() -> None:
    earlier = {
        "systemd": {
            "units": [
                {"name": "a.service", "enabled": True, "dropins": [{"name": "1.conf", "contents": "x"}]}
            ]
        },
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"], "groups": ["wheel"]}]},
    }
    later = {
        "systemd": {"units": [{"name": "a.service", "mask": False, "dropins": [{"name": "2.conf"}]}]},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k2", "k3"]}, {"name": "ops"}]},
    }
    merged = merge_configs(earlier, later)
    unit = merged["systemd"]["units"][0]
    assert unit["enabled"] is True and unit["mask"] is False
    assert [d["name"] for d in unit["dropins"]] == ["1.conf", "2.conf"]
    core, ops = merged["passwd"]["users"]
    assert core == {"name": "core", "sshAuthorizedKeys": ["k1", "k2", "k3"], "groups": ["wheel"]}
    assert ops == {"name": "ops"}


def test_a_path_moved_to_another_storage_list_leaves_the_earlier_list_and_append_concatenates() -> None:
    merged = merge_configs(
        {"storage": {"files": [{"path": "/x"}, {"path": "/y", "append": [{"source": "data:,1"}]}]}},
        {
            "storage": {
                "links": [{"path": "/x", "target": "/z"}],
                "files": [{"path": "/y", "append": [{"source": "data:,2"}]}],
            }
        },
    )
    assert [f["path"] for f in merged["storage"]["files"]] == ["/y"]
    assert merged["storage"]["links"] == [{"path": "/x", "target": "/z"}]
    assert merged["storage"]["files"][0]["append"] == [{"source": "data:,1"}, {"source": "data:,2"}]


def test_http_header_without_a_value_removes_it_and_the_highest_version_wins() -> None:
    resource = {
        "source": "https://h/c",
        "httpHeaders": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
    }
    merged = merge_configs(
        {"ignition": {"version": "3.4.0", "config": {"merge": [resource]}}},
        {
            "ignition": {
                "version": "3.1.0",
                "config": {"merge": [{"source": "https://h/c", "httpHeaders": [{"name": "A"}]}]},
            }
        },
    )
    assert merged["ignition"]["version"] == "3.4.0"
    assert merged["ignition"]["config"]["merge"][0]["httpHeaders"] == [{"name": "B", "value": "2"}]


def test_kernel_arguments_concatenate_and_a_special_kernel_type_wins() -> None:
    merged = merge_specs(
        [
            mc("2", kernelArguments=["hugepages=2", "b"], kernelType="default"),
            mc("1", kernelArguments=["hugepagesz=1G", "hugepages=1"], kernelType="realtime"),
            mc("3", kernelArguments=["hugepages=1"]),
        ]
    )
    assert merged["kernelArguments"] == ["hugepagesz=1G", "hugepages=1", "hugepages=2", "b", "hugepages=1"]
    assert merged["kernelType"] == "realtime"
    assert "kernelType" not in merge_specs([mc("1"), mc("2", kernelType="default")])


def test_inputs_are_never_changed() -> None:
    first = mc("1", {"storage": {"files": [{"path": "/a", "mode": 1}]}})
    second = mc("2", {"storage": {"files": [{"path": "/a", "mode": 2}]}})
    before = repr([first, second])
    merged = merge_specs([first, second])
    merged["config"]["storage"]["files"][0]["mode"] = 3
    assert repr([first, second]) == before


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"config": {"ignition": {"version": "9.9.9"}}},
            "unknown version 9.9.9. Supported spec versions: 3.0,",
        ),
        ({"config": {"ignition": {"version": "2.2.0"}}}, "unknown version 2.2.0"),
        ({"config": {"ignition": {"version": "3"}}}, "invalid version '3'"),
        ({"config": {"passwd": {}}}, "ignition.version is required"),
        ({"kernelType": "rt"}, "kernelType=rt is invalid"),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "storage": {"files": [{"path": "/a", "mode": 0o1777}]},
                }
            },
            "cannot exceed 0777",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "storage": {"files": [{"path": "/a", "overwrite": True}]},
                }
            },
            "overwrite must be false",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "storage": {
                        "files": [{"path": "/a", "contents": {"source": "data:,", "compression": "xz"}}]
                    },
                }
            },
            "compression must be gzip",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "storage": {"files": [{"path": "/a"}], "links": [{"path": "/a"}]},
                }
            },
            "duplicate file path /a",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x"}]}]},
                }
            },
            "invalid drop-in name x",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [1]}]},
                }
            },
            "sshAuthorizedKeys must be a list of strings",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "passwd": {"users": [{"name": "a"}, {"name": "a"}]},
                }
            },
            "duplicate user a",
        ),
        (
            {
                "config": {
                    "ignition": {"version": "3.2.0"},
                    "storage": {"files": [{"path": "/a", "append": {"source": "data:,x"}}]},
                }
            },
            "append must be a list",
        ),
    ],
)
def test_validation_refuses_what_mco_and_ignition_refuse(spec: dict[str, Any], problem: str) -> None:
    assert any(problem in p for p in validate_spec(spec)), validate_spec(spec)


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"config": {}},
        {"kernelArguments": ["a"]},
        {"kernelType": "64k-pages"},
        mc("x", {"storage": {"files": [{"path": "/a", "mode": 0o755}]}})["spec"],
        mc("x", {"storage": {"files": [{"path": "/a", "append": [{"source": "data:,x"}]}]}})["spec"],
    ],
)
def test_validation_accepts_empty_and_kernel_only_configs(spec: dict[str, Any]) -> None:
    assert validate_spec(spec) == []
