"""``validate_spec``: every problem of a MachineConfig spec, named as MCO and Ignition name it,
and nothing said of a valid spec. One table: a spec and the exact problems it has."""

from __future__ import annotations

from typing import Any

import pytest

from mcm.machineconfig.validation import UNIT_TYPES, validate_spec

V = "3.2.0"
SUPPORTED = "Supported spec versions: 3.0, 3.1, 3.2, 3.3, 3.4, 3.5"
F0 = "config.storage.files[0]"
U0 = "config.systemd.units[0]"


def c(**sections: Any) -> dict[str, Any]:
    """A spec whose config has a supported version and ``sections``."""
    return {"config": {"ignition": {"version": V}, **sections}}


def files(*entries: Any) -> dict[str, Any]:
    return c(storage={"files": list(entries)})


def units(*entries: Any) -> dict[str, Any]:
    return c(systemd={"units": list(entries)})


def users(*entries: Any) -> dict[str, Any]:
    return c(passwd={"users": list(entries)})


def groups(*entries: Any) -> dict[str, Any]:
    return c(passwd={"groups": list(entries)})


VALID = {
    "kernelType": "realtime",
    "osImageURL": "quay.io/os@sha256:0",
    "kernelArguments": ["nosmt", "quiet"],
    "config": {
        "ignition": {"version": "3.4.0"},
        "storage": {
            "files": [
                {
                    "path": "/etc/a",
                    "mode": 0o644,
                    "overwrite": True,
                    "user": {"name": "core"},
                    "group": {"id": 0},
                    "contents": {"source": "data:,a", "compression": ""},
                    "append": [{"source": "data:;base64,YQ==", "compression": "gzip"}, {}],
                },
                {"path": "/etc/b", "mode": 0, "overwrite": False},
                {"path": "/etc/c", "mode": 0o777, "contents": {"source": "data:,c", "compression": None}},
            ],
            "directories": [{"path": "/etc/d", "mode": 0o755}],
            "links": [{"path": "/etc/l", "target": "/etc/a"}],
        },
        "systemd": {
            "units": [
                {
                    "name": "a.service",
                    "enabled": True,
                    "mask": False,
                    "contents": "[Unit]\n",
                    "dropins": [{"name": "10.conf", "contents": "x"}, {"name": "20.conf"}],
                },
                {"name": "b.timer", "dropins": [{"name": "10.conf"}]},
            ]
        },
        "passwd": {
            "users": [
                {
                    "name": "core",
                    "sshAuthorizedKeys": ["ssh-ed25519 AAAA"],
                    "groups": ["wheel"],
                    "uid": 1000,
                    "passwordHash": "x",
                    "homeDir": "/home/core",
                    "shell": "/bin/bash",
                }
            ],
            "groups": [{"name": "core", "gid": 1000, "passwordHash": "x"}, {"name": "wheel"}],
        },
    },
}

CASES: list[tuple[str, Any, list[str]]] = [
    # -- the spec and its top-level fields
    ("valid-everything", VALID, []),
    ("not-an-object", "spec", ["spec must be an object"]),
    ("null", None, ["spec must be an object"]),
    ("empty", {}, []),
    ("kernel-default", {"kernelType": "default"}, []),
    ("kernel-empty", {"kernelType": ""}, []),
    ("kernel-64k", {"kernelType": "64k-pages"}, []),
    ("kernel-null", {"kernelType": None}, []),
    ("kernel-unknown", {"kernelType": "rt"}, ["kernelType=rt is invalid"]),
    ("os-image-not-string", {"osImageURL": 5}, ["osImageURL must be a string"]),
    ("os-image-empty", {"osImageURL": ""}, []),
    ("kargs-not-list", {"kernelArguments": "quiet"}, ["kernelArguments must be a list of strings"]),
    ("kargs-not-strings", {"kernelArguments": ["quiet", 1]}, ["kernelArguments must be a list of strings"]),
    ("kargs-empty", {"kernelArguments": []}, []),
    ("config-null", {"kernelType": "rt", "config": None}, ["kernelType=rt is invalid"]),
    ("config-empty", {"kernelType": "rt", "config": {}}, ["kernelType=rt is invalid"]),
    (
        "config-not-object",
        {"kernelType": "rt", "config": "x"},
        ["kernelType=rt is invalid", "config must be an object"],
    ),
    (
        "all-top-level",
        {"kernelType": "x", "osImageURL": [], "kernelArguments": [1], "config": {"storage": {}}},
        [
            "kernelType=x is invalid",
            "osImageURL must be a string",
            "kernelArguments must be a list of strings",
            "parsing Ignition config failed: ignition.version is required",
        ],
    ),
    # -- the Ignition version
    (
        "version-missing",
        {"config": {"storage": {}}},
        ["parsing Ignition config failed: ignition.version is required"],
    ),
    (
        "ignition-not-object",
        {"config": {"ignition": "3.2.0"}},
        ["parsing Ignition config failed: ignition.version is required"],
    ),
    (
        "version-empty",
        {"config": {"ignition": {"version": ""}}},
        ["parsing Ignition config failed: ignition.version is required"],
    ),
    (
        "version-null",
        {"config": {"ignition": {"version": None}}},
        ["parsing Ignition config failed: ignition.version is required"],
    ),
    (
        "version-number",
        {"config": {"ignition": {"version": 3}}},
        [f"parsing Ignition config failed: invalid version 3. {SUPPORTED}"],
    ),
    (
        "version-short",
        {"config": {"ignition": {"version": "3.2"}}},
        [f"parsing Ignition config failed: invalid version '3.2'. {SUPPORTED}"],
    ),
    (
        "version-spec2",
        {"config": {"ignition": {"version": "2.2.0"}}},
        [f"parsing Ignition config failed: unknown version 2.2.0. {SUPPORTED}"],
    ),
    (
        "version-newer",
        {"config": {"ignition": {"version": "3.6.0"}}},
        [f"parsing Ignition config failed: unknown version 3.6.0. {SUPPORTED}"],
    ),
    (
        "version-experimental",
        {"config": {"ignition": {"version": "3.6.0-experimental"}}},
        [f"parsing Ignition config failed: unknown version 3.6.0-experimental. {SUPPORTED}"],
    ),
    ("version-oldest", {"config": {"ignition": {"version": "3.0.0"}}}, []),
    ("version-newest", {"config": {"ignition": {"version": "3.5.0"}}}, []),
    (
        "version-and-sections",
        {"config": {"storage": {"files": [{"path": "rel"}]}}},
        [
            "parsing Ignition config failed: ignition.version is required",
            f"{F0}.path must be an absolute path, got 'rel'",
        ],
    ),
    # -- sections and lists
    ("storage-not-object", c(storage=[]), ["config.storage must be an object"]),
    ("files-not-list", c(storage={"files": {}}), ["config.storage.files must be a list"]),
    ("directories-not-list", c(storage={"directories": "x"}), ["config.storage.directories must be a list"]),
    ("links-not-list", c(storage={"links": 1}), ["config.storage.links must be a list"]),
    ("lists-null", c(storage={"files": None, "directories": None, "links": None}), []),
    ("systemd-not-object", c(systemd="x"), ["config.systemd must be an object"]),
    ("units-not-list", c(systemd={"units": {}}), ["config.systemd.units must be a list"]),
    ("passwd-not-object", c(passwd=[]), ["config.passwd must be an object"]),
    ("users-not-list", c(passwd={"users": "core", "groups": []}), ["config.passwd.users must be a list"]),
    ("groups-not-list", c(passwd={"groups": "wheel"}), ["config.passwd.groups must be a list"]),
    ("sections-null", c(storage=None, systemd=None, passwd=None), []),
    # -- files
    ("file-not-object", files("x"), [f"{F0} must be an object"]),
    ("file-no-path", files({}), [f"{F0}.path must be an absolute path, got None"]),
    ("file-relative", files({"path": "etc/a"}), [f"{F0}.path must be an absolute path, got 'etc/a'"]),
    ("file-path-number", files({"path": 5}), [f"{F0}.path must be an absolute path, got 5"]),
    (
        "file-wrong-types",
        files({"path": "/a", "overwrite": "yes", "mode": "0644", "user": "root", "group": []}),
        [
            f"{F0} (/a).overwrite must be a boolean",
            f"{F0} (/a).mode must be an integer",
            f"{F0} (/a).user must be an object",
            f"{F0} (/a).group must be an object",
        ],
    ),
    ("file-mode-bool", files({"path": "/a", "mode": True}), [f"{F0} (/a).mode must be an integer"]),
    ("file-overwrite-int", files({"path": "/a", "overwrite": 1}), [f"{F0} (/a).overwrite must be a boolean"]),
    (
        "file-mode-setuid",
        files({"path": "/a", "mode": 0o4755}),
        ["invalid mode 04755 for /a, cannot exceed 0777"],
    ),
    (
        "file-mode-sticky",
        files({"path": "/a", "mode": 0o1777}),
        ["invalid mode 01777 for /a, cannot exceed 0777"],
    ),
    (
        "file-mode-1000",
        files({"path": "/a", "mode": 0o1000}),
        ["invalid mode 01000 for /a, cannot exceed 0777"],
    ),
    (
        "file-mode-negative",
        files({"path": "/a", "mode": -1}),
        ["invalid mode -01 for /a, cannot exceed 0777"],
    ),
    (
        "file-second-index",
        files({"path": "/a"}, {"path": "/b", "mode": "x"}),
        ["config.storage.files[1] (/b).mode must be an integer"],
    ),
    ("file-duplicate", files({"path": "/a"}, {"path": "/b"}, {"path": "/a"}), ["duplicate file path /a"]),
    (
        "file-directory-link-one-space",
        c(storage={"files": [{"path": "/a"}], "directories": [{"path": "/a"}], "links": [{"path": "/a"}]}),
        ["duplicate file path /a", "duplicate file path /a"],
    ),
    (
        "file-contents-not-object",
        files({"path": "/a", "contents": "x"}),
        [f"{F0} (/a).contents must be an object"],
    ),
    (
        "file-contents-types",
        files({"path": "/a", "contents": {"source": 5, "compression": 1}}),
        [f"{F0} (/a).contents.source must be a string", f"{F0} (/a).contents.compression must be a string"],
    ),
    (
        "file-compression-unknown",
        files({"path": "/a", "contents": {"source": "data:,x", "compression": "bzip2"}}),
        [f"{F0} (/a).contents.compression must be gzip or empty, got 'bzip2'"],
    ),
    (
        "file-source-not-data-url",
        files({"path": "/a", "contents": {"source": "https://example.com/a"}}),
        [f"{F0} (/a).contents: contents source 'https://example.com/a' is not a data: URL"],
    ),
    (
        "file-source-and-compression-bad",
        files({"path": "/a", "contents": {"source": "s3://b/k", "compression": "xz"}}),
        [
            f"{F0} (/a).contents.compression must be gzip or empty, got 'xz'",
            f"{F0} (/a).contents: contents source 's3://b/k' is not a data: URL",
        ],
    ),
    ("file-contents-empty", files({"path": "/a", "contents": {}}), []),
    (
        "file-append-not-list",
        files({"path": "/a", "append": {"source": "data:,x"}}),
        [f"{F0} (/a).append must be a list"],
    ),
    (
        "file-append-entries",
        files({"path": "/a", "append": [{"source": "data:,ok"}, {"source": "http://a/b"}, "x"]}),
        [
            f"{F0} (/a).append[1]: contents source 'http://a/b' is not a data: URL",
            f"{F0} (/a).append[2] must be an object",
        ],
    ),
    (
        "file-overwrite-without-contents",
        files({"path": "/a", "overwrite": True}),
        [f"{F0} (/a): overwrite must be false when contents.source is not set"],
    ),
    (
        "file-overwrite-without-source",
        files({"path": "/a", "overwrite": True, "contents": {"compression": "gzip"}}),
        [f"{F0} (/a): overwrite must be false when contents.source is not set"],
    ),
    (
        "file-overwrite-contents-not-object",
        files({"path": "/a", "overwrite": True, "contents": "data:,x"}),
        [
            f"{F0} (/a).contents must be an object",
            f"{F0} (/a): overwrite must be false when contents.source is not set",
        ],
    ),
    ("file-no-overwrite-without-contents", files({"path": "/a", "overwrite": False}), []),
    # -- directories and links
    (
        "directory-not-object",
        c(storage={"directories": ["x"]}),
        ["config.storage.directories[0] must be an object"],
    ),
    (
        "link-relative",
        c(storage={"links": [{"path": "/l"}, {"path": "l"}]}),
        ["config.storage.links[1].path must be an absolute path, got 'l'"],
    ),
    (
        "directory-mode",
        c(storage={"directories": [{"path": "/d", "mode": 0o2755}]}),
        ["invalid mode 02755 for /d, cannot exceed 0777"],
    ),
    (
        "directory-types",
        c(storage={"directories": [{"path": "/d", "overwrite": "no", "user": 0}]}),
        [
            "config.storage.directories[0] (/d).overwrite must be a boolean",
            "config.storage.directories[0] (/d).user must be an object",
        ],
    ),
    # -- units
    ("unit-not-object", units("a.service"), [f"{U0} must be an object"]),
    ("unit-no-name", units({"contents": "x"}), [f"{U0}.name must be a non-empty string"]),
    ("unit-empty-name", units({"name": ""}), [f"{U0}.name must be a non-empty string"]),
    ("unit-name-number", units({"name": 5}), [f"{U0}.name must be a non-empty string"]),
    (
        "unit-wrong-types",
        units({"name": "a.service", "enabled": "yes", "mask": 1, "contents": 5, "dropins": {}}),
        [
            f"{U0} (a.service).enabled must be a boolean",
            f"{U0} (a.service).mask must be a boolean",
            f"{U0} (a.service).contents must be a string",
            f"{U0} (a.service).dropins must be a list",
        ],
    ),
    (
        "unit-no-type",
        units({"name": "a"}),
        ["invalid unit name a: it must end in a unit type such as .service"],
    ),
    (
        "unit-slash",
        units({"name": "x/a.service"}),
        ["invalid unit name x/a.service: it must end in a unit type such as .service"],
    ),
    (
        "unit-duplicate",
        units({"name": "a.service"}, {"name": "b.service"}, {"name": "a.service"}),
        ["duplicate systemd unit a.service"],
    ),
    (
        "dropin-not-object",
        units({"name": "a.service", "dropins": ["10.conf", {"contents": "x"}, {"name": 5}]}),
        [
            f"{U0} (a.service).dropins[0] must be an object with a name",
            f"{U0} (a.service).dropins[1] must be an object with a name",
            f"{U0} (a.service).dropins[2] must be an object with a name",
        ],
    ),
    (
        "dropin-contents-type",
        units({"name": "a.service", "dropins": [{"name": "10.conf", "contents": 5}]}),
        [f"{U0} (a.service).dropins[0].contents must be a string"],
    ),
    (
        "dropin-names",
        units({"name": "a.service", "dropins": [{"name": "10.txt"}, {"name": "d/10.conf"}]}),
        [
            "invalid drop-in name 10.txt: it must end in .conf",
            "invalid drop-in name d/10.conf: it must end in .conf",
        ],
    ),
    (
        "dropin-duplicate",
        units(
            {"name": "a.service", "dropins": [{"name": "10.conf"}, {"name": "20.conf"}, {"name": "10.conf"}]}
        ),
        [f"{U0} (a.service).dropins[2]: duplicate drop-in 10.conf"],
    ),
    (
        "dropin-same-name-in-two-units",
        units(
            {"name": "a.service", "dropins": [{"name": "10.conf"}]},
            {"name": "b.service", "dropins": [{"name": "10.conf"}]},
        ),
        [],
    ),
    # -- users and groups
    ("user-not-object", users("core"), ["config.passwd.users[0] must be an object with a non-empty name"]),
    ("user-no-name", users({"uid": 1}), ["config.passwd.users[0] must be an object with a non-empty name"]),
    (
        "user-empty-name",
        users({"name": ""}),
        ["config.passwd.users[0] must be an object with a non-empty name"],
    ),
    (
        "user-name-number",
        users({"name": 7}),
        ["config.passwd.users[0] must be an object with a non-empty name"],
    ),
    (
        "user-wrong-types",
        users(
            {
                "name": "core",
                "sshAuthorizedKeys": "k",
                "groups": [1],
                "uid": "1000",
                "passwordHash": 5,
                "homeDir": 5,
                "shell": 5,
            }
        ),
        [
            "config.passwd.users[0].sshAuthorizedKeys must be a list",
            "config.passwd.users[0].uid must be an integer",
            "config.passwd.users[0].passwordHash must be a string",
            "config.passwd.users[0].homeDir must be a string",
            "config.passwd.users[0].shell must be a string",
            "config.passwd.users[0].groups must be a list of strings",
        ],
    ),
    (
        "user-uid-bool",
        users({"name": "core", "uid": True}),
        ["config.passwd.users[0].uid must be an integer"],
    ),
    (
        "user-keys-not-strings",
        users({"name": "core", "sshAuthorizedKeys": ["k", 2]}),
        ["config.passwd.users[0].sshAuthorizedKeys must be a list of strings"],
    ),
    ("user-duplicate", users({"name": "core"}, {"name": "admin"}, {"name": "core"}), ["duplicate user core"]),
    ("group-duplicate", groups({"name": "wheel"}, {"name": "wheel"}), ["duplicate group wheel"]),
    (
        "group-not-object",
        groups(["wheel"]),
        ["config.passwd.groups[0] must be an object with a non-empty name"],
    ),
    (
        "group-wrong-types",
        groups({"name": "wheel", "gid": "10", "passwordHash": 1}),
        [
            "config.passwd.groups[0].gid must be an integer",
            "config.passwd.groups[0].passwordHash must be a string",
        ],
    ),
    (
        "group-gid-bool",
        groups({"name": "wheel", "gid": False}),
        ["config.passwd.groups[0].gid must be an integer"],
    ),
    ("user-and-group-same-name", c(passwd={"users": [{"name": "core"}], "groups": [{"name": "core"}]}), []),
    (
        "group-field-on-user-is-fine",
        users({"name": "core", "gid": "not checked on a user"}),
        [],
    ),
]


@pytest.mark.parametrize(("spec", "expected"), [(s, e) for _, s, e in CASES], ids=[i for i, _, _ in CASES])
def test_validate_spec_names_every_problem(spec: Any, expected: list[str]) -> None:
    assert validate_spec(spec) == expected


@pytest.mark.parametrize("unit_type", UNIT_TYPES)
def test_every_systemd_unit_type_is_a_valid_unit_name(unit_type: str) -> None:
    assert validate_spec(units({"name": f"a{unit_type}"})) == []


def test_a_source_that_is_not_base64_is_named() -> None:
    (problem,) = validate_spec(files({"path": "/a", "contents": {"source": "data:;base64,***"}}))
    assert problem.startswith(f"{F0} (/a).contents: contents source is not valid base64: ")


def test_a_section_that_is_not_an_object_is_named_once() -> None:
    """storage (files, directories, links) and passwd (users, groups) are read for several lists:
    a section that is not an object is still one problem."""
    assert validate_spec(c(storage="x", passwd=5, systemd=[])) == [
        "config.storage must be an object",
        "config.systemd must be an object",
        "config.passwd must be an object",
    ]
