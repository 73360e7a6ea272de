"""The host side of the agent: stdlib-only modules, run by the HOST's python.

Every module here imports only the standard library and its siblings (relative imports),
so the set can travel as one payload and be imported on the host under `ddtree_agent`.
The controller imports the protocol both sides share (`wire`, `wire_results`, `record`)
and the pure helpers (`pure`); the ops and `main` run only on the host.

    wire.py          framing, result codes, OpFailed/OpHalt, typed op arguments, bundle hash
    wire_results.py  typed results: Facts, PlanResult, BackupResult, SmokeResult
    wire_capture.py  the edits op's arguments and answer (EditsArgs, EditedFile, EditsResult)
    wire_outcomes.py typed answers of lock, journal, install, compile, drift, restore, prune,
                     services, restart, health, and the data of refusals and failures
    record.py        the Record base: strict from_dict, plain to_dict
    pure.py          sha256, classify_file, apply_unified_diff
    files.py         atomic writes, journal appends, pycache removal, path checks
    state.py         Ctx, journal, lock record, backups list, the installed distribution
    locate.py        where the package really is (import spec): wheel | editable, its root
    api_key.py       the server's API key read on the host; which paths need it; redaction
    ops_plan.py      facts, check_plan, lock_acquire/lock_release, journal
    ops_files.py     backup, install, restore, prune
    ops_compile.py   compile
    drift.py         hand edits since a deploy (restore refuses them), drift (status)
    ops_service.py   restart, health (start-up watchdog)
    ops_smoke.py     smoke (the suite scripts)
    ops_service_state.py  services: each service's state now (status)
    service_watch.py the start-up watchdog's log reader; leftovers of a stopped server
    health_probe.py  one GET of a health URL, answered by its status code (no urllib)
    ops_capture.py   edits: the package's files that differ from its RECORD, and their bytes
    ops_history.py   history: the deploys the journal and its rotated files remember
    main.py          OPS table, flock, handle/run_ops, the stdin loop
    codecache.py     the compiled bundle kept in the user's cache dir (the bootstrap's loader)
"""
