"""Unit tests for mcm.emulator.patch: RFC 6902, RFC 7386 and strategic merge patch."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcm.emulator.patch import PatchError, json_patch, merge_patch, strategic_merge_patch

NODE_LISTS = {
    "metadata.finalizers": "merge-primitive",
    "metadata.ownerReferences": "merge:uid",
    "spec.taints": "atomic",
    "status.conditions": "merge:type",
}
POD_LISTS = {
    "spec.containers": "merge:name",
    "spec.containers.env": "merge:name",
    "spec.containers.ports": "merge:containerPort",
    "spec.volumes": "merge:name",
}


# --------------------------------------------------------------------------- JSON patch


def test_json_patch_add_replace_remove() -> None:
    doc = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "replace", "path": "/spec/x", "value": 5},
            {"op": "remove", "path": "/metadata/labels/a"},
        ],
    )
    assert out == {"metadata": {"labels": {"b": "2"}}, "spec": {"x": 5}}
    assert doc == {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}}


def test_json_patch_array_insert_append_and_remove() -> None:
    doc = {"l": [1, 2, 3]}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/l/0", "value": 0},
            {"op": "add", "path": "/l/-", "value": 4},
            {"op": "remove", "path": "/l/1"},
        ],
    )
    assert out == {"l": [0, 2, 3, 4]}


def test_json_patch_escapes() -> None:
    doc = {"metadata": {"annotations": {"a/b": "x", "c~d": "y"}}}
    out = json_patch(
        doc,
        [
            {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "X"},
            {"op": "remove", "path": "/metadata/annotations/c~0d"},
        ],
    )
    assert out == {"metadata": {"annotations": {"a/b": "X"}}}


def test_json_patch_move_and_copy() -> None:
    doc = {"a": {"x": [1]}, "b": {}}
    out = json_patch(
        doc,
        [
            {"op": "copy", "from": "/a/x", "path": "/b/y"},
            {"op": "move", "from": "/a", "path": "/c"},
        ],
    )
    assert out == {"b": {"y": [1]}, "c": {"x": [1]}}
    out["b"]["y"].append(2)
    assert out["c"]["x"] == [1]


def test_json_patch_move_into_own_child_fails() -> None:
    with pytest.raises(PatchError) as err:
        json_patch({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/c"}])
    assert err.value.code == 422


def test_json_patch_test_op_success_and_failure() -> None:
    doc = {"spec": {"replicas": 1, "paused": True}}
    assert json_patch(doc, [{"op": "test", "path": "/spec/replicas", "value": 1}]) == doc
    with pytest.raises(PatchError) as err:
        json_patch(doc, [{"op": "test", "path": "/spec/replicas", "value": 2}])
    assert err.value.code == 422
    assert "test failed" in err.value.message
    # 1 and true are different JSON values
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "test", "path": "/spec/paused", "value": 1}])
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "test", "path": "/spec/missing", "value": None}])


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/nope"}],
        [{"op": "replace", "path": "/nope", "value": 1}],
        [{"op": "add", "path": "/a/b/c", "value": 1}],
        [{"op": "add", "path": "/l/5", "value": 1}],
        [{"op": "remove", "path": "/l/-"}],
        [{"op": "add", "path": "/l/01", "value": 1}],
    ],
)
def test_json_patch_unapplicable_is_422(ops: list[dict[str, Any]]) -> None:
    doc = {"l": [1]}
    with pytest.raises(PatchError) as err:
        json_patch(doc, ops)
    assert err.value.code == 422
    assert doc == {"l": [1]}


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add"},
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "/a"}],
        [{"op": "move", "path": "/a"}],
        ["text"],
        [{"op": "add", "path": "no-slash", "value": 1}],
    ],
)
def test_json_patch_malformed_is_400(ops: Any) -> None:
    with pytest.raises(PatchError) as err:
        json_patch({"a": 1}, ops)
    assert err.value.code == 400


def test_json_patch_replacing_root_with_non_object_is_rejected() -> None:
    with pytest.raises(PatchError):
        json_patch({"a": 1}, [{"op": "replace", "path": "", "value": [1]}])


def test_json_patch_failed_sequence_leaves_input_untouched() -> None:
    doc = {"a": {"b": 1}}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "add", "path": "/a/c", "value": 2}, {"op": "remove", "path": "/zz"}])
    assert doc == {"a": {"b": 1}}


# --------------------------------------------------------------------------- merge patch


def test_merge_patch_labels_add_and_null_delete() -> None:
    doc = {"metadata": {"labels": {"a": "1", "b": "2"}}}
    out = merge_patch(doc, {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert out == {"metadata": {"labels": {"b": "2", "c": "3"}}}
    assert doc == {"metadata": {"labels": {"a": "1", "b": "2"}}}


def test_merge_patch_arrays_replace() -> None:
    doc = {"metadata": {"finalizers": ["a", "b"]}}
    assert merge_patch(doc, {"metadata": {"finalizers": ["c"]}}) == {"metadata": {"finalizers": ["c"]}}


def test_merge_patch_nested_nulls_in_new_subtree_are_dropped() -> None:
    out = merge_patch({}, {"spec": {"a": None, "b": {"c": None, "d": 1}}})
    assert out == {"spec": {"b": {"d": 1}}}


def test_merge_patch_scalar_replaced_by_object() -> None:
    assert merge_patch({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}


def test_merge_patch_result_shares_nothing_with_patch() -> None:
    patch = {"spec": {"list": [{"x": 1}]}}
    out = merge_patch({}, patch)
    out["spec"]["list"][0]["x"] = 2
    assert patch == {"spec": {"list": [{"x": 1}]}}


def test_merge_patch_non_object_is_400() -> None:
    with pytest.raises(PatchError) as err:
        merge_patch({}, [1])
    assert err.value.code == 400


# --------------------------------------------------------------------------- strategic merge patch


def test_smp_scalar_and_map_merge() -> None:
    doc = {"spec": {"unschedulable": False, "podCIDR": "10.0.0.0/24"}, "metadata": {"labels": {"a": "1"}}}
    out = strategic_merge_patch(
        doc, {"spec": {"unschedulable": True}, "metadata": {"labels": {"a": None, "b": "2"}}}, NODE_LISTS
    )
    assert out == {
        "spec": {"unschedulable": True, "podCIDR": "10.0.0.0/24"},
        "metadata": {"labels": {"b": "2"}},
    }


def test_smp_finalizers_add_and_delete_directive() -> None:
    doc = {"metadata": {"finalizers": ["a"]}}
    added = strategic_merge_patch(doc, {"metadata": {"finalizers": ["b", "a"]}}, NODE_LISTS)
    assert added["metadata"]["finalizers"] == ["b", "a"]  # kube-apiserver: new values first
    removed = strategic_merge_patch(
        added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, NODE_LISTS
    )
    assert removed["metadata"]["finalizers"] == ["b"]
    assert doc == {"metadata": {"finalizers": ["a"]}}


def test_smp_taints_atomic() -> None:
    doc = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]}}
    out = strategic_merge_patch(doc, {"spec": {"taints": [{"key": "c", "effect": "NoSchedule"}]}}, NODE_LISTS)
    assert out["spec"]["taints"] == [{"key": "c", "effect": "NoSchedule"}]


def test_smp_unlisted_list_is_atomic() -> None:
    out = strategic_merge_patch({"x": [1, 2]}, {"x": [3]}, {})
    assert out == {"x": [3]}


def test_smp_conditions_merge_by_type() -> None:
    doc = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "MemoryPressure", "status": "False"},
            ]
        }
    }
    out = strategic_merge_patch(
        doc, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, NODE_LISTS
    )
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "False", "reason": "KubeletReady"},
        {"type": "MemoryPressure", "status": "False"},
    ]


def test_smp_keyed_list_appends_new_and_deletes_with_directive() -> None:
    doc = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}}
    out = strategic_merge_patch(
        doc,
        {"status": {"conditions": [{"type": "C", "status": "False"}, {"type": "A", "$patch": "delete"}]}},
        NODE_LISTS,
    )
    assert out["status"]["conditions"] == [{"type": "B", "status": "True"}, {"type": "C", "status": "False"}]


def test_smp_keyed_list_missing_key_is_400() -> None:
    with pytest.raises(PatchError) as err:
        strategic_merge_patch({}, {"status": {"conditions": [{"status": "True"}]}}, NODE_LISTS)
    assert err.value.code == 400


def test_smp_nested_keyed_lists_in_containers() -> None:
    doc = {
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "image": "x:1",
                    "env": [{"name": "E1", "value": "1"}],
                    "ports": [{"containerPort": 80}],
                },
                {"name": "b", "image": "y:1"},
            ]
        }
    }
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "image": "x:2",
                    "env": [{"name": "E2", "value": "2"}],
                    "ports": [{"containerPort": 80, "name": "http"}],
                }
            ]
        }
    }
    out = strategic_merge_patch(doc, patch, POD_LISTS)
    first = out["spec"]["containers"][0]
    assert first["image"] == "x:2"
    assert first["env"] == [{"name": "E1", "value": "1"}, {"name": "E2", "value": "2"}]
    assert first["ports"] == [{"containerPort": 80, "name": "http"}]
    assert out["spec"]["containers"][1] == {"name": "b", "image": "y:1"}


def test_smp_patch_replace_on_map() -> None:
    doc = {"metadata": {"labels": {"a": "1", "b": "2"}}}
    out = strategic_merge_patch(doc, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}}, {})
    assert out["metadata"]["labels"] == {"c": "3"}


def test_smp_patch_delete_on_map() -> None:
    doc = {"spec": {"x": {"a": 1}, "y": 2}}
    out = strategic_merge_patch(doc, {"spec": {"x": {"$patch": "delete"}}}, {})
    assert out == {"spec": {"y": 2}}


def test_smp_patch_replace_on_list() -> None:
    doc = {"status": {"conditions": [{"type": "A"}, {"type": "B"}]}}
    out = strategic_merge_patch(
        doc, {"status": {"conditions": [{"$patch": "replace"}, {"type": "C"}]}}, NODE_LISTS
    )
    assert out["status"]["conditions"] == [{"type": "C"}]


def test_smp_unknown_patch_directive_is_400() -> None:
    with pytest.raises(PatchError):
        strategic_merge_patch({}, {"spec": {"$patch": "explode"}}, {})


def test_smp_set_element_order() -> None:
    doc = {"metadata": {"finalizers": ["a", "b"]}}
    out = strategic_merge_patch(
        doc, {"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"], "finalizers": ["c"]}}, NODE_LISTS
    )
    assert out["metadata"]["finalizers"] == ["c", "b", "a"]
    conds = {"status": {"conditions": [{"type": "A"}, {"type": "B"}]}}
    out = strategic_merge_patch(
        conds, {"status": {"$setElementOrder/conditions": [{"type": "B"}, {"type": "A"}]}}, NODE_LISTS
    )
    assert [c["type"] for c in out["status"]["conditions"]] == ["B", "A"]


def test_smp_retain_keys() -> None:
    doc = {"spec": {"volumes": [{"name": "v", "emptyDir": {}, "foo": 1}]}}
    patch = {
        "spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}]}
    }
    out = strategic_merge_patch(doc, patch, POD_LISTS)
    assert out["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]


def test_smp_event_aggregation_patch() -> None:
    doc = {"count": 1, "message": "m1", "lastTimestamp": "2026-01-01T00:00:00Z", "reason": "R"}
    out = strategic_merge_patch(
        doc, {"count": 2, "message": "m2", "lastTimestamp": "2026-01-01T00:01:00Z"}, {}
    )
    assert out == {"count": 2, "message": "m2", "lastTimestamp": "2026-01-01T00:01:00Z", "reason": "R"}


def test_smp_directives_stripped_from_new_subtrees() -> None:
    out = strategic_merge_patch(
        {}, {"spec": {"x": {"$patch": "replace", "a": 1}, "l": [{"$retainKeys": ["a"], "a": 1}]}}, {}
    )
    assert out == {"spec": {"x": {"a": 1}, "l": [{"a": 1}]}}


def test_smp_never_mutates_inputs() -> None:
    doc = {"status": {"conditions": [{"type": "A", "status": "True"}]}, "metadata": {"finalizers": ["x"]}}
    patch = {"status": {"conditions": [{"type": "A", "status": "False"}]}, "metadata": {"finalizers": ["y"]}}
    doc_before, patch_before = copy.deepcopy(doc), copy.deepcopy(patch)
    out = strategic_merge_patch(doc, patch, NODE_LISTS)
    out["status"]["conditions"][0]["status"] = "Unknown"
    assert doc == doc_before
    assert patch == patch_before


def test_smp_non_object_is_400() -> None:
    with pytest.raises(PatchError) as err:
        strategic_merge_patch({}, [{"op": "add"}], {})
    assert err.value.code == 400
