"""Kubernetes e-commerce cluster: An online store runs as Kubernetes workloads in one cluster."""

from .client import KubernetesClusterEnv

__all__ = ["KubernetesClusterEnv"]
