"""The daemon's :class:`ConfigWriter` on a temporary root: what each config entry puts on disk
(contents, mode, owner, units, drop-ins, masks), what a change of config removes, and that a
failed apply leaves every path as it was (files, links, modes, owners, directories)."""

from __future__ import annotations

import base64
import gzip
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mcm.machineconfig.daemon import ApplyError, ConfigWriter

UNITS = "etc/systemd/system"


def spec(files: dict[str, Any] | None = None, units: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"ignition": {"version": "3.2.0"}}
    if files is not None:
        config["storage"] = {"files": [{"path": p, **f} for p, f in files.items()]}
    if units is not None:
        config["systemd"] = {"units": units}
    return {"config": config}


def text(source: str) -> dict[str, Any]:
    return {"contents": {"source": source}}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def owner_of(path: Path) -> tuple[int, int]:
    info = path.lstat()
    return info.st_uid, info.st_gid


def leftovers(directory: Path) -> list[str]:
    """Temporary files a write left in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="setting another owner needs root")


# --- what a config writes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({}, b""),
        ({"contents": None}, b""),
        ({"contents": {"source": None}}, b""),
        ({"contents": {"source": "data:,plain%20text"}}, b"plain text"),
        ({"contents": {"source": "data:,plain", "compression": None}}, b"plain"),
        ({"contents": {"source": "data:,plain", "compression": ""}}, b"plain"),
        (
            {
                "contents": {
                    "source": "data:;base64," + base64.b64encode(gzip.compress(b"zipped")).decode(),
                    "compression": "gzip",
                }
            },
            b"zipped",
        ),
        (
            {"contents": {"source": "data:,a"}, "append": [{"source": "data:,b"}, {"source": "data:,c"}]},
            b"abc",
        ),
        ({"append": [{"source": "data:,only"}]}, b"only"),
        ({"contents": {"source": "data:,a"}, "append": [{}, {"source": None}]}, b"a"),
        ({"contents": {"source": "data:,a"}, "append": None}, b"a"),
    ],
    ids=[
        "no-contents",
        "contents-null",
        "source-null",
        "percent-encoded",
        "compression-null",
        "compression-empty",
        "gzip",
        "appended",
        "append-only",
        "append-without-source",
        "append-null",
    ],
)
def test_a_file_holds_what_its_entry_describes(
    tmp_path: Path, entry: dict[str, Any], expected: bytes
) -> None:
    written = ConfigWriter(tmp_path).apply(None, spec({"/etc/f": entry}))
    assert (tmp_path / "etc/f").read_bytes() == expected
    assert mode_of(tmp_path / "etc/f") == 0o644, "Ignition's default mode"
    assert written.paths == ["/etc/f"] and written.units == []


def test_files_get_their_mode_and_new_directories_0755(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    writer.apply(
        None,
        spec(
            {
                "/etc/a/b/secret": {"mode": 0o600, **text("data:,s")},
                "/usr/local/bin/tool": {"mode": 0o755, **text("data:,#!")},
                "/etc/plain": {"mode": "0644", **text("data:,p")},
            }
        ),
    )
    assert mode_of(tmp_path / "etc/a/b/secret") == 0o600
    assert mode_of(tmp_path / "usr/local/bin/tool") == 0o755
    assert mode_of(tmp_path / "etc/plain") == 0o644, "a mode that is not a number is Ignition's default"
    for directory in ("etc/a", "etc/a/b", "usr", "usr/local", "usr/local/bin"):
        assert (tmp_path / directory).is_dir() and mode_of(tmp_path / directory) == 0o755
    assert leftovers(tmp_path / "etc/a/b") == [] and leftovers(tmp_path / "etc") == []


def test_a_file_is_replaced_by_a_new_inode_not_rewritten_in_place(tmp_path: Path) -> None:
    """A reader holding the old file open keeps the old contents (the write is a rename)."""
    writer = ConfigWriter(tmp_path)
    old = spec({"/etc/f": text("data:,old")})
    writer.apply(None, old)
    with (tmp_path / "etc/f").open("rb") as reader:
        writer.apply(old, spec({"/etc/f": {"mode": 0o600, **text("data:,new")}}))
        assert reader.read() == b"old"
    assert (tmp_path / "etc/f").read_bytes() == b"new" and mode_of(tmp_path / "etc/f") == 0o600
    assert leftovers(tmp_path / "etc") == []


def test_an_existing_file_is_always_overwritten_and_a_link_replaced_by_a_file(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/admin.conf").write_text("admin's")
    (tmp_path / "shared").mkdir()
    (tmp_path / "etc/linked").symlink_to("../shared")
    ConfigWriter(tmp_path).apply(
        None, spec({"/etc/admin.conf": text("data:,ours"), "/etc/linked": text("data:,file")})
    )
    assert (tmp_path / "etc/admin.conf").read_text() == "ours"
    linked = tmp_path / "etc/linked"
    assert not linked.is_symlink() and linked.read_text() == "file"
    assert (tmp_path / "shared").is_dir(), "the link's target is left alone"


@pytest.mark.parametrize(
    "junk",
    [
        {},
        {"config": None},
        {"config": {}},
        {"config": {"storage": None, "systemd": None}},
        {"config": {"storage": {"files": None}, "systemd": {"units": None}}},
        {
            "config": {
                "storage": {"files": ["not a file", {"contents": {}}, {"path": ""}]},
                "systemd": {"units": ["not a unit", {"contents": "x"}, {"name": ""}]},
            }
        },
    ],
    ids=["empty", "config-null", "config-empty", "sections-null", "lists-null", "entries-without-names"],
)
def test_a_config_without_usable_entries_writes_nothing(tmp_path: Path, junk: dict[str, Any]) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/kept").write_text("k")
    written = ConfigWriter(tmp_path).apply(junk, junk)
    assert written.paths == [] and written.units == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["etc", "kept"]


@needs_root
def test_a_file_gets_the_owner_it_names_by_id_or_by_name(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\n"
        "short:x\n"  # a line too short to hold an id
        "app:x:not-a-number:7:broken line first\n"
        "app:x:1001:2002:the app:/home/app:/bin/false\n"
    )
    (tmp_path / "etc/group").write_text("wheel:x:10:\nshort\nappgroup:x:3003\n")
    files = {
        "/etc/by-id": {"user": {"id": 4004}, "group": {"id": 5005}, **text("data:,i")},
        "/etc/by-name": {"user": {"name": "app"}, "group": {"name": "appgroup"}, **text("data:,n")},
        "/etc/root-by-id": {"user": {"id": 0}, "group": {"id": 0}, **text("data:,r")},
        "/etc/user-only": {"user": {"id": 4004}, **text("data:,u")},
        "/etc/group-only": {"group": {"name": "wheel"}, **text("data:,g")},
        "/etc/nobody-named": {"user": {}, "group": {"name": ""}, **text("data:,x")},
    }
    ConfigWriter(tmp_path).apply(None, spec(files))
    assert owner_of(tmp_path / "etc/by-id") == (4004, 5005)
    assert owner_of(tmp_path / "etc/by-name") == (1001, 3003)
    assert owner_of(tmp_path / "etc/root-by-id") == (0, 0)
    assert owner_of(tmp_path / "etc/user-only") == (4004, os.getegid())
    assert owner_of(tmp_path / "etc/group-only") == (os.geteuid(), 10)
    assert owner_of(tmp_path / "etc/nobody-named") == (os.geteuid(), os.getegid())


@needs_root
def test_a_rewritten_file_takes_the_new_owner(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    old = spec({"/etc/f": {"user": {"id": 4004}, "group": {"id": 5005}, **text("data:,1")}})
    writer.apply(None, old)
    writer.apply(old, spec({"/etc/f": {"user": {"id": 6006}, **text("data:,2")}}))
    assert owner_of(tmp_path / "etc/f") == (6006, os.getegid())


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"/etc/passwd": "root:x:0:0::/:/bin/sh\n"}, r"^no user 'ghost' in /etc/passwd$"),
        ({}, r"^cannot look up 'ghost' in /etc/passwd: "),
    ],
    ids=["unknown-user", "no-passwd"],
)
def test_an_owner_that_cannot_be_found_fails_the_apply(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    for path, content in files.items():
        (tmp_path / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path.lstrip("/")).write_text(content)
    with pytest.raises(ApplyError, match=message):
        ConfigWriter(tmp_path).apply(
            None, spec({"/etc/owned": {"user": {"name": "ghost"}, **text("data:,x")}})
        )
    assert not (tmp_path / "etc/owned").exists()


def test_an_unknown_group_is_named_as_a_group(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/group").write_text("wheel:x:10:\n")
    with pytest.raises(ApplyError, match=r"^no group 'ghosts' in /etc/group$"):
        ConfigWriter(tmp_path).apply(
            None, spec({"/etc/owned": {"group": {"name": "ghosts"}, **text("data:,x")}})
        )


def test_files_without_an_owner_need_no_passwd_or_group_file(tmp_path: Path) -> None:
    ConfigWriter(tmp_path).apply(None, spec({"/etc/f": {"user": {}, "group": {}, **text("data:,x")}}))
    assert (tmp_path / "etc/f").read_text() == "x"


# --- paths --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["etc/relative", "/etc/../../escape", "/../escape", "/etc/a/../b"])
def test_a_path_that_is_relative_or_climbs_is_refused(tmp_path: Path, path: str) -> None:
    writer = ConfigWriter(tmp_path / "root")
    (tmp_path / "root").mkdir()
    with pytest.raises(ApplyError, match=r"must be absolute, without '\.\.'"):
        writer.apply(None, spec({path: text("data:,x")}))
    assert list((tmp_path / "root").iterdir()) == [] and not (tmp_path / "escape").exists()


def test_a_name_with_dots_stays_under_the_root(tmp_path: Path) -> None:
    ConfigWriter(tmp_path).apply(None, spec({"/etc/a..b": text("data:,x"), "//etc/double": text("data:,y")}))
    assert (tmp_path / "etc/a..b").read_text() == "x"
    assert (tmp_path / "etc/double").read_text() == "y"


def test_the_host_path_is_under_the_root(tmp_path: Path) -> None:
    assert ConfigWriter(tmp_path).host_path("/etc/x") == tmp_path / "etc/x"


def test_a_root_that_does_not_exist_is_not_created(tmp_path: Path) -> None:
    """A mistyped root fails the apply instead of growing a tree beside the real one."""
    with pytest.raises(ApplyError, match="cannot write /etc/f"):
        ConfigWriter(tmp_path / "missing").apply(None, spec({"/etc/f": text("data:,x")}))
    assert not (tmp_path / "missing").exists()


def test_a_file_whose_path_is_a_directory_fails_and_leaves_the_directory(tmp_path: Path) -> None:
    (tmp_path / "etc/conf.d").mkdir(parents=True)
    (tmp_path / "etc/conf.d/inside").write_text("i")
    with pytest.raises(ApplyError, match=r"^cannot write /etc/conf.d: it is a directory$"):
        ConfigWriter(tmp_path).apply(None, spec({"/etc/conf.d": text("data:,x")}))
    assert (tmp_path / "etc/conf.d/inside").read_text() == "i"
    assert leftovers(tmp_path / "etc") == [], "the temporary file is removed"


def test_a_write_below_a_file_names_the_path_and_the_reason(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/blocker").write_text("a file")
    with pytest.raises(ApplyError, match=r"^cannot write /etc/blocker/app.conf: Not a directory$"):
        ConfigWriter(tmp_path).apply(None, spec({"/etc/blocker/app.conf": text("data:,x")}))


# --- removal ------------------------------------------------------------------------------------


def test_files_the_new_config_no_longer_has_are_removed_and_the_others_kept(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    old = spec({"/etc/gone": text("data:,g"), "/etc/kept": text("data:,k"), "/etc/linked": text("data:,l")})
    writer.apply(None, old)
    (tmp_path / "etc/linked").unlink()
    (tmp_path / "etc/linked").symlink_to("/nonexistent")  # an admin's link, dangling
    (tmp_path / "etc/gone-dir").mkdir()
    old["config"]["storage"]["files"].append({"path": "/etc/gone-dir", **text("data:,d")})
    written = writer.apply(old, spec({"/etc/kept": text("data:,k2")}))
    assert not (tmp_path / "etc/gone").exists()
    assert not (tmp_path / "etc/linked").is_symlink(), "a link at a removed file's path is removed"
    assert (tmp_path / "etc/gone-dir").is_dir(), "a directory is never removed"
    assert (tmp_path / "etc/kept").read_text() == "k2"
    assert written.paths == ["/etc/kept"]


def test_a_file_already_gone_is_not_an_error(tmp_path: Path) -> None:
    ConfigWriter(tmp_path).apply(spec({"/etc/never-written": text("data:,x")}), spec({}))
    assert list(tmp_path.iterdir()) == []


# --- units --------------------------------------------------------------------------------------


def test_units_drop_ins_and_masks_are_written_and_reported_when_their_definition_changes(
    tmp_path: Path,
) -> None:
    writer = ConfigWriter(tmp_path)
    first = spec(
        units=[
            {
                "name": "a.service",
                "contents": "[Service]\n",
                "dropins": [{"name": "10.conf", "contents": "x"}],
            },
            {"name": "masked.service", "mask": True},
            {
                "name": "only-dropins.service",
                "dropins": [{"name": "20.conf", "contents": "y"}, {"name": "n.conf"}],
            },
            {"name": "enabled-only.service", "enabled": True},
        ]
    )
    written = writer.apply(None, first)
    units = tmp_path / UNITS
    assert (units / "a.service").read_text() == "[Service]\n" and mode_of(units / "a.service") == 0o644
    assert (units / "a.service.d/10.conf").read_text() == "x"
    assert os.readlink(units / "masked.service") == "/dev/null"
    assert (units / "only-dropins.service.d/20.conf").read_text() == "y"
    assert (
        not (units / "only-dropins.service").exists()
        and not (units / "only-dropins.service.d/n.conf").exists()
    )
    assert not (units / "enabled-only.service").exists()
    assert sorted(written.units) == [
        "a.service",
        "enabled-only.service",
        "masked.service",
        "only-dropins.service",
    ]
    assert written.paths == []

    assert writer.apply(first, first).units == [], "the same definitions again: no unit changed"
    assert (units / "a.service.d/10.conf").read_text() == "x", "a drop-in kept is still there"

    second = spec(
        units=[
            {
                "name": "a.service",
                "contents": "[Service]\n",
                "dropins": [{"name": "10.conf", "contents": "x2"}],
            },
            {"name": "masked.service", "mask": True},
            {
                "name": "only-dropins.service",
                "dropins": [{"name": "20.conf", "contents": "y"}, {"name": "n.conf"}],
            },
            {"name": "enabled-only.service", "enabled": False},
        ]
    )
    assert writer.apply(first, second).units == ["a.service"], "only a definition change counts, not enabled"
    assert (units / "a.service.d/10.conf").read_text() == "x2"


def test_a_unit_without_contents_is_removed_where_the_old_config_wrote_it(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    units = tmp_path / UNITS
    units.mkdir(parents=True)
    (units / "os.service").write_text("from the image")
    old = spec(
        units=[
            {"name": "had-contents.service", "contents": "[Unit]\n"},
            {"name": "was-masked.service", "mask": True},
            {"name": "os.service", "dropins": [{"name": "10.conf", "contents": "x"}]},
        ]
    )
    writer.apply(None, old)
    new = spec(
        units=[
            {"name": "had-contents.service", "enabled": True},
            {"name": "was-masked.service", "mask": False},
            {"name": "os.service", "dropins": [{"name": "10.conf", "contents": "x"}]},
        ]
    )
    written = writer.apply(old, new)
    assert not (units / "had-contents.service").exists()
    assert not (units / "was-masked.service").is_symlink()
    assert (units / "os.service").read_text() == "from the image", "a unit file no config wrote stays"
    assert (units / "os.service.d/10.conf").read_text() == "x"
    assert sorted(written.units) == ["had-contents.service", "was-masked.service"]


def test_a_new_unit_without_contents_leaves_the_image_unit_file_alone(tmp_path: Path) -> None:
    units = tmp_path / UNITS
    units.mkdir(parents=True)
    (units / "os.service").write_text("from the image")
    written = ConfigWriter(tmp_path).apply(
        None, spec(units=[{"name": "os.service", "dropins": [{"name": "10.conf", "contents": "x"}]}])
    )
    assert (units / "os.service").read_text() == "from the image"
    assert written.units == ["os.service"]


def test_drop_ins_the_new_config_no_longer_has_are_removed(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    units = tmp_path / UNITS
    old = spec(
        units=[
            {
                "name": "a.service",
                "contents": "c",
                "dropins": [{"name": "10.conf", "contents": "x"}, {"name": "20.conf", "contents": "y"}],
            }
        ]
    )
    writer.apply(None, old)
    new = spec(
        units=[
            {
                "name": "a.service",
                "contents": "c",
                "dropins": [{"name": "10.conf", "contents": "x"}, {"name": "20.conf"}],
            }
        ]
    )
    assert writer.apply(old, new).units == ["a.service"]
    assert (units / "a.service.d/10.conf").read_text() == "x"
    assert not (units / "a.service.d/20.conf").exists()
    newest = spec(units=[{"name": "a.service", "contents": "c"}])
    writer.apply(new, newest)
    assert not (units / "a.service.d/10.conf").exists()
    assert (units / "a.service").read_text() == "c"


def test_units_the_new_config_no_longer_has_are_removed_with_their_drop_ins(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    units = tmp_path / UNITS
    old = spec(
        units=[
            {"name": "gone.service", "contents": "c", "dropins": [{"name": "10.conf", "contents": "x"}]},
            {"name": "masked.service", "mask": True},
            {"name": "plain.service", "contents": "p"},
            {"name": "kept.service", "contents": "k"},
        ]
    )
    writer.apply(None, old)
    written = writer.apply(old, spec(units=[{"name": "kept.service", "contents": "k"}]))
    assert not (units / "gone.service").exists() and not (units / "gone.service.d/10.conf").exists()
    assert not (units / "masked.service").is_symlink()
    assert not (units / "plain.service").exists()
    assert (units / "kept.service").read_text() == "k"
    assert sorted(written.units) == ["gone.service", "masked.service", "plain.service"]


def test_masking_replaces_a_unit_file_or_a_broken_link_and_unmasking_writes_the_file(tmp_path: Path) -> None:
    units = tmp_path / UNITS
    units.mkdir(parents=True)
    (units / "broken.service").symlink_to("/nonexistent/unit")
    writer = ConfigWriter(tmp_path)
    old = spec(units=[{"name": "a.service", "contents": "c"}])
    writer.apply(None, old)
    masked = spec(units=[{"name": "a.service", "mask": True}, {"name": "broken.service", "mask": True}])
    writer.apply(old, masked)
    assert os.readlink(units / "a.service") == "/dev/null"
    assert os.readlink(units / "broken.service") == "/dev/null"
    writer.apply(masked, masked)
    assert os.readlink(units / "a.service") == "/dev/null", "masking a masked unit again"
    writer.apply(masked, old)
    assert not (units / "a.service").is_symlink() and (units / "a.service").read_text() == "c"


def test_a_mask_on_a_fresh_root_creates_the_unit_directory(tmp_path: Path) -> None:
    ConfigWriter(tmp_path).apply(None, spec(units=[{"name": "m.service", "mask": True}]))
    assert os.readlink(tmp_path / UNITS / "m.service") == "/dev/null"
    assert mode_of(tmp_path / UNITS) == 0o755


# --- all or nothing -----------------------------------------------------------------------------


def _blocked_units(root: Path) -> None:
    """Make every unit write fail: ``/etc/systemd`` is a file."""
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/systemd").write_text("not a directory")


def test_a_failure_after_files_were_written_and_removed_puts_them_all_back(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    old = spec(
        {
            "/etc/changed": {"mode": 0o640, **text("data:,before")},
            "/etc/removed": {"mode": 0o600, **text("data:,removed")},
        }
    )
    writer.apply(None, old)
    if os.geteuid() == 0:
        os.chown(tmp_path / "etc/changed", 4004, 5005)
        os.chown(tmp_path / "etc/removed", 4004, 5005)
    _blocked_units(tmp_path)
    new = spec(
        {
            "/etc/changed": {"mode": 0o400, **text("data:,after")},
            "/etc/added": text("data:,added"),
            "/var/lib/new/deep": text("data:,deep"),
        },
        [{"name": "a.service", "contents": "c"}],
    )
    with pytest.raises(ApplyError, match=r"cannot write /etc/systemd/system/a.service"):
        writer.apply(old, new)
    changed, removed = tmp_path / "etc/changed", tmp_path / "etc/removed"
    assert changed.read_text() == "before" and mode_of(changed) == 0o640
    assert removed.read_text() == "removed" and mode_of(removed) == 0o600
    if os.geteuid() == 0:
        assert owner_of(changed) == (4004, 5005) and owner_of(removed) == (4004, 5005)
    assert not (tmp_path / "etc/added").exists()
    assert not (tmp_path / "var").exists(), "directories it created are removed again"
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["changed", "removed", "systemd"]


def test_a_failure_puts_back_unit_files_a_mask_replaced_and_removes_new_links(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    units = tmp_path / UNITS
    old = spec(
        units=[{"name": "a.service", "contents": "[Unit]\n"}, {"name": "was-masked.service", "mask": True}]
    )
    writer.apply(None, old)
    new = spec(
        units=[
            {"name": "a.service", "mask": True},
            {"name": "new.service", "mask": True},
            {"name": "was-masked.service", "contents": "now a file"},
            {
                "name": "z.service",
                "contents": "z",
                "dropins": [{"name": "../../escape.conf", "contents": "x"}],
            },
        ]
    )
    with pytest.raises(ApplyError):
        writer.apply(old, new)
    assert not (units / "a.service").is_symlink() and (units / "a.service").read_text() == "[Unit]\n"
    assert mode_of(units / "a.service") == 0o644
    assert not (units / "new.service").exists() and not (units / "new.service").is_symlink()
    assert os.readlink(units / "was-masked.service") == "/dev/null"
    assert not (units / "z.service").exists()


def test_a_contents_error_puts_back_what_was_written_before_it(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    old = spec({"/etc/a": text("data:,a")})
    writer.apply(None, old)
    bad = spec(
        {
            "/etc/a": text("data:,changed"),
            "/etc/b": {"contents": {"source": "data:,plain", "compression": "gzip"}},
        }
    )
    with pytest.raises(ApplyError, match="not gzip data"):
        writer.apply(old, bad)
    assert (tmp_path / "etc/a").read_text() == "a"
    assert not (tmp_path / "etc/b").exists()
    with pytest.raises(ApplyError, match="not a data: URL"):
        writer.apply(
            old, spec({"/etc/a": text("data:,changed"), "/etc/c": text("https://example.invalid/x")})
        )
    assert (tmp_path / "etc/a").read_text() == "a"
    with pytest.raises(ApplyError):
        writer.apply(
            old,
            spec({"/etc/a": text("data:,changed")}, [{"name": "u.service", "dropins": [{"contents": "x"}]}]),
        )
    assert (tmp_path / "etc/a").read_text() == "a"


def test_a_failure_does_not_undo_the_previous_apply(tmp_path: Path) -> None:
    writer = ConfigWriter(tmp_path)
    first = spec({"/etc/first": text("data:,1")})
    writer.apply(None, first)
    with pytest.raises(ApplyError):
        writer.apply(first, spec({"/etc/first": text("data:,1"), "/etc/../x": text("data:,x")}))
    assert (tmp_path / "etc/first").read_text() == "1"
    writer.roll_back()
    assert (tmp_path / "etc/first").read_text() == "1", "a roll-back only undoes the last apply"
