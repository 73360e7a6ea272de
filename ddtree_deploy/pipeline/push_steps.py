"""What each stage of a push sends: its agent ops, built from the patchset, the host and
the options (pure; pipeline/push.py decides which requests go and what a failure means)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddtree_deploy.agent import Op
from ddtree_deploy.agent.host import wire
from ddtree_deploy.agent.host.wire import JournalState
from ddtree_deploy.agent.host.wire_container import ContainerFacts
from ddtree_deploy.events import Stage
from ddtree_deploy.gate.settings import GateMode, GateSettings
from ddtree_deploy.pipeline.context import HostRun, Step
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.gate_plan import AFTER_FILE, BASELINE_FILE, backup_file, gate_op
from ddtree_deploy.stages.serve_file import ServeFile


@dataclass(frozen=True)
class PushOptions:
    """How to push: who holds the lock, whether to restart, lock TTL, takeover, backups,
    and the serving gate's mode from `--gate` (None: as the [gate] tables say)."""

    holder: str
    restart: bool = True
    lock_ttl_s: float = 3600.0
    break_lock: bool = False
    keep_backups: int = 5
    smoke_sources: dict[str, str] | None = None
    gate_mode: GateMode | None = None
    # BENCH ONLY (bench/scenario_verified.py): the reference as a request of its own after
    # the suites, as before it ran beside them (bench/NOTES.md)
    reference_apart: bool = False


@dataclass(frozen=True)
class PushSteps:
    """One push to one host; site, plan and deploy_id are known once preflight passed."""

    run: HostRun
    prepared: PreparedPatchset
    opts: PushOptions
    serve: ServeFile | None
    gate: GateSettings | None = None
    site: str = ""
    plan: dict[str, str] = field(default_factory=dict)
    deploy_id: str = ""
    container: ContainerFacts | None = None  # a container host's container at preflight

    @property
    def container_fields(self) -> dict[str, str | None]:
        """What the journal records of the container (its id and image), {} without one:
        `status` compares the id with the running container's."""
        found = self.container
        return {"container_id": found.id, "image": found.image} if found else {}

    @property
    def restarts(self) -> bool:
        return self.opts.restart and self.run.host.service.kind != "none"

    @property
    def gating(self) -> bool:
        """Whether the serving gate runs: configured, and the push restarts the server."""
        return self.gate is not None and self.restarts

    @property
    def records_reference(self) -> bool:
        prepared = self.prepared
        return (
            self.restarts and prepared.lossless is not None and "server" in prepared.after_restart
        )

    @property
    def reference_beside_smoke(self) -> bool:
        """Whether the reference is recorded while the pre-restart suites run (its suite
        rides in the smoke op as `beside`; the reference stage then reports its answer)."""
        return (
            self.records_reference and bool(self.prepared.suites) and not self.opts.reference_apart
        )

    def steps(self, stages: tuple[Stage, ...]) -> list[Step]:
        """The (stage, op) pairs a request of `stages` sends in this push (empty: not sent).

        restart and health of several services interleave in the order service_ops gives
        (each service's health before the next one's restart, unless staggered).
        """
        if Stage.RESTART in stages and Stage.HEALTH in stages:
            restarting = self.service_steps()
            return [
                pair
                for stage in stages
                if stage != Stage.HEALTH
                for pair in (restarting if stage == Stage.RESTART else self._of(stage))
            ]
        return [pair for stage in stages for pair in self._of(stage)]

    def _of(self, stage: Stage) -> list[Step]:
        return [(stage, op) for op in self.stage_ops(stage)]

    def service_steps(self) -> list[Step]:
        """Every service's restart and health, in order; [] when this push restarts nothing."""
        if not self.restarts:
            return []
        return ops.service_ops(self.run.host)

    def stage_ops(self, stage: Stage) -> list[Op]:
        """The ops `stage` sends in this push; [] when the stage does not run here."""
        run, prepared, site, deploy_id = self.run, self.prepared, self.site, self.deploy_id
        sources, timeout_s = self.opts.smoke_sources or {}, prepared.smoke_timeout_s
        match stage:
            case Stage.PREFLIGHT:
                opts = self.opts
                return [
                    ops.facts_op(run.host, prepared),
                    ops.check_plan_op(prepared, run.run_id, opts.break_lock, self.serve),
                    ops.lock_op(
                        run.run_id,
                        opts.holder,
                        opts.lock_ttl_s,
                        opts.break_lock,
                        pid=run.controller_pid,
                        controller=run.controller_machine,
                    ),
                ]
            case Stage.BACKUP:
                return [ops.backup_op(deploy_id, site, prepared, self.serve)]
            case Stage.JOURNAL:
                intent = {
                    "patchset": prepared.ref,
                    "run_id": run.run_id,
                    "holder": self.opts.holder,
                    **self.container_fields,
                }
                backup = f"backups/{deploy_id}"
                return [
                    ops.journal_op(
                        deploy_id, JournalState.INSTALLING, **intent, backup=backup, files=self.plan
                    )
                ]
            case Stage.BASELINE if self.gating:
                assert self.gate is not None
                save = backup_file(deploy_id, BASELINE_FILE)
                return [gate_op(run.host, self.gate, "baseline", load=False, save_as=save)]
            case Stage.INSTALL:
                return [ops.install_op(site, prepared, deploy_id, self.serve)]
            case Stage.COMPILE:
                return [ops.compile_op(site, prepared)]
            case Stage.SMOKE if prepared.suites:
                smoke = ops.smoke_op(run.host, site, prepared, sources, timeout_s, prepared.suites)
                return [self._with_reference(smoke)]
            case Stage.REFERENCE if self.records_reference:
                return [self._reference_op()]
            case Stage.RESTART | Stage.HEALTH if self.restarts:
                return [op for name, op in ops.service_ops(run.host) if name == stage]
            case Stage.VERIFY if self.restarts and prepared.after_restart:
                after = list(prepared.after_restart)
                return [ops.smoke_op(run.host, site, prepared, sources, timeout_s, after)]
            case Stage.CANARY if self.gating:
                assert self.gate is not None
                save = backup_file(deploy_id, AFTER_FILE)
                return [gate_op(run.host, self.gate, "after", load=True, save_as=save)]
            case Stage.COMMIT:
                fields = {
                    "patchset": prepared.ref,
                    "run_id": run.run_id,
                    "holder": self.opts.holder,
                    **self.container_fields,
                }
                return [ops.journal_op(deploy_id, JournalState.COMMITTED, **fields)]
            case Stage.UNLOCK:
                return [ops.unlock_op(run.run_id)]
            case Stage.PRUNE:
                return [ops.prune_op(self.opts.keep_backups)]
        return []

    def _reference_op(self) -> Op:
        """The `server` suite in mode record: the old server, still running, gives its
        greedy outputs (if it is plain greedy)."""
        sources = self.opts.smoke_sources or {}
        server = {k: v for k, v in sources.items() if k == "server" or k.endswith(".py")}
        timeout_s = self.prepared.smoke_timeout_s
        return ops.smoke_op(
            self.run.host, self.site, self.prepared, server, timeout_s, ["server"], "record"
        )

    def _with_reference(self, smoke: Op) -> Op:
        """The pre-restart smoke op with the reference's suite beside its suites when this
        push records one (reference_beside_smoke), else `smoke` itself."""
        if not self.reference_beside_smoke:
            return smoke
        reference = wire.SmokeArgs.from_dict(self._reference_op().args)
        return Op.of(wire.SmokeArgs.from_dict(smoke.args).replace(beside=reference.suites))

    def skip_reason(self, stage: Stage) -> str | None:
        """Why a stage reported as skipped does not run in this push: `restart`, and the
        serving gate's stages when a gate is set but nothing restarts."""
        gated = stage in (Stage.BASELINE, Stage.CANARY) and self.gate is not None
        if (stage != Stage.RESTART and not gated) or self.restarts:
            return None
        why = "--no-restart" if not self.opts.restart else "service kind none"
        return f"{why}: the serving gate needs a restarted server" if gated else why
