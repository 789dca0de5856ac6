"""St Brigid's hospital pharmacy stock: The pharmacy of St Brigid's, a 600-bed teaching hospital,
supplies the wards, theatres and the emergency department."""

from .client import HospitalPharmacyEnv

__all__ = ["HospitalPharmacyEnv"]
