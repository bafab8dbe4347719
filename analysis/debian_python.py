"""Makes an analysis script run under an interpreter that has its packages.

Debian's /usr/bin/python3 has them (jobs/setup.sh installs them); another python3 first on
PATH (pyenv, conda, a venv) may not. Standard library only, so it can run before the imports
it protects: a script started by such an interpreter restarts itself under /usr/bin/python3
instead of failing on an import.
"""
import importlib
import os
import sys


def require(*modules):
    """Returns when every module imports; else re-executes the script under /usr/bin/python3,
    or exits naming the missing module."""
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError as exc:
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and \
                os.access("/usr/bin/python3", os.X_OK):
            print(f"note: {sys.executable} lacks {exc.name}; running /usr/bin/python3 instead",
                  file=sys.stderr)
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        raise SystemExit(f"{sys.argv[0]}: needs {exc.name} (Debian: jobs/setup.sh installs it)")
