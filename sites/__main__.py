"""``python -m mcpfleet.sites``: seed data folders, print content hashes, list the sites.

python -m mcpfleet.sites seed shop DIR [--seed N] [--no-cache]
python -m mcpfleet.sites hash DIR/store.db
python -m mcpfleet.sites list
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mcpfleet.sites import SITES, build, default_seed, seed, site_info
from mcpfleet.sites.common.db import content_hash


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpfleet.sites", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_seed = sub.add_parser("seed", help="write a fresh seeded database into a data folder")
    p_seed.add_argument("site", choices=sorted(SITES))
    p_seed.add_argument("data", type=Path)
    p_seed.add_argument("--seed", type=int, default=None, help="generator seed (default: the site's own)")
    p_seed.add_argument("--no-cache", action="store_true", help="generate from scratch, bypassing the cache")
    p_hash = sub.add_parser("hash", help="content hash of a site database")
    p_hash.add_argument("db", type=Path)
    sub.add_parser("list", help="the sites, their data files and default seeds")
    args = parser.parse_args(argv)
    if args.command == "seed":
        if args.no_cache:
            args.data.mkdir(parents=True, exist_ok=True)
            path = build(args.site, args.data / site_info(args.site).db_file, args.seed)
        else:
            path = seed(args.site, args.data, args.seed)
        print(path)
    elif args.command == "hash":
        print(content_hash(args.db))
    else:
        for info in SITES.values():
            print(f"{info.name}\t{info.db_file}\tseed {default_seed(info.name)}\t{info.generator}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
