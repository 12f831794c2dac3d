"""Realistic upstream-shaped machine API objects (as an API server returns them)."""

from __future__ import annotations

import copy
from typing import Any

_MANAGED_FIELDS = [
    {
        "apiVersion": "machine.sapcloud.io/v1alpha1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:name": {}}}, "f:spec": {"f:class": {}}},
        "manager": "machine-controller-manager",
        "operation": "Update",
        "time": "2024-05-01T10:00:00Z",
    }
]

MACHINE: dict[str, Any] = {
    "apiVersion": "machine.sapcloud.io/v1alpha1",
    "kind": "Machine",
    "metadata": {
        "annotations": {"machinepriority.machine.sapcloud.io": "3"},
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "finalizers": ["machine.sapcloud.io/machine-controller-manager"],
        "generateName": "shoot--dev--worker-z1-5f7c9-",
        "generation": 2,
        "labels": {
            "name": "shoot--dev--worker-z1",
            "node": "ip-10-250-0-12.eu-west-1.compute.internal",
            "machine-template-hash": "5f7c9",
        },
        "managedFields": _MANAGED_FIELDS,
        "name": "shoot--dev--worker-z1-5f7c9-abcde",
        "namespace": "shoot--dev",
        "ownerReferences": [
            {
                "apiVersion": "machine.sapcloud.io/v1alpha1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "MachineSet",
                "name": "shoot--dev--worker-z1-5f7c9",
                "uid": "0b7f5f7e-9a51-4c36-9a2e-7e6f8a1d2c11",
            }
        ],
        "resourceVersion": "123456",
        "uid": "6d1f2f3a-0b8e-4b5c-8e1c-2f0a9d3b4c5d",
    },
    "spec": {
        "class": {"kind": "MachineClass", "name": "shoot--dev--worker-z1-5f7c9"},
        "creationTimeout": "20m0s",
        "drainTimeout": "2h0m0s",
        "healthTimeout": "10m0s",
        "maxEvictRetries": 360,
        "nodeConditions": "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable",
        "nodeTemplate": {
            "metadata": {
                "annotations": {"worker.gardener.cloud/pool": "worker-z1"},
                "labels": {"node.kubernetes.io/role": "node", "topology.kubernetes.io/zone": "eu-west-1a"},
            },
            "spec": {
                "taints": [
                    {"effect": "NoSchedule", "key": "dedicated", "value": "gpu"},
                    {"effect": "NoExecute", "key": "special", "timeAdded": "2024-05-01T10:00:00Z"},
                ]
            },
        },
        "providerID": "aws:///eu-west-1a/i-0123456789abcdef0",
    },
    "status": {
        "conditions": [
            {
                "lastHeartbeatTime": "2024-05-01T10:20:00Z",
                "lastTransitionTime": "2024-05-01T10:05:00Z",
                "message": "kubelet is posting ready status",
                "reason": "KubeletReady",
                "status": "True",
                "type": "Ready",
            },
            {
                "lastHeartbeatTime": "2024-05-01T10:20:00Z",
                "lastTransitionTime": "2024-05-01T10:05:00Z",
                "message": "kubelet has sufficient memory available",
                "reason": "KubeletHasSufficientMemory",
                "status": "False",
                "type": "MemoryPressure",
            },
        ],
        "currentStatus": {
            "lastUpdateTime": "2024-05-01T10:06:00Z",
            "phase": "Running",
            "timeoutActive": False,
        },
        "lastKnownState": '{"instanceID":"i-0123456789abcdef0"}',
        "lastOperation": {
            "description": "Machine shoot--dev--worker-z1-5f7c9-abcde successfully joined the cluster",
            "lastUpdateTime": "2024-05-01T10:06:00Z",
            "state": "Successful",
            "type": "Create",
        },
    },
}

MACHINE_CLASS: dict[str, Any] = {
    "apiVersion": "machine.sapcloud.io/v1alpha1",
    "kind": "MachineClass",
    "metadata": {
        "creationTimestamp": "2024-05-01T09:59:00Z",
        "finalizers": ["machine.sapcloud.io/machine-controller-manager"],
        "name": "shoot--dev--worker-z1-5f7c9",
        "namespace": "shoot--dev",
        "resourceVersion": "123400",
        "uid": "1a2b3c4d-0000-4000-8000-000000000001",
    },
    "credentialsSecretRef": {"name": "cloudprovider", "namespace": "shoot--dev"},
    "nodeTemplate": {
        "architecture": "amd64",
        "capacity": {"cpu": "4", "gpu": "0", "memory": "16Gi", "ephemeral-storage": 50},
        "instanceType": "m5.xlarge",
        "region": "eu-west-1",
        "zone": "eu-west-1a",
    },
    "provider": "AWS",
    "providerSpec": {
        "ami": "ami-0123456789abcdef0",
        "blockDevices": [{"ebs": {"deleteOnTermination": True, "volumeSize": 50, "volumeType": "gp3"}}],
        "iam": {"name": "shoot--dev-nodes"},
        "machineType": "m5.xlarge",
        "networkInterfaces": [{"securityGroupIDs": ["sg-1"], "subnetID": "subnet-1"}],
        "region": "eu-west-1",
        "tags": {"kubernetes.io/cluster/shoot--dev": "1", "kubernetes.io/role/node": "1"},
    },
    "secretRef": {"name": "shoot--dev--worker-z1-5f7c9", "namespace": "shoot--dev"},
}

MACHINE_SET: dict[str, Any] = {
    "apiVersion": "machine.sapcloud.io/v1alpha1",
    "kind": "MachineSet",
    "metadata": {"name": "shoot--dev--worker-z1-5f7c9", "namespace": "shoot--dev", "generation": 1},
    "spec": {
        "machineClass": {"kind": "MachineClass", "name": "shoot--dev--worker-z1-5f7c9"},
        "minReadySeconds": 500,
        "replicas": 2,
        "selector": {"matchLabels": {"name": "shoot--dev--worker-z1", "machine-template-hash": "5f7c9"}},
        "template": {
            "metadata": {"labels": {"name": "shoot--dev--worker-z1", "machine-template-hash": "5f7c9"}},
            "spec": copy.deepcopy(MACHINE["spec"]),
        },
    },
    "status": {
        "availableReplicas": 2,
        "fullyLabeledReplicas": 2,
        "lastOperation": {},
        "machineSetCondition": [
            {"lastTransitionTime": "2024-05-01T10:00:00Z", "status": "False", "type": "ReplicaFailure"}
        ],
        "failedMachines": [
            {
                "lastOperation": {
                    "description": "Cloud provider message - quota",
                    "state": "Failed",
                    "type": "Create",
                },
                "name": "m-failed",
                "ownerRef": "shoot--dev--worker-z1-5f7c9",
                "providerID": "aws:///eu-west-1a/i-dead",
            }
        ],
        "observedGeneration": 1,
        "readyReplicas": 2,
        "replicas": 2,
    },
}

MACHINE_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "machine.sapcloud.io/v1alpha1",
    "kind": "MachineDeployment",
    "metadata": {"name": "shoot--dev--worker-z1", "namespace": "shoot--dev"},
    "spec": {
        "minReadySeconds": 500,
        "replicas": 2,
        "revisionHistoryLimit": 0,
        "selector": {
            "matchExpressions": [{"key": "name", "operator": "In", "values": ["shoot--dev--worker-z1"]}]
        },
        "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}, "type": "RollingUpdate"},
        "template": copy.deepcopy(MACHINE_SET["spec"]["template"]),
    },
    "status": {
        "availableReplicas": 2,
        "conditions": [
            {
                "lastTransitionTime": "2024-05-01T10:00:00Z",
                "lastUpdateTime": "2024-05-01T10:00:00Z",
                "message": "Deployment has minimum availability.",
                "reason": "MinimumReplicasAvailable",
                "status": "True",
                "type": "Available",
            }
        ],
        "observedGeneration": 3,
        "readyReplicas": 2,
        "replicas": 2,
        "updatedReplicas": 2,
    },
}


def fresh(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy, so a test can change a fixture freely."""
    return copy.deepcopy(obj)
