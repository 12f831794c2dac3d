"""``SelfSubjectAccessReview`` (``kubectl auth can-i``), ``SelfSubjectRulesReview`` (``kubectl auth
can-i --list``) and ``SelfSubjectReview`` (``kubectl auth whoami``): answered at once, never
stored, as the real server does.

Guarantees:

- The caller is ``system:anonymous`` (group ``system:unauthenticated``) without credentials, and
  the emulator's admin user (``system:masters``, ``system:authenticated``) with a valid bearer
  token (a request with a wrong token never gets here: it is answered 401 first).
- Every access review is allowed and the rules review grants ``*`` on everything: the emulator
  authorizes every request; the access review's ``status.reason`` says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcm.emulator.registry import ResourceType
from mcm.emulator.store import Obj

__all__ = ["ADMIN_USER", "GROUPS", "answer", "user_info"]

GROUPS = ("authorization.k8s.io", "authentication.k8s.io")
ADMIN_USER = "emulator-admin"


def user_info(headers: Mapping[str, str]) -> Obj:
    """Who the request's credentials say the caller is."""
    if headers.get("Authorization", "").startswith("Bearer "):
        return {"username": ADMIN_USER, "groups": ["system:masters", "system:authenticated"]}
    return {"username": "system:anonymous", "groups": ["system:unauthenticated"]}


def answer(rt: ResourceType, body: Obj, headers: Mapping[str, str]) -> Obj:
    """The review with its ``status`` filled in."""
    result: Obj = {
        "kind": rt.kind,
        "apiVersion": rt.group_version,
        "metadata": {"creationTimestamp": None},
    }
    if rt.kind == "SelfSubjectAccessReview":
        result["spec"] = body.get("spec") or {}
        result["status"] = {"allowed": True, "reason": "the emulator authorizes every request"}
    elif rt.kind == "SelfSubjectRulesReview":
        result["spec"] = body.get("spec") or {}
        result["status"] = {
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": False,
        }
    else:
        result["status"] = {"userInfo": user_info(headers)}
    return result
