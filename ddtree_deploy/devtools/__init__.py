"""Checks for developers and CI (`make lint`): never imported by the product."""
