"""One op's entry in an answer: run the op, turn how it ended into plain JSON data.

Shared by the agent's own loop (main.run_ops) and the container relay's host-side ops
(relay.py), so both report an op the same way.
"""

import time

from .wire import Code, OpFailed, OpHalt, WireError

TRACEBACK_CHARS = 3000


def run_entry(name, call):
    """Run `call()` (op `name`'s work); return (entry, output).

    entry: {"op", "ok", "data", "error", "code", "duration_s"} (+ "halt", "note" when it
    halted). Never raises for the op: OpHalt, OpFailed, WireError and any other exception
    come back as the entry; output is None then.
    """
    started = time.monotonic()
    entry = {"op": name, "ok": True, "data": None, "error": None, "code": None}
    output = None
    try:
        output = call()
        entry["data"] = _plain(output)
    except OpHalt as exc:
        entry.update(halt=True, note=str(exc), code=exc.code.value, data=_plain(exc.data))
    except OpFailed as exc:
        entry.update(ok=False, error=str(exc), code=exc.code.value, data=_plain(exc.data))
    except WireError as exc:
        entry.update(ok=False, error=str(exc), code=Code.BAD_ARGS.value, data={})
    except Exception as exc:  # noqa: BLE001 - anything else still comes back as data
        import traceback

        entry.update(
            ok=False,
            error="%s: %s" % (type(exc).__name__, exc),
            code=Code.EXCEPTION.value,
            data={"traceback": traceback.format_exc()[-TRACEBACK_CHARS:]},
        )
    entry["duration_s"] = round(time.monotonic() - started, 4)
    return entry, output


def _plain(output):
    """Return an op's output as JSON-ready data (a Record becomes its dict)."""
    to_dict = getattr(output, "to_dict", None)
    return to_dict() if to_dict is not None else output
