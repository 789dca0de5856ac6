"""openadapt's seed environments, shipped as package data: `seed:NAME` on the command line."""
