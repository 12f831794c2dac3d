"""``merge_configs`` and ``merge_specs`` as a table: two configs and the one merged config, for each
rule of the merge (objects, keyed lists, shared key spaces, sets, concatenated lists, versions,
kernel fields), checked against Ignition's and machine-config-operator's rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcm.machineconfig.merge import merge_configs, merge_specs, version_key

CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ("empty", {}, {}, {}),
    (
        "objects-key-by-key",
        {"a": 1, "b": {"c": 1, "d": 2}},
        {"b": {"c": 3}, "e": 4},
        {"a": 1, "b": {"c": 3, "d": 2}, "e": 4},
    ),
    ("null-keeps-earlier", {"a": 1, "b": {"c": 1}}, {"a": None, "b": None}, {"a": 1, "b": {"c": 1}}),
    ("null-added-is-left-out", {}, {"x": None}, {}),
    ("earlier-null-takes-later", {"a": None}, {"a": {"b": 2}}, {"a": {"b": 2}}),
    ("type-change-takes-later", {"a": {"x": 1}}, {"a": 5}, {"a": 5}),
    ("scalar-replaced", {"a": "x"}, {"a": "y"}, {"a": "y"}),
    ("list-replaced-by-scalar", {"a": [1, 2]}, {"a": 5}, {"a": 5}),
    ("object-replaced-by-list", {"a": {"b": 1}}, {"a": ["c"]}, {"a": ["c"]}),
    ("scalar-replaced-by-list", {"a": "x"}, {"a": ["y"]}, {"a": ["y"]}),
    ("false-replaces", {"a": True}, {"a": False}, {"a": False}),
    (
        "files-by-path-in-place",
        {"storage": {"files": [{"path": "/a", "mode": 384}, {"path": "/b"}]}},
        {"storage": {"files": [{"path": "/c"}, {"path": "/a", "overwrite": True}]}},
        {
            "storage": {
                "files": [{"path": "/a", "mode": 384, "overwrite": True}, {"path": "/b"}, {"path": "/c"}]
            }
        },
    ),
    (
        "partitions-by-number-else-label",
        {
            "storage": {
                "disks": [
                    {
                        "device": "/dev/sda",
                        "wipeTable": False,
                        "partitions": [
                            {"number": 1, "label": "a", "sizeMiB": 1},
                            {"label": "b", "sizeMiB": 2},
                        ],
                    },
                    {"device": "/dev/sdb"},
                ]
            }
        },
        {
            "storage": {
                "disks": [
                    {
                        "device": "/dev/sda",
                        "partitions": [
                            {"number": 1, "sizeMiB": 10},
                            {"label": "b", "sizeMiB": 20},
                            {"number": 0, "label": "c"},
                        ],
                    }
                ]
            }
        },
        {
            "storage": {
                "disks": [
                    {
                        "device": "/dev/sda",
                        "wipeTable": False,
                        "partitions": [
                            {"number": 1, "label": "a", "sizeMiB": 10},
                            {"label": "b", "sizeMiB": 20},
                            {"number": 0, "label": "c"},
                        ],
                    },
                    {"device": "/dev/sdb"},
                ]
            }
        },
    ),
    (
        "partition-number-wins-over-label",
        {"storage": {"disks": [{"device": "/d", "partitions": [{"number": 2, "label": "x", "sizeMiB": 1}]}]}},
        {"storage": {"disks": [{"device": "/d", "partitions": [{"number": 3, "label": "x"}]}]}},
        {
            "storage": {
                "disks": [
                    {
                        "device": "/d",
                        "partitions": [
                            {"number": 2, "label": "x", "sizeMiB": 1},
                            {"number": 3, "label": "x"},
                        ],
                    }
                ]
            }
        },
    ),
    (
        "luks-by-name-tang-by-url-options-concatenated",
        {
            "storage": {
                "luks": [
                    {"name": "root", "clevis": {"tang": [{"url": "a", "thumbprint": "1"}]}, "options": ["x"]}
                ]
            }
        },
        {
            "storage": {
                "luks": [
                    {
                        "name": "root",
                        "clevis": {"tang": [{"url": "a", "thumbprint": "2"}, {"url": "b"}]},
                        "options": ["x"],
                    }
                ]
            }
        },
        {
            "storage": {
                "luks": [
                    {
                        "name": "root",
                        "clevis": {"tang": [{"url": "a", "thumbprint": "2"}, {"url": "b"}]},
                        "options": ["x", "x"],
                    }
                ]
            }
        },
    ),
    (
        "filesystems-by-device-options-concatenated",
        {
            "storage": {
                "filesystems": [
                    {"device": "/dev/a", "format": "xfs", "options": ["-f"], "mountOptions": ["ro"]}
                ]
            }
        },
        {"storage": {"filesystems": [{"device": "/dev/a", "options": ["-f"], "mountOptions": ["noatime"]}]}},
        {
            "storage": {
                "filesystems": [
                    {
                        "device": "/dev/a",
                        "format": "xfs",
                        "options": ["-f", "-f"],
                        "mountOptions": ["ro", "noatime"],
                    }
                ]
            }
        },
    ),
    (
        "raid-by-name-options-concatenated",
        {"storage": {"raid": [{"name": "md0", "level": "raid1", "options": ["--a"]}, {"name": "md1"}]}},
        {"storage": {"raid": [{"name": "md0", "options": ["--b"]}]}},
        {
            "storage": {
                "raid": [{"name": "md0", "level": "raid1", "options": ["--a", "--b"]}, {"name": "md1"}]
            }
        },
    ),
    (
        "append-concatenated",
        {"storage": {"files": [{"path": "/a", "append": [{"source": "data:,1"}]}]}},
        {"storage": {"files": [{"path": "/a", "append": [{"source": "data:,1"}, {"source": "data:,2"}]}]}},
        {
            "storage": {
                "files": [
                    {
                        "path": "/a",
                        "append": [{"source": "data:,1"}, {"source": "data:,1"}, {"source": "data:,2"}],
                    }
                ]
            }
        },
    ),
    (
        "certificate-authorities-and-merge-by-source",
        {
            "ignition": {
                "config": {"merge": [{"source": "data:,a", "verification": {"hash": "x"}}]},
                "security": {
                    "tls": {"certificateAuthorities": [{"source": "data:,ca", "compression": "gzip"}]}
                },
            }
        },
        {
            "ignition": {
                "config": {
                    "merge": [{"source": "data:,b"}, {"source": "data:,a", "verification": {"hash": "y"}}]
                },
                "security": {
                    "tls": {"certificateAuthorities": [{"source": "data:,ca"}, {"source": "data:,ca2"}]}
                },
            }
        },
        {
            "ignition": {
                "config": {
                    "merge": [{"source": "data:,a", "verification": {"hash": "y"}}, {"source": "data:,b"}]
                },
                "security": {
                    "tls": {
                        "certificateAuthorities": [
                            {"source": "data:,ca", "compression": "gzip"},
                            {"source": "data:,ca2"},
                        ]
                    }
                },
            }
        },
    ),
    (
        "units-and-dropins-by-name",
        {
            "systemd": {
                "units": [
                    {"name": "a.service", "enabled": True, "dropins": [{"name": "1.conf", "contents": "x"}]}
                ]
            }
        },
        {
            "systemd": {
                "units": [
                    {
                        "name": "a.service",
                        "dropins": [{"name": "2.conf"}, {"name": "1.conf", "contents": "y"}],
                    },
                    {"name": "b.service"},
                ]
            }
        },
        {
            "systemd": {
                "units": [
                    {
                        "name": "a.service",
                        "enabled": True,
                        "dropins": [{"name": "1.conf", "contents": "y"}, {"name": "2.conf"}],
                    },
                    {"name": "b.service"},
                ]
            }
        },
    ),
    (
        "users-groups-and-string-sets",
        {
            "passwd": {
                "users": [{"name": "core", "sshAuthorizedKeys": ["a", "b"], "groups": ["wheel"]}],
                "groups": [{"name": "wheel", "gid": 10}],
            }
        },
        {
            "passwd": {
                "users": [{"name": "core", "sshAuthorizedKeys": ["b", "c"], "groups": ["sudo", "wheel"]}],
                "groups": [{"name": "wheel"}, {"name": "sudo"}],
            }
        },
        {
            "passwd": {
                "users": [
                    {"name": "core", "sshAuthorizedKeys": ["a", "b", "c"], "groups": ["wheel", "sudo"]}
                ],
                "groups": [{"name": "wheel", "gid": 10}, {"name": "sudo"}],
            }
        },
    ),
    (
        "other-list-of-objects-replaced",
        {"x": [{"a": 1}, {"a": 2}]},
        {"x": [{"b": 2}]},
        {"x": [{"b": 2}]},
    ),
    ("mixed-list-replaced", {"x": ["a", {"b": 1}]}, {"x": [["c"]]}, {"x": [["c"]]}),
    (
        "kernel-arguments-share-one-key-space",
        {"kernelArguments": {"shouldExist": ["a", "b"], "shouldNotExist": ["c"]}},
        {"kernelArguments": {"shouldNotExist": ["a"], "shouldExist": ["c"]}},
        {"kernelArguments": {"shouldExist": ["b", "c"], "shouldNotExist": ["a"]}},
    ),
    (
        "storage-path-moved-from-directory-to-link",
        {
            "storage": {
                "directories": [{"path": "/x", "mode": 493}, {"path": "/y"}],
                "files": [{"path": "/f"}],
            }
        },
        {"storage": {"links": [{"path": "/x", "target": "/t"}]}},
        {
            "storage": {
                "directories": [{"path": "/y"}],
                "files": [{"path": "/f"}],
                "links": [{"path": "/x", "target": "/t"}],
            }
        },
    ),
    (
        "storage-list-not-a-list-is-left",
        {"storage": {"files": None, "directories": [{"path": "/x"}]}},
        {"storage": {"files": [{"path": "/x"}]}},
        {"storage": {"files": [{"path": "/x"}], "directories": []}},
    ),
    (
        "compression-reset-by-a-new-source",
        {
            "storage": {
                "files": [
                    {"path": "/a", "contents": {"source": "data:,gz", "compression": "gzip"}, "mode": 420}
                ]
            }
        },
        {"storage": {"files": [{"path": "/a", "contents": {"source": "data:,plain"}}]}},
        {"storage": {"files": [{"path": "/a", "contents": {"source": "data:,plain"}, "mode": 420}]}},
    ),
    (
        "compression-kept-without-a-new-source",
        {"storage": {"files": [{"path": "/a", "contents": {"source": "data:,gz", "compression": "gzip"}}]}},
        {"storage": {"files": [{"path": "/a", "contents": {"verification": {"hash": "h"}}, "mode": 420}]}},
        {
            "storage": {
                "files": [
                    {
                        "path": "/a",
                        "contents": {
                            "source": "data:,gz",
                            "compression": "gzip",
                            "verification": {"hash": "h"},
                        },
                        "mode": 420,
                    }
                ]
            }
        },
    ),
    (
        "compression-set-with-the-new-source",
        {"storage": {"files": [{"path": "/a", "contents": {"source": "data:,gz", "compression": "gzip"}}]}},
        {"storage": {"files": [{"path": "/a", "contents": {"source": "data:,plain", "compression": ""}}]}},
        {"storage": {"files": [{"path": "/a", "contents": {"source": "data:,plain", "compression": ""}}]}},
    ),
    (
        "http-headers-by-name-without-value-removed",
        {
            "ignition": {
                "config": {
                    "merge": [
                        {
                            "source": "data:,a",
                            "httpHeaders": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        }
                    ]
                }
            }
        },
        {
            "ignition": {
                "config": {
                    "merge": [
                        {"source": "data:,a", "httpHeaders": [{"name": "A"}, {"name": "B", "value": "3"}]}
                    ]
                }
            }
        },
        {
            "ignition": {
                "config": {"merge": [{"source": "data:,a", "httpHeaders": [{"name": "B", "value": "3"}]}]}
            }
        },
    ),
    (
        "version-highest",
        {"ignition": {"version": "3.4.0"}},
        {"ignition": {"version": "3.2.0"}},
        {"ignition": {"version": "3.4.0"}},
    ),
    (
        "version-later-higher",
        {"ignition": {"version": "3.1.0"}},
        {"ignition": {"version": "3.3.0"}},
        {"ignition": {"version": "3.3.0"}},
    ),
    (
        "version-only-earlier",
        {"ignition": {"version": "3.1.0"}},
        {"storage": {}},
        {"ignition": {"version": "3.1.0"}, "storage": {}},
    ),
    ("version-only-later", {}, {"ignition": {"version": "3.2.0"}}, {"ignition": {"version": "3.2.0"}}),
    (
        "ignition-without-version",
        {"ignition": {}},
        {"ignition": {"timeouts": {}}},
        {"ignition": {"timeouts": {}}},
    ),
]


@pytest.mark.parametrize(("parent", "child", "merged"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_merge_configs(parent: dict[str, Any], child: dict[str, Any], merged: dict[str, Any]) -> None:
    before = copy.deepcopy((parent, child))
    result = merge_configs(parent, child)
    assert result == merged
    assert (parent, child) == before, "inputs are never changed"
    if result:
        result[next(iter(result))] = "changed"
        assert (parent, child) == before, "the result shares nothing with its inputs"


def test_versions_compare_as_numbers() -> None:
    assert version_key("3.10.0") > version_key("3.4.0")
    assert merge_configs({"ignition": {"version": "3.10.0"}}, {"ignition": {"version": "3.4.0"}}) == {
        "ignition": {"version": "3.10.0"}
    }


def mc(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


SPECS: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] = [
    ("none", [], {"osImageURL": "", "config": {}, "kernelArguments": []}),
    (
        "name-order-and-kernel-arguments-kept-in-order",
        [
            mc("99-b", kernelArguments=["y", "x"], config={"a": 2}),
            mc("00-a", kernelArguments=["x"], config={"a": 1, "b": 1}),
        ],
        {"osImageURL": "", "config": {"a": 2, "b": 1}, "kernelArguments": ["x", "y", "x"]},
    ),
    (
        "special-kernel-wins-over-default",
        [mc("a", kernelType="realtime"), mc("b", kernelType="default"), mc("c", kernelType="")],
        {"osImageURL": "", "config": {}, "kernelArguments": [], "kernelType": "realtime"},
    ),
    (
        "later-special-kernel-wins",
        [mc("a", kernelType="64k-pages"), mc("b", kernelType="realtime")],
        {"osImageURL": "", "config": {}, "kernelArguments": [], "kernelType": "realtime"},
    ),
    (
        "default-kernel-left-out",
        [mc("a", kernelType="default")],
        {"osImageURL": "", "config": {}, "kernelArguments": []},
    ),
    (
        "last-non-empty-os-image",
        [mc("a", osImageURL="img1"), mc("b", osImageURL="img2"), mc("c", osImageURL=""), mc("d")],
        {"osImageURL": "img2", "config": {}, "kernelArguments": []},
    ),
    (
        "null-fields",
        [mc("a", config=None, kernelArguments=None, osImageURL=None)],
        {"osImageURL": "", "config": {}, "kernelArguments": []},
    ),
]


@pytest.mark.parametrize(("configs", "merged"), [s[1:] for s in SPECS], ids=[s[0] for s in SPECS])
def test_merge_specs(configs: list[dict[str, Any]], merged: dict[str, Any]) -> None:
    before = copy.deepcopy(configs)
    assert merge_specs(configs) == merged
    assert configs == before
