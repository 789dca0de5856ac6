"""Road freight contract rates: Baustoffwerke Lenz ships insulation boards from its plant in Kassel to
builders' merchants across Europe on contract lanes."""

from .client import FreightRateEnv

__all__ = ["FreightRateEnv"]
