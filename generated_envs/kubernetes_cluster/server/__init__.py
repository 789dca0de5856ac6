"""Server of the kubernetes_cluster environment."""
