"""`RUNTIME inspect` read whole: a container's facts for the relay (relay.py)."""

import subprocess

INSPECT_TIMEOUT_S = 60


def inspect_output(argv):
    """(exit code, the WHOLE stdout, stderr) of `RUNTIME inspect`: a real container's inspect
    is 6-10 KB of JSON, more than run_argv's 4000-character tail, and a runtime's warning on
    stderr must not end up inside the JSON. 127 when the runtime is missing."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=INSPECT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            errors="replace",
        )
    except FileNotFoundError:
        return 127, "command not found: %s" % argv[0], ""
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %ss: %s" % (INSPECT_TIMEOUT_S, argv[0])
    return done.returncode, done.stdout, done.stderr
