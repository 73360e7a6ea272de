"""The compile op: byte-compile the installed .py files, the bytecode owned as its source."""

import os

from .files import keep_owner, owner_of, safe_join
from .wire import Code, OpFailed
from .wire_outcomes import CompileResult


def op_compile(ctx, args):
    """py_compile each of args.paths; return a CompileResult (how many). Raises
    OpFailed(compile_failed) with {path: error} as data, or unsafe_path."""
    import py_compile

    errors = {}
    for rel in args.paths:
        full = safe_join(args.site_packages, rel)
        try:
            cached = py_compile.compile(full, doraise=True)
        except py_compile.PyCompileError as exc:
            errors[rel] = str(exc.msg).strip()[-2000:]
            continue
        if cached:  # bytecode takes its source's owner, as if its owner had compiled it
            keep_owner(os.path.dirname(cached), owner_of(os.path.dirname(full)))
            keep_owner(cached, owner_of(full))
    if errors:
        raise OpFailed(Code.COMPILE_FAILED, "py_compile failed: " + ", ".join(errors), errors)
    return CompileResult(compiled=len(args.paths))
