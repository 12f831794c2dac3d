"""Kubernetes REST client layer: config, typed errors, list/watch contract, per-resource clients."""
