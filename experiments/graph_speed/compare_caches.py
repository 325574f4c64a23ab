"""Are two graph caches identical where both hold a graph? (The lean export must not change any graph.)

.venv/bin/python experiments/graph_speed/compare_caches.py OLD_CACHE NEW_CACHE
"""

import gzip
import json
import sys
from pathlib import Path


def _load(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def main(old: str, new: str) -> int:
    old_files = {p.name: p for p in Path(old).glob("*.json.gz")}
    new_files = {p.name: p for p in Path(new).glob("*.json.gz")}
    common = sorted(old_files.keys() & new_files.keys())
    differ = [n for n in common if _load(old_files[n]) != _load(new_files[n])]
    print(json.dumps({"old": len(old_files), "new": len(new_files), "common": len(common), "differ": differ}))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
