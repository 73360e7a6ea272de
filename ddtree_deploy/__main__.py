"""`python -m ddtree_deploy` is the CLI."""

from ddtree_deploy.cli import main

main()
