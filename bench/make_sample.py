"""Regenerate the sample corpus shipped in data/sample/ (deterministic for a given --seed).

The text is generated here from small word lists and sentence templates (no third-party text),
so it can be redistributed with the project. About one document in seven is a planted near-
duplicate of an earlier one: a few words inserted, deleted or swapped, or a boilerplate header or
footer changed. ``planted.jsonl`` lists them: ``{"id", "original", "edits"}``.

    python bench/make_sample.py            # writes data/sample/corpus.jsonl and planted.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random

PEOPLE = """Ada Moreno, Ben Okafor, Clara Lindqvist, Dev Patel, Elena Rossi, Farid Haddad,
Grace Kim, Hugo Lefevre, Ines Duarte, Jonas Weber, Keiko Tanaka, Liam Byrne, Maya Cohen,
Nikolai Petrov, Olivia Grant, Pablo Ortega, Quinn Murphy, Rosa Alvarez, Samir Nasser,
Tara Singh, Umar Farouk, Vera Novak, Wen Li, Yusuf Demir, Zoe Adams""".replace("\n", " ")
PLACES = """the harbour district, the old mill, Riverside Park, the north valley, the market square,
the public library, the railway museum, the county fairground, the botanical garden,
the coastal path, the community hall, the science centre, the hill farm, the east bridge,
the city archive, the night market, the observatory, the marina, the university quarter""".replace(
    "\n", " "
)
TOPICS = {
    "gardening": (
        "tomatoes seedlings compost mulch roses hedges beans lettuce soil greenhouse trellis "
        "orchard pruning shears raised beds rainwater bulbs herbs squash slugs"
    ),
    "cooking": (
        "sourdough broth lentils dumplings saffron risotto pastry marinade chillies stew "
        "flatbread pickles custard noodles cardamom batter skillet oven glaze dough"
    ),
    "council": (
        "budget zoning proposal bus routes streetlights bike lanes permits housing plan "
        "consultation petition recycling schedule parking fees library hours ordinance"
    ),
    "hiking": (
        "trail ridge summit boots map compass switchbacks waterfall campsite rain gear "
        "blisters meadow scree cairns headlamp thermos valley pass shelter fog"
    ),
    "software": (
        "release changelog parser cache regression benchmark plugin installer dependency "
        "compiler test suite memory leak API endpoint config file log output thread pool"
    ),
    "astronomy": (
        "telescope eclipse nebula meteor shower comet Jupiter moons eyepiece tripod "
        "star chart red dwarf galaxy light pollution mirror exposure orbit horizon"
    ),
    "music": (
        "choir rehearsal violin quartet setlist amplifier drummer chorus tempo festival "
        "encore vinyl melody harmony bassline soundcheck album tour piano recital"
    ),
}
ADJ = """quiet busy careful generous stubborn bright muddy crowded surprising patient early
late cheerful gentle heavy narrow steep modest ambitious fragile sturdy familiar unusual
delicate noisy remote seasonal practical""".split()
VERBS = """noticed repaired tested measured cooked planted discussed reviewed approved
rebuilt postponed recorded painted borrowed shared mapped cleaned sorted organised replaced
improved carried described questioned welcomed""".split()
TEMPLATES = [
    "{P} {v} the {a} {n} near {L} on {day} morning.",
    "According to {P}, the {n} was {a} but nobody {v} it until {day}.",
    "We {v} {num} {n} and a {a} {n2} before the rain came to {L}.",
    "The {a} {n} at {L} drew {num} visitors, more than last {season}.",
    "{P} says the {n2} should be {v} every {season}, which sounds {a} to most of us.",
    "After {num} weeks the {n} finally looked {a}, and {P} {v} the {n2} again.",
    "Nobody expected the {n} to be so {a}; even {P} admitted it on {day}.",
    "If you visit {L}, bring a {a} {n} and ask {P} about the {n2}.",
    "There were {num} questions about the {n} and only one about the {n2}.",
    "By {day} evening the {a} {n2} had been {v} twice and the {n} once.",
    "{P} and {P2} {v} the {n} together, which took a {a} afternoon.",
    "The notes from {day} mention the {n}, the {n2} and a {a} disagreement.",
    "It is worth repeating that the {n} near {L} is {a} in {season}.",
    "Half of the {n} was {v} by noon; the rest waited for {P2}.",
    "A {a} {n} is easier to handle than a {n2}, says {P2}.",
]
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
SEASONS = "spring summer autumn winter".split()
HEADERS = [
    "Posted by {P} on {day}.",
    "From the {topic} newsletter, issue {num}.",
    "Filed under {topic} by {P}.",
]
FOOTERS = [
    "Comments are open until {day}.",
    "Share this post with a friend who likes {topic}.",
    "Subscribe to the {topic} newsletter for more.",
    "All photos by {P}.",
]


def _people() -> list[str]:
    return [p.strip() for p in PEOPLE.split(",")]


def _places() -> list[str]:
    return [p.strip() for p in PLACES.split(",")]


def _fill(t: str, rng: random.Random, topic: str) -> str:
    words = TOPICS[topic].split()
    people = _people()
    return t.format(
        P=rng.choice(people),
        P2=rng.choice(people),
        L=rng.choice(_places()),
        a=rng.choice(ADJ),
        v=rng.choice(VERBS),
        n=rng.choice(words),
        n2=rng.choice(words),
        num=rng.randint(2, 90),
        day=rng.choice(DAYS),
        season=rng.choice(SEASONS),
        topic=topic,
    )


def document(rng: random.Random) -> str:
    """One generated post: header, 2-3 paragraphs of 3-7 sentences, footer."""
    topic = rng.choice(sorted(TOPICS))
    paras = []
    for _ in range(rng.randint(2, 3)):
        paras.append(
            " ".join(_fill(rng.choice(TEMPLATES), rng, topic) for _ in range(rng.randint(3, 7)))
        )
    head = _fill(rng.choice(HEADERS), rng, topic)
    foot = _fill(rng.choice(FOOTERS), rng, topic)
    return "\n\n".join([head, *paras, foot])


def near_duplicate(text: str, rng: random.Random) -> tuple[str, list[str]]:
    """``text`` with 1-2 small edits; returns the new text and the edit names."""
    edits = rng.sample(["insert", "delete", "swap", "boilerplate"], rng.randint(1, 2))
    paras = text.split("\n\n")
    body = " ".join(paras[1:-1]).split(" ")
    for e in edits:
        if e == "insert":
            for _ in range(rng.randint(1, 2)):
                body.insert(rng.randrange(len(body) + 1), rng.choice(ADJ))
        elif e == "delete":
            for _ in range(rng.randint(1, 2)):
                if len(body) > 10:
                    del body[rng.randrange(len(body))]
        elif e == "swap":
            i = rng.randrange(len(body) - 1)
            body[i], body[i + 1] = body[i + 1], body[i]
        else:
            topic = rng.choice(sorted(TOPICS))
            paras[-1] = _fill(rng.choice(FOOTERS), rng, topic)
    return "\n\n".join([paras[0], " ".join(body), paras[-1]]), edits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=1200, help="documents in all [1200]")
    ap.add_argument("--dup-rate", type=float, default=0.15, help="share of planted copies")
    ap.add_argument("--seed", type=int, default=7)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "data", "sample"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    docs: list[tuple[str, str]] = []
    planted = []
    for i in range(args.docs):
        rid = f"doc-{i:05d}"
        if docs and rng.random() < args.dup_rate:
            orig_id, orig = rng.choice(docs)
            text, edits = near_duplicate(orig, rng)
            planted.append({"id": rid, "original": orig_id, "edits": edits})
        else:
            text = document(rng)
        docs.append((rid, text))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for rid, text in docs:
            f.write(json.dumps({"id": rid, "text": text}) + "\n")
    with open(os.path.join(args.out, "planted.jsonl"), "w", encoding="utf-8") as f:
        for p in planted:
            f.write(json.dumps(p) + "\n")
    print(f"{len(docs)} documents, {len(planted)} planted near-duplicates -> {args.out}")


if __name__ == "__main__":
    main()
