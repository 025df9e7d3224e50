#!/usr/bin/env python3
"""Generate the `retail` PostgreSQL state: a UK online homeware shop's orders and inventory.

Run as `python retail.py OUT.sql`. Deterministic (fixed seed, no clock), stdlib only. The output is a plain
SQL script for `psql -v ON_ERROR_STOP=1`: tables with keys and checks, COPY blocks, then foreign keys and
indexes (as pg_dump orders them, so restore stays fast). The mess is deliberate and the tasks rely on it:
duplicate customer accounts whose emails differ only in case or surrounding whitespace, guest checkouts,
missing phones, a closed warehouse that still holds stock, reserved stock, a pending batch of transfer
requests with typed-in SKUs, exact duplicate indexes, orders placed around midnight at month ends (which
the Europe/London offset moves into the next month) and refunds that are line-level, order-level, pending
or rejected. `build()` returns the tables so expectations can be derived from the same data.
"""

from __future__ import annotations

import random
import sys
from bisect import bisect
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from itertools import accumulate

SEED = 20250401
ORDERS_FROM = datetime(2024, 1, 1, tzinfo=UTC)
AS_OF = datetime(2025, 4, 1, tzinfo=UTC)
BATCH_FROM = datetime(2025, 3, 28, 8, 0, tzinfo=UTC)
CENT = Decimal("0.01")

Table = tuple[list[str], list[tuple]]

# (top-level category, SKU prefix, [(sub-category, product nouns, adjectives)]); no nouns = no products of its own
CATALOGUE: list[tuple[str, str, list[tuple[str, list[str], list[str]]]]] = [
    (
        "Kitchen",
        "KIT",
        [
            (
                "Cookware",
                ["Frying Pan", "Saucepan", "Casserole Dish", "Wok", "Stockpot", "Griddle Pan", "Roasting Tin"],
                ["Cast Iron", "Stainless Steel", "Non-Stick", "Enamel", "Copper", "Carbon Steel"],
            ),
            (
                "Knives & Utensils",
                ["Chef's Knife", "Bread Knife", "Paring Knife", "Spatula", "Ladle", "Tongs", "Peeler"],
                ["Damascus", "Bamboo", "Silicone", "Olive Wood", "Forged", "Ceramic"],
            ),
            (
                "Tableware",
                ["Dinner Plate", "Pasta Bowl", "Mug", "Serving Platter", "Side Plate", "Tumbler"],
                ["Stoneware", "Porcelain", "Speckled", "Hand-Glazed", "Recycled Glass", "Bone China"],
            ),
            (
                "Small Appliances",
                ["Kettle", "Toaster", "Hand Blender", "Coffee Grinder", "Milk Frother", "Food Scale"],
                ["Retro", "Brushed Steel", "Matt Black", "Compact", "Digital", "Cordless"],
            ),
        ],
    ),
    (
        "Home & Living",
        "HOM",
        [
            ("Textiles", [], []),
            (
                "Lighting",
                ["Table Lamp", "Floor Lamp", "Pendant Shade", "Wall Light", "Fairy Lights"],
                ["Rattan", "Linen", "Brass", "Opal Glass", "Ceramic", "Industrial"],
            ),
            (
                "Storage",
                ["Storage Basket", "Shoe Rack", "Under-Bed Box", "Shelf Unit", "Laundry Bin"],
                ["Seagrass", "Oak Effect", "Woven", "Stackable", "Folding", "Metal"],
            ),
            (
                "Home Fragrance",
                ["Scented Candle", "Reed Diffuser", "Room Spray", "Wax Melts"],
                ["Fig & Cassis", "Sea Salt", "Cedarwood", "Lavender", "Amber", "Fresh Linen"],
            ),
        ],
    ),
    (
        "Garden",
        "GDN",
        [
            (
                "Planters",
                ["Planter", "Window Box", "Hanging Basket", "Plant Pot Set"],
                ["Terracotta", "Galvanised", "Fibre Clay", "Glazed", "Self-Watering"],
            ),
            (
                "Garden Tools",
                ["Trowel", "Pruning Shears", "Hand Fork", "Watering Can", "Kneeler", "Hose Reel"],
                ["Stainless", "Ash Handle", "Ergonomic", "Heavy Duty", "Children's"],
            ),
            (
                "Outdoor Lighting",
                ["Solar Lantern", "Festoon Lights", "Stake Light", "Wall Lantern"],
                ["Solar", "Rechargeable", "Warm White", "Black Metal", "Colour-Changing"],
            ),
        ],
    ),
    (
        "Electronics",
        "ELE",
        [
            ("Audio", ["Audio Cable", "Headphone Stand"], ["3.5mm", "Braided", "Aluminium"]),
            (
                "Phone Accessories",
                ["Phone Case", "Wireless Charger", "Car Mount", "Power Bank", "USB-C Cable"],
                ["Clear", "MagSafe", "Leather", "20W", "Fast-Charge", "2m"],
            ),
            (
                "Computer Accessories",
                ["Laptop Stand", "Wireless Mouse", "Keyboard", "USB Hub", "Webcam"],
                ["Ergonomic", "Mechanical", "Slim", "7-Port", "1080p", "Silent"],
            ),
            (
                "Smart Home",
                ["Smart Plug", "Smart Bulb", "Video Doorbell", "Thermostat", "Motion Sensor"],
                ["Wi-Fi", "Zigbee", "Dimmable", "Battery", "Twin Pack"],
            ),
        ],
    ),
    (
        "Toys & Games",
        "TOY",
        [
            (
                "Board Games",
                ["Strategy Game", "Party Game", "Family Quiz", "Card Game", "Word Game"],
                ["Deluxe", "Travel", "Classic", "Junior", "Expansion"],
            ),
            (
                "Puzzles",
                ["Jigsaw Puzzle", "Wooden Puzzle", "3D Puzzle", "Puzzle Mat"],
                ["1000 Piece", "500 Piece", "Panoramic", "Kids'", "Gradient"],
            ),
            (
                "Building Sets",
                ["Building Set", "Marble Run", "Magnetic Tiles", "Construction Kit"],
                ["Starter", "Deluxe", "Space", "Castle", "Vehicle"],
            ),
        ],
    ),
    (
        "Sports & Outdoors",
        "SPO",
        [
            (
                "Yoga & Fitness",
                ["Yoga Mat", "Resistance Bands", "Kettlebell", "Foam Roller", "Skipping Rope"],
                ["Cork", "Eco", "6mm", "Weighted", "Non-Slip"],
            ),
            (
                "Camping",
                ["Camping Mug", "Head Torch", "Sleeping Bag", "Dry Bag", "Camping Stove"],
                ["Enamel", "Rechargeable", "3-Season", "20L", "Lightweight"],
            ),
            (
                "Cycling",
                ["Bike Light Set", "Bike Lock", "Saddle Bag", "Mini Pump", "Bottle Cage"],
                ["USB", "D-Lock", "Waterproof", "Alloy", "Carbon"],
            ),
        ],
    ),
    (
        "Beauty & Personal Care",
        "BEA",
        [
            (
                "Skincare",
                ["Face Serum", "Moisturiser", "Cleansing Balm", "Sheet Mask", "Eye Cream"],
                ["Vitamin C", "Hyaluronic", "Rose", "Unscented", "Night"],
            ),
            (
                "Haircare",
                ["Shampoo Bar", "Hair Oil", "Wide-Tooth Comb", "Silk Scrunchies", "Hair Mask"],
                ["Argan", "Coconut", "Bamboo", "Mulberry", "Repair"],
            ),
            (
                "Fragrance",
                ["Eau de Parfum", "Body Mist", "Solid Perfume", "Discovery Set"],
                ["Neroli", "Oud", "Peony", "Vetiver", "Citrus"],
            ),
        ],
    ),
    (
        "Stationery & Office",
        "STA",
        [
            (
                "Notebooks",
                ["Notebook", "Bullet Journal", "Planner", "Sketchbook"],
                ["A5 Dotted", "A4 Lined", "Weekly", "Linen Cover", "Recycled"],
            ),
            (
                "Pens & Pencils",
                ["Fountain Pen", "Gel Pen Set", "Pencil Set", "Fineliner Set", "Highlighters"],
                ["Brass", "Pastel", "Graphite", "0.4mm", "Refillable"],
            ),
            (
                "Desk Organisers",
                ["Desk Tidy", "Letter Tray", "Monitor Riser", "Cable Organiser"],
                ["Walnut", "Acrylic", "Felt", "Cork", "Steel Mesh"],
            ),
        ],
    ),
]
# third level: (parent sub name, leaf name, nouns, adjectives)
THIRD_LEVEL = [
    (
        "Audio",
        "Headphones",
        ["Over-Ear Headphones", "Earbuds", "Kids' Headphones"],
        ["Wireless", "Noise-Cancelling", "Sport", "Wired"],
    ),
    (
        "Audio",
        "Speakers",
        ["Bluetooth Speaker", "Soundbar", "Smart Speaker"],
        ["Portable", "Waterproof", "Mini", "2.1"],
    ),
    (
        "Textiles",
        "Bedding",
        ["Duvet Cover Set", "Fitted Sheet", "Pillowcases", "Duvet"],
        ["Washed Linen", "Percale", "Brushed Cotton", "Seersucker", "Double", "King"],
    ),
    (
        "Textiles",
        "Cushions & Throws",
        ["Cushion", "Throw", "Bolster", "Seat Pad"],
        ["Boucle", "Velvet", "Chunky Knit", "Herringbone", "Faux Fur"],
    ),
]
TOP_LEVEL_PRODUCTS = {
    "Stationery & Office": ["E-Gift Card", "Gift Wrap Bundle"],
    "Kitchen": ["Kitchen Gift Hamper"],
    "Home & Living": ["Home Gift Box"],
    "Toys & Games": ["Mystery Toy Box"],
}

FIRST = (
    "Olivia Amelia Isla Ava Mia Ivy Lily Isabella Rosie Sophia Grace Freya Willow Florence Emily Ella Poppy "
    "Evie Elsie Charlotte Evelyn Sienna Sofia Daisy Phoebe Harper Chloe Alice Ruby Matilda Jessica Hannah Sarah "
    "Emma Laura Rebecca Amy Zara Aisha Priya Nia Siobhan Aoife Niamh Mairi Eilidh Catrin Megan Noah Oliver "
    "George Arthur Muhammad Leo Harry Oscar Archie Henry Theodore Freddie Jack Charlie Theo Alfie Jacob Thomas "
    "Finley Arlo William Lucas Tommy Isaac James Daniel Samuel Joseph David Michael Christopher Matthew Andrew "
    "Ryan Ben Tom Sam Liam Callum Connor Rhys Dylan Ewan Fraser Kieran Ravi Arjun Omar Ali Yusuf Hamza Kwame "
    "Tunde Chen Wei Hiroshi Piotr Marek Luca Mateo"
).split()
LAST = (
    "Smith Jones Taylor Brown Williams Wilson Johnson Davies Robinson Wright Thompson Evans Walker White Roberts "
    "Green Hall Wood Jackson Clarke Patel Khan Lewis James Phillips Mason Mitchell Rose Davis Rodriguez Cox "
    "Alexander Morgan Moore Mills King Anderson Harris Martin Shaw Lee Ward Cooper Young Hughes Edwards Baker "
    "Turner Hill Murphy O'Brien O'Connor McDonald MacLeod Campbell Stewart Murray Kelly Reid Ross Fraser Scott "
    "Begum Hussain Ahmed Singh Kaur Sharma Shah Ali Chowdhury Nguyen Chen Wang Kowalski Nowak Novak Rossi "
    "Fernandes Silva Costa Okafor Mensah Adeyemi Osei Lindqvist Jensen Dubois Moreau Fischer Weber Schmidt "
    "Harrison Gibson Marshall Owen Lloyd Price Bennett Fox Holmes Palmer Stevens Bailey Parker Collins Bell "
    "Russell Hunt Knight Webb Simpson Dixon Pearson Ellis Fletcher Lawrence Porter Hart Chapman Barnes "
    "Sutherland Quinn Doyle Byrne Gallagher Kennedy Fitzgerald Brennan"
).split()
DOMAINS = (
    ["gmail.com"] * 34
    + ["hotmail.co.uk"] * 14
    + ["outlook.com"] * 10
    + ["yahoo.co.uk"] * 8
    + ["btinternet.com"] * 6
    + ["icloud.com"] * 9
    + ["sky.com"] * 3
    + ["live.co.uk"] * 5
    + ["protonmail.com"] * 2
    + ["virginmedia.com"] * 3
    + ["me.com"] * 2
    + ["talktalk.net"] * 2
    + ["aol.com", "nhs.net", "ed.ac.uk"]
)
AREAS = [
    ("SW", "London"),
    ("SE", "London"),
    ("N", "London"),
    ("E", "London"),
    ("W", "London"),
    ("M", "Manchester"),
    ("B", "Birmingham"),
    ("LS", "Leeds"),
    ("G", "Glasgow"),
    ("EH", "Edinburgh"),
    ("BS", "Bristol"),
    ("CF", "Cardiff"),
    ("L", "Liverpool"),
    ("NE", "Newcastle upon Tyne"),
    ("S", "Sheffield"),
    ("NG", "Nottingham"),
    ("OX", "Oxford"),
    ("CB", "Cambridge"),
    ("BN", "Brighton"),
    ("EX", "Exeter"),
    ("BT", "Belfast"),
    ("AB", "Aberdeen"),
    ("YO", "York"),
    ("PL", "Plymouth"),
]
STREETS = (
    "High Street, Station Road, Church Lane, Victoria Road, Park Avenue, Mill Lane, Queen Street, King's Road, "
    "The Crescent, Orchard Close, Manor Way, Green Lane, Albert Road, Windsor Drive, Meadow View, Beech Grove, "
    "Elm Terrace, Castle Street, Bridge Street, Chapel Row, Hawthorn Close, Riverside Walk"
).split(", ")
SUPPLIERS = [
    ("Northbridge Trading Ltd", "GB"),
    ("Hartwell & Sons", "GB"),
    ("Lumen Home BV", "NL"),
    ("Kagawa Ceramics", "JP"),
    ("Shenzhen Brightway Electronics", "CN"),
    ("Atelier Provence SARL", "FR"),
    ("Nordic Form AB", "SE"),
    ("Greenleaf Garden Supplies", "GB"),
    ("Porto Tableware Lda", "PT"),
    ("Bavaria Küchen GmbH", "DE"),
    ("Tidewater Textiles", "IN"),
    ("Pennine Outdoor Co", "GB"),
    ("Ningbo Evergreen Crafts", "CN"),
    ("Clarity Beauty Labs", "GB"),
    ("Playwise Toys Ltd", "GB"),
    ("Inkwell Stationers", "GB"),
    ("Vistula Home Sp. z o.o.", "PL"),
    ("Sunrise Audio Ltd", "HK"),
    ("Copperfield Kitchenware", "GB"),
    ("Hanoi Handcraft JSC", "VN"),
    ("Alpine Active GmbH", "AT"),
    ("Mediterranean Candle Co", "ES"),
    ("Brightside Lighting", "GB"),
    ("Kerala Coir Works", "IN"),
    ("Solent Smart Living", "GB"),
]
WAREHOUSES = [
    (1, "LON1", "London Park Royal DC", "London", True),
    (2, "MAN1", "Manchester Trafford DC", "Manchester", True),
    (3, "BHX1", "Birmingham Hub", "Birmingham", True),
    (4, "GLA1", "Glasgow Store Room", "Glasgow", False),
    (5, "BRS1", "Bristol Avonmouth DC", "Bristol", True),
]
GLA_CLOSED = datetime(2024, 11, 30, tzinfo=UTC)
BRS_OPENED = datetime(2024, 10, 1, tzinfo=UTC)
STAFF = ["a.okafor", "j.patel", "m.lindqvist", "s.reid", "t.nguyen", "r.hughes", "ops-bot"]


def money(x: Decimal | float | str) -> Decimal:
    """Round half up to pennies, as the shop's checkout does."""
    return Decimal(str(x)).quantize(CENT, rounding=ROUND_HALF_UP)


def line_amount(qty: int, price: Decimal, discount_pct: Decimal) -> Decimal:
    """A line's charged amount, rounded per line (the checkout rounds each line before summing)."""
    return (qty * price * (1 - discount_pct / 100)).quantize(CENT, rounding=ROUND_HALF_UP)


class Picker:
    """Fast weighted sampling with precomputed cumulative weights."""

    def __init__(self, rng: random.Random, items: list, weights: list[float]) -> None:
        self.rng, self.items, self.cum = rng, items, list(accumulate(weights))

    def __call__(self) -> object:
        return self.items[bisect(self.cum, self.rng.random() * self.cum[-1])]


def rand_time(rng: random.Random, start: datetime, end: datetime) -> datetime:
    return start + timedelta(seconds=rng.randrange(int((end - start).total_seconds())))


def build_catalogue(rng: random.Random) -> tuple[Table, Table, Table, dict[int, float]]:
    """Categories (three levels in places, ids not in tree order), suppliers and products."""
    nodes: list[tuple[str, str | None, list[str], list[str], str]] = []  # name, parent, nouns, adjs, prefix
    for top, prefix, subs in CATALOGUE:
        nodes.append((top, None, [], [], prefix))
        for sub, nouns, adjs in subs:
            nodes.append((sub, top, nouns, adjs, prefix))
    for parent, leaf, nouns, adjs in THIRD_LEVEL:
        prefix = next(n[4] for n in nodes if n[0] == parent)
        nodes.append((leaf, parent, nouns, adjs, prefix))
    ids = list(range(1, len(nodes) + 1))
    rng.shuffle(ids)
    cat_id = {n[0]: i for n, i in zip(nodes, ids, strict=True)}
    categories = [
        (
            cat_id[n[0]],
            n[0],
            cat_id[n[1]] if n[1] else None,
            n[0].lower().replace(" & ", "-").replace("'", "").replace(" ", "-"),
        )
        for n in nodes
    ]
    categories.sort()
    suppliers = [
        (i + 1, name, country, f"orders@{name.split()[0].lower()}.example")
        for i, (name, country) in enumerate(SUPPLIERS)
    ]
    specs: list[tuple[int, str, str, bool]] = []  # category id, prefix, name, is plain
    for name, _parent, nouns, adjs, prefix in nodes:
        if nouns:
            seen: set[str] = set()
            for _ in range(rng.randint(12, 22)):
                pname = f"{rng.choice(adjs)} {rng.choice(nouns)}"
                if rng.random() < 0.3:
                    pname += rng.choice(
                        [
                            " - Small",
                            " - Large",
                            " - Set of 2",
                            " - Set of 4",
                            " - Sage",
                            " - Charcoal",
                            " - Oat",
                            " - Navy",
                            " - Terracotta",
                        ]
                    )
                if pname not in seen:
                    seen.add(pname)
                    specs.append((cat_id[name], prefix, pname, False))
        for pname in TOP_LEVEL_PRODUCTS.get(name, []):
            specs.append((cat_id[name], prefix, pname, True))
    rng.shuffle(specs)
    products, skus = [], set()
    for pid, (cid, prefix, pname, plain) in enumerate(specs, 1):
        sku = f"{prefix}-{rng.randint(10000, 99999)}"
        while sku in skus:
            sku = f"{prefix}-{rng.randint(10000, 99999)}"
        skus.add(sku)
        price = Decimal(rng.choice([5, 8, 10, 12, 15, 18, 20, 24, 25, 30, 35, 40, 45, 50, 60, 75, 90, 120]))
        price = price - Decimal(rng.choice(["0.01", "0.05", "0.50", "0.01", "0.00"]))
        if plain:
            price = Decimal(rng.choice([25, 30, 50]))
        cost = money(price * Decimal(rng.uniform(0.35, 0.6)))
        supplier = None if plain or rng.random() < 0.03 else rng.randint(1, len(suppliers))
        created = rand_time(rng, datetime(2021, 6, 1, tzinfo=UTC), datetime(2024, 9, 1, tzinfo=UTC))
        active = rng.random() > 0.05
        products.append((pid, sku, pname, cid, supplier, price, cost, active, created))
    weights = {p[0]: 1.0 / (rank**1.05) for rank, p in enumerate(rng.sample(products, len(products)), 1)}
    cols_c = ["category_id", "name", "parent_id", "slug"]
    cols_s = ["supplier_id", "name", "country_code", "contact_email"]
    cols_p = [
        "product_id",
        "sku",
        "name",
        "category_id",
        "supplier_id",
        "unit_price",
        "unit_cost",
        "is_active",
        "created_at",
    ]
    return (cols_c, categories), (cols_s, suppliers), (cols_p, products), weights


def email_variant(rng: random.Random, email: str) -> str:
    local, domain = email.split("@")
    kind = rng.randrange(7)
    if kind == 0:
        return email.upper()
    if kind == 1:
        return ".".join(p.capitalize() for p in local.split(".")) + "@" + domain
    if kind == 2:
        return email + " "
    if kind == 3:
        return " " + email
    if kind == 4:
        return local + "@" + domain.capitalize()
    if kind == 5:
        return ".".join(p.capitalize() for p in local.split(".")) + "@" + domain + "  "
    return local.capitalize() + "@" + domain.upper()


def phone(rng: random.Random) -> str:
    n = f"7{rng.randint(100, 999)}{rng.randint(100000, 999999)}"
    return rng.choice([f"0{n}", f"+44 {n[:4]} {n[4:]}", f"0{n[:4]} {n[4:]}", f"+44{n}"])


def build_customers(rng: random.Random) -> tuple[Table, list[tuple], dict[int, float]]:
    """Registered customers, duplicate accounts (same email up to case/whitespace) and look-alike decoys."""
    base: list[list] = []
    taken: set[str] = set()
    while len(base) < 5600:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        fl, ll = first.lower(), last.lower().replace("'", "")
        local = rng.choice(
            [
                f"{fl}.{ll}",
                f"{fl}{ll}",
                f"{fl[0]}.{ll}",
                f"{fl}.{ll}{rng.randint(1, 99)}",
                f"{fl}_{ll}",
                f"{ll}.{fl}",
                f"{fl}{rng.randint(70, 99)}",
            ]
        )
        email = f"{local}@{rng.choice(DOMAINS)}"
        if email in taken:
            continue
        taken.add(email)
        if rng.random() < 0.06:  # stored as typed, but unique
            email = email.capitalize() if rng.random() < 0.5 else local.title() + email[len(local) :]
        created = rand_time(rng, datetime(2019, 3, 1, tzinfo=UTC), datetime(2025, 3, 20, tzinfo=UTC))
        base.append([email, first, last, phone(rng) if rng.random() < 0.7 else None, created, rng.random() < 0.42])
    # look-alikes that are NOT the same address: plus-addressing and gmail dots
    gmail = [b for b in base if b[0].endswith("@gmail.com") and "." in b[0].split("@")[0]]
    for b in rng.sample(gmail, 16):
        local = b[0].split("@")[0]
        alt = f"{local}+shop@gmail.com" if rng.random() < 0.5 else f"{local.replace('.', '')}@gmail.com"
        if alt.lower() not in taken:
            taken.add(alt.lower())
            base.append([alt, b[1], b[2], None, rand_time(rng, b[4], AS_OF - timedelta(days=12)), False])
    base.sort(key=lambda r: r[4])
    rows = [(i + 1, *r) for i, r in enumerate(base)]
    # duplicate accounts: appended later (legacy import and guests who registered again)
    dups: list[tuple] = []
    stored = {r[1] for r in rows}
    next_id = len(rows) + 1
    for orig in rng.sample(rows, 250):
        for _ in range(2 if rng.random() < 0.12 else 1):
            r = rng.random()
            if r < 0.82:
                created = (
                    rand_time(rng, orig[5] + timedelta(days=1), AS_OF - timedelta(days=5))
                    if orig[5] < AS_OF - timedelta(days=8)
                    else orig[5] + timedelta(hours=3)
                )
            elif r < 0.95:
                created = rand_time(rng, datetime(2018, 6, 1, tzinfo=UTC), orig[5])
            else:
                created = orig[5]
            email = email_variant(rng, orig[1].strip().lower())
            while email in stored:
                email = email_variant(rng, orig[1].strip().lower()) + " "
            stored.add(email)
            ph = phone(rng) if rng.random() < 0.6 else None
            dups.append(
                (
                    next_id,
                    email,
                    orig[2],
                    orig[3] if rng.random() < 0.9 else orig[3][:1],
                    ph,
                    created,
                    rng.random() < 0.4,
                )
            )
            next_id += 1
    customers = rows + dups
    # make the phone-fill rule matter: some survivors without a phone while a duplicate has one
    by_key: dict[str, list[int]] = {}
    for c in customers:
        by_key.setdefault(c[1].strip().lower(), []).append(c[0])
    cust = {c[0]: list(c) for c in customers}
    for members in by_key.values():
        if len(members) > 1 and rng.random() < 0.3:
            surv = min(members, key=lambda i: (cust[i][5], i))
            cust[surv][4] = None
            for m in members:
                if m != surv and rng.random() < 0.7:
                    cust[m][4] = phone(rng)
    customers = [tuple(cust[i]) for i in sorted(cust)]
    weights = {c[0]: rng.lognormvariate(0, 1.1) for c in customers}
    cols = ["customer_id", "email", "first_name", "last_name", "phone", "created_at", "marketing_opt_in"]
    return (cols, customers), customers, weights


def postcode(rng: random.Random) -> tuple[str, str]:
    area, city = rng.choice(AREAS)
    letters = "ABDEFGHJLNPQRSTUWXYZ"
    return f"{area}{rng.randint(1, 28)} {rng.randint(1, 9)}{rng.choice(letters)}{rng.choice(letters)}", city


def build_addresses(rng: random.Random, customers: list[tuple]) -> tuple[Table, dict[int, int]]:
    rows, default_ship = [], {}
    for c in customers:
        if rng.random() > 0.82:
            continue
        kinds = [("shipping", True)]
        if rng.random() < 0.3:
            kinds.append(("billing", True))
        if rng.random() < 0.15:
            kinds.append(("shipping", False))
        for kind, default in kinds:
            pc, city = postcode(rng)
            line2 = rng.choice([None, None, None, f"Flat {rng.randint(1, 40)}", "Unit 3", "c/o Reception"])
            created = c[5] + timedelta(minutes=rng.randint(2, 60 * 24 * 200))
            aid = len(rows) + 1
            rows.append(
                (
                    aid,
                    c[0],
                    kind,
                    f"{c[2]} {c[3]}",
                    f"{rng.randint(1, 220)} {rng.choice(STREETS)}",
                    line2,
                    city,
                    pc,
                    "GB" if rng.random() > 0.02 else "IE",
                    default,
                    min(created, AS_OF),
                )
            )
            if kind == "shipping" and default:
                default_ship[c[0]] = aid
    cols = [
        "address_id",
        "customer_id",
        "kind",
        "recipient_name",
        "line1",
        "line2",
        "city",
        "postcode",
        "country_code",
        "is_default",
        "created_at",
    ]
    return (cols, rows), default_ship


def order_times(rng: random.Random, n: int) -> list[datetime]:
    """Placement times with seasonality, evening peaks and planted month-end-midnight orders."""
    days, weights = [], []
    d = ORDERS_FROM
    while d < AS_OF:
        w = 1.0
        if d.month == 11:
            w = 1.5 if not (22 <= d.day <= 29) else 3.0
        elif d.month == 12:
            w = 2.0 if d.day <= 20 else 0.8
        elif d.month == 1:
            w = 1.3
        elif d.month in (7, 8):
            w = 0.85
        days.append(d)
        weights.append(w)
        d += timedelta(days=1)
    pick_day = Picker(rng, days, weights)
    hours = list(range(24))
    pick_hour = Picker(
        rng,
        hours,
        [
            0.3,
            0.2,
            0.1,
            0.1,
            0.1,
            0.2,
            0.5,
            0.8,
            1,
            1.2,
            1.3,
            1.3,
            1.5,
            1.4,
            1.2,
            1.1,
            1.1,
            1.2,
            1.5,
            1.9,
            2.2,
            2.1,
            1.6,
            0.9,
        ],
    )
    out = [
        pick_day() + timedelta(hours=pick_hour(), minutes=rng.randrange(60), seconds=rng.randrange(60))
        for _ in range(n)
    ]
    # month ends: 23:xx UTC is already next month in London during BST (not in GMT months)
    for y, m in [
        (2024, 3),
        (2024, 4),
        (2024, 5),
        (2024, 6),
        (2024, 7),
        (2024, 8),
        (2024, 9),
        (2024, 10),
        (2024, 11),
        (2024, 12),
        (2025, 1),
        (2025, 2),
    ]:
        first_next = datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=UTC)
        for _ in range(rng.randint(2, 4)):
            out.append(first_next - timedelta(minutes=rng.randint(1, 59), seconds=rng.randrange(60)))
        out.append(first_next - timedelta(hours=1))  # exactly 00:00 London in BST
    out.append(datetime(2025, 3, 31, 23, 0, tzinfo=UTC) - timedelta(hours=4))
    return sorted(out)


def make_refund(
    rng: random.Random, oid: int, line_id: int | None, amount: Decimal, reason: str, status: str, after: datetime
) -> tuple | None:
    """A refund row; approvals that would land after the as-of date are still pending."""
    requested = after + timedelta(hours=rng.randint(20, 24 * 12), minutes=rng.randrange(60))
    done = requested + timedelta(hours=rng.randint(3, 24 * 6)) if status == "approved" else None
    if requested >= AS_OF:
        return None
    if done and done >= AS_OF:
        status, done = "pending", None
    return (oid, line_id, amount, reason, status, requested, done)


def build_orders(
    rng: random.Random,
    customers: list[tuple],
    cweights: dict[int, float],
    default_ship: dict[int, int],
    products: list[tuple],
    pweights: dict[int, float],
) -> dict[str, Table]:
    times = order_times(rng, 17950)
    pick_cust = Picker(rng, [c for c in customers], [cweights[c[0]] for c in customers])
    pick_prod = Picker(rng, products, [pweights[p[0]] for p in products])
    old_price = {p[0]: money(p[5] * Decimal("0.92")) for p in products if rng.random() < 0.3}
    pick_lines = Picker(rng, [1, 2, 3, 4, 5, 6], [40, 27, 15, 9, 5, 4])
    pick_qty = Picker(rng, [1, 2, 3, 4, 6], [70, 18, 6, 4, 2])
    pick_disc = Picker(rng, [Decimal(d) for d in ("0", "5", "10", "12.5", "15", "20", "33.33")], [78, 5, 6, 3, 3, 3, 2])
    pick_method = Picker(rng, ["card", "paypal", "klarna", "gift_card"], [70, 18, 8, 4])
    pick_carrier = Picker(rng, ["Royal Mail", "DPD", "Evri", "DHL"], [40, 30, 20, 10])
    pick_wh = {
        era: Picker(rng, [w for w, _ in whs], [x for _, x in whs])
        for era, whs in (
            (0, [(1, 45), (2, 25), (3, 15), (4, 10)]),
            (1, [(1, 45), (2, 25), (3, 15), (4, 10), (5, 12)]),
            (2, [(1, 45), (2, 25), (3, 15), (5, 12)]),
        )
    }
    orders, lines, payments, refunds, shipments = [], [], [], [], []
    tracking: set[str] = set()
    for oid, placed in enumerate(times, 1):
        cust = None
        if rng.random() > 0.12:
            for _ in range(8):
                c = pick_cust()
                if c[5] <= placed:
                    cust = c
                    break
        guest_email = None
        if cust is None:
            if rng.random() < 0.1:
                guest_email = email_variant(rng, rng.choice(customers)[1].strip().lower()).strip()
            else:
                guest_email = (
                    f"{rng.choice(FIRST).lower()}.{rng.choice(LAST).lower().replace(chr(39), '')}"
                    f"{rng.randint(1, 999)}@{rng.choice(DOMAINS)}"
                )
        age = AS_OF - placed
        r = rng.random()
        if age < timedelta(days=2):
            status = "pending" if r < 0.4 else "paid"
        elif age < timedelta(days=6):
            status = "paid" if r < 0.2 else ("shipped" if r < 0.85 else "delivered")
        else:
            status = (
                "delivered"
                if r < 0.895
                else "cancelled"
                if r < 0.935
                else "failed"
                if r < 0.955
                else "refunded"
                if r < 0.98
                else "shipped"
            )
        wh = pick_wh[0 if placed < BRS_OPENED else 1 if placed < GLA_CLOSED else 2]()
        fee = Decimal(rng.choice(["0.00", "0.00", "3.95", "4.99", "4.99", "6.95"]))
        n_lines = pick_lines()
        chosen: list[tuple] = []
        while len(chosen) < n_lines:
            p = pick_prod()
            if p not in chosen:
                chosen.append(p)
        total = fee
        my_lines = []
        for ln, p in enumerate(chosen, 1):
            qty = pick_qty()
            price = old_price.get(p[0], p[5]) if placed < datetime(2024, 7, 1, tzinfo=UTC) else p[5]
            disc = pick_disc()
            lid = len(lines) + 1
            lines.append((lid, oid, ln, p[0], qty, price, disc))
            amt = line_amount(qty, price, disc)
            my_lines.append((lid, amt))
            total += amt
        if oid % 997 == 0:  # legacy import bug: stored total does not match the lines
            total += Decimal("10.00")
        orders.append(
            (
                oid,
                f"R{1000000 + oid * 3 + rng.randrange(3)}",
                cust[0] if cust else None,
                guest_email,
                status,
                placed,
                wh,
                default_ship.get(cust[0]) if cust else None,
                fee,
                total,
            )
        )
        paid_at = placed + timedelta(seconds=rng.randint(5, 600))
        method = pick_method()
        if status == "failed":
            payments.append((oid, method, total, "failed", paid_at))
        elif status != "pending":
            if rng.random() < 0.03:
                payments.append((oid, "card", total, "failed", paid_at - timedelta(seconds=90)))
            payments.append((oid, method, total, "voided" if status == "cancelled" else "captured", paid_at))
        if status in ("shipped", "delivered", "refunded"):
            shipped = placed + timedelta(hours=rng.randint(10, 70))
            parts = 2 if rng.random() < 0.08 else 1
            for _ in range(parts):
                carrier = pick_carrier()
                tn = f"{carrier[:2].upper()}{rng.randint(10**9, 10**10 - 1)}GB"
                while tn in tracking:
                    tn = f"{carrier[:2].upper()}{rng.randint(10**9, 10**10 - 1)}GB"
                tracking.add(tn)
                delivered = shipped + timedelta(hours=rng.randint(18, 110)) if status != "shipped" else None
                if delivered and delivered > AS_OF:
                    delivered = None
                if delivered and oid % 2011 == 0:  # carrier feed glitch
                    delivered = shipped - timedelta(hours=5)
                shipments.append((oid, wh, carrier, tn, shipped, delivered))
        if status == "refunded":
            for line in my_lines:
                refunds.append(
                    make_refund(
                        rng, oid, line[0], line[1], "Returned - changed mind", "approved", placed + timedelta(days=3)
                    )
                )
        elif status == "delivered" and rng.random() < 0.06:
            line = rng.choice(my_lines)
            amt = line[1] if rng.random() < 0.6 else money(line[1] * Decimal(rng.choice(["0.5", "0.25", "0.2"])))
            st = rng.choices(["approved", "pending", "rejected"], [76, 9, 15])[0]
            reason = rng.choice(
                [
                    "Damaged in transit",
                    "Faulty item",
                    "Wrong colour sent",
                    "Missing part",
                    "Returned - not as described",
                ]
            )
            refunds.append(make_refund(rng, oid, line[0], amt, reason, st, placed + timedelta(days=2)))
        elif status == "delivered" and rng.random() < 0.012:
            reason = rng.choice(["Late delivery goodwill", "Delivery charge refunded"])
            refunds.append(
                make_refund(
                    rng, oid, None, fee if fee > 0 else Decimal("5.00"), reason, "approved", placed + timedelta(days=2)
                )
            )
        elif status == "cancelled" and rng.random() < 0.03:  # inconsistent: refund logged on a cancelled order
            line = rng.choice(my_lines)
            refunds.append(make_refund(rng, oid, line[0], line[1], "Cancelled after payment", "approved", placed))
    refunds = [r for r in refunds if r is not None]
    return {
        "orders": (
            [
                "order_id",
                "order_number",
                "customer_id",
                "guest_email",
                "status",
                "placed_at",
                "warehouse_id",
                "shipping_address_id",
                "shipping_fee",
                "total_amount",
            ],
            orders,
        ),
        "order_lines": (
            ["order_line_id", "order_id", "line_no", "product_id", "quantity", "unit_price", "discount_pct"],
            lines,
        ),
        "payments": (
            ["payment_id", "order_id", "method", "amount", "status", "created_at"],
            [(i, *p) for i, p in enumerate(sorted(payments, key=lambda p: p[4]), 1)],
        ),
        "refunds": (
            ["refund_id", "order_id", "order_line_id", "amount", "reason", "status", "requested_at", "refunded_at"],
            [(i, *r) for i, r in enumerate(sorted(refunds, key=lambda r: r[5]), 1)],
        ),
        "shipments": (
            ["shipment_id", "order_id", "warehouse_id", "carrier", "tracking_number", "shipped_at", "delivered_at"],
            [(i, *s) for i, s in enumerate(sorted(shipments, key=lambda s: s[4]), 1)],
        ),
    }


def build_reviews(rng: random.Random, orders: list[tuple], lines: list[tuple]) -> Table:
    by_order = {o[0]: o for o in orders}
    rows = []
    titles = {
        5: ["Love it", "Perfect", "Excellent quality", "Would buy again"],
        4: ["Very good", "Nice", "Good value"],
        3: ["OK", "Does the job", "Average"],
        2: ["Disappointed", "Not great"],
        1: ["Poor", "Broke quickly"],
    }
    for ln in lines:
        o = by_order[ln[1]]
        if o[2] is None or o[4] != "delivered" or rng.random() > 0.06:
            continue
        rating = rng.choices([5, 4, 3, 2, 1], [50, 25, 10, 7, 8])[0]
        created = o[5] + timedelta(days=rng.randint(4, 40), minutes=rng.randrange(1440))
        if created >= AS_OF:
            continue
        rows.append(
            (
                ln[3],
                o[2],
                rating,
                rng.choice(titles[rating]),
                None
                if rng.random() < 0.4
                else rng.choice(["Arrived quickly.", "Smaller than expected.", "Great colour.", "Bought as a gift."]),
                created,
            )
        )
    rows.sort(key=lambda r: r[5])
    return ["review_id", "product_id", "customer_id", "rating", "title", "body", "created_at"], [
        (i, *r) for i, r in enumerate(rows, 1)
    ]


def build_stock(rng: random.Random, products: list[tuple]) -> dict[str, Table]:
    """Stock levels whose on_hand always equals the ledger sum, historic transfers, and the pending batch."""
    coverage = {1: 0.95, 2: 0.8, 3: 0.6, 4: 0.3, 5: 0.15}
    pairs = {(w, p[0]) for w in coverage for p in products if rng.random() < coverage[w]}
    events: dict[tuple[int, int], list[tuple]] = {}  # (wh, pid) -> [(time, type, qty, ref)]
    requests: list[list] = []
    # historic requests (before the batch): applied, rejected, cancelled
    hist_times = sorted(
        rand_time(rng, datetime(2024, 2, 1, tzinfo=UTC), datetime(2025, 3, 20, tzinfo=UTC)) for _ in range(72)
    )
    pair_list = sorted(pairs)
    for t in hist_times:
        w_from, pid = rng.choice(pair_list)
        choices = [w for w in coverage if w != w_from]
        w_to = rng.choice(choices)
        if (w_from == 4 or w_to == 4) and t >= GLA_CLOSED or (w_from == 5 or w_to == 5) and t < BRS_OPENED:
            continue
        qty = rng.choice([2, 5, 6, 10, 12, 20, 24, 30])
        sku = next(p[1] for p in products if p[0] == pid)
        r = rng.random()
        status = "applied" if r < 0.8 else ("rejected" if r < 0.9 else "cancelled")
        reason = rng.choice(["INSUFFICIENT_STOCK", "UNKNOWN_SKU"]) if status == "rejected" else None
        processed = t + timedelta(hours=rng.randint(2, 30)) if status != "cancelled" else None
        requests.append([t, rng.choice(STAFF), w_from, w_to, sku, qty, status, reason, processed, None])
        if status == "applied":
            pairs.add((w_to, pid))
            ref = f"TR-{len(requests)}"
            events.setdefault((w_from, pid), []).append((processed, "transfer_out", -qty, ref))
            events.setdefault((w_to, pid), []).append((processed, "transfer_in", qty, ref))
    movements: list[tuple] = []
    levels: list[list] = []
    for wh, pid in sorted(pairs):
        start = rand_time(rng, datetime(2023, 6, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC))
        if wh == 5:
            start = rand_time(rng, BRS_OPENED - timedelta(days=20), BRS_OPENED + timedelta(days=60))
        stop = min(GLA_CLOSED if wh == 4 else AS_OF, datetime(2025, 3, 27, tzinfo=UTC))
        evs = list(events.get((wh, pid), []))
        evs.append((start, "receipt", rng.choice([24, 40, 60, 100, 150, 200]), f"PO-{rng.randint(30000, 59999)}"))
        for _ in range(rng.randint(4, 14)):
            t = rand_time(rng, start + timedelta(days=1), stop)
            k = rng.choices(["sale", "receipt", "return", "adjustment"], [62, 20, 10, 8])[0]
            if k == "sale":
                evs.append((t, k, -rng.randint(1, 40), f"SALES-{t:%Y%m%d}"))
            elif k == "receipt":
                evs.append((t, k, rng.choice([12, 24, 36, 48, 60, 100]), f"PO-{rng.randint(30000, 59999)}"))
            elif k == "return":
                evs.append((t, k, rng.randint(1, 3), f"RMA-{rng.randint(100000, 999999)}"))
            else:
                evs.append((t, k, rng.choice([-3, -2, -1, 1, 2]), f"STOCKTAKE-{t:%Y}Q{(t.month - 1) // 3 + 1}"))
        if wh == 4:  # closing stock-take before the store room shut
            evs.append((GLA_CLOSED - timedelta(days=2), "adjustment", -1, "CLOSURE-GLA1"))
        evs.sort(key=lambda e: (e[0], e[1] != "receipt"))
        bal, kept = 0, []
        for t, k, q, ref in evs:
            if q < 0 and k != "transfer_out":
                q = -min(-q, bal)
                if q == 0:
                    continue
            if k == "transfer_out" and bal < -q:
                top = -q - bal + rng.choice([0, 10, 24])
                kept.append((t - timedelta(days=3), "receipt", top, f"PO-{rng.randint(30000, 59999)}"))
                bal += top
            kept.append((t, k, q, ref))
            bal += q
        if rng.random() < 0.07 and bal > 0 and wh != 4:
            t = datetime(2025, 3, rng.randint(20, 26), rng.randint(8, 20), tzinfo=UTC)
            kept.append((t, "sale", -bal, f"SALES-{t:%Y%m%d}"))
            bal = 0
        movements.extend((t, wh, pid, k, q, ref) for t, k, q, ref in kept)
        reserved = rng.randint(1, min(bal, 6)) if bal > 0 and wh != 4 and rng.random() < 0.16 else 0
        levels.append([wh, pid, bal, reserved, rng.choice([0, 5, 10, 10, 20, 30]), max(e[0] for e in kept)])
    movements.sort(key=lambda m: (m[0], m[1], m[2]))
    batch = pending_batch(rng, products, {(lv[0], lv[1]): lv for lv in levels})
    first_pending = len(requests) + 1
    reqs = [(i, *r) for i, r in enumerate(requests, 1)]
    for i, b in enumerate(batch):
        reqs.append((first_pending + i, *b))
    return {
        "stock_levels": (
            ["warehouse_id", "product_id", "on_hand", "reserved", "reorder_point", "updated_at"],
            [tuple(lv) for lv in levels],
        ),
        "stock_movements": (
            ["movement_id", "warehouse_id", "product_id", "movement_type", "quantity", "reference", "created_at"],
            [(i, m[1], m[2], m[3], m[4], m[5], m[0]) for i, m in enumerate(movements, 1)],
        ),
        "transfer_requests": (
            [
                "request_id",
                "requested_at",
                "requested_by",
                "from_warehouse_id",
                "to_warehouse_id",
                "sku",
                "quantity",
                "status",
                "reject_reason",
                "processed_at",
                "note",
            ],
            reqs,
        ),
    }


def pending_batch(rng: random.Random, products: list[tuple], levels: dict[tuple[int, int], list]) -> list[list]:
    """The pending transfer batch: ordinary requests plus cases where each rule (and the order) decides.

    Rows come back in request_id order. Late-imported store requests get the highest ids but early
    requested_at times, so processing by id instead of by time changes the outcome.
    """
    sku = {p[0]: p[1] for p in products}
    avail = {k: v[2] - v[3] for k, v in levels.items()}
    used: set[int] = set()

    def pick(cond: Callable[[tuple[int, int], list], bool]) -> tuple[int, int]:
        cands = sorted(k for k, v in levels.items() if k[1] not in used and cond(k, v))
        k = rng.choice(cands)
        used.add(k[1])
        return k

    def at(day: int, hh: int, mm: int) -> datetime:
        return datetime(2025, 3, day, hh, mm, rng.randrange(60), tzinfo=UTC)

    def messy(s: str) -> str:
        return rng.choice([s.lower(), f" {s}", f"{s} ", s.lower() + "  ", s.title()])

    out: list[tuple[datetime, str, int, int, str, int, str | None]] = []
    late: list[tuple[datetime, str, int, int, str, int, str | None]] = []
    # ordinary requests, all satisfiable on their own
    for _ in range(20):
        w, pid = pick(lambda k, v: k[0] in (1, 2, 3) and v[2] - v[3] >= 12)
        to = rng.choice([x for x in (1, 2, 3, 5) if x != w])
        q = rng.randint(1, max(1, (avail[(w, pid)]) // 3))
        s = sku[pid] if rng.random() < 0.7 else messy(sku[pid])
        out.append(
            (rand_time(rng, BATCH_FROM, datetime(2025, 3, 31, 17, tzinfo=UTC)), rng.choice(STAFF), w, to, s, q, None)
        )
    # order matters: the earlier request (imported late, higher id) takes nearly everything
    w, pid = pick(lambda k, v: k[0] == 1 and v[2] - v[3] >= 30 and v[3] == 0)
    a = avail[(w, pid)]
    late.append((at(29, 10, 5), "store-import", 1, 2, sku[pid], a - 3, "Manchester launch display"))
    out.append((at(29, 14, 20), "j.patel", 1, 3, sku[pid], 8, None))
    # chain through a warehouse that has no row yet for the product
    w, pid = pick(lambda k, v: k[0] == 1 and v[2] - v[3] >= 40 and (5, k[1]) not in levels)
    out.append((at(28, 9, 12), "m.lindqvist", 1, 5, sku[pid], 24, "Seed Bristol range"))
    out.append((at(30, 11, 40), "s.reid", 5, 2, sku[pid].lower(), 15, None))
    out.append((at(31, 9, 15), "s.reid", 5, 3, sku[pid], 12, None))
    # reserved stock: on_hand would cover it, available does not
    w, pid = pick(lambda k, v: k[0] == 2 and v[3] >= 2 and v[2] - v[3] >= 3)
    out.append((at(29, 16, 2), "t.nguyen", 2, 1, sku[pid], levels[(w, pid)][2] - levels[(w, pid)][3] + 1, None))
    w, pid = pick(lambda k, v: k[0] == 3 and v[3] >= 2 and v[2] - v[3] >= 3)
    out.append((at(30, 8, 47), "r.hughes", 3, 1, sku[pid], levels[(w, pid)][2] - levels[(w, pid)][3], "clear BHX1"))
    # the closed Glasgow store room still holds stock
    w, pid = pick(lambda k, v: k[0] == 4 and v[2] >= 10)
    out.append((at(28, 13, 30), "a.okafor", 4, 1, sku[pid], 10, "Glasgow leftovers"))
    w, pid = pick(lambda k, v: k[0] == 1 and v[2] - v[3] >= 10)
    out.append((at(30, 15, 5), "a.okafor", 1, 4, sku[pid], 4, None))
    # same warehouse (also with an inactive one), unknown SKUs, bad quantities
    w, pid = pick(lambda k, v: k[0] == 2 and v[2] - v[3] >= 5)
    out.append((at(29, 11, 11), "t.nguyen", 2, 2, sku[pid], 5, None))
    w, pid = pick(lambda k, v: k[0] == 4 and v[2] >= 3)
    out.append((at(31, 10, 0), "ops-bot", 4, 4, sku[pid], 3, None))
    w, pid = pick(lambda k, v: k[0] == 1 and v[2] - v[3] >= 5)
    typo = sku[pid][:4] + sku[pid][4:].replace("0", "O", 1) if "0" in sku[pid][4:] else sku[pid][:-1] + "X"
    out.append((at(30, 12, 30), "j.patel", 1, 2, typo, 2, None))
    late.append((at(28, 15, 45), "store-import", 4, 1, "HOM-0000", 1, "imported from store sheet"))
    w, pid = pick(lambda k, v: k[0] == 1 and v[2] - v[3] >= 5)
    out.append((at(28, 17, 20), "m.lindqvist", 1, 3, sku[pid], 0, None))
    w, pid = pick(lambda k, v: k[0] == 3 and v[2] - v[3] >= 5)
    out.append((at(31, 14, 55), "r.hughes", 3, 3, sku[pid], -5, None))
    # nothing at the source: no row at all, and a row at zero
    pid = next(p[0] for p in sorted(products) if (5, p[0]) not in levels and p[0] not in used and (1, p[0]) in levels)
    used.add(pid)
    out.append((at(30, 10, 20), "s.reid", 5, 1, sku[pid], 2, None))
    w, pid = pick(lambda k, v: k[0] in (1, 2) and v[2] == 0)
    out.append((at(29, 9, 30), "t.nguyen", w, 3 if w != 3 else 1, sku[pid], 6, None))
    # two requests from one source that fit together, one with a messy SKU
    w, pid = pick(lambda k, v: k[0] == 2 and v[2] - v[3] >= 20)
    a = avail[(w, pid)]
    out.append((at(28, 11, 0), "t.nguyen", 2, 1, messy(sku[pid]), a // 2, None))
    out.append((at(31, 16, 40), "t.nguyen", 2, 3, sku[pid], a - a // 2, None))
    out.sort(key=lambda r: r[0])
    late.sort(key=lambda r: r[0])
    rows = [[*r[:6], "pending", None, None, r[6]] for r in out + late]
    # a cancelled request inside the batch window: not part of the batch
    w, pid = pick(lambda k, v: k[0] == 1 and v[2] - v[3] >= 8)
    rows.insert(7, [at(29, 12, 0), "j.patel", 1, 2, sku[pid], 8, "cancelled", None, None, "raised twice"])
    return rows


def copy_value(v: object) -> str:
    """One value in COPY text format (timestamps are UTC and written with their +00:00 offset)."""
    t = type(v)
    if t is str:
        return (
            v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            if "\\" in v or "\t" in v or "\n" in v
            else v
        )
    if v is None:
        return r"\N"
    if t is bool:
        return "t" if v else "f"
    return str(v)


def build() -> dict[str, Table]:
    """Every table's columns and rows, in load order."""
    rng = random.Random(SEED)
    categories, suppliers, products, pweights = build_catalogue(rng)
    customers_t, customers, cweights = build_customers(rng)
    addresses, default_ship = build_addresses(rng, customers)
    tables: dict[str, Table] = {
        "warehouses": (["warehouse_id", "code", "name", "city", "is_active"], WAREHOUSES),
        "categories": categories,
        "suppliers": suppliers,
        "products": products,
        "customers": customers_t,
        "addresses": addresses,
    }
    tables.update(build_orders(rng, customers, cweights, default_ship, products[1], pweights))
    tables["product_reviews"] = build_reviews(rng, tables["orders"][1], tables["order_lines"][1])
    tables.update(build_stock(rng, products[1]))
    return tables


SCHEMA = """
CREATE TABLE warehouses (
    warehouse_id integer PRIMARY KEY,
    code text NOT NULL UNIQUE,
    name text NOT NULL,
    city text NOT NULL,
    is_active boolean NOT NULL DEFAULT true
);
CREATE TABLE categories (
    category_id integer PRIMARY KEY,
    name text NOT NULL UNIQUE,
    parent_id integer,
    slug text NOT NULL UNIQUE
);
CREATE TABLE suppliers (
    supplier_id integer PRIMARY KEY,
    name text NOT NULL,
    country_code character(2) NOT NULL,
    contact_email text
);
CREATE TABLE products (
    product_id serial PRIMARY KEY,
    sku text NOT NULL UNIQUE,
    name text NOT NULL,
    category_id integer NOT NULL,
    supplier_id integer,
    unit_price numeric(10,2) NOT NULL CHECK (unit_price >= 0),
    unit_cost numeric(10,2),
    is_active boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL
);
CREATE TABLE customers (
    customer_id serial PRIMARY KEY,
    email text NOT NULL UNIQUE,
    first_name text NOT NULL,
    last_name text NOT NULL,
    phone text,
    created_at timestamptz NOT NULL,
    marketing_opt_in boolean NOT NULL DEFAULT false
);
CREATE TABLE addresses (
    address_id serial PRIMARY KEY,
    customer_id integer NOT NULL,
    kind text NOT NULL CHECK (kind IN ('shipping', 'billing')),
    recipient_name text NOT NULL,
    line1 text NOT NULL,
    line2 text,
    city text NOT NULL,
    postcode text NOT NULL,
    country_code character(2) NOT NULL DEFAULT 'GB',
    is_default boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL
);
CREATE TABLE orders (
    order_id serial PRIMARY KEY,
    order_number text NOT NULL,
    customer_id integer,
    guest_email text,
    status text NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'delivered', 'cancelled', 'failed',
                                           'refunded')),
    placed_at timestamptz NOT NULL,
    warehouse_id integer NOT NULL,
    shipping_address_id integer,
    shipping_fee numeric(10,2) NOT NULL DEFAULT 0,
    total_amount numeric(12,2) NOT NULL,
    CONSTRAINT orders_order_number_key UNIQUE (order_number),
    CONSTRAINT orders_customer_or_guest CHECK (customer_id IS NOT NULL OR guest_email IS NOT NULL)
);
CREATE TABLE order_lines (
    order_line_id serial PRIMARY KEY,
    order_id integer NOT NULL,
    line_no smallint NOT NULL,
    product_id integer NOT NULL,
    quantity integer NOT NULL CHECK (quantity > 0),
    unit_price numeric(10,2) NOT NULL,
    discount_pct numeric(5,2) NOT NULL DEFAULT 0 CHECK (discount_pct >= 0 AND discount_pct < 100),
    CONSTRAINT order_lines_order_id_line_no_key UNIQUE (order_id, line_no)
);
CREATE TABLE payments (
    payment_id serial PRIMARY KEY,
    order_id integer NOT NULL,
    method text NOT NULL,
    amount numeric(12,2) NOT NULL,
    status text NOT NULL CHECK (status IN ('captured', 'failed', 'voided', 'authorized')),
    created_at timestamptz NOT NULL
);
CREATE TABLE refunds (
    refund_id serial PRIMARY KEY,
    order_id integer NOT NULL,
    order_line_id integer,
    amount numeric(10,2) NOT NULL CHECK (amount > 0),
    reason text,
    status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    requested_at timestamptz NOT NULL,
    refunded_at timestamptz
);
CREATE TABLE shipments (
    shipment_id serial PRIMARY KEY,
    order_id integer NOT NULL,
    warehouse_id integer NOT NULL,
    carrier text NOT NULL,
    tracking_number text NOT NULL UNIQUE,
    shipped_at timestamptz NOT NULL,
    delivered_at timestamptz
);
CREATE TABLE product_reviews (
    review_id serial PRIMARY KEY,
    product_id integer NOT NULL,
    customer_id integer NOT NULL,
    rating smallint NOT NULL CHECK (rating BETWEEN 1 AND 5),
    title text,
    body text,
    created_at timestamptz NOT NULL
);
CREATE TABLE stock_levels (
    warehouse_id integer NOT NULL,
    product_id integer NOT NULL,
    on_hand integer NOT NULL CHECK (on_hand >= 0),
    reserved integer NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    reorder_point integer NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (warehouse_id, product_id)
);
CREATE TABLE stock_movements (
    movement_id bigserial PRIMARY KEY,
    warehouse_id integer NOT NULL,
    product_id integer NOT NULL,
    movement_type text NOT NULL CHECK (movement_type IN ('receipt', 'sale', 'return', 'adjustment', 'transfer_in',
                                                         'transfer_out')),
    quantity integer NOT NULL CHECK (quantity <> 0),
    reference text,
    created_at timestamptz NOT NULL
);
CREATE TABLE transfer_requests (
    request_id serial PRIMARY KEY,
    requested_at timestamptz NOT NULL,
    requested_by text NOT NULL,
    from_warehouse_id integer NOT NULL,
    to_warehouse_id integer NOT NULL,
    sku text NOT NULL,
    quantity integer NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'rejected', 'cancelled')),
    reject_reason text,
    processed_at timestamptz,
    note text
);
"""

POST = """
ALTER TABLE categories ADD CONSTRAINT categories_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES categories;
ALTER TABLE products ADD CONSTRAINT products_category_id_fkey FOREIGN KEY (category_id) REFERENCES categories;
ALTER TABLE products ADD CONSTRAINT products_supplier_id_fkey FOREIGN KEY (supplier_id) REFERENCES suppliers;
ALTER TABLE addresses ADD CONSTRAINT addresses_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers
    ON DELETE CASCADE;
ALTER TABLE orders ADD CONSTRAINT orders_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers
    ON DELETE SET NULL;
ALTER TABLE orders ADD CONSTRAINT orders_warehouse_id_fkey FOREIGN KEY (warehouse_id) REFERENCES warehouses;
ALTER TABLE orders ADD CONSTRAINT orders_shipping_address_id_fkey FOREIGN KEY (shipping_address_id)
    REFERENCES addresses;
ALTER TABLE order_lines ADD CONSTRAINT order_lines_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders
    ON DELETE CASCADE;
ALTER TABLE order_lines ADD CONSTRAINT order_lines_product_id_fkey FOREIGN KEY (product_id) REFERENCES products;
ALTER TABLE payments ADD CONSTRAINT payments_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders;
ALTER TABLE refunds ADD CONSTRAINT refunds_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders;
ALTER TABLE refunds ADD CONSTRAINT refunds_order_line_id_fkey FOREIGN KEY (order_line_id) REFERENCES order_lines;
ALTER TABLE shipments ADD CONSTRAINT shipments_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders;
ALTER TABLE shipments ADD CONSTRAINT shipments_warehouse_id_fkey FOREIGN KEY (warehouse_id) REFERENCES warehouses;
ALTER TABLE product_reviews ADD CONSTRAINT product_reviews_product_id_fkey FOREIGN KEY (product_id)
    REFERENCES products;
ALTER TABLE product_reviews ADD CONSTRAINT product_reviews_customer_id_fkey FOREIGN KEY (customer_id)
    REFERENCES customers ON DELETE CASCADE;
ALTER TABLE stock_levels ADD CONSTRAINT stock_levels_warehouse_id_fkey FOREIGN KEY (warehouse_id)
    REFERENCES warehouses;
ALTER TABLE stock_levels ADD CONSTRAINT stock_levels_product_id_fkey FOREIGN KEY (product_id) REFERENCES products;
ALTER TABLE stock_movements ADD CONSTRAINT stock_movements_warehouse_id_fkey FOREIGN KEY (warehouse_id)
    REFERENCES warehouses;
ALTER TABLE stock_movements ADD CONSTRAINT stock_movements_product_id_fkey FOREIGN KEY (product_id)
    REFERENCES products;
ALTER TABLE transfer_requests ADD CONSTRAINT transfer_requests_from_warehouse_id_fkey FOREIGN KEY (from_warehouse_id)
    REFERENCES warehouses;
ALTER TABLE transfer_requests ADD CONSTRAINT transfer_requests_to_warehouse_id_fkey FOREIGN KEY (to_warehouse_id)
    REFERENCES warehouses;

CREATE INDEX products_category_id_idx ON products (category_id);
CREATE INDEX addresses_customer_id_idx ON addresses (customer_id);
CREATE UNIQUE INDEX addresses_one_default_per_kind ON addresses (customer_id, kind) WHERE is_default;
CREATE INDEX idx_orders_number ON orders (order_number);
CREATE INDEX idx_orders_status ON orders (status);
CREATE INDEX orders_placed_at_idx ON orders (placed_at);
CREATE INDEX idx_payments_order ON payments (order_id);
CREATE INDEX payments_order_id_idx ON payments (order_id);
CREATE INDEX idx_refunds_order ON refunds (order_id);
CREATE INDEX refunds_order_id_idx ON refunds (order_id);
CREATE INDEX refunds_order_line_id_idx ON refunds (order_line_id);
CREATE INDEX shipments_order_id_idx ON shipments (order_id);
CREATE INDEX shipments_undelivered_idx ON shipments (order_id) WHERE delivered_at IS NULL;
CREATE INDEX product_reviews_product_id_idx ON product_reviews (product_id);
CREATE INDEX product_reviews_customer_id_idx ON product_reviews (customer_id);
CREATE INDEX stock_levels_product_id_idx ON stock_levels (product_id, warehouse_id);
CREATE INDEX stock_movements_created_at_idx ON stock_movements (created_at);
CREATE INDEX stock_movements_reference_idx ON stock_movements (reference);
CREATE INDEX transfer_requests_status_idx ON transfer_requests (status);
"""


def write_sql(path: str) -> None:
    tables = build()
    with open(path, "w", encoding="utf-8") as f:
        f.write("-- retail: generated by tasks/postgres/states/retail.py (deterministic; do not edit)\n")
        f.write("SET client_encoding = 'UTF8';\nSET standard_conforming_strings = on;\n")
        f.write(SCHEMA)
        for name, (cols, rows) in tables.items():
            f.write(f"\nCOPY {name} ({', '.join(cols)}) FROM stdin;\n")
            f.writelines("\t".join(map(copy_value, row)) + "\n" for row in rows)
            f.write("\\.\n")
        # tables with serial keys: move their sequences past the loaded ids, in one quiet statement
        plain = {"warehouses", "categories", "suppliers", "stock_levels"}
        setvals = [
            f"setval(pg_get_serial_sequence('{name}', '{cols[0]}'), {len(rows)})"
            for name, (cols, rows) in tables.items()
            if name not in plain
        ]
        f.write(f"\nDO $$BEGIN PERFORM {', '.join(setvals)}; END$$;\n")
        f.write(POST)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: retail.py OUT.sql")
    write_sql(sys.argv[1])
