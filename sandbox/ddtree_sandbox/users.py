"""Non-root login users for topology tests (sudo, ssh_config User): created once, kept.

Every sandbox sshd reads the same AuthorizedKeysFile, so a user that exists with a usable
account logs in with the sandbox's client key. sshd reads that file as the user: the caller
makes it (and its directories) readable. Creating a system user is a change to this machine;
it is done only for test users named ``ddtree-*`` and only as root.
"""

from __future__ import annotations

import os
import pwd
import subprocess


def ensure_login_user(name: str) -> int:
    """Create ``name`` (shell /bin/sh, no password, key login only) if missing; its uid."""
    if not name.startswith("ddtree-"):
        raise ValueError(f"sandbox test users are named ddtree-*, got {name!r}")
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        pass
    if os.geteuid() != 0:
        raise RuntimeError(f"creating login user {name!r} needs root")
    # '*' (not useradd's default '!'): with UsePAM no, sshd refuses a locked ('!') account.
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
         "--shell", "/bin/sh", "--password", "*", name],
        check=True, capture_output=True,
    )  # fmt: skip
    return pwd.getpwnam(name).pw_uid
