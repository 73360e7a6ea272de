"""Command line (Typer only; no logic beyond wiring and exit codes)."""

from .app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
