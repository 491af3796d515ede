"""The program's data file: members and their activity, as JSON."""

import json
from decimal import Decimal

from loyalty.store.records import Activity, Member


def load_program(path):
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    members = {m["id"]: Member(m["id"], m["name"], m.get("joined", "")) for m in raw["members"]}
    activity = [Activity(a["member"], a["date"], a["kind"], Decimal(str(a.get("amount", 0))),
                         int(a.get("points", 0)))
                for a in raw.get("activity", [])]
    unknown = {a.member for a in activity} - set(members)
    if unknown:
        raise ValueError(f"activity for unknown members: {', '.join(sorted(unknown))}")
    return {"members": members, "activity": sorted(activity, key=lambda a: a.date)}
