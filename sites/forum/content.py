"""Hand-written forum content for the generator: communities, post title templates, bodies, replies."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Community:
    name: str
    title: str
    description: str
    titles: tuple[str, ...]
    fills: dict[str, tuple[str, ...]] = field(default_factory=dict)
    bodies: tuple[str, ...] = ()
    replies: tuple[str, ...] = ()
    links: tuple[str, ...] = ()


RULES = (
    "1. Be civil. Personal attacks get removed.\n2. Stay on topic.\n3. No spam or self-promotion.\n"
    "4. Search before asking: many questions have been answered before."
)

COMMUNITIES: tuple[Community, ...] = (
    Community(
        "gardening",
        "Gardening",
        "Vegetables, flowers, houseplants and everything that grows.",
        (
            "My {plant} leaves are turning yellow. What am I doing wrong?",
            "First {plant} harvest of the year!",
            "What is eating my {plant}?",
            "Best {tool} for a small backyard garden?",
            "Raised beds: cedar or galvanized steel?",
            "How often should I water {plant} in a heat wave?",
            "Finally got my {plant} to flower after three years",
            "Is it too late to plant {plant} in {month}?",
            "Composting in an apartment: does it actually work?",
            "Show me your balcony gardens",
            "{plant} seedlings are leggy, how do I fix it?",
        ),
        {
            "plant": (
                "tomato",
                "basil",
                "zucchini",
                "pepper",
                "strawberry",
                "lavender",
                "hydrangea",
                "monstera",
                "fig tree",
                "garlic",
                "blueberry",
                "rose",
            ),
            "tool": ("hand trowel", "pruning shears", "soaker hose", "wheelbarrow", "hori hori knife"),
            "month": ("June", "July", "August", "September"),
        },
        (
            "Zone 7b here, clay soil that I have been amending with compost for two seasons.",
            "I water every morning before work and the bed gets about six hours of direct sun.",
            "Pictures would not upload, but the spots are brown with yellow edges and started at the bottom.",
            "I tried neem oil last week and it did not seem to change anything.",
            "Any advice appreciated, this is only my second year growing anything.",
        ),
        (
            "Sounds like overwatering to me. Let the top inch dry out between waterings.",
            "Could be early blight. Pull the affected leaves and mulch so soil does not splash up.",
            "Check the undersides of the leaves for aphids.",
            "Same thing happened to me, a bit of fish emulsion fixed it.",
            "Gorgeous! What variety is that?",
            "Cedar lasts longer than people think, mine are eight years old.",
        ),
    ),
    Community(
        "cooking",
        "Cooking",
        "Recipes, techniques and kitchen questions for home cooks.",
        (
            "What's your go-to weeknight {dish}?",
            "Finally nailed {dish} after years of trying",
            "Cast iron or carbon steel for {dish}?",
            "My {dish} always comes out {problem}. Help!",
            "Cheap pantry meals that don't feel cheap",
            "Made {dish} from scratch for the first time",
            "What's a technique that changed your cooking forever?",
            "Is a {gadget} worth it?",
            "Meal prep ideas for a family of four on a budget",
        ),
        {
            "dish": (
                "risotto",
                "sourdough",
                "fried rice",
                "pad thai",
                "chili",
                "lasagna",
                "ramen",
                "curry",
                "pie crust",
                "biscuits",
            ),
            "problem": ("gummy", "dry", "bland", "too salty", "soggy"),
            "gadget": ("stand mixer", "rice cooker", "sous vide", "pressure cooker", "food processor"),
        },
        (
            "I follow the recipe exactly and it still comes out wrong.",
            "Using a 10-inch skillet on a gas stove.",
            "My family loved it and asked for seconds, which never happens.",
            "Recipe in the comments if anyone wants it.",
        ),
        (
            "Salt your pasta water like the sea, it makes a huge difference.",
            "Lower the heat and be patient.",
            "Day-old rice is the secret for fried rice.",
            "That looks incredible.",
            "Weigh your flour instead of using cups.",
            "MSG is your friend, do not let anyone tell you otherwise.",
        ),
    ),
    Community(
        "personalfinance",
        "Personal Finance",
        "Budgeting, saving, debt, investing and taxes.",
        (
            "Paid off ${amount} of debt in {months} months!",
            "Should I pay off my car loan early or invest?",
            "How much emergency fund is enough?",
            "First job out of college: what should I do with my 401(k)?",
            "Is a high-yield savings account worth switching banks for?",
            "Budgeting app recommendations?",
            "Got a raise to ${salary}, how do I avoid lifestyle creep?",
            "Renting vs buying in a high cost of living area",
        ),
        {
            "amount": ("8,000", "12,500", "23,000", "41,000", "60,000"),
            "months": ("9", "14", "18", "26"),
            "salary": ("62,000", "75,000", "90,000", "115,000"),
        },
        (
            "I am 28, no kids, renting with a roommate.",
            "Interest rate on the loan is 6.9% and I have about $4,000 in savings.",
            "My employer matches 4% but I only contribute 2% right now.",
            "Not sure if I am overthinking this.",
        ),
        (
            "Always take the full employer match first, it is free money.",
            "Three to six months of expenses is the usual rule.",
            "Congrats, that is a huge accomplishment!",
            "Check the wiki, it has a flowchart for exactly this.",
            "Pay off anything above about 7% before investing extra.",
        ),
    ),
    Community(
        "cycling",
        "Cycling",
        "Road, gravel, commuting and mountain biking.",
        (
            "Finally did my first {distance} ride!",
            "Gravel or road bike for mostly paved commuting?",
            "How do you deal with {problem} on long rides?",
            "New bike day: {bike}",
            "Tubeless worth the hassle?",
            "Drivers in {city} are getting worse",
            "What's in your saddle bag?",
        ),
        {
            "distance": ("50 km", "100 km", "century", "200 km"),
            "problem": ("numb hands", "saddle soreness", "cramps", "headwinds"),
            "bike": ("steel touring bike", "carbon road bike", "used gravel bike", "cargo e-bike"),
            "city": ("Portland", "Denver", "Austin", "Chicago", "Boston"),
        },
        (
            "Took about five hours with stops.",
            "I am around 80 kg and ride four days a week.",
            "Bought it used for about half of retail.",
        ),
        (
            "Get a proper bike fit, it fixed all my pain.",
            "Eat before you are hungry, drink before you are thirsty.",
            "Tubeless changed my life, no flats in two years.",
            "Nice ride! Enjoy it.",
            "Lights on, even in the day.",
        ),
    ),
    Community(
        "homeimprovement",
        "Home Improvement",
        "DIY repairs, renovations and contractor questions.",
        (
            "Is this crack in my {room} wall something to worry about?",
            "Replaced my {thing} myself and saved $$$",
            "How much should a {project} cost?",
            "Contractor ghosted me halfway through the {project}",
            "Before and after: {room} refresh on a budget",
            "Best way to fix a squeaky {thing}?",
        ),
        {
            "room": ("kitchen", "bathroom", "basement", "living room", "garage"),
            "thing": ("faucet", "toilet flapper", "door hinge", "ceiling fan", "water heater", "stair tread"),
            "project": ("deck rebuild", "bathroom remodel", "roof replacement", "fence install"),
        },
        (
            "House was built in 1978.",
            "The crack runs diagonally from the door frame and is about 2 mm wide.",
            "I got three quotes and they are all over the place.",
        ),
        (
            "Diagonal cracks from door corners are usually settling, but get it checked.",
            "Shut off the water first!",
            "YouTube is your friend for this one.",
            "Always get it in writing.",
            "That looks great, nice work.",
        ),
    ),
    Community(
        "boardgames",
        "Board Games",
        "Tabletop games, strategy, reviews and game nights.",
        (
            "Best {count}-player game for people new to the hobby?",
            "Just played {game} for the first time",
            "Is {game} worth it at full price?",
            "Game night ideas for a group that hates long rules explanations",
            "Organizing my shelf: show me your storage solutions",
            "Cooperative games that are not {game}?",
        ),
        {
            "count": ("two", "three", "four", "six"),
            "game": ("Wingspan", "Catan", "Pandemic", "Azul", "Terraforming Mars", "Ticket to Ride", "Spirit Island"),
        },
        (
            "We play every Friday, mostly casual gamers.",
            "My partner loves puzzle-like games but hates direct conflict.",
        ),
        (
            "Can't go wrong with Azul.",
            "Try Cascadia, it is a hit with every group.",
            "House rule it and have fun.",
            "That sounds like a great group.",
            "Sleeve your cards, trust me.",
        ),
    ),
    Community(
        "python",
        "Python",
        "The Python programming language: news, questions and projects.",
        (
            "Why does my {thing} raise {error}?",
            "Built a small {project} in Python this weekend",
            "Best way to learn {topic} in 2025?",
            "{tool} vs {tool2} for a new project?",
            "Type hints: worth it in small scripts?",
        ),
        {
            "thing": ("list comprehension", "async function", "dataclass", "import", "generator"),
            "error": ("KeyError", "TypeError", "RecursionError", "ModuleNotFoundError"),
            "project": ("budget tracker", "CLI tool", "web scraper", "Discord bot", "static site generator"),
            "topic": ("asyncio", "packaging", "testing", "data analysis"),
            "tool": ("Flask", "FastAPI", "Django", "Starlette"),
            "tool2": ("Django", "Flask", "Litestar", "Bottle"),
        },
        (
            "Python 3.11 on Linux.",
            "Here is a minimal example that reproduces it.",
            "I have read the docs but I am still confused.",
        ),
        (
            "You are mutating the list while iterating over it.",
            "Check that your virtualenv is activated.",
            "Use pathlib, it makes this much easier.",
            "Nice project! Is the code on GitHub?",
            "pytest plus fixtures, every time.",
        ),
    ),
    Community(
        "travel",
        "Travel",
        "Trip reports, itineraries and travel questions.",
        (
            "{days} days in {place}: what should I not miss?",
            "Trip report: {place} on a budget",
            "Is {place} worth visiting in {season}?",
            "Packing light for {days} days, possible?",
            "Lost luggage horror stories",
        ),
        {
            "days": ("3", "5", "7", "10", "14"),
            "place": ("Lisbon", "Kyoto", "Mexico City", "Iceland", "the Scottish Highlands", "Vancouver", "Istanbul"),
            "season": ("winter", "spring", "the rainy season", "August"),
        },
        ("Traveling with my partner, we like food and walking more than museums.", "Budget is about $150 a day."),
        (
            "Go early in the morning to beat the crowds.",
            "Get a transit pass, it pays for itself.",
            "Eat where the locals eat.",
            "Great report, thanks for sharing!",
            "Packing cubes are a game changer.",
        ),
    ),
    Community(
        "books",
        "Books",
        "What are you reading? Reviews, recommendations and discussion.",
        (
            "Just finished {book} and I need to talk about it",
            "Books like {book}?",
            "What's your comfort read?",
            "DNF'd {book}, am I missing something?",
            "Reading goal update: {n} books this year",
        ),
        {
            "book": (
                "a 900-page fantasy epic",
                "that viral thriller",
                "a classic I avoided in school",
                "a slow literary novel",
                "a space opera trilogy",
            ),
            "n": ("12", "25", "40", "52"),
        },
        ("No spoilers in the title, promise.", "I read mostly on an e-reader these days."),
        (
            "The ending makes the middle worth it.",
            "Try the audiobook, the narrator is fantastic.",
            "Adding this to my list.",
            "Comfort read: anything by Pratchett.",
        ),
    ),
    Community(
        "photography",
        "Photography",
        "Cameras, lenses, technique and critique.",
        (
            "First {kind} shoot, feedback welcome",
            "Upgrade from {camera}: lens or body?",
            "How do you edit {kind} photos?",
            "Shot this at golden hour with a {lens}",
            "Manual mode finally clicked for me",
        ),
        {
            "kind": ("portrait", "landscape", "street", "astro", "wildlife"),
            "camera": ("a kit lens", "an old DSLR", "my phone"),
            "lens": ("50mm f/1.8", "35mm prime", "70-200mm", "ultra-wide"),
        },
        ("Settings: f/2.8, 1/250, ISO 400.", "Edited lightly in Lightroom."),
        ("Glass first, body later.", "Horizon is a little tilted, otherwise great.", "Beautiful light!", "Shoot RAW."),
    ),
    Community(
        "running",
        "Running",
        "From couch to marathon.",
        (
            "Finished my first {race}!",
            "How do you stay motivated in {season}?",
            "Shin splints again, what am I doing wrong?",
            "Best shoes for {surface}?",
            "Training plan for a sub-{time} half?",
        ),
        {
            "race": ("5K", "10K", "half marathon", "marathon", "trail race"),
            "season": ("winter", "the summer heat"),
            "surface": ("trails", "treadmill", "road"),
            "time": ("2:00", "1:45", "1:30"),
        },
        ("Been running for about a year.", "Averaging 30 km a week."),
        (
            "Increase mileage slowly, 10% a week max.",
            "Congrats!!",
            "Strength training helped my shins a lot.",
            "Easy runs should feel easy.",
        ),
    ),
    Community(
        "movies",
        "Movies",
        "Film news, reviews and discussion.",
        (
            "Underrated {genre} movies?",
            "Just rewatched a {decade} classic and it holds up",
            "Best movie you saw in a theater this year?",
            "Which sequel was better than the original?",
            "Movies with great practical effects",
        ),
        {"genre": ("horror", "sci-fi", "comedy", "heist", "animated"), "decade": ("70s", "80s", "90s")},
        ("Spoilers below.", "Saw it on a whim and loved it."),
        ("Seconding this one.", "The score is what makes it.", "Holds up better than I expected.", "Great pick."),
    ),
    Community(
        "linux",
        "Linux",
        "Distributions, desktops, servers and the command line.",
        (
            "Switched from Windows to {distro}, first impressions",
            "Wi-Fi not working after update on {distro}",
            "Favorite {tool} tips?",
            "Which desktop environment for an old laptop?",
            "Dotfiles thread: show yours",
        ),
        {"distro": ("Debian", "Fedora", "Arch", "Ubuntu", "Mint"), "tool": ("tmux", "vim", "bash", "systemd", "ssh")},
        ("Laptop is a 2017 ThinkPad.", "dmesg shows firmware errors."),
        (
            "Install the non-free firmware package.",
            "Check journalctl for errors.",
            "XFCE runs great on old hardware.",
            "Welcome aboard!",
        ),
    ),
    Community(
        "diy",
        "DIY & Crafts",
        "Woodworking, sewing, knitting and maker projects.",
        (
            "Made a {thing} from scrap wood",
            "First {craft} project, be gentle",
            "How do I finish {material}?",
            "Tool recommendations for a beginner {craft}er?",
        ),
        {
            "thing": ("bookshelf", "cutting board", "planter box", "step stool", "picture frame"),
            "craft": ("knitting", "woodworking", "sewing", "leatherwork"),
            "material": ("pine", "walnut", "oak", "plywood"),
        },
        ("Took me two weekends.", "Used pocket screws and wood glue."),
        (
            "Looks great for a first project!",
            "Danish oil is forgiving for beginners.",
            "Measure twice, cut once.",
            "Love the grain on that.",
        ),
    ),
    Community(
        "pets",
        "Pets",
        "Cats, dogs and other companions.",
        (
            "My {pet} keeps {habit}, any tips?",
            "Meet our new {pet}!",
            "Best food for a senior {pet}?",
            "Vet bills are killing me, is pet insurance worth it?",
        ),
        {
            "pet": ("dog", "cat", "rabbit", "puppy", "kitten"),
            "habit": ("chewing furniture", "waking us at 5 a.m.", "pulling on the leash", "scratching the couch"),
        },
        ("She is about two years old, adopted from a shelter.", "We have tried everything."),
        (
            "Puzzle feeders help with boredom.",
            "So cute!",
            "Consistency is key with training.",
            "Insurance saved us $4,000 last year.",
        ),
    ),
    Community(
        "localnews",
        "Riverton Local",
        "News and discussion for Riverton and the surrounding county.",
        (
            "City council votes on {issue} next week",
            "New {place} opening on Main Street",
            "Road closures on {road} this weekend",
            "Anyone else lose power last night?",
            "Best {food} in town?",
        ),
        {
            "issue": ("the bike lane plan", "library hours", "the stadium proposal", "parking rates"),
            "place": ("bakery", "bookstore", "climbing gym", "taco spot"),
            "road": ("Route 9", "Elm Street", "the river bridge"),
            "food": ("pizza", "tacos", "coffee", "bagels"),
        },
        ("Details on the city website.", "Heard about it from a neighbor."),
        (
            "Finally!",
            "Thanks for the heads up.",
            "The one on 3rd Street is the best.",
            "Power was out for two hours here.",
        ),
    ),
    Community(
        "fitness",
        "Fitness",
        "Strength training, cardio and nutrition.",
        (
            "Progress after {months} months of lifting",
            "Beginner routine for {goal}?",
            "Home gym on a budget",
            "How much protein do I actually need?",
        ),
        {"months": ("3", "6", "12"), "goal": ("strength", "fat loss", "general fitness")},
        ("Training three days a week.", "Eating roughly maintenance calories."),
        (
            "Progressive overload, sleep, protein.",
            "Great progress!",
            "A good beginner program beats a perfect one you skip.",
        ),
    ),
    Community(
        "gaming",
        "Gaming",
        "Video games on every platform.",
        (
            "Is {game} worth it on sale?",
            "Just finished {game}, what a ride",
            "Games like {game}?",
            "Backlog check: what are you playing?",
        ),
        {"game": ("a cozy farming sim", "that huge open-world RPG", "a roguelike deckbuilder", "an indie platformer")},
        ("Playing on a Steam Deck.", "About 40 hours in."),
        ("Absolutely, one of the best.", "Wait for a sale.", "The DLC is even better.", "Adding to my wishlist."),
    ),
    Community(
        "askscience",
        "Ask Science",
        "Questions answered by people who know the science.",
        (
            "Why is the sky {color} at sunset?",
            "How do {animal} navigate?",
            "What would happen if {scenario}?",
            "Why does {thing} feel cold?",
        ),
        {
            "color": ("red", "orange", "purple"),
            "animal": ("birds", "bees", "sea turtles", "salmon"),
            "scenario": ("the Moon disappeared", "Earth stopped spinning", "we drilled through the planet"),
            "thing": ("metal", "tile", "a breeze"),
        },
        ("Asking for my kid, who stumped me at dinner.",),
        (
            "Rayleigh scattering: shorter wavelengths scatter more.",
            "Great question!",
            "They use Earth's magnetic field.",
            "Metal conducts heat away from your hand faster.",
        ),
    ),
    Community(
        "meta",
        "Meta",
        "Feedback, announcements and questions about this forum.",
        (
            "Feature request: {feature}",
            "Announcement: updated community rules",
            "Bug: {bug}",
            "How do I become a moderator?",
        ),
        {
            "feature": ("dark mode", "saved posts", "user flair", "better search"),
            "bug": ("votes not showing", "pagination skips a page", "notifications are late"),
        },
        ("Would make the site so much better.", "Steps to reproduce below."),
        ("+1, would love this.", "Thanks for reporting, we are looking into it.", "Check the sidebar for the rules."),
    ),
)

GENERIC_REPLIES = (
    "This is really helpful, thanks.",
    "Following, I have the same question.",
    "Great post.",
    "Can you share more details?",
    "I had the same experience.",
    "Agreed, completely.",
    "Not sure I agree, but interesting take.",
    "Saving this for later.",
    "Came here to say this.",
    "Underrated comment.",
    "Thanks, that worked for me!",
    "Hard disagree.",
)

TOXIC = (
    "Nobody cares about your opinion, idiot.",
    "This is the dumbest thing I have read all week.",
    "BUY CHEAP WATCHES AT totally-legit-watches.example !!!",
    "Get off this forum, loser.",
)

REPORT_REASONS = {
    "spam": "Spam",
    "harassment": "Harassment or personal attack",
    "off_topic": "Off topic",
    "misinformation": "Misinformation",
    "other": "Other",
}
