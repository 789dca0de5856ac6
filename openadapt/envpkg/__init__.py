"""The environment package format: manifest, loading, serving."""
