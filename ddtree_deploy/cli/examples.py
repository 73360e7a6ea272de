"""The example block at the end of every command's help (`cli/help.py` appends it): a few
command lines a user can copy, in the order they are usually needed."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "push": (
        "ddtree-deploy plan -H ct129 -p ddtree@1.1.0          # what would change",
        "ddtree-deploy push -H ct129 -p ddtree@1.1.0",
        "ddtree-deploy push -g gpus -p ddtree --canary 1 --batch 25% --max-fail 1",
        "ddtree-deploy push --all -p ddtree --json --junit junit.xml > events.jsonl",
        "ddtree-deploy push -p ddtree --retry events.jsonl   # only the hosts that failed",
        "ddtree-deploy push -g gpus -p ddtree --gate observe   # gate measured, never rolls back",
    ),
    "plan": (
        "ddtree-deploy plan -H ct129 -p ddtree@1.1.0",
        "ddtree-deploy plan --all -p ddtree | less -S",
    ),
    "smoke": (
        "ddtree-deploy smoke -H ct129 -p ddtree@1.1.0",
        "ddtree-deploy smoke -H ct129 -s integrity -s imports",
    ),
    "rollback": (
        "ddtree-deploy rollback -H ct129",
        "ddtree-deploy rollback -H ct129 --to DEPLOY_ID   # from `status` or `backups list`",
        "ddtree-deploy rollback -g gpus --dry-run         # what would be restored",
    ),
    "recover": ("ddtree-deploy recover -H ct129   # after a run died mid-install",),
    "status": (
        "ddtree-deploy status --all",
        "ddtree-deploy status -g gpus -p ddtree --check   # exit 3 when a patch is gone",
    ),
    "history": (
        "ddtree-deploy history --all",
        "ddtree-deploy history -g gpus --last 5 --json | jq -c 'select(.stage==\"history\")'",
    ),
    "gate": (
        "ddtree-deploy gate -H ct129 --gate quick",
        "ddtree-deploy gate -H ct129 --gate full --record measurements/",
        "ddtree-deploy gate --url http://127.0.0.1:30000 --baseline canary-baseline.json",
    ),
    "hosts check": (
        "ddtree-deploy hosts check -H ct129",
        "ddtree-deploy hosts check --all --json | jq -c 'select(.stage==\"summary\")'",
    ),
    "backups list": ("ddtree-deploy backups list -H ct129",),
    "backups prune": (
        "ddtree-deploy backups prune --all --keep 3 --dry-run   # what would be deleted",
        "ddtree-deploy backups prune --all --keep 3 --yes",
    ),
    "patchset list": (
        "ddtree-deploy patchset list",
        "ddtree-deploy patchset list --json | jq -r .ref",
    ),
    "patchset lock": (
        "ddtree-deploy patchset lock ddtree@2.2.0            # a new version, never locked",
        "ddtree-deploy patchset lock --upgrade ddtree@2.2.0  # old format: add the toml record",
    ),
    "patchset verify": (
        "ddtree-deploy patchset verify ddtree@1.1.0",
        "ddtree-deploy patchset verify ddtree --json",
    ),
    "patchset new": (
        "ddtree-deploy patchset new ddtree@3.0.0 --target sglang==0.5.13.post1 "
        "--from-tree venv/lib/python3.11/site-packages --like ddtree@1.1.0",
        "ddtree-deploy patchset new ddtree@3.0.1 --target sglang==0.5.13.post1 "
        "--from-diff fix.diff --like ddtree@3.0.0",
    ),
    "patchset dedupe": ("ddtree-deploy patchset dedupe ddtree --dry-run",),
    "patchset port": (
        "ddtree-deploy patchset port ddtree@2.0.0 --to sglang==0.5.23",
        "ddtree-deploy patchset port ddtree@2.0.0 --to sglang==0.5.23 --continue",
    ),
    "export oci": (
        "ddtree-deploy export oci -p ddtree@2.1.2 --base sglang-0.5.23.tar --out out/oci",
        "skopeo copy oci:out/oci/oci docker://registry.example/sglang:ddtree-2.1.2",
    ),
    "export k8s": (
        "ddtree-deploy export k8s -p ddtree@2.1.2 --out k8s --image registry.example/sglang "
        "--digest sha256:HEX --workload sglang --args '--model-path /models/qwen'",
    ),
    "export dir": (
        "ddtree-deploy export dir -p ddtree@2.1.2 --base sglang-0.5.23.tar --out /shared/ddtree",
    ),
    "patchset diff": (
        "ddtree-deploy patchset diff ddtree@1.0.0 ddtree@1.1.0 > d.patch",
        "ddtree-deploy patchset diff ddtree@1.0.0 ddtree@1.1.0 --json | jq '.files[].change'",
    ),
}


def examples_block(command: str) -> str:
    """Return the help's example block for ``command`` ("" when it has none). `\\b` keeps
    Click from re-wrapping the lines."""
    lines = EXAMPLES.get(command)
    if not lines:
        return ""
    return "\n\n\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
