"""Small T5 tokenizer fixture and golden ids for the Go `tokenizer` package.

Run from the repository root:  python -m scripts.tokenizer_fixture

Writes (byte-deterministic):
  models/testdata/tokenizer/spiece.model           SentencePiece unigram, ~2000 pieces
  models/testdata/tokenizer/tokenizer_legacy.json   old HF T5 layout (Precompiled; WhitespaceSplit+Metaspace)
  models/testdata/tokenizer/tokenizer.json          current layout (transformers 4.46, legacy=False)
  tokenizer/testdata/golden_ids.json                encode/decode goldens for both layouts

The vocabulary is trained on generated text shaped like Auto-UI prompts and targets, so that
every character an Auto-UI target uses has its own piece.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import random
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER_DIR = os.path.join(ROOT, "models", "testdata", "tokenizer")
GOLDEN_PATH = os.path.join(ROOT, "tokenizer", "testdata", "golden_ids.json")

SP_VOCAB_SIZE = 2000
EXTRA_IDS = 100
SEED = 20240611

LAYOUTS = ("legacy", "modern")
LAYOUT_FILES = {"legacy": "tokenizer_legacy.json", "modern": "tokenizer.json"}

ACTION_TYPES = [
    "TYPE", "DUAL_POINT", "PRESS_BACK", "PRESS_HOME", "PRESS_ENTER",
    "STATUS_TASK_COMPLETE", "STATUS_TASK_IMPOSSIBLE",
]

# Vocabulary of the generated text. Kept small and fixed so the fixture is stable.
APPS = ["Google", "Chrome", "YouTube", "Gmail", "Maps", "Settings", "Play Store", "Amazon",
        "eBay", "Walmart", "Best Buy", "Costco", "Target", "Newegg", "Calendar", "Clock",
        "Camera", "Photos", "Contacts", "Messages", "Files", "Drive", "Spotify", "Netflix"]
PLACES = ["Paris", "London", "New York", "Tokyo", "Berlin", "San Francisco", "Mumbai",
          "São Paulo", "Zürich", "Montréal", "Kraków", "Reykjavík", "Málaga", "Lyon"]
THINGS = ["hotel", "flight", "restaurant", "coffee shop", "gas station", "pharmacy",
          "laptop", "headphones", "usb-c cable", "4k tv", "razer mouse", "logitech keyboard",
          "apple airpods", "nike shoes", "rice cooker", "bluetooth speaker", "iphone 14 pro"]
SETTINGS = ["wifi", "bluetooth", "airplane mode", "dark mode", "location", "do not disturb",
            "battery saver", "auto-rotate", "hotspot", "nfc"]
GOAL_TEMPLATES = [
    "Search for a {thing} in {place} on {app}",
    "Open the settings app and turn on {setting}",
    "Turn off {setting}",
    "What's the weather like in {place}?",
    "Add {thing} to the cart on {site}",
    "Search for \"{thing}\" on {site}, select the first entry, and add it to the cart.",
    "Open {app}",
    "Install the {app} app",
    "Show me the news about {place}",
    "Set an alarm for {hour}:{minute:02d} am",
    "How much does a {thing} cost in {place}?",
    "check my email from {name}",
    "Go to {site}.com and look up {thing} under ${price}",
    "Find directions from {place} to {place2} on Maps",
    "Play the latest video from {name} on YouTube",
    "Clear the shopping cart on {site}",
]
SITES = ["amazon", "ebay", "walmart", "bestbuy", "costco", "target", "newegg"]
NAMES = ["Alice", "Bob", "Chloé", "Jürgen", "Ana María", "Li Wei", "Zoë", "François"]
TYPED = ["paris hotels", "wifi", "razer blade 15", "best pizza near me", "usb-c hub",
         "news today", "weather tomorrow", "macbook pro 16 inch", "it's raining",
         "what's up?", "price < 100", "C:\\Users\\me", "café au lait", "naïve résumé",
         "100% cotton", "a+b=c", "#hashtag @user", "x_y-z.w", "東京 ramen", "crème brûlée"]
UNICODE_SNIPPETS = ["é", "è", "ü", "ö", "ñ", "ç", "à", "ß", "ø", "å", "ł", "ź", "—", "–",
                    "…", "€", "£", "°", "©", "™", "“", "”", "‘", "’", "東京", "日本", "中文",
                    "한국어", "Привет", "Ελλάδα", "مرحبا", "😀", "👍"]


def render_point(p):
    """Python list repr of [y, x] floats, as Auto-UI renders them."""
    return repr([float(p[0]), float(p[1])])


def strip_typed(text):
    return text.replace("\\", "").replace('"', "").replace("'", "")


def render_action(kind, touch=(-1.0, -1.0), lift=(-1.0, -1.0), typed=""):
    return (f'"action_type": "{kind}", "touch_point": "{render_point(touch)}", '
            f'"lift_point": "{render_point(lift)}", "typed_text": "{strip_typed(typed)}"')


def random_action(rng):
    kind = rng.choice(ACTION_TYPES + ["DUAL_POINT"] * 4)
    if kind == "DUAL_POINT":
        if rng.random() < 0.7:
            p = (round(rng.random(), 4), round(rng.random(), 4))
            return kind, render_action(kind, p, p)
        touch, lift = rng.choice([((0.8, 0.5), (0.2, 0.5)), ((0.2, 0.5), (0.8, 0.5)),
                                  ((0.5, 0.8), (0.5, 0.2)), ((0.5, 0.2), (0.5, 0.8))])
        return kind, render_action(kind, touch, lift)
    if kind == "TYPE":
        return kind, render_action(kind, typed=rng.choice(TYPED))
    return kind, render_action(kind)


def random_goal(rng):
    t = rng.choice(GOAL_TEMPLATES)
    return t.format(thing=rng.choice(THINGS), place=rng.choice(PLACES), place2=rng.choice(PLACES),
                    app=rng.choice(APPS), setting=rng.choice(SETTINGS), site=rng.choice(SITES),
                    name=rng.choice(NAMES), hour=rng.randint(1, 12), minute=rng.randint(0, 59),
                    price=rng.randint(10, 999))


def prompt(goal, history, window=8):
    if window > 0:
        s = "Previous Actions: " + "\n".join(history[-window:]) + "\nGoal: " + goal
    else:
        s = "Goal: " + goal
    return " ".join(s.split())


def target(rng):
    plan = [random_action(rng) for _ in range(rng.randint(1, 4))]
    return ("Action Plan: [" + ",".join(k for k, _ in plan) + "] ; Action Decision: " + plan[0][1])


def training_corpus():
    rng = random.Random(SEED)
    lines = []
    for _ in range(6000):
        goal = random_goal(rng)
        history = [random_action(rng)[1] for _ in range(rng.randint(0, 10))]
        lines.append(prompt(goal, history, window=rng.choice([8, 8, 8, 0])))
        lines.append(target(rng))
        lines.append(goal)
    return lines + coverage_lines(rng)


def coverage_lines(rng):
    """Every printable ASCII character, digits in many shapes, and a little unicode, so that
    typed text and coordinates never fall back to <unk>."""
    lines = []
    ascii_chars = "".join(chr(c) for c in range(33, 127))
    for i in range(300):
        lines.append(" ".join(ascii_chars[j::7] for j in range(7)))
        lines.append(f"{rng.random():.4f} {rng.randint(0, 10**6)} [{rng.random():.4f}, {rng.random():.4f}] - _ ; : ,")
        lines.append(" ".join(rng.choice(UNICODE_SNIPPETS) for _ in range(5)) + " " + rng.choice(TYPED))
    return lines


def train_spiece(path, corpus=None, vocab_size=SP_VOCAB_SIZE, **extra):
    """Train the SentencePiece unigram model on corpus (default: the fixture corpus)."""
    import sentencepiece as spm

    spm.set_random_generator_seed(SEED)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_corpus() if corpus is None else corpus),
        model_writer=buf,
        model_type="unigram",
        vocab_size=vocab_size,
        character_coverage=1.0,
        num_threads=1,
        shuffle_input_sentence=False,
        input_sentence_size=0,
        pad_id=0, pad_piece="<pad>",
        eos_id=1, eos_piece="</s>",
        unk_id=2, unk_piece="<unk>",
        bos_id=-1,
        normalization_rule_name="nmt_nfkc",
        minloglevel=2,
        **extra,
    )
    data = buf.getvalue()
    with open(path, "wb") as f:
        f.write(data)
    return data


def slow_tokenizer(spiece_path, legacy):
    from transformers import T5Tokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return T5Tokenizer(vocab_file=spiece_path, extra_ids=EXTRA_IDS, legacy=legacy)


def fast_tokenizer_json(spiece_path, legacy):
    """tokenizer.json as transformers 4.46 writes it when converting the slow T5 tokenizer."""
    from transformers import T5TokenizerFast

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = T5TokenizerFast(vocab_file=spiece_path, extra_ids=EXTRA_IDS, legacy=legacy, from_slow=True)
    return json.loads(fast.backend_tokenizer.to_str())


def legacy_layout(modern):
    """The older T5 tokenizer.json layout (as on the t5-base hub repo)."""
    doc = copy.deepcopy(modern)
    precompiled = [n for n in modern["normalizer"]["normalizers"] if n["type"] == "Precompiled"]
    assert len(precompiled) == 1, modern["normalizer"]
    doc["normalizer"] = precompiled[0]
    doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"},
        {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True},
    ]}
    doc["decoder"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
    return doc


def dump_json(path, doc, indent=2):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(doc, f, ensure_ascii=False, indent=indent, sort_keys=False)
        f.write("\n")


def dump_golden(path, doc):
    """Pretty at the top level, one case per line (readable diffs, modest size)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lines = ["{"]
    keys = list(doc)
    for k, key in enumerate(keys):
        comma = "," if k < len(keys) - 1 else ""
        value = doc[key]
        if isinstance(value, list):
            lines.append(f" {json.dumps(key)}: [")
            for i, item in enumerate(value):
                sep = "," if i < len(value) - 1 else ""
                lines.append("  " + json.dumps(item, ensure_ascii=False) + sep)
            lines.append(" ]" + comma)
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    lines.append("}")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def golden_strings():
    rng = random.Random(SEED + 1)
    out = [
        "", " ", "  ", "   ", "\t", "\n", " \t\n ", "a", " a", "a ", "  a  ", "a  b", "a   b", "a \t b",
        "a\nb", "a\n\nb", "a\tb", "a\r\nb", " leading", "trailing ", "  both  ", "x" * 50,
        "Goal: Open Chrome", "Previous Actions: Goal: Open the settings app and turn on wifi",
        "Previous Actions:  Goal:  double  spaces", "\u3000ideographic\u3000space",
        "non\u00a0breaking\u00a0space", "zero\u200bwidth", "soft\u00adhyphen",
        "</s>", "<pad>", "<unk>", "a</s>b", "hello </s> world", "<extra_id_0>", "<extra_id_3>",
        "<extra_id_99>", "<extra_id_100>", "x<extra_id_3>y", " <extra_id_3> ", "<extra_id_3><extra_id_4>",
        "The answer is <extra_id_0> and </s>", "</s></s>", "<s>", "< /s>", "<pad><unk></s>",
        "Action Plan: [DUAL_POINT,TYPE] ; Action Decision: ",
        "[0.7262, 0.4187]", "[-1.0, -1.0]", "[0.5, 0.2]", "0.0001 1e-05 -3.5 +7 1,000,000 3.14159",
        '"[]:;,._-', "!@#$%^&*()_+-=[]{}|;':\",./<>?`~", "\\", "\\\\n", "it's don't I'm you're we've he's",
        "Hello , world . How are you ? Fine !", "a . b , c ? d ! e 's", "cafe\u0301 vs café",
        "Ｆｕｌｌ ｗｉｄｔｈ １２３", "ﬁ ligature ﬀ", "Ⅻ ① ²³", "naïve résumé façade Zürich",
        "Crème brûlée à Montréal", "東京でラーメン", "中文测试 한국어 テスト", "日本", "😀", "👍🏽 👨‍👩‍👧",
        "emoji 😀 in text 🎉", "Привет мир", "Ελλάδα", "مرحبا بالعالم", "עברית", "हिन्दी", "ไทย",
        "a\u0000b", "tab\tinside\ttext", "\x7f\x01control", "▁", "▁▁", "a▁b", " ▁ ", "▁hello",
        "ends with space ", "  multiple   inner   spaces  ", "\n\nnewlines at start", "end\n\n",
        "\u200bhello", "\x01hello", "\ufeffhello", "</s>\u200bhello", "a ▁b", "▁ a", "x ▁▁ y", "</s> x",
        "</s>x", "▁▁a", "a▁▁b", "a▁", "<pad>▁x", "e\u0301", "Ａ\u0301", "x\u0301\u0302\u0303", "<</s>>",
        "<extra_id_1><extra_id_10>", "<extra_id_", "</s", "<<pad>", "\u2028line\u2029sep", "\u0085nel", "a\u0085b", "a\u180eb",
        "Goal:\tOpen\vthe\fapp\r", "🇫🇷 flag", "ｶﾀｶﾅ", "㍻ ㌔", "x" * 30 + "y" * 30,
        # Equal-score segmentations ("." + ".." vs ".." + "."): Hugging Face decides them by
        # the exact bits of its (serde_json-parsed) scores.
        "ا...", "ب...", "b...", "مرحبا…", "مرحبا… test", "…\x00🇫🇷4", "Привет...", "日本....",
    ]
    for _ in range(60):
        goal = random_goal(rng)
        history = [random_action(rng)[1] for _ in range(rng.randint(0, 10))]
        out.append(prompt(goal, history, window=rng.choice([8, 0, 3])))
    for _ in range(40):
        out.append(target(rng))
    for _ in range(10):
        out.append(random_goal(rng))
    # Raw (not whitespace-collapsed) histories, as a careless caller would pass them.
    for _ in range(5):
        history = [random_action(rng)[1] for _ in range(rng.randint(2, 6))]
        out.append("Previous Actions: " + "\n".join(history) + "\nGoal: " + random_goal(rng))
    # Very long texts.
    long_history = [random_action(rng)[1] for _ in range(40)]
    out.append(prompt(random_goal(rng), long_history, window=40))
    out.append(" ".join(random_goal(rng) for _ in range(60)))
    out.append("é😀東" * 400)
    out.append("a" * 3000)
    out.append("  ".join(TYPED) * 8)
    # Random mixes of pieces, whitespace and specials.
    alphabet = (list("abcxyz019 \t\n.,:;\"[]_-'?!") + UNICODE_SNIPPETS
                + ["</s>", "<pad>", "<extra_id_5>", "  ", "▁", "\u00a0", "\u3000", "…", "\u0085", "\x00",
                   "\u200b", "\u0301", "ﬁ", "Ａ", "①", "ｶ", "ﾞ", "\U0001F1EB\U0001F1F7", "<unk>"])
    for _ in range(120):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    for t in TYPED:
        out.append(t)
        out.append(render_action("TYPE", typed=t))
    return out


def decode_id_lists(encoded, vocab_size):
    rng = random.Random(SEED + 2)
    lists = [
        [], [0], [1], [2], [0, 1], [1, 1, 1], [vocab_size - 1], [vocab_size - 100], [vocab_size - 4, 1],
        [vocab_size], [vocab_size + 11], [32127], [vocab_size, 1, vocab_size + 5],
    ]
    # Encodings of golden strings, then the same with pads, specials and out-of-vocab ids.
    for ids in encoded[::3]:
        lists.append(list(ids))
    for ids in encoded[1::6]:
        mixed = [0] + list(ids)
        for _ in range(3):
            pos = rng.randint(0, len(mixed))
            mixed.insert(pos, rng.choice([0, 1, 2, vocab_size - 1 - rng.randint(0, 99), vocab_size + rng.randint(0, 11)]))
        lists.append(mixed)
    for _ in range(20):
        lists.append([rng.randint(0, vocab_size + 11) for _ in range(rng.randint(1, 30))])
    return lists


def build(tokenizer_dir=TOKENIZER_DIR, golden_path=GOLDEN_PATH):
    os.makedirs(tokenizer_dir, exist_ok=True)
    spiece_path = os.path.join(tokenizer_dir, "spiece.model")
    train_spiece(spiece_path)

    modern = fast_tokenizer_json(spiece_path, legacy=False)
    legacy = legacy_layout(fast_tokenizer_json(spiece_path, legacy=True))
    docs = {"legacy": legacy, "modern": modern}
    for name in LAYOUTS:
        dump_json(os.path.join(tokenizer_dir, LAYOUT_FILES[name]), docs[name])

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    fast = {}
    hf = {}
    for name in LAYOUTS:
        path = os.path.join(tokenizer_dir, LAYOUT_FILES[name])
        fast[name] = Tokenizer.from_file(path)
        hf[name] = PreTrainedTokenizerFast(tokenizer_file=path, eos_token="</s>", unk_token="<unk>",
                                           pad_token="<pad>", clean_up_tokenization_spaces=True)
    slow = {"legacy": slow_tokenizer(spiece_path, True), "modern": slow_tokenizer(spiece_path, False)}

    vocab_size = fast["modern"].get_vocab_size(with_added_tokens=True)
    assert vocab_size == fast["legacy"].get_vocab_size(with_added_tokens=True)

    encode = []
    encoded_modern = []
    for text in golden_strings():
        entry = {"text": text}
        ids = {name: fast[name].encode(text).ids for name in LAYOUTS}
        for name in LAYOUTS:
            assert ids[name] == hf[name](text)["input_ids"], (name, text)
            entry[name] = ids[name]
        entry["layouts_agree"] = ids["legacy"] == ids["modern"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the slow tokenizer warns when text ends with </s>
            entry["slow_agrees"] = {name: slow[name](text)["input_ids"] == ids[name] for name in LAYOUTS}
        encode.append(entry)
        encoded_modern.append(ids["modern"])

    decode = []
    for ids in decode_id_lists(encoded_modern, vocab_size):
        entry = {"ids": ids}
        for name in LAYOUTS:
            entry[name] = {
                f"skip={str(skip).lower()},cleanup={str(clean).lower()}":
                    hf[name].decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
                for skip in (True, False) for clean in (True, False)
            }
        decode.append(entry)

    golden = {
        "comment": "Generated by python -m scripts.tokenizer_fixture; do not edit.",
        "layouts": {name: "../models/testdata/tokenizer/" + LAYOUT_FILES[name] for name in LAYOUTS},
        "vocab_size": vocab_size, "pad_id": 0, "eos_id": 1, "unk_id": 2,
        "special_tokens": {"<pad>": 0, "</s>": 1, "<unk>": 2, "<extra_id_0>": vocab_size - 1,
                           "<extra_id_99>": vocab_size - 100},
        "encode": encode,
        "decode": decode,
    }
    dump_golden(golden_path, golden)
    return golden


def summarize(golden):
    enc = golden["encode"]
    differ = [e for e in enc if not e["layouts_agree"]]
    print(f"vocab_size={golden['vocab_size']} encode cases={len(enc)} decode cases={len(golden['decode'])}")
    print(f"layouts differ on {len(differ)} strings:")
    for e in differ:
        print("   ", repr(e["text"][:80]))
    for name in LAYOUTS:
        bad = [e for e in enc if not e["slow_agrees"][name]]
        print(f"slow T5Tokenizer(legacy={name == 'legacy'}) differs from {name} on {len(bad)} strings:")
        for e in bad:
            print("   ", repr(e["text"][:80]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer-dir", default=TOKENIZER_DIR, help="where spiece.model and the tokenizer.json files go")
    parser.add_argument("--golden", default=GOLDEN_PATH, help="where golden_ids.json goes")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    golden = build(args.tokenizer_dir, args.golden)
    if not args.quiet:
        summarize(golden)
    return 0


if __name__ == "__main__":
    sys.exit(main())
