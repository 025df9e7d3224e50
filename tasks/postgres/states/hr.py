"""Deterministic generator for the `hr` PostgreSQL state (Brightwater Systems' HR database).

Run as `python hr.py OUT.sql`; writes a plain SQL script (DDL, COPY blocks, then indexes) restorable with
`psql -v ON_ERROR_STOP=1`. Stdlib only, fixed seed, no clock reads, so the same bytes come out every time.
The data is messy on purpose (tasks depend on it): a management tree with nested VPs, terminated managers
who still have reports, orphans and cross-department reporting; effective-dated salaries with gaps,
duplicates, overlaps, inverted periods and lower-case currency codes; a wide bonus sheet with NULL vs 0.00.
"""

from __future__ import annotations

import random
import sys
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

SEED = 20261123
SNAPSHOT = date(2026, 10, 15)
AS_OF = date(2026, 10, 1)
DAY = timedelta(days=1)

FIRST = (
    "James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard Susan Joseph "
    "Jessica Thomas Sarah Christopher Karen Daniel Lisa Matthew Nancy Anthony Sandra Mark Ashley Steven Emily "
    "Andrew Michelle Joshua Amanda Kevin Melissa Brian Stephanie George Rebecca Timothy Laura Ryan Sharon Jacob "
    "Cynthia Nicholas Kathleen Eric Amy Jonathan Angela Justin Anna Samuel Brenda Gregory Pamela Benjamin Emma "
    "Priya Rahul Ananya Arjun Deepika Vikram Sanjay Kavya Wei Mei Jun Li Hiroshi Yuki Haruto Sakura Minh Linh "
    "Ji-woo Seo-yeon Min-jun Olusegun Chiamaka Tunde Amara Kwame Abena Fatima Omar Layla Yusuf Aisha Ahmed "
    "Noor Lucas Sophie Lukas Hannah Jonas Lena Felix Clara Matteo Giulia Alessandro Chiara Mateo Lucia Diego "
    "Sofia Carmen Pablo Ines Joao Beatriz Thiago Camila Sean Aoife Ciaran Niamh Oisin Siobhan Pieter Anouk "
    "Daan Femke Lars Ingrid Astrid Bjorn Mikael Freya Dmitri Olga Katarzyna Piotr Zofia Tomasz Eleni Nikos"
).split()
LAST = [
    n.replace("_", " ")
    for n in (
        "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson "
        "Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis "
        "Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall "
        "Rivera Campbell Mitchell Carter Roberts Patel Shah Iyer Reddy Sharma Gupta Chen Wang Zhang Liu Tanaka "
        "Suzuki Kim Park Choi Tran Pham Okafor Adeyemi Mensah Boateng Haddad Khalil Rahman Hussain Muller Schmidt "
        "Schneider Fischer Weber Becker Rossi Russo Ferrari Bianchi Fernandez Santos Oliveira Silva Murphy Kelly "
        "O'Brien Byrne Walsh O'Connor de_Vries Jansen Bakker Visser Larsen Nilsson Lindqvist Kowalski Nowak "
        "Ivanova Petrov Papadopoulos Dubois Lefebvre Moreau Novak MacDonald Fraser Campbell-Ross Van_der_Berg"
    ).split()
]
COUNTRY_W = [("US", 62), ("GB", 12), ("DE", 7), ("NL", 4), ("IE", 4), ("CA", 9), ("ES", 2)]
CURRENCY = {"US": "USD", "GB": "GBP", "DE": "EUR", "NL": "EUR", "IE": "EUR", "ES": "EUR", "CA": "CAD"}
LOCAL_PER_USD = {"USD": 1.0, "GBP": 0.78, "EUR": 0.9, "CAD": 1.32}
BASE_USD = {1: 68000, 2: 86000, 3: 112000, 4: 142000, 5: 150000, 6: 172000, 7: 205000, 8: 262000, 9: 335000, 10: 425000}
FAMILY_MULT = {
    "Engineering": 1.12,
    "Product": 1.08,
    "Sales": 0.92,
    "Marketing": 0.95,
    "Customer Success": 0.85,
    "Finance": 1.0,
    "Legal": 1.1,
    "People": 0.9,
    "Operations": 0.88,
    "IT": 0.96,
    "Executive": 1.0,
}

# division -> (code, family, [(dept code, dept name, location)])
DIVISIONS = {
    "Engineering": (
        "ENG",
        "Engineering",
        [
            ("ENG-CORE", "Core Services", "Austin"),
            ("ENG-WEB", "Web Applications", "Austin"),
            ("ENG-MOB", "Mobile", "London"),
            ("ENG-DATA", "Data Engineering", "Amsterdam"),
            ("ENG-PLAT", "Platform Engineering", "Seattle"),
            ("ENG-SRE", "Site Reliability", "Seattle"),
            ("ENG-INFRA", "Infrastructure", "Dublin"),
            ("ENG-SEC", "Security Engineering", "Austin"),
            ("ENG-QA", "Quality Engineering", "Toronto"),
            ("ENG-ML", "Machine Learning", "Berlin"),
        ],
    ),
    "Product": (
        "PRD",
        "Product",
        [
            ("PRD-PM", "Product Management", "Austin"),
            ("PRD-DES", "Product Design", "London"),
            ("PRD-RES", "User Research", "Berlin"),
            ("PRD-ANL", "Product Analytics", "Austin"),
        ],
    ),
    "Sales": (
        "SAL",
        "Sales",
        [
            ("SAL-NA", "Sales North America", "New York"),
            ("SAL-ENT", "Enterprise Sales", "New York"),
            ("SAL-EMEA", "Sales EMEA", "London"),
            ("SAL-DACH", "Sales DACH", "Berlin"),
            ("SAL-OPS", "Sales Operations", "Austin"),
            ("SAL-PART", "Partnerships", "Toronto"),
        ],
    ),
    "Marketing": (
        "MKT",
        "Marketing",
        [
            ("MKT-BRAND", "Brand", "New York"),
            ("MKT-DEM", "Demand Generation", "Austin"),
            ("MKT-PMM", "Product Marketing", "Austin"),
            ("MKT-EVT", "Events", "London"),
        ],
    ),
    "Customer Success": (
        "CS",
        "Customer Success",
        [
            ("CS-SUP", "Customer Support", "Dublin"),
            ("CS-ONB", "Onboarding", "Toronto"),
            ("CS-AM", "Account Management", "New York"),
            ("CS-TAM", "Technical Account Management", "London"),
        ],
    ),
    "Finance": (
        "FIN",
        "Finance",
        [
            ("FIN-ACC", "Accounting", "Austin"),
            ("FIN-FPA", "FP&A", "New York"),
            ("FIN-PAY", "Payroll", "Austin"),
            ("FIN-TAX", "Tax", "Dublin"),
        ],
    ),
    "Legal": ("LEG", "Legal", [("LEG-COM", "Commercial Legal", "New York"), ("LEG-PRIV", "Privacy", "Dublin")]),
    "People": (
        "PPL",
        "People",
        [
            ("PPL-OPS", "People Operations", "Austin"),
            ("PPL-TA", "Talent Acquisition", "Austin"),
            ("PPL-LD", "Learning & Development", "London"),
            ("PPL-TR", "Total Rewards", "Austin"),
        ],
    ),
    "Operations": (
        "OPS",
        "Operations",
        [
            ("OPS-FAC", "Facilities", "Austin"),
            ("OPS-PROC", "Procurement", "Toronto"),
            ("OPS-BIZ", "Business Operations", "New York"),
        ],
    ),
    "IT": ("IT", "IT", [("IT-HD", "IT Helpdesk", "Austin"), ("IT-SYS", "Corporate Systems", "Dublin")]),
}
LOC_COUNTRY = {
    "Austin": "US",
    "New York": "US",
    "Seattle": "US",
    "London": "GB",
    "Amsterdam": "NL",
    "Dublin": "IE",
    "Toronto": "CA",
    "Berlin": "DE",
}

# (VP title, division, team departments, reporting C-level key, org size)
VPS = [
    ("VP, Engineering", "Engineering", ["ENG-CORE", "ENG-WEB", "ENG-MOB", "ENG-QA"], "CTO", 1150),
    ("VP, Platform Engineering", "Engineering", ["ENG-PLAT", "ENG-SRE", "ENG-DATA", "ENG-ML"], "VP, Engineering", 700),
    ("VP, Infrastructure", "Engineering", ["ENG-INFRA"], "CTO", 260),
    ("VP, Security", "Engineering", ["ENG-SEC"], "CTO", 140),
    ("VP, Product Management", "Product", ["PRD-PM", "PRD-ANL"], "CPO", 230),
    ("VP, Design", "Product", ["PRD-DES", "PRD-RES"], "CPO", 150),
    ("VP, Sales Americas", "Sales", ["SAL-NA", "SAL-ENT", "SAL-OPS"], "CRO", 760),
    ("VP, Sales EMEA", "Sales", ["SAL-EMEA", "SAL-DACH"], "CRO", 430),
    ("VP, Marketing", "Marketing", ["MKT-BRAND", "MKT-DEM", "MKT-PMM", "MKT-EVT"], "CRO", 340),
    ("VP, Customer Success", "Customer Success", ["CS-SUP", "CS-ONB", "CS-AM", "CS-TAM"], "CRO", 820),
    ("VP, Finance", "Finance", ["FIN-ACC", "FIN-FPA", "FIN-PAY", "FIN-TAX"], "CFO", 210),
    ("VP, Legal", "Legal", ["LEG-COM", "LEG-PRIV"], "CFO", 60),
    ("VP, People Operations", "People", ["PPL-OPS", "PPL-LD", "PPL-TR"], "CHRO", 130),
    ("VP, Talent Acquisition", "People", ["PPL-TA"], "CHRO", 110),
    ("VP, Operations", "Operations", ["OPS-FAC", "OPS-PROC", "OPS-BIZ"], "COO", 190),
    ("VP, IT", "IT", ["IT-HD", "IT-SYS"], "COO", 120),
    ("Vice President, Partnerships", "Sales", ["SAL-PART"], "CRO", 34),  # terminated, org left dangling
]
CLEVEL = [
    ("CTO", "Chief Technology Officer", "Engineering"),
    ("CPO", "Chief Product Officer", "Product"),
    ("CRO", "Senior Vice President, Revenue", "Sales"),
    ("CFO", "Chief Financial Officer", "Finance"),
    ("CHRO", "Chief People Officer", "People"),
    ("COO", "Chief Operating Officer", "Operations"),
]
IC_TITLES = {
    "Engineering": ["Software Engineer I", "Software Engineer II", "Senior Software Engineer", "Staff Engineer"],
    "Product": ["Associate Product Manager", "Product Designer", "Senior Product Manager", "Principal Designer"],
    "Sales": ["Sales Development Rep", "Account Executive", "Senior Account Executive", "Sales Engineer"],
    "Marketing": ["Marketing Coordinator", "Marketing Specialist", "Senior Marketing Manager", "Marketing Lead"],
    "Customer Success": [
        "Support Specialist I",
        "Support Specialist II",
        "Customer Success Manager",
        "Senior Technical Account Manager",
    ],
    "Finance": ["Accountant", "Financial Analyst", "Senior Financial Analyst", "Finance Lead"],
    "Legal": ["Paralegal", "Legal Counsel", "Senior Legal Counsel", "Principal Counsel"],
    "People": ["People Coordinator", "Recruiter", "HR Business Partner", "Senior HR Business Partner"],
    "Operations": ["Operations Coordinator", "Operations Analyst", "Senior Operations Analyst", "Operations Lead"],
    "IT": ["IT Support Technician", "Systems Administrator", "Senior Systems Engineer", "IT Architect"],
}
MGR_TITLES = {5: "Manager, {f}", 6: "Senior Manager, {f}", 7: "Director, {f}", 8: "VP, {f}"}


class Gen:
    """Holds the generated rows; each build_* method fills one or more tables."""

    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.departments: list[tuple] = []
        self.dept_ids: dict[str, int] = {}
        self.dept_div: dict[int, str] = {}
        self.dept_loc: dict[int, str] = {}
        self.titles: list[tuple] = []
        self.title_ids: dict[str, int] = {}
        self.emps: list[dict] = []
        self.salaries: list[list] = []
        self.terminations: list[tuple] = []
        self.rates: list[tuple] = []
        self.bonuses: list[tuple] = []
        self.leaves: list[tuple] = []
        self.reviews: list[tuple] = []
        self.emails: dict[str, int] = {}

    # ---------------------------------------------------------------- reference data
    def build_reference(self) -> None:
        did = 10
        self.departments.append((did, "EXEC", "Executive Office", None, "CC-1000", "Austin"))
        self.dept_ids["EXEC"], self.dept_div[did], self.dept_loc[did] = did, "Executive", "Austin"
        for div, (code, _fam, teams) in DIVISIONS.items():
            did += 10
            div_id = did
            self.departments.append((div_id, code, div, 10, f"CC-{1000 + did}", teams[0][2]))
            self.dept_ids[code], self.dept_div[div_id], self.dept_loc[div_id] = div_id, div, teams[0][2]
            for tcode, tname, loc in teams:
                did += 1
                self.departments.append((did, tcode, tname, div_id, f"CC-{1000 + did}", loc))
                self.dept_ids[tcode], self.dept_div[did], self.dept_loc[did] = did, div, loc
        tid = 100

        def title(name: str, family: str, level: int, mgr: bool) -> None:
            nonlocal tid
            tid += 1
            base = BASE_USD[level] * FAMILY_MULT[family]
            lo = None if level >= 9 else Decimal(round(base * 0.8, -3))
            hi = None if level >= 9 else Decimal(round(base * 1.25, -3))
            self.titles.append((tid, name, family, level, mgr, lo, hi))
            self.title_ids[name] = tid

        title("Chief Executive Officer", "Executive", 10, True)
        for _k, name, fam in CLEVEL:
            title(name, fam, 9, True)
        for div, (_c, fam, _t) in DIVISIONS.items():
            for lvl, ic in enumerate(IC_TITLES[fam], start=1):
                title(ic, fam, lvl, False)
            for lvl in (5, 6, 7):
                title(MGR_TITLES[lvl].format(f=div), fam, lvl, True)
        for vp in VPS:
            title(vp[0], DIVISIONS[vp[1]][1], 8, True)
        title("Associate Vice President, Finance", "Finance", 7, True)
        title("Associate Vice President, Sales", "Sales", 7, True)
        title("Chief of Staff", "Executive", 7, False)
        title("Executive Assistant", "Executive", 3, False)
        title("Intern", "Engineering", 1, False)

        d, end = date(2015, 1, 1), SNAPSHOT
        levels = {"EUR": 1.08, "GBP": 1.27, "CAD": 0.76}
        while d <= date(2026, 9, 30):
            nxt = date(d.year + (d.month == 12), d.month % 12 + 1, 1)
            last = nxt - DAY
            while last.weekday() >= 5:
                last -= DAY
            for cur in ("EUR", "GBP", "CAD"):
                levels[cur] *= 1 + self.rng.uniform(-0.018, 0.018)
                self.rates.append((cur, last, Decimal(f"{levels[cur]:.6f}")))
            d = nxt
        d = date(2026, 10, 5)
        while d <= end:
            if d.weekday() < 5:
                for cur in ("EUR", "GBP", "CAD"):
                    self.rates.append((cur, d, Decimal(f"{levels[cur] * (1 + self.rng.uniform(-0.004, 0.004)):.6f}")))
            d += DAY

    # ---------------------------------------------------------------- people
    def hire_date(self, level: int) -> date:
        rng = self.rng
        years = list(range(2009, 2027))
        weights = [1 + (y - 2009) * (0.6 if level < 5 else 0.25) for y in years]
        y = rng.choices(years, weights)[0]
        start = date(y, 1, 1)
        span = (date(y, 12, 31) if y < 2026 else date(2026, 9, 20)) - start
        return start + timedelta(days=rng.randrange(span.days + 1))

    def person(self, level: int, title: str, dept: int, manager: int | None, **kw: object) -> dict:
        rng = self.rng
        fn, ln = rng.choice(FIRST), rng.choice(LAST)
        country = (
            LOC_COUNTRY[self.dept_loc[dept]]
            if rng.random() < 0.85
            else rng.choices([c for c, _ in COUNTRY_W], [w for _, w in COUNTRY_W])[0]
        )
        e = {
            "id": 1000 + len(self.emps),
            "first": fn,
            "last": ln,
            "level": level,
            "title": self.title_ids[title],
            "family": self.titles[self.title_ids[title] - 101][2],
            "dept": dept,
            "mgr": manager,
            "country": country,
            "hire": kw.get("hire") or self.hire_date(level),
            "orig_hire": None,
            "status": kw.get("status", "active"),
            "type": kw.get("etype", "full_time"),
            "term": None,
            "stints": None,
        }
        self.emps.append(e)
        return e

    def build_subtree(self, mgr: dict, budget: int, family: str, depts: list[int], div: str) -> None:
        """Spread `budget` people below `mgr`: sub-managers while the budget is big, then individual contributors."""
        rng = self.rng
        lvl = mgr["level"]
        if budget <= 14 or lvl <= 5 and budget <= 18:
            for _ in range(budget):
                self.ic(mgr, family, depts, div)
            return
        sub_lvl = max(5, min(lvl - 1, 7))
        k = max(2, min(9, round(budget / rng.uniform(14, 40))))
        direct = rng.randint(0, 3)
        weights = [rng.paretovariate(1.6) for _ in range(k)]
        remaining = budget - k - direct
        shares = [int(remaining * w / sum(weights)) for w in weights]
        shares[0] += remaining - sum(shares)
        for share in shares:
            dept = rng.choice(depts) if lvl >= 7 else mgr["dept"]
            t = MGR_TITLES[sub_lvl].format(f=div)
            child = self.person(sub_lvl, t, dept, mgr["id"])
            self.build_subtree(child, max(share, 1), family, depts, div)
        for _ in range(direct):
            self.ic(mgr, family, depts, div)

    def ic(self, mgr: dict, family: str, depts: list[int], div: str) -> dict:
        rng = self.rng
        r = rng.random()
        dept = mgr["dept"] if r < 0.9 else rng.choice(depts) if r < 0.985 else rng.choice(list(self.dept_div))
        if dept in (10,) or self.dept_div[dept] == "Executive":
            dept = mgr["dept"]
        lvl = rng.choices([1, 2, 3, 4], [22, 38, 28, 12])[0]
        t = IC_TITLES[family][lvl - 1]
        e = self.person(lvl, t, dept, mgr["id"])
        if rng.random() < 0.04:
            e["type"] = "contractor"
        elif rng.random() < 0.05:
            e["type"] = "part_time"
        return e

    def build_people(self) -> None:
        rng = self.rng
        ceo = self.person(10, "Chief Executive Officer", 10, None, hire=date(2009, 3, 2))
        clevel: dict[str, dict] = {}
        for key, name, fam in CLEVEL:
            dept = self.dept_ids[DIVISIONS[fam][0]] if fam in DIVISIONS else 10
            clevel[key] = self.person(9, name, dept, ceo["id"], hire=date(2009, 6, 1) + timedelta(rng.randrange(2200)))
        self.person(7, "Chief of Staff", 10, ceo["id"])
        self.person(3, "Executive Assistant", 10, ceo["id"])
        for vp_title, div, teams, parent, size in VPS:
            boss = clevel.get(parent) or next(e for e in self.emps if e["title"] == self.title_ids[parent])
            depts = [self.dept_ids[t] for t in teams]
            vp = self.person(
                8,
                vp_title,
                self.dept_ids[DIVISIONS[div][0]],
                boss["id"],
                hire=date(2010, 1, 4) + timedelta(rng.randrange(4500)),
            )
            self.build_subtree(vp, size, DIVISIONS[div][1], depts, div)
        # a few executive-level people in finance and sales with "Associate Vice President" titles (level 7)
        fin_vp = next(e for e in self.emps if e["title"] == self.title_ids["VP, Finance"])
        for e in [e for e in self.emps if e["mgr"] == fin_vp["id"] and e["level"] == 7][:2]:
            e["title"] = self.title_ids["Associate Vice President, Finance"]
        sal_vp = next(e for e in self.emps if e["title"] == self.title_ids["VP, Sales Americas"])
        for e in [e for e in self.emps if e["mgr"] == sal_vp["id"] and e["level"] == 7][:1]:
            e["title"] = self.title_ids["Associate Vice President, Sales"]

    def mark_statuses(self) -> None:
        """Terminations (with rehires), on-leave people, orphans, future starters, boundary hires."""
        rng = self.rng
        by_id = {e["id"]: e for e in self.emps}
        partner_vp = next(e for e in self.emps if e["title"] == self.title_ids["Vice President, Partnerships"])
        self.terminate(partner_vp, date(2025, 6, 30))
        design_vp = next(e for e in self.emps if e["title"] == self.title_ids["VP, Design"])
        design_vp["status"] = "on_leave"
        ics = [e for e in self.emps if e["level"] <= 4 and e["mgr"] is not None and e["status"] == "active"]
        rng.shuffle(ics)
        managers = [e for e in self.emps if e["level"] in (5, 6) and by_id[e["mgr"]]["status"] == "active"]
        rng.shuffle(managers)
        # terminated managers whose reports were never re-pointed
        for m in managers[:14]:
            self.terminate(m, self.rand_date(date(2024, 1, 1), date(2026, 9, 25), m["hire"]))
        # ordinary leavers: extra people who worked here before, attached to their last manager
        mgr_pool = [e for e in self.emps if e["level"] >= 5]
        for _ in range(2400):
            m = rng.choice(mgr_pool)
            family = m["family"]
            lvl = rng.choices([1, 2, 3, 4], [30, 38, 24, 8])[0]
            e = self.person(
                lvl, IC_TITLES[family][lvl - 1] if family in IC_TITLES else "Executive Assistant", m["dept"], m["id"]
            )
            e["hire"] = self.rand_date(date(2009, 6, 1), date(2026, 6, 1), None)
            self.terminate(e, self.rand_date(e["hire"] + timedelta(days=60), date(2026, 10, 9), None))
        # rehires: active people who left once and came back
        rehire_pool = [e for e in ics if e["status"] == "active" and e["hire"] < date(2024, 1, 1)]
        for e in rehire_pool[:160]:
            first = e["hire"]
            left = self.rand_date(first + timedelta(days=200), first + timedelta(days=1500), None)
            back = left + timedelta(days=rng.randint(45, 900))
            if back >= date(2026, 9, 1):
                continue
            e["orig_hire"], e["hire"] = first, back
            e["stints"] = [(first, left), (back, None)]
            self.terminations.append(
                (e["id"], left, rng.choice(["resignation", "relocation", "resignation"]), True, True, None)
            )
        for e in ics[160:420]:
            if e["status"] == "active":
                e["status"] = "on_leave"
        for e in ics[420:434]:
            if e["status"] == "active":
                e["mgr"] = None
        for i, e in enumerate(ics[434:470]):
            if e["status"] == "active" and e["orig_hire"] is None:
                e["hire"] = (
                    (date(2026, 10, 16) + timedelta(days=rng.randrange(50)))
                    if i < 26
                    else date(2026, 10, 1)
                    if i < 31
                    else date(2026, 10, 2)
                )
        for e in ics[470:495]:  # a gap in the data: active full-timers with no salary rows at all
            if e["status"] == "active":
                e["nosalary"] = True

    def rand_date(self, lo: date, hi: date, floor: date | None) -> date:
        if floor and floor > lo:
            lo = floor + timedelta(days=30)
        if hi <= lo:
            return lo
        return lo + timedelta(days=self.rng.randrange((hi - lo).days + 1))

    def terminate(self, e: dict, when: date) -> None:
        rng = self.rng
        e["status"], e["term"] = "terminated", when
        reason = rng.choices(
            ["resignation", "layoff", "performance", "retirement", "contract_end", "relocation"], [55, 14, 9, 4, 8, 10]
        )[0]
        voluntary = reason in ("resignation", "retirement", "relocation")
        self.terminations.append(
            (
                e["id"],
                when,
                reason,
                voluntary,
                reason != "performance" and rng.random() < 0.9,
                rng.choice(
                    [
                        None,
                        None,
                        None,
                        "exit interview done",
                        "garden leave",
                        "Exit interview declined",
                        "equipment returned",
                    ]
                ),
            )
        )

    # ---------------------------------------------------------------- salaries
    def amount(self, e: dict) -> float:
        cur = CURRENCY[e["country"]]
        base = BASE_USD[e["level"]] * FAMILY_MULT.get(e["family"], 1.0) * LOCAL_PER_USD[cur]
        if e["type"] == "part_time":
            base *= 0.6
        return base * self.rng.uniform(0.82, 1.12)

    def build_salaries(self) -> None:
        rng = self.rng
        oct_adjust = {self.dept_ids["ENG-PLAT"], self.dept_ids["ENG-SEC"], self.dept_ids["CS-TAM"]}
        promo_oct2 = 0
        for e in self.emps:
            if e["type"] == "contractor" or e.get("nosalary"):
                continue
            stints = e["stints"] or [(e["hire"], e["term"])]
            amt = self.amount(e) * (0.8 if e["hire"] < date(2016, 1, 1) else 0.92)
            cur = CURRENCY[e["country"]]
            for si, (start, end) in enumerate(stints):
                events: list[tuple[date, str]] = [(start, "hire" if si == 0 else "rehire")]
                limit = end or date(2026, 12, 31)
                for y in range(start.year, 2027):
                    apr = date(y, 4, 1)
                    if start + timedelta(days=90) <= apr <= limit and rng.random() < 0.93:
                        events.append((apr, "merit"))
                d = start + timedelta(days=rng.randint(500, 1600))
                while d < min(limit, date(2026, 9, 30)):
                    if d.month != 4 or d.day != 1:
                        events.append((d, "promotion"))
                    d += timedelta(days=rng.randint(700, 2000))
                if end is None and e["dept"] in oct_adjust and start < date(2026, 6, 1):
                    events.append((date(2026, 10, 1), "market adjustment"))
                if end is None and start < date(2025, 1, 1) and promo_oct2 < 7 and e["id"] % 41 == 0:
                    events.append((date(2026, 10, 2), "promotion"))
                    promo_oct2 += 1
                events = sorted({d: why for d, why in sorted(events, reverse=True)}.items())
                rows: list[list] = []
                for i, (d, why) in enumerate(events):
                    if why == "merit":
                        amt *= rng.uniform(1.015, 1.055)
                    elif why == "promotion":
                        amt *= rng.uniform(1.07, 1.16)
                    elif why == "market adjustment":
                        amt *= rng.uniform(1.04, 1.09)
                    nxt = events[i + 1][0] - DAY if i + 1 < len(events) else end
                    rows.append([e["id"], Decimal(round(amt, -2)).quantize(Decimal("0.01")), cur, d, nxt, why])
                # unpaid leave: a hole between two rows
                if len(rows) > 3 and rng.random() < 0.015:
                    k = rng.randrange(1, len(rows) - 1)
                    if (rows[k][4] - rows[k][3]).days > 120:
                        rows[k][4] = rows[k][3] + timedelta(days=rng.randint(20, 90))
                self.salaries.extend(rows)
        self.salaries.sort(key=lambda r: (r[3], r[0]))
        epoch = datetime(2000, 1, 1, tzinfo=UTC)
        for i, r in enumerate(self.salaries):
            approver = None if rng.random() < 0.35 else 1000 + int(rng.random() * 60)
            created = epoch + timedelta(days=(r[3] - date(2000, 1, 1)).days, seconds=-int(rng.random() * 3_456_000))
            r[:0] = [100001 + i]
            r.extend([approver, created])
        self.inject_salary_anomalies()

    def inject_salary_anomalies(self) -> None:
        """Duplicates, inverted periods, overlaps and lower-case currencies (each on a different employee)."""
        rng = self.rng
        by_emp: dict[int, list[list]] = {}
        for r in self.salaries:
            by_emp.setdefault(r[1], []).append(r)
        for rows in by_emp.values():
            rows.sort(key=lambda r: r[4])
        status = {e["id"]: e["status"] for e in self.emps}
        emps = sorted(by_emp)
        rng.shuffle(emps)
        used: set[int] = set()

        def pick(pred) -> list[list]:
            for emp in emps:
                if emp in used:
                    continue
                rows = by_emp[emp]
                got = pred(rows, emp)
                if got is not None:
                    used.add(emp)
                    return [rows, got]
            raise RuntimeError("no candidate")

        def live(emp: int) -> bool:
            return status[emp] != "terminated"

        def covers(r: list, d: date) -> bool:
            return r[4] <= d and (r[5] is None or r[5] >= d)

        next_id = max(r[0] for r in self.salaries) + 1
        extra: list[list] = []
        for n in range(16):  # duplicate entry of a row; half of them current rows with a corrected amount
            want_current = n < 8
            rows, k = pick(
                lambda rows, emp, want=want_current: next(
                    (i for i, r in enumerate(rows) if (covers(r, AS_OF) and live(emp)) == want), None
                )
            )
            src = rows[k]
            dup = list(src)
            dup[0] = next_id
            next_id += 1
            if want_current or rng.random() < 0.4:
                dup[2] = (src[2] + rng.choice([-500, 500, 1000, 250])).quantize(Decimal("0.01"))
            if n % 4 == 3 and k == len(rows) - 1:
                dup[5] = None
            dup[8] = src[8] + timedelta(days=rng.randint(1, 30), seconds=rng.randint(0, 9999))
            extra.append(dup)
        for _ in range(18):  # inverted end date: the year typed one too low
            rows, k = pick(
                lambda rows, emp: next(
                    (
                        i
                        for i, r in enumerate(rows[:-1])
                        if r[5] is not None and (r[5] - r[4]).days < 330 and rows[i + 1][4] == r[5] + DAY
                    ),
                    None,
                )
            )
            r = rows[k]
            r[5] = date(r[5].year - 1, r[5].month, min(r[5].day, 28))
        rows, k = pick(
            lambda rows, emp: (
                len(rows) - 1 if live(emp) and rows[-1][5] is None and rows[-1][4] < date(2026, 1, 1) else None
            )
        )
        rows[k][5] = rows[k][4] - timedelta(days=31)
        for n in range(36):  # overlaps: never closed, closed one day late, or closed months late
            kind = "open" if n < 16 else "late1" if n < 28 else "late"
            cur_pref = n < 7

            def pred(rows: list[list], emp: int, kind: str = kind, cur_pref: bool = cur_pref) -> int | None:
                for i in range(len(rows) - 1):
                    r, nx = rows[i], rows[i + 1]
                    if r[5] is None or nx[4] != r[5] + DAY:
                        continue
                    if cur_pref and not (live(emp) and covers(nx, AS_OF) and nx[5] is None):
                        continue
                    if kind == "late" and (nx[5] is None or (nx[5] - nx[4]).days < 130):
                        continue
                    return i
                return None

            rows, k = pick(pred)
            nx = rows[k + 1]
            rows[k][5] = (
                None if kind == "open" else nx[4] if kind == "late1" else nx[4] + timedelta(days=rng.randint(10, 120))
            )
        for n in range(30):  # currency keyed in lower case
            rows, k = pick(
                lambda rows, emp: rng.randrange(len(rows)) if rows[0][3] != "USD" or rng.random() < 0.5 else None
            )
            rows[k][3] = rows[k][3].lower() if n % 5 else rows[k][3].capitalize()
        self.salaries.extend(extra)

    # ---------------------------------------------------------------- bonuses, leave, reviews
    def employed_years(self, e: dict) -> list[int]:
        stints = e["stints"] or [(e["hire"], e["term"])]
        years: list[int] = []
        for s, t in stints:
            if s <= SNAPSHOT:
                years += [y for y in range(max(s.year, 2019), (t or SNAPSHOT).year + 1) if y not in years]
        return years

    def build_bonuses(self) -> None:
        rng = self.rng
        bid = 5000
        for e in self.emps:
            if e["type"] == "contractor" or e["level"] < 2 and e["family"] != "Sales":
                continue
            for fy in self.employed_years(e):
                if rng.random() > 0.72:
                    continue
                bid += 1
                base = BASE_USD[e["level"]] * LOCAL_PER_USD[CURRENCY[e["country"]]] * 0.01
                quarters: list[Decimal | None] = []
                for q in range(1, 5):
                    if fy == 2026 and q >= 3:
                        quarters.append(None)
                    elif e["family"] == "Sales":
                        quarters.append(
                            Decimal("0.00")
                            if rng.random() < 0.12
                            else Decimal(round(base * rng.uniform(1.5, 9), 2)).quantize(Decimal("0.01"))
                        )
                    elif q == 4:
                        quarters.append(
                            Decimal("0.00")
                            if rng.random() < 0.08
                            else Decimal(round(base * rng.uniform(4, 14), -1)).quantize(Decimal("0.01"))
                        )
                    else:
                        quarters.append(
                            None
                            if rng.random() < 0.93
                            else Decimal(round(base * rng.uniform(0.5, 2), 2)).quantize(Decimal("0.01"))
                        )
                r = rng.random()
                spot = (
                    None
                    if r < 0.88
                    else Decimal(rng.choice([250, 500, 750, 1000, 1500, 2500])).quantize(Decimal("0.01"))
                    if r < 0.995
                    else Decimal(-rng.choice([250, 500, 1000])).quantize(Decimal("0.01"))
                )
                if rng.random() < 0.003:
                    quarters, spot = [None] * 4, None
                approver = e["mgr"] if rng.random() < 0.8 else None
                created = datetime(fy + 1 if fy < 2026 else 2026, 1 if fy < 2026 else 7, 15, tzinfo=UTC) + timedelta(
                    days=rng.randint(0, 60), seconds=rng.randint(0, 86399)
                )
                row = (bid, e["id"], fy, *quarters, spot, CURRENCY[e["country"]], approver, created)
                self.bonuses.append(row)
                if rng.random() < 0.0015:
                    bid += 1
                    self.bonuses.append((bid, *row[1:-1], row[-1] + timedelta(hours=rng.randint(1, 400))))

    def build_leave_and_reviews(self) -> None:
        rng = self.rng
        types = ["Vacation"] * 9 + [
            "vacation",
            "VACATION",
            "Sick",
            "sick ",
            "SICK",
            "Sick",
            "Parental",
            "Bereavement",
            "Unpaid",
            "Jury Duty",
            "Vacation ",
        ]
        reasons = [None] * 6 + ["family trip", "medical", "moving house", "wedding"]
        comments = [None] * 4 + [
            "Strong year.",
            "Needs support on delivery",
            "Exceeded targets",
            "  promoted mid-cycle",
        ]
        lid, rid = 1, 1
        leaders = [e["id"] for e in self.emps if e["level"] >= 5]
        for e in self.emps:
            for y in self.employed_years(e):
                if y >= 2024:
                    for _ in range(rng.choices((0, 1, 2, 3, 4), (30, 32, 20, 12, 6))[0]):
                        start = date(y, 1, 1) + timedelta(days=rng.randrange(364))
                        ndays = rng.choices((1, 2, 3, 5, 10, 15, 60), (25, 20, 18, 18, 12, 5, 2))[0]
                        end = start + timedelta(days=ndays + ndays // 5 * 2 - 1)
                        r = rng.random()
                        st = (
                            ("approved" if r < 0.9 else "rejected" if r < 0.95 else "cancelled")
                            if start < date(2026, 9, 25)
                            else ("pending", "approved", "rejected")[int(r * 3)]
                        )
                        days = Decimal(ndays) - (Decimal("0.5") if ndays == 1 and r < 0.2 else 0)
                        req = datetime(start.year, start.month, start.day, tzinfo=UTC) - timedelta(
                            seconds=rng.randrange(86400 * 60)
                        )
                        self.leaves.append(
                            (
                                lid,
                                e["id"],
                                rng.choice(types),
                                start,
                                end,
                                days,
                                st,
                                e["mgr"] if st != "pending" else None,
                                rng.choice(reasons),
                                req,
                            )
                        )
                        lid += 1
                if 2020 <= y <= 2025 and rng.random() < 0.85:
                    rating = None if rng.random() < 0.05 else rng.choices((1, 2, 3, 4, 5), (3, 10, 52, 27, 8))[0]
                    sub = (
                        None
                        if rating is None
                        else datetime(y + 1, 1, 1, 9, tzinfo=UTC) + timedelta(seconds=rng.randrange(86400 * 50))
                    )
                    self.reviews.append(
                        (rid, e["id"], e["mgr"] or rng.choice(leaders), f"FY{y}", rating, sub, rng.choice(comments))
                    )
                    rid += 1


def emp_rows(g: Gen) -> list[tuple]:
    rng = random.Random(SEED + 1)
    rows = []
    for e in g.emps:
        base = f"{e['first']}.{e['last']}".lower().replace(" ", "").replace("'", "")
        n = g.emails.get(base, 0)
        g.emails[base] = n + 1
        email = f"{base}{n or ''}@brightwater.example"
        r = rng.random()
        if r < 0.03:
            email = email.upper() if r < 0.01 else email.capitalize()
        if e["type"] == "contractor" and rng.random() < 0.4 or rng.random() < 0.004:
            email = None
        first = e["first"] + (" " if rng.random() < 0.006 and e["level"] < 8 else "")
        created = datetime(e["hire"].year, e["hire"].month, e["hire"].day, 9, tzinfo=UTC) - timedelta(
            days=rng.randint(3, 45), minutes=rng.randint(0, 600)
        )
        if e["orig_hire"]:
            created = datetime(e["orig_hire"].year, e["orig_hire"].month, e["orig_hire"].day, tzinfo=UTC)
        updated = (
            None
            if rng.random() < 0.3
            else datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randint(0, 24_000_000))
        )
        rows.append(
            (
                e["id"],
                f"E{e['id']:05d}",
                first,
                e["last"],
                rng.choice([None] * 12 + [e["first"][:3]]),
                email,
                e["hire"],
                e["orig_hire"],
                e["dept"],
                e["title"],
                e["mgr"],
                e["type"],
                e["status"],
                e["country"],
                created,
                updated,
            )
        )
    return rows


def escape(s: str) -> str:
    """COPY text format escaping (the generated strings never need it, but a stray tab must not shift columns)."""
    if "\\" in s or "\t" in s or "\n" in s:
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
    return s


def copy_block(table: str, cols: str, rows: list[tuple] | list[list]) -> str:
    """One COPY ... FROM stdin block; aware datetimes print as '2026-01-01 09:00:00+00:00', booleans as True/False."""
    body = "\n".join(
        "\t".join(["\\N" if v is None else escape(v) if type(v) is str else str(v) for v in r]) for r in rows
    )
    return f"COPY {table} ({cols}) FROM stdin;\n{body}\n\\.\n\n"


# salaries keeps a fifth of every page free (fillfactor 80), so that fixing a row in place (effective_to, currency:
# no indexed column) is a HOT update. An index build indexes an old row version that some snapshot may still see,
# or that its own transaction updated away, unless it is HOT-updated; salary_period_constraints' exclusion
# constraint on daterange(effective_from, effective_to, '[]') raised on the inverted periods' old versions whenever
# a snapshot older than the fix was open (another session of the database, any open XID of the cluster) or the fix
# and the ALTER TABLE ran in one transaction. At most two of its changed rows share a page (a row version is ~110
# bytes, 1.6 KB free); the table is 6.7 MB instead of 5.4. Values, keys and every digest are unchanged.
SCHEMA = """
CREATE TABLE departments (
    department_id integer NOT NULL,
    dept_code varchar(12) NOT NULL,
    name text NOT NULL,
    parent_department_id integer,
    cost_center varchar(12),
    location text
);
CREATE TABLE job_titles (
    job_title_id integer NOT NULL,
    title text NOT NULL,
    job_family text NOT NULL,
    job_level smallint NOT NULL CONSTRAINT job_titles_job_level_check CHECK (job_level BETWEEN 1 AND 10),
    is_people_manager boolean NOT NULL DEFAULT false,
    min_salary_usd numeric(10,2),
    max_salary_usd numeric(10,2)
);
CREATE TABLE employees (
    employee_id integer NOT NULL,
    employee_number varchar(10) NOT NULL,
    first_name text NOT NULL,
    last_name text NOT NULL,
    preferred_name text,
    email text,
    hire_date date NOT NULL,
    original_hire_date date,
    department_id integer,
    job_title_id integer NOT NULL,
    manager_id integer,
    employment_type text NOT NULL
        CONSTRAINT employees_employment_type_check CHECK (employment_type IN ('full_time', 'part_time', 'contractor')),
    status text NOT NULL CONSTRAINT employees_status_check CHECK (status IN ('active', 'on_leave', 'terminated')),
    country_code char(2) NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz
);
CREATE TABLE salaries (
    salary_id bigint GENERATED BY DEFAULT AS IDENTITY,
    employee_id integer NOT NULL,
    amount numeric(12,2) NOT NULL,
    currency char(3) NOT NULL,
    effective_from date NOT NULL,
    effective_to date,
    change_reason text,
    approved_by integer,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz
) WITH (fillfactor = 80);
COMMENT ON TABLE salaries IS 'Annual base salary, effective-dated. effective_to is the last day the amount applies '
    '(inclusive); NULL means open-ended (current).';
CREATE TABLE exchange_rates (
    currency_code char(3) NOT NULL,
    rate_date date NOT NULL,
    usd_per_unit numeric(12,6) NOT NULL
);
COMMENT ON TABLE exchange_rates IS 'USD value of one unit of the currency, published on rate_date. No rows for USD.';
CREATE TABLE terminations (
    termination_id integer NOT NULL,
    employee_id integer NOT NULL,
    termination_date date NOT NULL,
    reason text NOT NULL,
    voluntary boolean NOT NULL,
    rehire_eligible boolean,
    notes text
);
CREATE TABLE bonuses (
    bonus_id integer NOT NULL,
    employee_id integer NOT NULL,
    fiscal_year smallint NOT NULL,
    q1_amount numeric(10,2),
    q2_amount numeric(10,2),
    q3_amount numeric(10,2),
    q4_amount numeric(10,2),
    spot_amount numeric(10,2),
    currency char(3) NOT NULL,
    approved_by integer,
    created_at timestamptz NOT NULL
);
COMMENT ON TABLE bonuses IS 'Bonus sheet imported from Finance. NULL = not applicable, '
    '0.00 = eligible but nothing paid.';
CREATE TABLE leave_requests (
    leave_id integer NOT NULL,
    employee_id integer NOT NULL,
    leave_type text NOT NULL,
    start_date date NOT NULL,
    end_date date NOT NULL,
    days numeric(4,1) NOT NULL,
    status text NOT NULL,
    approver_id integer,
    reason text,
    requested_at timestamptz NOT NULL
);
CREATE TABLE performance_reviews (
    review_id integer NOT NULL,
    employee_id integer NOT NULL,
    reviewer_id integer,
    review_cycle varchar(8) NOT NULL,
    rating smallint CONSTRAINT performance_reviews_rating_check CHECK (rating BETWEEN 1 AND 5),
    submitted_at timestamptz,
    comments text
);
CREATE FUNCTION touch_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END $$;
"""

# Keys, constraints and indexes come after the data, as in a pg_dump script (bulk validation is much faster).
POST = """
SELECT setval(pg_get_serial_sequence('salaries', 'salary_id'), (SELECT max(salary_id) FROM salaries));
ALTER TABLE ONLY departments ADD CONSTRAINT departments_pkey PRIMARY KEY (department_id);
ALTER TABLE ONLY departments ADD CONSTRAINT departments_dept_code_key UNIQUE (dept_code);
ALTER TABLE ONLY job_titles ADD CONSTRAINT job_titles_pkey PRIMARY KEY (job_title_id);
ALTER TABLE ONLY job_titles ADD CONSTRAINT job_titles_title_key UNIQUE (title);
ALTER TABLE ONLY employees ADD CONSTRAINT employees_pkey PRIMARY KEY (employee_id);
ALTER TABLE ONLY employees ADD CONSTRAINT employees_employee_number_key UNIQUE (employee_number);
ALTER TABLE ONLY salaries ADD CONSTRAINT salaries_pkey PRIMARY KEY (salary_id);
ALTER TABLE ONLY exchange_rates ADD CONSTRAINT exchange_rates_pkey PRIMARY KEY (currency_code, rate_date);
ALTER TABLE ONLY terminations ADD CONSTRAINT terminations_pkey PRIMARY KEY (termination_id);
ALTER TABLE ONLY bonuses ADD CONSTRAINT bonuses_pkey PRIMARY KEY (bonus_id);
ALTER TABLE ONLY leave_requests ADD CONSTRAINT leave_requests_pkey PRIMARY KEY (leave_id);
ALTER TABLE ONLY performance_reviews ADD CONSTRAINT performance_reviews_pkey PRIMARY KEY (review_id);
CREATE INDEX employees_manager_id_idx ON employees (manager_id);
CREATE INDEX employees_department_id_idx ON employees (department_id);
CREATE INDEX salaries_employee_id_idx ON salaries (employee_id, effective_from);
CREATE INDEX terminations_employee_id_idx ON terminations (employee_id);
CREATE INDEX bonuses_employee_year_idx ON bonuses (employee_id, fiscal_year);
CREATE INDEX leave_requests_employee_id_idx ON leave_requests (employee_id, start_date);
CREATE INDEX performance_reviews_employee_id_idx ON performance_reviews (employee_id);
ALTER TABLE ONLY departments ADD CONSTRAINT departments_parent_department_id_fkey
    FOREIGN KEY (parent_department_id) REFERENCES departments (department_id);
ALTER TABLE ONLY employees ADD CONSTRAINT employees_department_id_fkey
    FOREIGN KEY (department_id) REFERENCES departments (department_id);
ALTER TABLE ONLY employees ADD CONSTRAINT employees_job_title_id_fkey
    FOREIGN KEY (job_title_id) REFERENCES job_titles (job_title_id);
ALTER TABLE ONLY employees ADD CONSTRAINT employees_manager_id_fkey
    FOREIGN KEY (manager_id) REFERENCES employees (employee_id);
ALTER TABLE ONLY salaries ADD CONSTRAINT salaries_employee_id_fkey
    FOREIGN KEY (employee_id) REFERENCES employees (employee_id);
ALTER TABLE ONLY salaries ADD CONSTRAINT salaries_approved_by_fkey
    FOREIGN KEY (approved_by) REFERENCES employees (employee_id);
ALTER TABLE ONLY terminations ADD CONSTRAINT terminations_employee_id_fkey
    FOREIGN KEY (employee_id) REFERENCES employees (employee_id);
ALTER TABLE ONLY bonuses ADD CONSTRAINT bonuses_employee_id_fkey
    FOREIGN KEY (employee_id) REFERENCES employees (employee_id);
ALTER TABLE ONLY bonuses ADD CONSTRAINT bonuses_approved_by_fkey
    FOREIGN KEY (approved_by) REFERENCES employees (employee_id);
ALTER TABLE ONLY leave_requests ADD CONSTRAINT leave_requests_employee_id_fkey
    FOREIGN KEY (employee_id) REFERENCES employees (employee_id);
ALTER TABLE ONLY leave_requests ADD CONSTRAINT leave_requests_approver_id_fkey
    FOREIGN KEY (approver_id) REFERENCES employees (employee_id);
ALTER TABLE ONLY performance_reviews ADD CONSTRAINT performance_reviews_employee_id_fkey
    FOREIGN KEY (employee_id) REFERENCES employees (employee_id);
ALTER TABLE ONLY performance_reviews ADD CONSTRAINT performance_reviews_reviewer_id_fkey
    FOREIGN KEY (reviewer_id) REFERENCES employees (employee_id);
CREATE TRIGGER salaries_touch_updated_at BEFORE UPDATE ON salaries
    FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE TRIGGER employees_touch_updated_at BEFORE UPDATE ON employees
    FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
CREATE VIEW v_annual_bonus_totals AS
SELECT employee_id, fiscal_year, currency,
       sum(coalesce(q1_amount, 0) + coalesce(q2_amount, 0) + coalesce(q3_amount, 0) + coalesce(q4_amount, 0)
           + coalesce(spot_amount, 0)) AS total_amount,
       count(*) AS sheet_rows
FROM bonuses
GROUP BY employee_id, fiscal_year, currency;
CREATE VIEW v_active_headcount AS
SELECT d.dept_code, d.name AS department, count(*) AS headcount
FROM employees e JOIN departments d USING (department_id)
WHERE e.status <> 'terminated'
GROUP BY d.dept_code, d.name;
"""


def main(out: str) -> None:
    g = Gen()
    g.build_reference()
    g.build_people()
    g.mark_statuses()
    g.build_salaries()
    g.build_bonuses()
    g.build_leave_and_reviews()
    terms = sorted(g.terminations, key=lambda t: (t[1], t[0]))
    parts = ["SET client_encoding = 'UTF8';\nSET standard_conforming_strings = on;\n", SCHEMA, "\n"]
    parts.append(
        copy_block(
            "departments", "department_id, dept_code, name, parent_department_id, cost_center, location", g.departments
        )
    )
    parts.append(
        copy_block(
            "job_titles",
            "job_title_id, title, job_family, job_level, is_people_manager, min_salary_usd, max_salary_usd",
            g.titles,
        )
    )
    parts.append(
        copy_block(
            "employees",
            "employee_id, employee_number, first_name, last_name, preferred_name, email, "
            "hire_date, original_hire_date, department_id, job_title_id, manager_id, employment_type, "
            "status, country_code, created_at, updated_at",
            emp_rows(g),
        )
    )
    parts.append(
        copy_block(
            "salaries",
            "salary_id, employee_id, amount, currency, effective_from, effective_to, "
            "change_reason, approved_by, created_at",
            g.salaries,
        )
    )
    parts.append(copy_block("exchange_rates", "currency_code, rate_date, usd_per_unit", g.rates))
    parts.append(
        copy_block(
            "terminations",
            "termination_id, employee_id, termination_date, reason, voluntary, rehire_eligible, notes",
            [(i + 1, *t) for i, t in enumerate(terms)],
        )
    )
    parts.append(
        copy_block(
            "bonuses",
            "bonus_id, employee_id, fiscal_year, q1_amount, q2_amount, q3_amount, "
            "q4_amount, spot_amount, currency, approved_by, created_at",
            g.bonuses,
        )
    )
    parts.append(
        copy_block(
            "leave_requests",
            "leave_id, employee_id, leave_type, start_date, end_date, days, status, approver_id, reason, requested_at",
            g.leaves,
        )
    )
    parts.append(
        copy_block(
            "performance_reviews",
            "review_id, employee_id, reviewer_id, review_cycle, rating, submitted_at, comments",
            g.reviews,
        )
    )
    parts.append(POST)
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(parts))


if __name__ == "__main__":
    main(sys.argv[1])
