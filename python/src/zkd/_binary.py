"""Finds the `zkd` executable: an explicit path, $ZKD_BINARY, the one this wheel installed,
or the first `zkd` on PATH."""

import os
import shutil
import sys
import sysconfig

ENV_VAR = "ZKD_BINARY"
_EXE = "zkd.exe" if os.name == "nt" else "zkd"


class BinaryNotFound(RuntimeError):
    """No `zkd` executable could be found."""


def _installed_candidates():
    # The wheel installs the binary into the scripts directory of the environment this
    # package lives in: the venv's bin/, or the user scheme's when installed with --user.
    seen = []
    for scheme in (None, "nt_user" if os.name == "nt" else "posix_user"):
        try:
            path = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if path and path not in seen:
            seen.append(path)
    exe_dir = os.path.dirname(sys.executable)
    if exe_dir not in seen:
        seen.append(exe_dir)
    return [os.path.join(d, _EXE) for d in seen]


def find_binary(explicit=None):
    """Returns the path of the `zkd` binary to run.

    Order: ``explicit``, the ``ZKD_BINARY`` environment variable, the binary installed with
    this package, then ``zkd`` on ``PATH``.
    """
    if explicit:
        if not os.path.isfile(explicit) or not os.access(explicit, os.X_OK):
            raise BinaryNotFound("zkd binary %r does not exist or is not executable" % explicit)
        return explicit
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        if not os.path.isfile(from_env) or not os.access(from_env, os.X_OK):
            raise BinaryNotFound(
                "%s=%r does not name an executable file" % (ENV_VAR, from_env)
            )
        return from_env
    for candidate in _installed_candidates():
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("zkd")
    if on_path:
        return on_path
    raise BinaryNotFound(
        "cannot find the zkd binary: install the zkd wheel, put zkd on PATH, "
        "or set %s to its path" % ENV_VAR
    )
