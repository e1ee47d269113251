#!/usr/bin/env python3
"""The simple baselines of the KJV finetuning tasks, on gmlp's chapter split.

Rebuilds the three tasks of `gmlp finetune` independently of the C++ code, from `bible -f`:
chapters numbered 0..1188 in book order, index % 10 == 9 test, == 4 dev, the rest train;
  ot-nt       one verse -> Old or New Testament        TF-IDF (word 1-2 grams) + linear SVM
  genre       one verse -> 7 genres                     TF-IDF (word 1-2 grams) + linear SVM
  next-verse  (A, B) -> is B the verse after A?         bag-of-words logistic regression on
              positives: adjacent verses of a chapter;  [bow(A), bow(B), bow(A) * bow(B)]
              negatives: a random verse of the same book and split, one per positive
The SVM's C and the regression's C are chosen on dev; the test accuracy of that choice is printed.
Next-verse's figure depends on the draw of its negatives: --draws N repeats that task for the
draws of seeds 0..N-1 and prints their mean, spread and range beside the table.

  scripts/setup.sh --text-baselines && python3 scripts/text_baselines.py [--json] [--draws N]
"""
import argparse
import json
import random
import subprocess

import numpy as np
from scipy.sparse import hstack
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

# Book index ranges of the genres, in book order (Genesis = 0 ... Revelation = 65).
GENRES = [("law", 5), ("history", 17), ("wisdom", 22), ("prophets", 39),
          ("gospels and acts", 44), ("epistles", 65), ("revelation", 66)]


def genre_of(book):
    return next(g for g, (_, end) in enumerate(GENRES) if book < end)


def split_of(chapter):
    return {9: "test", 4: "dev"}.get(chapter % 10, "train")


def load_verses():
    """(book, chapter index, verse number, text) for each of the 31,102 verses."""
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True,
                         check=True).stdout
    verses, book, chapter, last_ref = [], -1, -1, None
    for line in out.splitlines():
        if not line.strip():
            continue
        ref, text = line.split(" ", 1)
        abbrev = ref.rstrip("0123456789:")
        ch, vs = ref[len(abbrev):].split(":")
        if abbrev != (last_ref or ("", ""))[0]:
            book += 1
        if (abbrev, ch) != last_ref:
            chapter += 1
        last_ref = (abbrev, ch)
        verses.append((book, chapter, int(vs), text))
    if len(verses) != 31102 or book != 65 or chapter != 1188:
        raise SystemExit(f"bible -f: expected 31102 verses, 66 books, 1189 chapters; found "
                         f"{len(verses)}, {book + 1}, {chapter + 1}")
    return verses


def single_verse_task(verses, label):
    sets = {s: ([], []) for s in ("train", "dev", "test")}
    for book, chapter, _, text in verses:
        x, y = sets[split_of(chapter)]
        x.append(text), y.append(label(book))
    return sets


def next_verse_task(verses, seed=0):
    rng = random.Random(seed)
    pools = {}
    for i, (book, chapter, _, _) in enumerate(verses):
        pools.setdefault((split_of(chapter), book), []).append(i)
    sets = {s: ([], [], []) for s in ("train", "dev", "test")}
    for (split, _), pool in pools.items():
        if len(pool) < 3:
            continue
        a_, b_, y_ = sets[split]
        for a in pool:
            n = a + 1
            if n >= len(verses) or verses[n][1] != verses[a][1] or verses[n][2] != verses[a][2] + 1:
                continue
            b = a
            while b in (a, n):
                b = rng.choice(pool)
            for other, label in ((n, 1), (b, 0)):
                a_.append(verses[a][3]), b_.append(verses[other][3]), y_.append(label)
    return sets


def best_on_dev(make, cs, xs, ys):
    """Fits make(C) on train for each C; returns (dev acc, test acc, C) of the best dev."""
    results = []
    for c in cs:
        model = make(c).fit(xs["train"], ys["train"])
        dev = float(np.mean(model.predict(xs["dev"]) == ys["dev"]))
        test = float(np.mean(model.predict(xs["test"]) == ys["test"]))
        results.append((dev, test, c))
    return max(results, key=lambda r: r[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--draws", type=int, default=1,
                    help="next-verse: repeat over the negatives of seeds 0..N-1 (default 1)")
    args = ap.parse_args()
    if args.draws < 1:
        ap.error(f"--draws {args.draws}: expected at least 1 draw of negatives")
    verses = load_verses()
    rows = {}
    for task, label in (("ot-nt", lambda b: int(b >= 39)), ("genre", genre_of)):
        sets = single_verse_task(verses, label)
        vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
        xs = {"train": vec.fit_transform(sets["train"][0])}
        xs.update({s: vec.transform(sets[s][0]) for s in ("dev", "test")})
        ys = {s: np.array(sets[s][1]) for s in sets}
        dev, test, c = best_on_dev(lambda c: LinearSVC(C=c), (0.1, 0.3, 1.0, 3.0), xs, ys)
        rows[task] = {"model": "TF-IDF + linear SVM", "C": c, "dev_acc": dev, "test_acc": test,
                      "train": len(ys["train"]), "test": len(ys["test"])}
    draws = [next_verse(verses, seed) for seed in range(args.draws)]
    rows["next-verse"] = draws[0]
    if len(draws) > 1:
        tests = np.array([r["test_acc"] for r in draws])
        rows["next-verse draws"] = {"draws": len(draws), "test_accs": tests.tolist(),
                                    "mean": tests.mean(), "sd": tests.std(ddof=1)}
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| task | baseline | train | test | dev acc | test acc |\n|---|---|---|---|---|---|")
    for task in ("ot-nt", "genre", "next-verse"):
        r = rows[task]
        print(f"| {task} | {r['model']} (C={r['C']}) | {r['train']} | {r['test']} | "
              f"{100 * r['dev_acc']:.1f} % | {100 * r['test_acc']:.1f} % |")
    if len(draws) > 1:
        d = rows["next-verse draws"]
        print(f"next-verse over {d['draws']} draws of the negatives: test {100 * d['mean']:.2f} % "
              f"(sd {100 * d['sd']:.2f}, range {100 * min(d['test_accs']):.2f}-"
              f"{100 * max(d['test_accs']):.2f} %)")


def next_verse(verses, seed):
    """The next-verse baseline on the pairs of one draw of negatives: its row of the table."""
    sets = next_verse_task(verses, seed)
    vec = CountVectorizer(binary=True, min_df=2).fit(sets["train"][0] + sets["train"][1])
    xs, ys = {}, {}
    for s, (a, b, y) in sets.items():
        va, vb = vec.transform(a), vec.transform(b)
        xs[s], ys[s] = hstack([va, vb, va.multiply(vb)]).tocsr(), np.array(y)
    dev, test, c = best_on_dev(lambda c: LogisticRegression(C=c, max_iter=2000), (0.1, 1.0), xs, ys)
    return {"model": "bag-of-words logistic regression", "C": c, "dev_acc": dev, "test_acc": test,
            "train": len(ys["train"]), "test": len(ys["test"])}


if __name__ == "__main__":
    main()
