"""Host inventories: models (service: the service tables), loading, target selection."""

from ddtree_deploy.inventory.load import default_inventory_path, load_inventory, parse_inventory
from ddtree_deploy.inventory.models import Host, Inventory, SmokeSpec
from ddtree_deploy.inventory.select import select_hosts
from ddtree_deploy.inventory.service import ServiceSpec

__all__ = [
    "Host",
    "Inventory",
    "ServiceSpec",
    "SmokeSpec",
    "default_inventory_path",
    "load_inventory",
    "parse_inventory",
    "select_hosts",
]
