#!/usr/bin/env python3
"""Pull one day of logs per service from Loki into logs/<service>/."""

import argparse
import datetime
import subprocess

SERVICES = ["api-gateway", "billing-worker", "notifier"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--date", required=True)
    a = ap.parse_args()
    day = datetime.date.fromisoformat(a.date)
    for svc in SERVICES:
        out = f"logs/{svc}/{svc}-{day}.log"
        subprocess.run(
            [
                "logcli",
                "query",
                f'{{app="{svc}"}}',
                "--from",
                f"{day}T00:05:00Z",
                "--to",
                f"{day + datetime.timedelta(days=1)}T00:05:00Z",
                "-o",
                "raw",
            ],
            stdout=open(out, "w"),
            check=True,
        )


if __name__ == "__main__":
    main()
