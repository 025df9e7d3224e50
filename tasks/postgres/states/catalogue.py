#!/usr/bin/env python3
"""Deterministic generator for the `catalogue` PostgreSQL state: a music streaming catalogue.

Run as `python catalogue.py OUT.sql`. The script restores with `psql -v ON_ERROR_STOP=1`.
The mess is deliberate and is what the category's tasks are about: duplicate artist spellings,
tracks whose album was deleted, malformed and duplicated ISRCs, playlist positions with gaps and
duplicates, play events of deleted listeners and retried ingest batches, contracts that change
at month boundaries. Stdlib only, fixed seed, no clock.
"""

from __future__ import annotations

import bisect
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

SEED = 20261123
PLAY_START = datetime(2026, 7, 1, tzinfo=UTC)
PLAY_END = datetime(2026, 11, 20, tzinfo=UTC)

FIRST = (
    "Nadia Tomas Priya Lukas Amara Jonah Ingrid Mateo Yuki Femi Clara Rafael Sione Hana Oskar Leila Dmitri "
    "Aoife Kwame Marisol Theo Zainab Elias Noor Caleb Freya Ravi Sofia Malik Ines Bruno Tamsin Kenji Ada "
    "Colm Lucia Rowan Esther Idris Mei Joaquin Saoirse Tariq Vera Anders Chioma Felix Paloma Emeka Greta "
    "Sami Beatriz Ronan Yara Hugo Thandiwe Milo Zofia Arjun Lena Cyrus Odile Ezra Nia Pavel Rosa Silas Ayla"
).split()
LAST = (
    "Okafor Lindqvist Moreau Castillo Nakamura Brennan Haddad Kowalski Mensah Rossi Varga Oyelaran Delacroix "
    "Fischer Quinn Sato Abernathy Novak Ferreira Achterberg McCoy O'Neill Duarte Halvorsen Zhou Petrov Amini "
    "Whitlock Ibarra Kaur Laurent Mbeki Sandoval Tanaka Wojcik Eriksen Baptiste Costa Holm Ruiz Adeyemi Park "
    "Marchetti Delgado Lund Nwosu Strand Valdez Kimura Obi Reyes Sorensen Takahashi Vance Winter Yilmaz"
).split()
ADJ = (
    "Velvet Silver Hollow Electric Paper Golden Midnight Crimson Quiet Wild Neon Broken Lucky Lonely Bright "
    "Restless Northern Salt Amber Glass Copper Static Tender Feral Paper Distant Little Violet Sunken Lazy "
    "Burning Cold Secret Gentle Savage Marble Iron Painted Young Faded"
).split()
NOUN = (
    "Owls Tides Harbors Wolves Lanterns Satellites Foxes Rivers Engines Ghosts Parade Machines Orchards "
    "Sparrows Comets Giants Echoes Mirrors Kites Pilots Daughters Thieves Horses Anchors Moths Saints Bandits "
    "Hearts Rockets Lions Strangers Cathedrals Islands Swimmers Ravens Animals Letters Signals Valleys"
).split()
WORDS = (
    "Midnight Highway Paper Hearts Slow Burn Letters June Gravity Summer Rain Afterglow Static Honey Wire "
    "Ocean Fever Dream Small Hours Northern Lights Satellite Heartbeat Ashes Gold Silver Runaway Blue Hour "
    "Wildfire Echo Harbour Lanterns Daylight Shadow Mirror Velvet Thunder Crystal Home Stranger Sugar Rust "
    "Cathedral Ghost Tide Moonlight Glass Oxygen Tokyo Lisbon Berlin Motel Neon Prayer Comet Sundown Coffee"
).split()
TITLE_FORMS = (
    "{a} {b}",
    "{a} {b}",
    "The {a} {b}",
    "{a} of {b}",
    "{a}",
    "{a} in {b}",
    "Another {a}",
    "{a} & {b}",
    "No More {a}",
    "{a} ({b} Mix)",
    "Until the {a}",
)
COUNTRIES = ["US", "GB", "DE", "FR", "SE", "NL", "CA", "AU", "JP", "BR", "NG", "ES", "IT", "KR", "MX", "IE"]
LABELS = [
    ("Northbound Records", "US", 1998),
    ("Blue Lantern Music", "GB", 2004),
    ("Copperline Music Group", "US", 1987),
    ("Harbor & Pine Recordings", "CA", 2011),
    ("Ninth Wave Records", "GB", 1995),
    ("Glasshouse Audio", "DE", 2009),
    ("Red Kite Records", "GB", 2002),
    ("Saltmarsh Sound", "NL", 2014),
    ("Velvet Static", "US", 2016),
    ("Tidewater Label Co.", "US", 1979),
    ("Lowlight Records", "SE", 2008),
    ("Paper Crane Music", "JP", 2012),
    ("Starling Recordings", "IE", 2006),
    ("Iron Orchard", "AU", 2010),
    ("Moonrise Collective", "FR", 2017),
    ("Coastal Drift Records", "AU", 2013),
    ("Brightside Music", "US", 2001),
    ("Cinder & Ash", "GB", 2015),
    ("Fieldnote Records", "US", 2018),
    ("Hollow Oak Music", "CA", 2007),
    ("Kestrel Sound", "DE", 2019),
    ("Meridian Records", "ES", 1999),
    ("Parallax Audio", "NL", 2020),
    ("Quarry Lane Records", "GB", 2005),
    ("Riverbend Music", "US", 1992),
    ("Silver Thread Records", "IT", 2003),
    ("Sundial Recordings", "MX", 2012),
    ("Twelve Bridges", "US", 2021),
    ("Undertow Records", "BR", 2010),
    ("Wildflower Sound", "NG", 2016),
    ("Yellow Door Music", "KR", 2014),
    ("Zephyr Records", None, 2000),
    ("Atlas Beat", "US", 2022),
    ("Bramble Records", "GB", 2019),
    ("Driftwood Audio", "SE", 2023),
    ("Echo Valley Records", "US", 2026),
]
GENRES = [
    ("Pop", None),
    ("Rock", None),
    ("Hip-Hop", None),
    ("Electronic", None),
    ("R&B", None),
    ("Jazz", None),
    ("Folk", None),
    ("Classical", None),
    ("Latin", None),
    ("Country", None),
    ("Metal", "Rock"),
    ("Indie Rock", "Rock"),
    ("Alternative", "Rock"),
    ("Punk", "Rock"),
    ("Trap", "Hip-Hop"),
    ("Soul", "R&B"),
    ("House", "Electronic"),
    ("Techno", "Electronic"),
    ("Drum & Bass", "Electronic"),
    ("Ambient", "Electronic"),
    ("Lo-Fi", "Electronic"),
    ("Singer-Songwriter", "Folk"),
    ("Reggaeton", "Latin"),
    ("K-Pop", "Pop"),
    ("Afrobeats", "Pop"),
    ("Reggae", None),
    ("Blues", None),
    ("Funk", "R&B"),
    ("Gospel", None),
    ("Soundtrack", None),
]
PLAYLIST_NAMES = (
    "Morning Run|Chill Vibes|Road Trip 2026|Focus Flow|Late Night Drive|Sunday Coffee|Gym Bangers|Rainy Day|"
    "Throwbacks|Dinner Party|Study Beats|Summer 26|Heartbreak Hotel|Indie Finds|Wedding Dance Floor|Deep Work|"
    "Kitchen Disco|Sleep|Commute|Songs for Mum|Party Starters|Acoustic Evenings|New Music Friday|Old Faves|"
    "Walking the Dog|Running 10k|Cleaning the Flat|Autumn Leaves|Birthday Mix|Bus Home"
).split("|")


@dataclass
class Catalogue:
    """All rows of the state, as Python values (tests of the category recompute expectations from these)."""

    labels: list[tuple] = field(default_factory=list)
    contracts: list[tuple] = field(default_factory=list)
    tiers: list[tuple] = field(default_factory=list)
    genres: list[tuple] = field(default_factory=list)
    artists: list[tuple] = field(default_factory=list)
    albums: list[tuple] = field(default_factory=list)
    tracks: list[tuple] = field(default_factory=list)
    track_artists: list[tuple] = field(default_factory=list)
    listeners: list[tuple] = field(default_factory=list)
    subscriptions: list[tuple] = field(default_factory=list)
    playlists: list[tuple] = field(default_factory=list)
    playlist_entries: list[tuple] = field(default_factory=list)
    play_events: list[tuple] = field(default_factory=list)


def zipf_weights(n: int, s: float) -> list[float]:
    return [1.0 / (i + 1) ** s for i in range(n)]


def cumulative(weights: list[float]) -> list[float]:
    out, acc = [], 0.0
    for w in weights:
        acc += w
        out.append(acc)
    return out


def title(rng: random.Random) -> str:
    a, b = rng.sample(WORDS, 2)
    return rng.choice(TITLE_FORMS).format(a=a, b=b)


def norm_name(name: str) -> str:
    return " ".join(name.split()).lower()


def make_artist_names(rng: random.Random, n: int) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < n:
        r = rng.random()
        if r < 0.5:
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        elif r < 0.72:
            name = f"The {rng.choice(ADJ)} {rng.choice(NOUN)}"
        elif r < 0.85:
            name = f"{rng.choice(ADJ)} {rng.choice(NOUN)}"
        elif r < 0.92:
            name = f"DJ {rng.choice(FIRST)}{rng.choice(['', ' ' + rng.choice(LAST)])}"
        else:
            name = f"{rng.choice(FIRST)} & {rng.choice(FIRST)}"
        key = norm_name(name)
        bare = key.removeprefix("the ")
        if key in seen or bare in seen or ("the " + bare) in seen:
            continue
        seen.add(key)
        names.append(name)
    return names


def variant(rng: random.Random, name: str, used: set[str]) -> str:
    """A spelling of `name` that is the same artist under 'trim, collapse spaces, ignore case'."""
    forms = [
        name.upper(),
        name.lower(),
        " " + name,
        name + " ",
        name.replace(" ", "  ", 1),
        "  " + name.lower() + " ",
        name.title() if name.title() != name else name[0] + name[1:].lower(),
        name.replace(" ", "   ").upper(),
    ]
    rng.shuffle(forms)
    for f in forms:
        if f not in used and f != name:
            used.add(f)
            return f
    raise RuntimeError(name)


def decoy(name: str) -> str | None:
    """A near-duplicate that is a DIFFERENT artist under the merge rule: one letter gets an accent."""
    for a, b in (("e", "é"), ("o", "ö"), ("a", "á"), ("i", "í")):
        if a in name:
            return name.replace(a, b, 1)
    return None


def build() -> Catalogue:
    rng = random.Random(SEED)
    cat = Catalogue()

    # ---- labels, contracts, tiers
    for i, (name, cc, year) in enumerate(LABELS, start=1):
        cat.labels.append((i, name, cc, year))
    label_weights = zipf_weights(len(LABELS) - 1, 0.95) + [0.0]  # the last label (signed 2026) has no albums
    label_weights[LABELS.index(("Twelve Bridges", "US", 2021))] = 0.004
    contract_id = 0
    special = {
        "Lowlight Records": "lapsed",  # no contract in force for October 2026
        "Ninth Wave Records": "renewed",  # new contract from 2026-10-01 with other rates
        "Iron Orchard": "ends_oct",  # contract ends 2026-10-31
        "Echo Valley Records": "new",  # signed 2026-10-01, no catalogue yet
        "Atlas Beat": "none",  # never had a contract
        "Parallax Audio": "starts_nov",  # first contract starts 2026-11-01
    }

    def add_contract(label_id: int, start: date, end: date | None, min_ms: int, tiers: list[tuple[int, str]]) -> None:
        nonlocal contract_id
        contract_id += 1
        cat.contracts.append((contract_id, label_id, start, end, min_ms))
        for from_play, rate in tiers:
            cat.tiers.append((contract_id, from_play, rate))

    def rate_tiers(rank: int) -> list[tuple[int, str]]:
        base = 3900 + rng.randrange(0, 900)
        if rank < 6:
            b1 = rng.choice([601, 801, 1001, 1201])
            b2 = b1 + rng.choice([500, 700, 1000])
            return [
                (1, f"0.00{base:04d}"),
                (b1, f"0.00{base - 430 - rng.randrange(200):04d}"),
                (b2, f"0.00{base - 950 - rng.randrange(300):04d}"),
            ]
        if rank < 14 and rng.random() < 0.7:
            b1 = rng.choice([201, 301, 401, 501])
            return [(1, f"0.00{base:04d}"), (b1, f"0.00{base - 375 - rng.randrange(250):04d}")]
        return [(1, f"0.00{base + rng.randrange(0, 60):04d}")]

    for rank, (label_id, name, _, _) in enumerate(cat.labels):
        kind = special.get(name)
        min_ms = 30000 if rng.random() < 0.85 else rng.choice([20000, 45000, 60000])
        if kind == "none":
            continue
        if kind == "starts_nov":
            add_contract(label_id, date(2026, 11, 1), None, min_ms, rate_tiers(rank))
            continue
        if kind == "new":
            add_contract(label_id, date(2026, 10, 1), None, 30000, [(1, "0.004500")])
            continue
        if rng.random() < 0.6:
            add_contract(label_id, date(2023, 1, 1), date(2025, 6, 30), 30000, rate_tiers(rank))
        if kind == "lapsed":
            add_contract(label_id, date(2025, 7, 1), date(2026, 9, 30), min_ms, rate_tiers(rank))
            add_contract(label_id, date(2026, 11, 1), None, min_ms, rate_tiers(rank))
        elif kind == "renewed":
            add_contract(label_id, date(2025, 7, 1), date(2026, 9, 30), 30000, rate_tiers(rank))
            add_contract(label_id, date(2026, 10, 1), None, 45000, rate_tiers(rank))
        elif kind == "ends_oct":
            add_contract(label_id, date(2025, 7, 1), date(2026, 10, 31), min_ms, rate_tiers(rank))
        else:
            add_contract(label_id, date(2025, 7, 1), None, min_ms, rate_tiers(rank))

    # ---- genres
    gid = {name: i for i, (name, _) in enumerate(GENRES, start=1)}
    for name, parent in GENRES:
        cat.genres.append((gid[name], name, gid[parent] if parent else None))

    # ---- artists: base names, duplicate spellings, decoys
    base_names = make_artist_names(rng, 1420)
    rng.shuffle(base_names)
    used = set(base_names)
    # (name, base index): variants share their base index; decoys are -1 - base; Various Artists -99999
    artist_specs: list[tuple[str, int]] = [(n, i) for i, n in enumerate(base_names)]
    dup_bases = rng.sample(range(40, 700), 46)
    for b in dup_bases:
        for _ in range(1 if rng.random() < 0.75 else 2):
            artist_specs.append((variant(rng, base_names[b], used), b))
    decoy_count = 0
    for b in rng.sample(range(0, 900), 60):
        d = decoy(base_names[b])
        if d and norm_name(d) not in {norm_name(x) for x in used} and decoy_count < 10:
            used.add(d)
            artist_specs.append((d, -1 - b))
            decoy_count += 1
    artist_specs.append(("Various Artists", -99999))
    rng.shuffle(artist_specs)
    artist_id_of_spec: list[int] = []
    t0 = datetime(2015, 3, 1, tzinfo=UTC)
    for i, (name, _) in enumerate(artist_specs, start=1):
        created = t0 + timedelta(seconds=int(i * 200000 + rng.randrange(150000)))
        cc = rng.choice(COUNTRIES) if rng.random() < 0.9 else None
        formed = rng.randrange(1965, 2025) if rng.random() < 0.8 else None
        cat.artists.append((i, name, cc, formed, created))
        artist_id_of_spec.append(i)
    various_id = next(a[0] for a in cat.artists if a[1] == "Various Artists")
    ids_by_base: dict[int, list[int]] = {}
    for (_name, b), aid in zip(artist_specs, artist_id_of_spec, strict=True):
        if b >= 0:
            ids_by_base.setdefault(b, []).append(aid)
    # popularity follows the base index (index 0 = most popular); variants share the base's popularity
    popularity = {aid: 1.0 / (b + 3) ** 0.85 for b, ids in ids_by_base.items() for aid in ids}
    for name, b in artist_specs:
        if -99999 < b < 0:
            popularity[artist_id_of_spec[artist_specs.index((name, b))]] = 0.002

    # ---- albums
    album_specs: list[dict] = []
    for b, ids in sorted(ids_by_base.items()):
        n_albums = max(0, int(rng.paretovariate(1.6)) - (1 if rng.random() < 0.12 else 0))
        n_albums = min(n_albums + (2 if b < 30 else 0), 14)
        if len(ids) > 1:
            n_albums = max(n_albums, 2)
        owners = []
        for _ in range(n_albums):
            owners.append(ids[0] if len(ids) == 1 or rng.random() < 0.4 else rng.choice(ids))
        label_id = rng.choices(range(1, len(LABELS) + 1), weights=label_weights)[0]
        for owner in owners:
            if rng.random() < 0.2:
                label_id = rng.choices(range(1, len(LABELS) + 1), weights=label_weights)[0]
            year = min(2026, 2026 - int(rng.expovariate(0.22)))
            rd = date(year, rng.randrange(1, 13), rng.randrange(1, 29))
            if rd > date(2026, 11, 13):
                rd = date(2026, rng.randrange(1, 11), rng.randrange(1, 29))
            kind = rng.choices(["album", "single", "ep"], weights=[55, 28, 17])[0]
            album_specs.append(
                {
                    "artist": owner,
                    "label": label_id if rng.random() > 0.07 else None,
                    "title": title(rng),
                    "type": kind,
                    "date": rd if rng.random() > 0.03 else None,
                    "base": b,
                }
            )
    for d, (_name, b) in enumerate(artist_specs):
        if -99999 < b < 0 and d % 2 == 0:
            album_specs.append(
                {
                    "artist": artist_id_of_spec[d],
                    "label": None,
                    "title": title(rng),
                    "type": "single",
                    "date": date(2025, rng.randrange(1, 13), 5),
                    "base": None,
                }
            )
    # deluxe editions: same artist, same release date, same recordings
    for spec in rng.sample([s for s in album_specs if s["type"] == "album" and s["date"]], 25):
        album_specs.append({**spec, "title": spec["title"] + " (Deluxe Edition)", "deluxe_of": id(spec)})
    rng.shuffle(album_specs)
    spec_index = {id(s): i for i, s in enumerate(album_specs)}
    n_comp = 55
    comp_specs = [
        {
            "artist": various_id,
            "label": rng.choices(range(1, len(LABELS) + 1), weights=label_weights)[0],
            "title": f"{rng.choice(['Best of', 'Hits', 'Essential', 'Now That Is Music', 'Summer Hits'])} "
            f"{rng.randrange(1995, 2027)}" + rng.choice(["", " Vol. 2", " Vol. 3"]),
            "type": "compilation",
            "date": date(2026, rng.randrange(1, 11), rng.randrange(1, 28)),
            "base": None,
        }
        for _ in range(n_comp)
    ]
    all_album_specs = album_specs + comp_specs
    # album ids are ingest order; a few albums were deleted later (their ids vanish, tracks stay: orphans)
    deleted_album_positions = set(rng.sample(range(200, len(album_specs)), 16))

    # ---- tracks
    isrc_counter: dict[str, int] = {}
    label_reg = {
        lid: "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(3))
        for lid in range(1, len(LABELS) + 1)
    }

    def new_isrc(cc: str, reg: str, year: int) -> str:
        key = f"{cc}{reg}{year % 100:02d}"
        isrc_counter[key] = isrc_counter.get(key, 0) + 1
        return f"{key}{isrc_counter[key]:05d}"

    track_rows: list[dict] = []
    album_tracks: dict[int, list[dict]] = {}
    album_id = 0
    albums_by_spec: dict[int, int] = {}
    for pos, spec in enumerate(all_album_specs):
        album_id += 1 + (1 if rng.random() < 0.01 else 0)
        albums_by_spec[pos] = album_id
        spec["album_id"] = album_id
        spec["deleted"] = pos in deleted_album_positions
        a_cc = cat.artists[spec["artist"] - 1][2] or "US"
        genre = rng.randrange(1, len(GENRES) + 1)
        if spec["type"] == "compilation":
            continue
        if "deluxe_of" in spec:
            continue
        n = {"single": rng.randrange(1, 3), "ep": rng.randrange(4, 7), "album": rng.randrange(8, 17)}[spec["type"]]
        reg = label_reg.get(spec["label"]) or "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(3))
        year = spec["date"].year if spec["date"] else 2024
        rows = []
        for k in range(1, n + 1):
            dur = int(max(62000, rng.gauss(212000, 52000))) if rng.random() > 0.015 else None
            rows.append(
                {
                    "album": album_id,
                    "disc": 1,
                    "no": k,
                    "title": title(rng),
                    "dur": dur,
                    "isrc": new_isrc(a_cc, reg, year),
                    "genre": genre if rng.random() > 0.04 else None,
                    "explicit": rng.random() < 0.12,
                    "artist": spec["artist"],
                    "spec": spec,
                }
            )
        album_tracks[album_id] = rows
        track_rows.extend(rows)
    for spec in all_album_specs:
        if "deluxe_of" in spec:
            src = album_tracks[all_album_specs[spec_index[spec["deluxe_of"]]]["album_id"]]
            rows = [{**r, "album": spec["album_id"], "spec": spec} for r in src]
            rows += [
                {
                    **r,
                    "album": spec["album_id"],
                    "no": len(src) + j + 1,
                    "title": r["title"] + " (Demo)",
                    "isrc": new_isrc("GB", "DLX", 26),
                    "spec": spec,
                }
                for j, r in enumerate(src[:3])
            ]
            album_tracks[spec["album_id"]] = rows
            track_rows.extend(rows)
    live_pool = [r for r in track_rows if not r["spec"]["deleted"]]
    for spec in comp_specs:
        picks = rng.sample(live_pool, rng.randrange(10, 19))
        rows = [
            {**r, "album": spec["album_id"], "no": k, "disc": 1, "spec": spec, "comp": True}
            for k, r in enumerate(picks, start=1)
        ]
        album_tracks[spec["album_id"]] = rows
        track_rows.extend(rows)
    # re-ingested albums: a deleted album's tracks came back under a new album (same ISRCs)
    for pos in sorted(deleted_album_positions)[:6]:
        spec = all_album_specs[pos]
        new = {**spec, "deleted": False, "album_id": album_id + 1, "title": spec["title"]}
        album_id += 1
        all_album_specs.append(new)
        rows = [{**r, "album": new["album_id"], "spec": new} for r in album_tracks[spec["album_id"]]]
        album_tracks[new["album_id"]] = rows
        track_rows.extend(rows)
    # drafts: no album yet
    for _ in range(31):
        track_rows.append(
            {
                "album": None,
                "disc": 1,
                "no": None,
                "title": title(rng),
                "dur": int(rng.gauss(200000, 40000)) if rng.random() < 0.7 else None,
                "isrc": None if rng.random() < 0.6 else new_isrc("US", "DRF", 26),
                "genre": None,
                "explicit": False,
                "artist": rng.randrange(1, len(cat.artists) + 1),
                "spec": None,
            }
        )
    # data-entry errors: an ISRC copied onto an unrelated track
    for a, b in [rng.sample(range(len(track_rows)), 2) for _ in range(18)]:
        if track_rows[a]["isrc"] and track_rows[b]["spec"] and track_rows[b]["spec"]["type"] != "compilation":
            track_rows[b] = {**track_rows[b], "isrc": track_rows[a]["isrc"]}

    # ISRC mess: formatting and junk, applied per row
    def mess(isrc: str | None) -> str | None:
        if isrc is None:
            return None
        r = rng.random()
        if r < 0.04:
            return None
        if r < 0.055:
            return isrc.lower()
        if r < 0.072:
            return f"{isrc[:2]}-{isrc[2:5]}-{isrc[5:7]}-{isrc[7:]}"
        if r < 0.078:
            return f"{isrc[:2]} {isrc[2:5]} {isrc[5:7]} {isrc[7:]}"
        if r < 0.082:
            return " " + isrc if rng.random() < 0.5 else isrc + " "
        if r < 0.088:
            return rng.choice(["N/A", "PENDING", "", "TBD", isrc[:11], isrc + "0", "0", isrc[:2] + "0" + isrc[3:]])
        return isrc

    # track ids: albums are ingested in id order; tracks follow their album
    track_rows.sort(key=lambda r: (r["album"] is None, r["album"] or 0, r["disc"], r["no"] or 0))
    taken_down: set[int] = set()
    for tid, r in enumerate(track_rows, start=1):
        r["id"] = tid
        cat.tracks.append(
            (tid, r["album"], r["disc"], r["no"], r["title"], r["dur"], mess(r["isrc"]), r["genre"], r["explicit"])
        )
    live_ids = [r["id"] for r in track_rows if r["spec"] and not r["spec"]["deleted"]]
    taken_down = set(rng.sample(live_ids, 40))
    cat.tracks = [t for t in cat.tracks if t[0] not in taken_down]

    # credits: primary = album artist (compilations: the original artist); some featured artists
    all_artist_ids = [a[0] for a in cat.artists if a[0] != various_id]
    for r in track_rows:
        if r["id"] in taken_down:
            continue
        credits = {r["artist"]: "primary"}
        spec = r["spec"]
        if spec and spec.get("base") is not None and len(ids_by_base.get(spec["base"], [])) > 1 and rng.random() < 0.3:
            other = rng.choice([x for x in ids_by_base[spec["base"]] if x != r["artist"]])
            credits[other] = "featured"  # the same artist credited twice under two spellings
        elif rng.random() < 0.11:
            f = rng.choice(all_artist_ids)
            credits.setdefault(f, "featured")
            if rng.random() < 0.02:
                b = rng.choice(list(ids_by_base))
                for x in ids_by_base[b]:
                    credits.setdefault(x, "featured")
        for aid, role in credits.items():
            cat.track_artists.append((r["id"], aid, role))
    cat.track_artists.sort()

    # albums rows (deleted albums omitted)
    for spec in all_album_specs:
        if spec["deleted"]:
            continue
        upc = "".join(rng.choice("0123456789") for _ in range(12)) if rng.random() > 0.1 else None
        cat.albums.append(
            (spec["album_id"], spec["artist"], spec["label"], spec["title"], spec["type"], spec["date"], upc)
        )
    cat.albums.sort()

    # ---- listeners and subscriptions
    n_listeners = 4200
    user_seen: set[str] = set()
    deleted_listeners = set(rng.sample(range(1, n_listeners + 1), 150))
    for lid in range(1, n_listeners + 1):
        fn, ln = rng.choice(FIRST), rng.choice(LAST)
        while True:
            u = f"{fn.lower()}{rng.choice(['', '.', '_'])}{ln.lower().replace(chr(39), '')}{rng.randrange(1, 9999)}"
            if u not in user_seen:
                user_seen.add(u)
                break
        email = (
            f"{u}@{rng.choice(['mail.com', 'inbox.org', 'post.net', 'example.co'])}" if rng.random() > 0.06 else None
        )
        signed = datetime(2019, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(0, 240_000_000))
        if lid in deleted_listeners:
            continue
        cat.listeners.append(
            (
                lid,
                u,
                email,
                rng.choice(COUNTRIES) if rng.random() > 0.05 else None,
                rng.randrange(1950, 2011) if rng.random() > 0.2 else None,
                signed,
            )
        )
    sid = 0
    for lid, _, _, _, _, signed in cat.listeners:
        t = signed
        for _ in range(rng.choices([1, 2, 3], weights=[60, 30, 10])[0]):
            sid += 1
            plan = rng.choices(["free", "premium", "family", "student"], weights=[45, 35, 12, 8])[0]
            end = t + timedelta(days=rng.randrange(20, 900)) if rng.random() < 0.55 else None
            if end and end > datetime(2026, 11, 20, tzinfo=UTC):
                end = None
            cat.subscriptions.append((sid, lid, plan, t, end))
            if end is None:
                break
            t = end

    # ---- play events: popularity-skewed, only live tracks
    track_by_id = {r["id"]: r for r in track_rows}
    playable = [r for r in track_rows if r["spec"] and not r["spec"]["deleted"] and r["id"] not in taken_down]
    weights = []
    for r in playable:
        w = popularity.get(r["artist"], 0.01) * (1.0 / (r["no"] or 1) ** 0.3)
        if r.get("comp"):
            w *= 0.15
        if r["spec"]["date"] and r["spec"]["date"].year >= 2025:
            w *= 2.2
        weights.append(w)
    cw = cumulative(weights)
    listener_w = cumulative(zipf_weights(n_listeners, 0.7))
    listener_order = list(range(1, n_listeners + 1))
    rng.shuffle(listener_order)
    country_of = {x[0]: x[3] for x in cat.listeners}
    span = int((PLAY_END - PLAY_START).total_seconds())
    plays: list[tuple] = []
    n_plays = 60500
    picks = rng.choices(playable, cum_weights=cw, k=n_plays)
    lpicks = rng.choices(listener_order, cum_weights=listener_w, k=n_plays)
    for r, lid in zip(picks, lpicks, strict=True):
        sec = int((rng.random() * span) ** 0.985 * span**0.015)  # slight growth towards the end
        ts = PLAY_START + timedelta(seconds=sec)
        if rng.random() < 0.04:
            ts += timedelta(microseconds=1000 + int(rng.random() * 998000))
        plays.append(play_row(rng, r, lid, ts, country_of))
    # plays hugging month boundaries (UTC) to expose timezone and off-by-one mistakes
    for month in (8, 9, 10, 11):
        edge = datetime(2026, month, 1, tzinfo=UTC)
        for delta in (0, 0, 0, -1, -1, 1, -3600, 3600, -7 * 3600, 9 * 3600, -5 * 3600, -0.25, -0.001, 0.5):
            for _ in range(3):
                r = rng.choices(playable, cum_weights=cw)[0]
                lid = rng.choice(listener_order)
                row = play_row(rng, r, lid, edge + timedelta(seconds=delta), country_of)
                plays.append(row[:3] + (max(row[3] or 0, 95000),) + row[4:])
    # retried ingest batches: exact duplicates
    for row in rng.sample(plays, 780):
        plays.append(row)
    plays.sort(key=lambda p: (p[2], p[0] or 0, p[1]))
    cat.play_events = [(i,) + p for i, p in enumerate(plays, start=1)]

    # ---- playlists and entries
    present = [x[0] for x in cat.listeners]
    pl_cw = cumulative([w for w in weights])
    orphan_ids = [r["id"] for r in track_rows if r["spec"] and r["spec"]["deleted"]]
    entry_rows: list[list] = []
    for pid in range(1, 701):
        editorial = rng.random() < 0.08
        owner = None if editorial else rng.choice(present)
        name = ("Editorial: " if editorial else "") + rng.choice(PLAYLIST_NAMES)
        created = datetime(2021, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(0, 160_000_000))
        cat.playlists.append((pid, owner, name, editorial or rng.random() < 0.6, created))
        size = min(240, max(1, int(rng.paretovariate(1.25) * 6)))
        tracks_in = [t["id"] for t in rng.choices(playable, cum_weights=pl_cw, k=size)]
        if rng.random() < 0.06:
            tracks_in += rng.sample(orphan_ids, rng.randrange(1, 6))
        if rng.random() < 0.05:
            tracks_in += rng.sample(sorted(taken_down), rng.randrange(1, 3))
        rng.shuffle(tracks_in)
        n = len(tracks_in)
        # order in which entries were added (entry ids follow this), positions are the user's order
        legacy = rng.random() < 0.08
        add_times = sorted(created + timedelta(seconds=rng.randrange(0, 60_000_000)) for _ in range(n))
        pattern = rng.choices(["clean", "gaps", "tens", "dups", "zero"], weights=[52, 20, 10, 12, 6])[0]
        if pattern == "clean":
            positions = list(range(1, n + 1))
        elif pattern == "gaps":
            positions, p = [], 0
            for _ in range(n):
                p += rng.choice([1, 1, 1, 2, 3, 5])
                positions.append(p)
        elif pattern == "tens":
            positions = [10 * (k + 1) for k in range(n)]
        else:
            positions, p = [], 0 if pattern == "zero" else 1
            for k in range(n):
                positions.append(p)
                if rng.random() > 0.15 or k == 0:
                    p += 1
        # entries were added in a different order than they are shown
        order = list(range(n))
        if rng.random() < 0.7:
            for _ in range(max(1, n // 4)):
                i, j = rng.randrange(n), rng.randrange(n)
                order[i], order[j] = order[j], order[i]
        for k in range(n):
            at = add_times[order[k]]
            if legacy and rng.random() < 0.5:
                at = None
            elif pattern in ("dups", "zero") and k > 0 and positions[k] == positions[k - 1] and rng.random() < 0.3:
                at = entry_rows[-1][4]  # same position AND same timestamp: only entry_id breaks the tie
            entry_rows.append([pid, tracks_in[k], positions[k], order[k], at])
    # entry ids follow the time entries were added (NULL = legacy import, first)
    far = datetime(1970, 1, 1, tzinfo=UTC)
    entry_rows.sort(key=lambda e: (e[4] is not None, e[4] or far, e[0], e[3]))
    for eid, e in enumerate(entry_rows, start=1):
        cat.playlist_entries.append((eid, e[0], e[1], e[2], e[4]))
    cat.playlist_entries.sort()
    assert all(t in track_by_id for _, _, t, _, _ in cat.playlist_entries)
    return cat


SOURCES = ["playlist", "album", "search", "radio", "artist_page", None]
SOURCE_CW = cumulative([38, 24, 12, 14, 9, 3])
THRESHOLD_MS = [30000, 29999, 30001, 45000, 44999, 60000, 59999, 20000, 19999]


def play_row(rng: random.Random, r: dict, lid: int, ts: datetime, country_of: dict[int, str | None]) -> tuple:
    """One play: ~20 % skips, a few plays exactly at contract thresholds, a few NULL durations."""
    rnd = rng.random
    dur = r["dur"] or 200000
    x = rnd()
    if x < 0.2:
        ms = 1000 + int(rnd() * 29000)
    elif x < 0.215:
        ms = THRESHOLD_MS[int(rnd() * len(THRESHOLD_MS))]
    elif x < 0.22:
        ms = None
    else:
        ms = 30000 + int(rnd() * max(1, dur - 30000))
    listener = None if rnd() < 0.03 else lid
    source = SOURCES[bisect.bisect(SOURCE_CW, rnd() * SOURCE_CW[-1])]
    return (listener, r["id"], ts, ms, source, country_of.get(lid) if listener else None)


# ---------------------------------------------------------------- SQL output
SCHEMA = """
SET client_min_messages = warning;
SET TimeZone = 'UTC';

CREATE TABLE labels (
    label_id      integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    country       char(2),
    founded_year  smallint
);

CREATE TABLE label_contracts (
    contract_id    integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    label_id       integer NOT NULL REFERENCES labels (label_id),
    valid_from     date NOT NULL,
    valid_to       date,
    min_ms_played  integer NOT NULL DEFAULT 30000,
    CHECK (valid_to IS NULL OR valid_to >= valid_from)
);
COMMENT ON COLUMN label_contracts.valid_to IS 'last day the contract applies (inclusive); NULL = open-ended';
COMMENT ON COLUMN label_contracts.min_ms_played IS 'a play counts for royalties only if ms_played >= this';

CREATE TABLE contract_rate_tiers (
    contract_id    integer NOT NULL REFERENCES label_contracts (contract_id),
    from_play      integer NOT NULL CHECK (from_play >= 1),
    rate_per_play  numeric(10,6) NOT NULL,
    PRIMARY KEY (contract_id, from_play)
);
COMMENT ON TABLE contract_rate_tiers IS
    'marginal monthly tiers: the n-th qualifying play of a label in a month is paid at the rate of the tier '
    'with the greatest from_play <= n';

CREATE TABLE genres (
    genre_id         integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    name             text NOT NULL UNIQUE,
    parent_genre_id  integer REFERENCES genres (genre_id)
);

CREATE TABLE artists (
    artist_id    integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    name         text NOT NULL,
    country      char(2),
    formed_year  smallint,
    created_at   timestamptz NOT NULL
);

CREATE TABLE albums (
    album_id      integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    artist_id     integer NOT NULL REFERENCES artists (artist_id),
    label_id      integer,
    title         text NOT NULL,
    album_type    text NOT NULL CHECK (album_type IN ('album', 'single', 'ep', 'compilation')),
    release_date  date,
    upc           text
);

CREATE TABLE tracks (
    track_id      integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    album_id      integer,
    disc_number   smallint NOT NULL DEFAULT 1,
    track_number  smallint,
    title         text NOT NULL,
    duration_ms   integer CHECK (duration_ms > 0),
    isrc          text,
    genre_id      integer REFERENCES genres (genre_id),
    explicit      boolean NOT NULL DEFAULT false
);
COMMENT ON COLUMN tracks.album_id IS 'NULL while a track is a draft that is not on any release yet';

CREATE TABLE track_artists (
    track_id   integer NOT NULL REFERENCES tracks (track_id),
    artist_id  integer NOT NULL REFERENCES artists (artist_id),
    role       text NOT NULL CHECK (role IN ('primary', 'featured')),
    PRIMARY KEY (track_id, artist_id)
);

CREATE TABLE listeners (
    listener_id   integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    username      text NOT NULL UNIQUE,
    email         text,
    country       char(2),
    birth_year    smallint,
    signed_up_at  timestamptz NOT NULL
);

CREATE TABLE subscriptions (
    subscription_id  integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    listener_id      integer NOT NULL REFERENCES listeners (listener_id) ON DELETE CASCADE,
    plan             text NOT NULL CHECK (plan IN ('free', 'premium', 'family', 'student')),
    started_at       timestamptz NOT NULL,
    ended_at         timestamptz
);

CREATE TABLE playlists (
    playlist_id  integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    owner_id     integer REFERENCES listeners (listener_id) ON DELETE SET NULL,
    name         text NOT NULL,
    is_public    boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL
);
COMMENT ON COLUMN playlists.owner_id IS 'NULL for editorial playlists';

CREATE TABLE playlist_entries (
    entry_id     integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    playlist_id  integer NOT NULL,
    track_id     integer NOT NULL,
    position     integer NOT NULL,
    added_at     timestamptz
);

CREATE TABLE play_events (
    play_id      bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    listener_id  integer,
    track_id     integer NOT NULL,
    played_at    timestamptz NOT NULL,
    ms_played    integer,
    source       text,
    country      char(2)
);
COMMENT ON TABLE play_events IS 'one row per stream start, loaded in batches from the clients (UTC timestamps)';
"""

INDEXES = """
CREATE INDEX albums_artist_id_idx ON albums (artist_id);
CREATE INDEX tracks_album_id_idx ON tracks (album_id);
CREATE INDEX track_artists_artist_id_idx ON track_artists (artist_id);
CREATE INDEX subscriptions_listener_id_idx ON subscriptions (listener_id);
CREATE INDEX playlists_owner_id_idx ON playlists (owner_id);
CREATE INDEX play_events_played_at_idx ON play_events (played_at);
"""

TABLES = [
    ("labels", "label_id, name, country, founded_year", "labels"),
    ("label_contracts", "contract_id, label_id, valid_from, valid_to, min_ms_played", "contracts"),
    ("contract_rate_tiers", "contract_id, from_play, rate_per_play", "tiers"),
    ("genres", "genre_id, name, parent_genre_id", "genres"),
    ("artists", "artist_id, name, country, formed_year, created_at", "artists"),
    ("albums", "album_id, artist_id, label_id, title, album_type, release_date, upc", "albums"),
    ("tracks", "track_id, album_id, disc_number, track_number, title, duration_ms, isrc, genre_id, explicit", "tracks"),
    ("track_artists", "track_id, artist_id, role", "track_artists"),
    ("listeners", "listener_id, username, email, country, birth_year, signed_up_at", "listeners"),
    ("subscriptions", "subscription_id, listener_id, plan, started_at, ended_at", "subscriptions"),
    ("playlists", "playlist_id, owner_id, name, is_public, created_at", "playlists"),
    ("playlist_entries", "entry_id, playlist_id, track_id, position, added_at", "playlist_entries"),
    ("play_events", "play_id, listener_id, track_id, played_at, ms_played, source, country", "play_events"),
]


def copy_value(v: object) -> str:
    """One value in COPY text format (timestamps with an explicit +00 offset)."""
    if v is None:
        return "\\N"
    t = type(v)
    if t is int:
        return str(v)
    if t is bool:
        return "t" if v else "f"
    if t is datetime:
        return v.astimezone(UTC).isoformat(" ")[:-6] + "+00"
    if isinstance(v, date):
        return v.isoformat()
    s = str(v)
    if "\\" not in s and "\t" not in s and "\n" not in s and "\r" not in s:
        return s
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def write_sql(cat: Catalogue, out: Path) -> None:
    parts = [SCHEMA]
    for table, cols, attr in TABLES:
        parts.append(f"COPY {table} ({cols}) FROM stdin;\n")
        parts.append("".join("\t".join(copy_value(v) for v in row) + "\n" for row in getattr(cat, attr)))
        parts.append("\\.\n\n")
    parts.append("DO $$\nBEGIN\n")  # identity sequences continue after the loaded ids (quietly, unlike SELECT)
    for table, cols, _ in TABLES:
        pk = cols.split(",")[0]
        if table not in ("contract_rate_tiers", "track_artists"):
            parts.append(
                f"    PERFORM setval(pg_get_serial_sequence('{table}', '{pk}'), (SELECT max({pk}) FROM {table}));\n"
            )
    parts.append("END\n$$;\n")
    parts.append(INDEXES)
    out.write_text("".join(parts), encoding="utf-8")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: catalogue.py OUT.sql", file=sys.stderr)
        return 2
    write_sql(build(), Path(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
