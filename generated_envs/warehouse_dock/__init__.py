"""Distribution centre inbound dock: The Tilbury regional distribution centre receives trucks at seven
dock doors."""

from .client import WarehouseDockEnv

__all__ = ["WarehouseDockEnv"]
