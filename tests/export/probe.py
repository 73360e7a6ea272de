"""Run by the sandbox's python against an unpacked image: where does `import sglang` find
the package, and does Python's own loader run each module's current source?

argv: SITE_DIR (the image's site-packages, processed like a site dir: .pth, finders),
JSON list of patchset paths, then extra site dirs (the sandbox's overlay); or
`--root DIR` instead of SITE_DIR: no import, the paths are taken under DIR (the negative
control asks only what the loader runs). Prints JSON.
"""

import hashlib
import importlib.machinery
import json
import os
import site
import sys


def strings(code):
    """Every name and string constant of `code` and the code objects inside it."""
    found = set(code.co_names) | {c for c in code.co_consts if isinstance(c, str)}
    for const in code.co_consts:
        if hasattr(const, "co_consts"):
            found |= strings(const)
    return found


def main():
    if sys.argv[1] == "--root":
        root, rels = sys.argv[2], json.loads(sys.argv[3])
        out = {"file": None, "modules": {}}
    else:
        site_dir, rels = sys.argv[1], json.loads(sys.argv[2])
        for extra in sys.argv[3:]:
            site.addsitedir(extra)
        site.addsitedir(site_dir)
        import sglang

        root = os.path.dirname(sglang.__path__[0])
        out = {"file": sglang.__file__, "modules": {}}
    for rel in rels:
        path = os.path.join(root, rel)
        name = rel[:-3].replace("/", ".")
        cache = os.path.join(os.path.dirname(path), "__pycache__")
        stem = os.path.basename(path)[:-3] + "."
        names = os.listdir(cache) if os.path.isdir(cache) else []
        pycs = sorted(n for n in names if n.startswith(stem) and n.endswith(".pyc"))
        loaded = importlib.machinery.SourceFileLoader(name, path).get_code(name)
        with open(path, "rb") as fh:
            source = fh.read()
        fresh = compile(source, path, "exec", dont_inherit=True)
        out["modules"][rel] = {
            "sha256": hashlib.sha256(source).hexdigest(),
            "runs_source": strings(loaded) == strings(fresh),
            "pycs": pycs,  # listed before the loader ran (run with -B: it writes none)
        }
    print(json.dumps(out))


main()
