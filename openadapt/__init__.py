"""openadapt: generate, validate and train on OpenEnv environments, with an ECI curriculum."""

__version__ = "0.1.0"
