"""Word lists for the seed generators: people, places, streets. Plain data, no logic."""

from __future__ import annotations

FIRST_NAMES = (
    "Emma Olivia Ava Sophia Isabella Mia Amelia Harper Evelyn Abigail Emily Elizabeth Sofia Avery Ella Scarlett "
    "Grace Chloe Victoria Riley Aria Lily Aubrey Zoey Penelope Lillian Addison Layla Natalie Camila Hannah "
    "Brooklyn Zoe Nora Leah Savannah Audrey Claire Eleanor Skylar Ellie Samantha Stella Paisley Violet Mila "
    "Allison Alexa Anna Hazel Aaliyah Ariana Lucy Caroline Sarah Genesis Kennedy Sadie Gabriella Madelyn Adeline "
    "Maya Autumn Aurora Piper Hailey Arianna Kaylee Ruby Serenity Eva Naomi Nevaeh Alice Luna Bella Quinn Lydia "
    "Peyton Melanie Kylie Aubree Mackenzie Kinsley Cora Julia Taylor Katherine Madeline Gianna Eliana Elena Vivian "
    "Liam Noah William James Logan Benjamin Mason Elijah Oliver Jacob Lucas Michael Alexander Ethan Daniel Matthew "
    "Aiden Henry Joseph Jackson Samuel Sebastian David Carter Wyatt Jayden John Owen Dylan Luke Gabriel Anthony "
    "Isaac Grayson Jack Julian Levi Christopher Joshua Andrew Lincoln Mateo Ryan Jaxon Nathan Aaron Isaiah Thomas "
    "Charles Caleb Josiah Christian Hunter Eli Jonathan Connor Landon Adrian Asher Cameron Leo Theodore Jeremiah "
    "Hudson Robert Easton Nolan Nicholas Ezra Colton Angel Brayden Jordan Dominic Austin Ian Adam Elias Jose "
    "Ezekiel Carson Evan Maverick Bryson Jace Cooper Xavier Parker Roman Jason Santiago Chase Sawyer Gavin Leonardo "
    "Kayden Ayden Jameson Priya Arjun Wei Mei Hiroshi Yuki Fatima Omar Amara Kwame Ingrid Lars Mateus Lucia Diego "
    "Rafael Anika Ravi Chen Jin Soo-ah Tomasz Agnieszka Dmitri Svetlana Siobhan Declan Niamh Kofi"
).split()

LAST_NAMES = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson "
    "Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis "
    "Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera "
    "Campbell Mitchell Carter Roberts Gomez Phillips Evans Turner Diaz Parker Cruz Edwards Collins Reyes Stewart "
    "Morris Morales Murphy Cook Rogers Gutierrez Ortiz Morgan Cooper Peterson Bailey Reed Kelly Howard Ramos Kim "
    "Cox Ward Richardson Watson Brooks Chavez Wood James Bennett Gray Mendoza Ruiz Hughes Price Alvarez Castillo "
    "Sanders Patel Myers Long Ross Foster Jimenez Powell Jenkins Perry Russell Sullivan Bell Coleman Butler "
    "Henderson Barnes Gonzales Fisher Vasquez Simmons Romero Jordan Patterson Alexander Hamilton Graham Reynolds "
    "Griffin Wallace Moreno West Cole Hayes Bryant Herrera Gibson Ellis Tran Medina Aguilar Stevens Murray Ford "
    "Castro Marshall Owens Harrison Fernandez McDonald Woods Washington Kennedy Wells Vargas Henry Chen Freeman "
    "Webb Tucker Guzman Burns Crawford Olson Simpson Porter Hunter Gordon Mendez Silva Shaw Snyder Mason Dixon "
    "Munoz Hunt Hicks Holmes Palmer Wagner Black Robertson Boyd Rose Stone Salazar Fox Warren Mills Meyer Rice "
    "Schmidt Garza Daniels Ferguson Nichols Stephens Soto Weaver Ryan Gardner Payne Grant Dunn Kowalski Novak "
    "Okafor Mensah Haddad Nakamura Tanaka Yamamoto Lindqvist Johansson O'Brien Gallagher Byrne Singh Sharma Iyer"
).split()

# (city, state, ZIP prefix)
CITIES = (
    ("Portland", "OR", "972"),
    ("Seattle", "WA", "981"),
    ("Spokane", "WA", "992"),
    ("Boise", "ID", "837"),
    ("Sacramento", "CA", "958"),
    ("Oakland", "CA", "946"),
    ("San Diego", "CA", "921"),
    ("Fresno", "CA", "937"),
    ("Phoenix", "AZ", "850"),
    ("Tucson", "AZ", "857"),
    ("Albuquerque", "NM", "871"),
    ("Denver", "CO", "802"),
    ("Boulder", "CO", "803"),
    ("Salt Lake City", "UT", "841"),
    ("Las Vegas", "NV", "891"),
    ("Reno", "NV", "895"),
    ("Austin", "TX", "787"),
    ("Dallas", "TX", "752"),
    ("Houston", "TX", "770"),
    ("San Antonio", "TX", "782"),
    ("Oklahoma City", "OK", "731"),
    ("Tulsa", "OK", "741"),
    ("Omaha", "NE", "681"),
    ("Kansas City", "MO", "641"),
    ("St. Louis", "MO", "631"),
    ("Minneapolis", "MN", "554"),
    ("Madison", "WI", "537"),
    ("Milwaukee", "WI", "532"),
    ("Chicago", "IL", "606"),
    ("Springfield", "IL", "627"),
    ("Indianapolis", "IN", "462"),
    ("Columbus", "OH", "432"),
    ("Cleveland", "OH", "441"),
    ("Detroit", "MI", "482"),
    ("Ann Arbor", "MI", "481"),
    ("Louisville", "KY", "402"),
    ("Nashville", "TN", "372"),
    ("Memphis", "TN", "381"),
    ("Atlanta", "GA", "303"),
    ("Savannah", "GA", "314"),
    ("Charlotte", "NC", "282"),
    ("Raleigh", "NC", "276"),
    ("Richmond", "VA", "232"),
    ("Baltimore", "MD", "212"),
    ("Philadelphia", "PA", "191"),
    ("Pittsburgh", "PA", "152"),
    ("Newark", "NJ", "071"),
    ("Buffalo", "NY", "142"),
    ("Albany", "NY", "122"),
    ("Brooklyn", "NY", "112"),
    ("Hartford", "CT", "061"),
    ("Providence", "RI", "029"),
    ("Boston", "MA", "021"),
    ("Worcester", "MA", "016"),
    ("Burlington", "VT", "054"),
    ("Portland", "ME", "041"),
    ("Miami", "FL", "331"),
    ("Tampa", "FL", "336"),
    ("Orlando", "FL", "328"),
    ("New Orleans", "LA", "701"),
    ("Birmingham", "AL", "352"),
    ("Charleston", "SC", "294"),
    ("Des Moines", "IA", "503"),
    ("Fargo", "ND", "581"),
    ("Anchorage", "AK", "995"),
    ("Honolulu", "HI", "968"),
)

STREETS = (
    "Maple",
    "Oak",
    "Pine",
    "Cedar",
    "Elm",
    "Willow",
    "Birch",
    "Walnut",
    "Chestnut",
    "Spruce",
    "Hickory",
    "Aspen",
    "Main",
    "Church",
    "High",
    "Park",
    "Lake",
    "Hill",
    "River",
    "Meadow",
    "Forest",
    "Sunset",
    "Highland",
    "Ridge",
    "Washington",
    "Lincoln",
    "Jefferson",
    "Madison",
    "Franklin",
    "Jackson",
    "Adams",
    "Monroe",
    "Grant",
    "Harrison",
    "Mill",
    "Spring",
    "Valley",
    "Orchard",
    "Garden",
    "Prospect",
    "Center",
    "Union",
    "College",
    "Front",
    "Water",
    "Bridge",
    "Railroad",
    "Fairview",
    "Greenwood",
    "Lakeview",
    "Woodland",
    "Cherry",
    "Magnolia",
    "Dogwood",
)
STREET_TYPES = ("St", "Ave", "Rd", "Blvd", "Ln", "Dr", "Ct", "Way", "Pl", "Ter")

EMAIL_DOMAINS = ("example.com", "example.net", "example.org", "mail.example.com", "inbox.example.net")

USERNAME_WORDS = (
    "quiet river fox maple north static pixel copper cedar lunar amber rusty velvet hollow sunny stormy "
    "wander tinker garden coffee bicycle paper lantern harbor falcon otter badger heron juniper sage "
    "granite willow ember frost meadow thistle cobalt indigo marble pebble comet orbit nova canyon prairie"
).split()

US_STATES = (
    ("AL", "Alabama"),
    ("AK", "Alaska"),
    ("AZ", "Arizona"),
    ("AR", "Arkansas"),
    ("CA", "California"),
    ("CO", "Colorado"),
    ("CT", "Connecticut"),
    ("DE", "Delaware"),
    ("DC", "District of Columbia"),
    ("FL", "Florida"),
    ("GA", "Georgia"),
    ("HI", "Hawaii"),
    ("ID", "Idaho"),
    ("IL", "Illinois"),
    ("IN", "Indiana"),
    ("IA", "Iowa"),
    ("KS", "Kansas"),
    ("KY", "Kentucky"),
    ("LA", "Louisiana"),
    ("ME", "Maine"),
    ("MD", "Maryland"),
    ("MA", "Massachusetts"),
    ("MI", "Michigan"),
    ("MN", "Minnesota"),
    ("MS", "Mississippi"),
    ("MO", "Missouri"),
    ("MT", "Montana"),
    ("NE", "Nebraska"),
    ("NV", "Nevada"),
    ("NH", "New Hampshire"),
    ("NJ", "New Jersey"),
    ("NM", "New Mexico"),
    ("NY", "New York"),
    ("NC", "North Carolina"),
    ("ND", "North Dakota"),
    ("OH", "Ohio"),
    ("OK", "Oklahoma"),
    ("OR", "Oregon"),
    ("PA", "Pennsylvania"),
    ("RI", "Rhode Island"),
    ("SC", "South Carolina"),
    ("SD", "South Dakota"),
    ("TN", "Tennessee"),
    ("TX", "Texas"),
    ("UT", "Utah"),
    ("VT", "Vermont"),
    ("VA", "Virginia"),
    ("WA", "Washington"),
    ("WV", "West Virginia"),
    ("WI", "Wisconsin"),
    ("WY", "Wyoming"),
)
