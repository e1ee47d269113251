// Tests for the text pipeline: the KJV reader (program and file) and its chapter split, the book
// tables, plain-text corpora, the SentencePiece tokenizer (trained once on the KJV's train split,
// vocabulary 2000), BERT packing and masking, and the KJV finetuning tasks. Every malformed
// input is written by the test and must fail with a one-line gmlp::Error naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/rng.h"
#include "files.h"
#include "io/atomic_file.h"
#include "text/corpus.h"
#include "text/mlm.h"
#include "text/tasks.h"
#include "text/tokenizer.h"

namespace fs = std::filesystem;
using gmlp::cat;
using namespace gmlp::text;

namespace {

using gmlp::test::expect_error;
using gmlp::test::tmp_path;

std::string write_tmp(const std::string& name, const std::string& bytes) {
  std::string path = tmp_path(name);
  gmlp::write_file_atomic(path, bytes);
  return path;
}

const std::vector<Verse>& kjv() {
  static const std::vector<Verse> v = load_kjv();
  return v;
}

// The KJV as `bible` prints it, rebuilt from the verse table.
std::string kjv_text(const std::vector<Verse>& verses) {
  std::string s;
  for (const Verse& v : verses) s += cat(book(v.book).abbrev, v.chapter, ":", v.verse, " ", v.text, "\n");
  return s;
}

// The tokenizer all tests share: trained once on the train split, vocabulary 2000.
constexpr int kTestVocab = 2000;
struct Trained {
  std::string prefix = (gmlp::test::temp_folder() / "kjv2000").string();
  double seconds = 0;
  Tokenizer tok = [this] {
    const auto lines = verse_texts(kjv(), Split::train);
    const auto t0 = std::chrono::steady_clock::now();
    Tokenizer t = Tokenizer::train(lines, prefix, kTestVocab, 1);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ info     ] tokenizer: vocabulary %d trained on %zu train-split verses in %.2f s\n", kTestVocab,
                lines.size(), seconds);
    return t;
  }();
};
const Trained& trained() {
  static const Trained t;
  return t;
}

// Collapses runs of white space to one space and trims both ends (SentencePiece's default
// normalisation does the same).
std::string squeeze(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// |x - mean| <= 5 standard deviations of a binomial(n, p) count.
::testing::AssertionResult binomial_ok(const std::string& what, int64_t x, int64_t n, double p) {
  const double mean = double(n) * p, sd = std::sqrt(double(n) * p * (1 - p));
  if (std::abs(double(x) - mean) <= 5 * sd) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << x << " of " << n << ", expected " << mean << " +- " << 5 * sd
                                       << " (5 sd)";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// KJV

TEST(KjvCorpus, LoadsTheWholeBible) {
  const auto& v = kjv();
  ASSERT_EQ(v.size(), 31102u);
  std::set<int> bks, chapters;
  for (const Verse& x : v) {
    bks.insert(x.book);
    chapters.insert(x.chapter_index);
    EXPECT_EQ(x.chapter_index, first_chapter_index(x.book) + x.chapter - 1);
    EXPECT_FALSE(x.text.empty());
    EXPECT_NE(x.text.back(), ' ');
  }
  EXPECT_EQ(bks.size(), 66u);
  EXPECT_EQ(*bks.begin(), 0);
  EXPECT_EQ(*bks.rbegin(), 65);
  EXPECT_EQ(chapters.size(), 1189u);
  EXPECT_EQ(*chapters.begin(), 0);
  EXPECT_EQ(*chapters.rbegin(), 1188);

  EXPECT_EQ(v[0].book, 0);
  EXPECT_EQ(v[0].chapter, 1);
  EXPECT_EQ(v[0].verse, 1);
  EXPECT_EQ(v[0].text, "In the beginning God created the heaven and the earth.");
  EXPECT_EQ(v.back().book, 65);
  EXPECT_EQ(v.back().chapter, 22);
  EXPECT_EQ(v.back().verse, 21);
  EXPECT_EQ(v.back().chapter_index, 1188);
  EXPECT_EQ(v.back().text, "The grace of our Lord Jesus Christ be with you all. Amen.");
  // Psalm 119 is the longest chapter (176 verses); John 11:35 the shortest verse.
  int psa119 = 0;
  for (const Verse& x : v) psa119 += x.book == 18 && x.chapter == 119;
  EXPECT_EQ(psa119, 176);
  bool found = false;
  for (const Verse& x : v)
    if (x.book == 42 && x.chapter == 11 && x.verse == 35) found = x.text == "Jesus wept.";
  EXPECT_TRUE(found);
}

TEST(KjvCorpus, FileInTheSameFormatLoadsTheSameVerses) {
  const auto& v = kjv();
  const std::string path = write_tmp("kjv.txt", kjv_text(v));
  const auto w = load_kjv_file(path);
  ASSERT_EQ(w.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(w[i].book, v[i].book) << i;
    ASSERT_EQ(w[i].chapter, v[i].chapter) << i;
    ASSERT_EQ(w[i].verse, v[i].verse) << i;
    ASSERT_EQ(w[i].chapter_index, v[i].chapter_index) << i;
    ASSERT_EQ(w[i].text, v[i].text) << i;
  }
  // CRLF line ends and a missing final newline are accepted.
  std::string crlf;
  for (const Verse& x : v) crlf += cat(book(x.book).abbrev, x.chapter, ":", x.verse, " ", x.text, "\r\n");
  crlf.pop_back(), crlf.pop_back();
  const auto c = load_kjv_file(write_tmp("crlf.txt", crlf));
  ASSERT_EQ(c.size(), v.size());
  EXPECT_EQ(c.back().text, v.back().text);
}

TEST(KjvCorpus, MalformedFilesFailNamingTheFileAndLine) {
  const auto& v = kjv();
  auto lines_of = [&] {
    std::vector<std::string> l;
    l.reserve(v.size());
    for (const Verse& x : v) l.push_back(cat(book(x.book).abbrev, x.chapter, ":", x.verse, " ", x.text));
    return l;
  };
  auto join = [](const std::vector<std::string>& l) {
    std::string s;
    for (const auto& x : l) s += x + "\n";
    return s;
  };
  {  // an unknown book abbreviation on line 3
    auto l = lines_of();
    l[2] = "Gen1:3 And God said, Let there be light: and there was light.";
    const std::string p = write_tmp("abbrev.txt", join(l));
    expect_error([&] { load_kjv_file(p); }, {"'" + p + "'", "line 3", "book abbreviation", "'Gen'"});
  }
  {  // no "C:V" reference
    auto l = lines_of();
    l[9] = "Genesis one ten";
    const std::string p = write_tmp("shape.txt", join(l));
    expect_error([&] { load_kjv_file(p); }, {"'" + p + "'", "line 10", "BookC:V text", "Genesis one ten"});
  }
  {  // a verse without text
    auto l = lines_of();
    l[4] = "Ge1:5   ";
    const std::string p = write_tmp("notext.txt", join(l));
    expect_error([&] { load_kjv_file(p); }, {"'" + p + "'", "line 5", "BookC:V text"});
  }
  {  // a verse left out: line 6 is Ge1:7 where Ge1:6 belongs
    auto l = lines_of();
    l.erase(l.begin() + 5);
    const std::string p = write_tmp("gap.txt", join(l));
    expect_error([&] { load_kjv_file(p); }, {"'" + p + "'", "line 6", "expected Ge1:6", "found 'Ge1:7"});
  }
  {  // a chapter beyond the book's last (Obadiah has 1)
    auto l = lines_of();
    size_t i = 0;
    while (!(v[i].book == 30 && v[i].verse == 21)) ++i;  // Obad1:21, the book's last verse
    l.insert(l.begin() + ptrdiff_t(i) + 1, "Obad2:1 An extra chapter.");
    const std::string p = write_tmp("chapter.txt", join(l));
    expect_error([&] { load_kjv_file(p); },
                 {"'" + p + "'", cat("line ", i + 2), "at most 1 chapter in Obadiah", "Obad2:1"});
  }
  {  // truncated: the last verse is missing
    auto l = lines_of();
    l.pop_back();
    const std::string p = write_tmp("short.txt", join(l));
    expect_error([&] { load_kjv_file(p); }, {"'" + p + "'", "expected 31102 verses", "found 31101", "Rev22:20"});
  }
  {  // a blank line in the middle
    auto l = lines_of();
    l[100] = "";
    const std::string p = write_tmp("blank.txt", join(l));
    expect_error([&] { load_kjv_file(p); }, {"'" + p + "'", "line 101"});
  }
  const std::string empty = write_tmp("empty.txt", "");
  expect_error([&] { load_kjv_file(empty); }, {"'" + empty + "'", "found no text"});
  const std::string missing = tmp_path("missing.txt");
  expect_error([&] { load_kjv_file(missing); }, {"'" + missing + "'", "No such file or directory"});
}

TEST(KjvSplit, ChaptersSplitByIndexIntoAPartition) {
  std::map<Split, int> chapters;
  for (int c = 0; c < kKjvChapters; ++c) {
    const Split s = kjv_split(c);
    ++chapters[s];
    EXPECT_EQ(s == Split::test, c % 10 == 9) << c;
    EXPECT_EQ(s == Split::dev, c % 10 == 4) << c;
    EXPECT_EQ(s == Split::train, c % 10 != 9 && c % 10 != 4) << c;
  }
  // 1,189 chapters = 118 full tens + 9: residue 9 occurs 118 times, residue 4 119 times.
  EXPECT_EQ(chapters[Split::test], 118);
  EXPECT_EQ(chapters[Split::dev], 119);
  EXPECT_EQ(chapters[Split::train], 952);

  const auto& v = kjv();
  const int64_t tr = count_verses(v, Split::train), dv = count_verses(v, Split::dev), te = count_verses(v, Split::test);
  EXPECT_EQ(tr + dv + te, 31102);
  EXPECT_GT(te, 2000);
  EXPECT_GT(dv, 2000);
  EXPECT_EQ(int64_t(verse_texts(v, Split::test).size()), te);
  // Every verse of a chapter is in that chapter's split (a chapter is never cut).
  std::map<int, std::set<Split>> per_chapter;
  for (const Verse& x : v) per_chapter[x.chapter_index].insert(kjv_split(x.chapter_index));
  for (const auto& [c, s] : per_chapter) EXPECT_EQ(s.size(), 1u) << c;
  // Genesis 10 (index 9) is test, Genesis 5 (index 4) dev, Exodus 1 (index 50) train.
  EXPECT_EQ(kjv_split(first_chapter_index(0) + 9), Split::test);
  EXPECT_EQ(kjv_split(first_chapter_index(0) + 4), Split::dev);
  EXPECT_EQ(kjv_split(first_chapter_index(1)), Split::train);

  EXPECT_EQ(parse_split("dev"), Split::dev);
  EXPECT_STREQ(split_name(Split::test), "test");
  expect_error([] { parse_split("valid"); }, {"'valid'", "'train', 'dev' or 'test'"});
}

TEST(KjvBooks, TestamentAndGenreTables) {
  ASSERT_EQ(books().size(), 66u);
  auto idx = [](const char* name) {
    for (int b = 0; b < kNumBooks; ++b)
      if (std::string(book(b).name) == name) return b;
    ADD_FAILURE() << "no book " << name;
    return 0;
  };
  const auto NT = Testament::new_testament, OT = Testament::old_testament;
  EXPECT_EQ(book(idx("Matthew")).testament, NT);
  EXPECT_EQ(book(idx("Matthew")).genre, Genre::gospels_acts);
  EXPECT_EQ(book(idx("Psalms")).genre, Genre::wisdom);
  EXPECT_EQ(book(idx("Psalms")).testament, OT);
  EXPECT_EQ(book(idx("Jude")).genre, Genre::epistles);
  EXPECT_EQ(book(idx("Jude")).testament, NT);
  EXPECT_EQ(book(idx("Deuteronomy")).genre, Genre::law);
  EXPECT_EQ(book(idx("Joshua")).genre, Genre::history);
  EXPECT_EQ(book(idx("Esther")).genre, Genre::history);
  EXPECT_EQ(book(idx("Job")).genre, Genre::wisdom);
  EXPECT_EQ(book(idx("Song of Solomon")).genre, Genre::wisdom);
  EXPECT_EQ(book(idx("Isaiah")).genre, Genre::prophets);
  EXPECT_EQ(book(idx("Lamentations")).genre, Genre::prophets);
  EXPECT_EQ(book(idx("Malachi")).genre, Genre::prophets);
  EXPECT_EQ(book(idx("Malachi")).testament, OT);
  EXPECT_EQ(book(idx("Acts")).genre, Genre::gospels_acts);
  EXPECT_EQ(book(idx("Romans")).genre, Genre::epistles);
  EXPECT_EQ(book(idx("Hebrews")).genre, Genre::epistles);
  EXPECT_EQ(book(idx("Revelation")).genre, Genre::revelation);
  EXPECT_EQ(book(idx("Revelation")).testament, NT);

  std::map<Genre, int> per_genre;
  int ot = 0, chapters = 0;
  for (int b = 0; b < kNumBooks; ++b) {
    ++per_genre[book(b).genre];
    ot += book(b).testament == OT;
    chapters += book(b).chapters;
    EXPECT_EQ(book(b).testament == OT, b < 39) << book(b).name;
    EXPECT_EQ(book_from_abbrev(book(b).abbrev), b);
    EXPECT_EQ(first_chapter_index(b + 1) - first_chapter_index(b), book(b).chapters);
  }
  EXPECT_EQ(ot, 39);
  EXPECT_EQ(chapters, 1189);
  EXPECT_EQ(per_genre[Genre::law], 5);
  EXPECT_EQ(per_genre[Genre::history], 12);
  EXPECT_EQ(per_genre[Genre::wisdom], 5);
  EXPECT_EQ(per_genre[Genre::prophets], 17);
  EXPECT_EQ(per_genre[Genre::gospels_acts], 5);
  EXPECT_EQ(per_genre[Genre::epistles], 21);
  EXPECT_EQ(per_genre[Genre::revelation], 1);
  EXPECT_STREQ(genre_name(Genre::gospels_acts), "gospels and acts");
  EXPECT_EQ(book_from_abbrev("Gen"), -1);
  expect_error([] { book(66); }, {"book index 66"});

  // The chapter counts in the table are those of the text.
  std::vector<int> seen(kNumBooks, 0);
  for (const Verse& x : kjv()) seen[size_t(x.book)] = std::max(seen[size_t(x.book)], x.chapter);
  for (int b = 0; b < kNumBooks; ++b) EXPECT_EQ(seen[size_t(b)], book(b).chapters) << book(b).name;
}

// ---------------------------------------------------------------------------------------------
// Plain text

TEST(PlainText, LoadsNonEmptyLinesAndSplitsByIndex) {
  const std::string p = write_tmp("c.txt", "first doc\n\n  \nsecond doc\r\n\tthird\nlast without newline");
  const auto l = load_lines(p);
  EXPECT_EQ(l, (std::vector<std::string>{"first doc", "second doc", "\tthird", "last without newline"}));

  std::vector<std::string> many;
  many.reserve(25);
  for (int i = 0; i < 25; ++i) many.push_back(cat("line ", i));
  const auto te = lines_in_split(many, Split::test), dv = lines_in_split(many, Split::dev),
             tr = lines_in_split(many, Split::train);
  EXPECT_EQ(te, (std::vector<std::string>{"line 9", "line 19"}));
  EXPECT_EQ(dv, (std::vector<std::string>{"line 4", "line 14", "line 24"}));
  EXPECT_EQ(tr.size(), 20u);
  EXPECT_EQ(line_split(19), Split::test);

  const std::string missing = tmp_path("missing.txt");
  expect_error([&] { load_lines(missing); }, {"'" + missing + "'", "No such file or directory"});
  const std::string empty = write_tmp("empty.txt", "");
  expect_error([&] { load_lines(empty); }, {"'" + empty + "'", "an empty file"});
  const std::string blank = write_tmp("blank.txt", "\n \n\r\n\t\n");
  expect_error([&] { load_lines(blank); }, {"'" + blank + "'", "only blank lines"});
  const std::string dir = tmp_path("dir");
  fs::create_directories(dir);
  expect_error([&] { load_lines(dir); }, {"'" + dir + "'", "not a regular file"});
}

// ---------------------------------------------------------------------------------------------
// Tokenizer

TEST(Tokenizer, TrainsQuicklyWithTheReservedIdsFirst) {
  const auto& t = trained();
#ifndef GMLP_SANITIZED  // ASan's allocator slows SentencePiece's training several-fold
  EXPECT_LT(t.seconds, 20.0) << "training a 2000-piece vocabulary should take a few seconds";
#endif
  const Tokenizer& tok = t.tok;
  ASSERT_EQ(tok.vocab_size(), kTestVocab);
  const char* want[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(tok.id_to_piece(i), want[i]);
    EXPECT_EQ(tok.piece_to_id(want[i]), i);
  }
  EXPECT_EQ(Tokenizer::kPad, 0);
  EXPECT_EQ(Tokenizer::kMask, 4);
  EXPECT_EQ(tok.piece_to_id("no such piece at all"), Tokenizer::kUnk);
  // Text never produces [CLS], [SEP], [MASK] or [PAD], even when it spells them ('[' is not
  // in the KJV, so it is [UNK]).
  const auto spelled = tok.encode("[CLS] a [SEP] b [MASK] c [PAD]");
  EXPECT_GT(spelled.size(), 8u);
  for (int32_t id : spelled) {
    EXPECT_TRUE(id == Tokenizer::kUnk || id >= Tokenizer::kNumReserved) << id;
    EXPECT_LT(id, kTestVocab);
  }
  EXPECT_TRUE(fs::exists(t.prefix + ".model"));
  EXPECT_TRUE(fs::exists(t.prefix + ".vocab"));
  expect_error([&] { tok.id_to_piece(kTestVocab); }, {"token id 2000"});
}

TEST(Tokenizer, RoundTripsVerses) {
  const Tokenizer& tok = trained().tok;
  const auto& v = kjv();
  const auto ids = tok.encode(v[0].text);
  EXPECT_GT(ids.size(), 3u);
  EXPECT_LT(ids.size(), 20u);
  EXPECT_EQ(tok.decode(ids), v[0].text);
  // Every verse of the test split (unseen in training) comes back, up to SentencePiece's
  // white-space normalisation, without [UNK] (every character occurs in the train split).
  int64_t tokens = 0, exact = 0, n = 0;
  for (const Verse& x : v) {
    if (kjv_split(x.chapter_index) != Split::test) continue;
    const auto e = tok.encode(x.text);
    for (int32_t id : e) {
      ASSERT_GE(id, Tokenizer::kNumReserved) << x.text;
      ASSERT_LT(id, kTestVocab);
    }
    tokens += int64_t(e.size());
    const std::string d = tok.decode(e);
    EXPECT_EQ(d, squeeze(x.text));
    exact += d == x.text;
    ++n;
  }
  EXPECT_GE(exact, n - 3);  // the KJV text has three verses with double or trailing spaces
  // A 2000-piece vocabulary should cut a KJV verse into well under 2 tokens per word.
  EXPECT_LT(double(tokens) / double(n), 40.0);
  expect_error([&] { tok.decode({5, kTestVocab}); }, {"id 2000", "position 1"});
}

// A text of several 64 KiB chunks gives the ids of its words encoded one by one (pieces never
// cross a space); a long run without a space is cut between characters.
TEST(Tokenizer, LongTextIsEncodedInChunksWithTheSameIds) {
  const Tokenizer& tok = trained().tok;
  std::string text;
  std::vector<int32_t> want;
  for (size_t i = 0; text.size() < 3 * (size_t{1} << 16) + 1000; ++i) {
    const std::string& verse = kjv()[i % kjv().size()].text;
    size_t pos = 0;
    while (pos < verse.size()) {
      size_t end = verse.find(' ', pos);
      if (end == std::string::npos) end = verse.size();
      if (end > pos) {
        const auto ids = tok.encode(verse.substr(pos, end - pos));
        want.insert(want.end(), ids.begin(), ids.end());
        text.append(verse, pos, end - pos).push_back(' ');
      }
      pos = end + 1;
    }
  }
  EXPECT_EQ(tok.encode(text), want);
  // A 200,000-byte run without a space is cut into four chunks, each its own word.
  const std::string run(200'000, 'a');
  std::string decoded = tok.decode(tok.encode(run));
  EXPECT_EQ(std::count(decoded.begin(), decoded.end(), ' '), 3);
  decoded.erase(std::remove(decoded.begin(), decoded.end(), ' '), decoded.end());
  EXPECT_EQ(decoded, run);
}

TEST(Tokenizer, LoadedModelGivesIdenticalIds) {
  const auto& t = trained();
  const Tokenizer loaded = Tokenizer::load(t.prefix + ".model");
  EXPECT_EQ(loaded.vocab_size(), kTestVocab);
  EXPECT_EQ(loaded.serialized(), t.tok.serialized());
  EXPECT_EQ(loaded.serialized(), gmlp::read_file(t.prefix + ".model", size_t{1} << 30));
  const Tokenizer embedded = Tokenizer::from_serialized(t.tok.serialized(), "a checkpoint");
  for (const Verse& x : kjv()) {
    if (kjv_split(x.chapter_index) != Split::dev) continue;
    const auto a = t.tok.encode(x.text);
    ASSERT_EQ(loaded.encode(x.text), a) << x.text;
    ASSERT_EQ(embedded.encode(x.text), a) << x.text;
  }
  for (int i = 0; i < kTestVocab; ++i) ASSERT_EQ(loaded.id_to_piece(i), t.tok.id_to_piece(i));
}

TEST(Tokenizer, TrainingIsDeterministic) {
  const auto& t = trained();
  const auto lines = verse_texts(kjv(), Split::train);
  const std::string prefix = tmp_path("again");
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer again = Tokenizer::train(lines, prefix, kTestVocab, 1);
  std::printf("[ info     ] tokenizer: trained again in %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_EQ(again.serialized(), t.tok.serialized());
  EXPECT_EQ(gmlp::read_file(prefix + ".model", size_t{1} << 30), t.tok.serialized());
  for (const auto& e : fs::directory_iterator(gmlp::test::temp_folder()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(Tokenizer, BadInputsFailWithOneLine) {
  const std::string missing = tmp_path("missing.model");
  expect_error([&] { Tokenizer::load(missing); }, {"'" + missing + "'", "No such file or directory"});
  const std::string garbage = write_tmp("garbage.model", "this is not a protobuf \x01\x02\xff");
  expect_error([&] { Tokenizer::load(garbage); }, {"'" + garbage + "'", "SentencePiece model"});
  const std::string empty = write_tmp("empty.model", "");
  expect_error([&] { Tokenizer::load(empty); }, {"'" + empty + "'", "found no data"});
  // A truncated model file.
  const std::string bytes = trained().tok.serialized();
  const std::string cut = write_tmp("cut.model", bytes.substr(0, bytes.size() / 2));
  expect_error([&] { Tokenizer::load(cut); }, {"'" + cut + "'"});
  // A reserved piece renamed to hold a newline (a fuzzer's find): the message shows it escaped.
  std::string renamed = bytes;
  const size_t unk = renamed.find("[UNK]");
  ASSERT_NE(unk, std::string::npos);
  renamed.replace(unk, 5, "[U\nK]");
  const std::string odd = write_tmp("odd.model", renamed);
  expect_error([&] { Tokenizer::load(odd); }, {"'" + odd + "'", "found \"[U\\nK]\""});

  const std::string prefix = tmp_path("m");
  expect_error([&] { Tokenizer::train({"", ""}, prefix, 100); }, {prefix + ".model", "no non-empty line"});
  expect_error([&] { Tokenizer::train({"a b c"}, prefix, 5); }, {prefix + ".model", "vocabulary size", "found 5"});
  // Far more pieces than a tiny text can give: SentencePiece's own complaint, on one line.
  expect_error(
      [&] {
        Tokenizer::train({"a tiny text", "of two lines"}, prefix, 5000);
      },
      {prefix + ".model", "SentencePiece"});
  EXPECT_FALSE(fs::exists(prefix + ".model"));
}

// The normalizer's character map inside a model's bytes (NormalizerSpec: name = field 1, then
// precompiled_charsmap = field 2): its offset and size.
std::pair<size_t, size_t> charsmap_span(const std::string& model) {
  const std::string before = "\x0a\x08nmt_nfkc\x12";
  size_t at = model.find(before);
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos) return {0, 0};
  at += before.size();
  size_t size = 0;
  for (int shift = 0;; shift += 7) {
    const auto b = uint8_t(model[at++]);
    size |= size_t(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return {at, size};
}

TEST(Tokenizer, CorruptCharacterMapIsRejected) {
  // SentencePiece walks the map's darts-clone trie over every text it encodes with no bounds
  // checks, and reads a replacement string at whatever offset a leaf holds: a model with a bad
  // leaf made it read outside the model (fuzz/fuzz_tokenizer, under ASan). The real map passes
  // (every other tokenizer test loads it); these two corruptions keep the protobuf valid.
  const std::string model = trained().tok.serialized();
  const auto span = charsmap_span(model);
  const size_t at = span.first, size = span.second;  // named: a lambda below captures at
  ASSERT_GT(size, 4u);
  uint32_t trie_bytes;
  std::memcpy(&trie_bytes, model.data() + at, 4);
  ASSERT_LT(trie_bytes, size);
  const auto set_unit = [&](std::string& m, size_t i, uint32_t u) { std::memcpy(m.data() + at + 4 + 4 * i, &u, 4); };

  std::string leaves = model;  // every leaf (bit 31 set) points past the replacement strings
  for (size_t i = 0; i < trie_bytes / 4; ++i) {
    uint32_t u;
    std::memcpy(&u, leaves.data() + at + 4 + 4 * i, 4);
    if (u >> 31) set_unit(leaves, i, 0xffffffffu);
  }
  expect_error([&] { Tokenizer::from_serialized(leaves, "in a checkpoint"); },
               {"failed to load the tokenizer in a checkpoint: expected a SentencePiece model whose normalization "
                "rules are intact, found one where the normalizer's character map has a replacement at byte "
                "2147483647 of its "});
  std::string root = model;  // the root's children far past the trie's end
  set_unit(root, 0, uint32_t{0x3fffff} << 10);
  expect_error([&] { Tokenizer::from_serialized(root, "in a checkpoint"); },
               {"the normalizer's character map has a trie that leads to unit 4194303 of "});
  // The replacements run together into one long string (a text of n bytes could normalize to
  // n times its length: fuzz/fuzz_tokenizer ran out of memory on one), then lose their end.
  std::string joined = model, unterminated = model;
  const size_t strings = at + 4 + trie_bytes, end = at + size;
  for (size_t i = strings; i < end; ++i)
    if (model[i] == '\0') unterminated[i] = 'x', joined[i] = i + 1 < end ? 'x' : '\0';
  ASSERT_GT(end - strings, 256u);
  expect_error([&] { Tokenizer::from_serialized(joined, "in a checkpoint"); },
               {"the normalizer's character map has a replacement of ", " bytes at byte ", ", more than 256"});
  expect_error([&] { Tokenizer::from_serialized(unterminated, "in a checkpoint"); },
               {"that runs past the end of its strings"});
}

// ---------------------------------------------------------------------------------------------
// Packing

TEST(PackSequences, FixedLengthNothingLostOrReordered) {
  gmlp::Rng rng(7);
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < 300; ++d) {
    std::vector<int32_t> doc(rng.below(d % 17 == 0 ? 400 : 40));  // some empty, some long
    for (auto& id : doc) id = rng.below(10) == 0 ? Tokenizer::kUnk : 5 + int32_t(rng.below(995));
    docs.push_back(doc);
  }
  std::vector<int32_t> stream;  // doc0 [SEP] doc1 [SEP] ..., empty documents skipped
  for (const auto& d : docs)
    if (!d.empty()) stream.insert(stream.end(), d.begin(), d.end()), stream.push_back(Tokenizer::kSep);

  for (int seq_len : {2, 3, 8, 128, 1000, 100000}) {
    const auto seqs = pack_sequences(docs, seq_len);
    ASSERT_FALSE(seqs.empty());
    // ceil(|stream| / (seq_len - 1)) sequences.
    EXPECT_EQ(seqs.size(), (stream.size() + size_t(seq_len) - 2) / size_t(seq_len - 1)) << seq_len;
    std::vector<int32_t> back;
    for (size_t s = 0; s < seqs.size(); ++s) {
      ASSERT_EQ(seqs[s].size(), size_t(seq_len));
      EXPECT_EQ(seqs[s][0], Tokenizer::kCls);
      for (size_t i = 1; i < seqs[s].size(); ++i) {
        const int32_t id = seqs[s][i];
        EXPECT_NE(id, Tokenizer::kCls);
        if (id == Tokenizer::kPad) {  // only at the end of the last sequence
          EXPECT_EQ(s, seqs.size() - 1);
          for (size_t j = i; j < seqs[s].size(); ++j) ASSERT_EQ(seqs[s][j], Tokenizer::kPad);
          break;
        }
        back.push_back(id);
      }
    }
    EXPECT_EQ(back, stream) << "seq_len " << seq_len;
    EXPECT_EQ(pack_sequences(docs, seq_len), seqs);  // deterministic
  }
  // The layout on a small case.
  const auto s = pack_sequences({{10, 11, 12}, {}, {13, 14, 15, 16, 17}, {18}}, 5);
  const std::vector<std::vector<int32_t>> want = {{2, 10, 11, 12, 3}, {2, 13, 14, 15, 16}, {2, 17, 3, 18, 3}};
  EXPECT_EQ(s, want);
  EXPECT_EQ(pack_sequences({{10}}, 5), (std::vector<std::vector<int32_t>>{{2, 10, 3, 0, 0}}));
  EXPECT_TRUE(pack_sequences({{}, {}}, 5).empty());
  expect_error([] { pack_sequences({{10}}, 1); }, {"sequence length >= 2", "found 1"});
  expect_error([] { pack_sequences({{10}, {11, 3}}, 8); }, {"document 1", "reserved id 3", "[SEP]"});
}

// BERT's short sequences: whole documents from the first on while they fit the length, always
// the first (cut at the sequence length), then padding.
TEST(ShortSequence, WholeDocumentsThatFitThenPadding) {
  const std::vector<std::vector<int32_t>> docs = {{10, 11, 12}, {13, 14}, {15}, {16, 17, 18, 19, 20, 21, 22, 23}};
  auto make = [&](size_t first, int length, int seq_len) {
    std::vector<int32_t> out(size_t(seq_len), -1);
    short_sequence(docs, first, length, seq_len, out.data());
    return out;
  };
  // [CLS] 10 11 12 [SEP] takes 5; the next document needs 3 more.
  EXPECT_EQ(make(0, 7, 10), (std::vector<int32_t>{2, 10, 11, 12, 3, 0, 0, 0, 0, 0}));
  EXPECT_EQ(make(0, 8, 10), (std::vector<int32_t>{2, 10, 11, 12, 3, 13, 14, 3, 0, 0}));
  EXPECT_EQ(make(1, 10, 10), (std::vector<int32_t>{2, 13, 14, 3, 15, 3, 0, 0, 0, 0}));
  EXPECT_EQ(make(0, 2, 10), (std::vector<int32_t>{2, 10, 11, 12, 3, 0, 0, 0, 0, 0}));  // the first always
  EXPECT_EQ(make(3, 6, 6), (std::vector<int32_t>{2, 16, 17, 18, 19, 20}));             // cut, no [SEP]
  EXPECT_EQ(make(2, 4, 4), (std::vector<int32_t>{2, 15, 3, 0}));                       // the last document
  expect_error([&] { make(4, 5, 10); }, {"document 4 of 4"});
  expect_error([&] { make(0, 11, 10); }, {"length in [2, 10]", "found 11"});
  expect_error([&] { make(0, 1, 10); }, {"length in [2, 10]", "found 1"});
}

// Next-sentence pairs on synthetic documents whose ids name them: document d is 1 + d % 7 copies
// of the id 5 + d, in units of 1..9 documents and groups of 1..4 units, so a pair can be read
// back into the documents it holds.
TEST(NextSentencePairs, ChunksAreFixedAndBIsTheSuccessorOrFromTheGroup) {
  gmlp::Rng shape(3);
  std::vector<std::vector<int32_t>> docs;
  std::vector<int> unit, group;
  for (int g = 0, u = 0; g < 100; ++g)
    for (int units = 1 + int(shape.below(4)); units > 0; --units, ++u)
      for (int n = 1 + int(shape.below(9)); n > 0; --n) {
        const int d = int(docs.size());
        docs.push_back(std::vector<int32_t>(size_t(1 + d % 7), 5 + d));
        unit.push_back(u), group.push_back(g);
      }
  // The documents in one segment, in order (a segment may end inside a document, cut to fit).
  auto docs_in = [](const std::vector<int32_t>& ids, size_t from, size_t to) {
    std::vector<int> out;
    for (size_t i = from; i < to; ++i)
      if (out.empty() || out.back() != ids[i] - 5) out.push_back(ids[i] - 5);
    return out;
  };
  // 24: most chunks are cut to fit; 1000: none is, and a chunk is its unit.
  for (const int seq_len : {24, 1000}) {
    gmlp::Rng r1(1), r2(2);
    const auto a = next_sentence_pairs(docs, unit, group, seq_len, r1);
    const auto b = next_sentence_pairs(docs, unit, group, seq_len, r2);
    ASSERT_GT(a.size(), size_t(100));
    ASSERT_EQ(a.size(), b.size());  // the chunks do not depend on the draw
    int64_t positives = 0, differ = 0, whole = 0;
    int last_start = -1;
    for (size_t k = 0; k < a.size(); ++k) {
      const std::vector<int32_t>& ids = a[k].ids;
      ASSERT_EQ(ids.size(), size_t(seq_len));
      ASSERT_EQ(ids[0], Tokenizer::kCls);
      const auto sep1 = size_t(std::find(ids.begin() + 1, ids.end(), Tokenizer::kSep) - ids.begin());
      const auto sep2 = size_t(std::find(ids.begin() + long(sep1) + 1, ids.end(), Tokenizer::kSep) - ids.begin());
      ASSERT_LT(sep2, ids.size());
      for (size_t i = sep2 + 1; i < ids.size(); ++i) ASSERT_EQ(ids[i], Tokenizer::kPad);
      const auto da = docs_in(ids, 1, sep1), db = docs_in(ids, sep1 + 1, sep2);
      ASSERT_FALSE(da.empty());
      ASSERT_FALSE(db.empty());
      // A: consecutive documents of one unit, the chunks in order.
      EXPECT_GT(da[0], last_start);
      last_start = da[0];
      for (size_t i = 1; i < da.size(); ++i) {
        ASSERT_EQ(da[i], da[i - 1] + 1);
        ASSERT_EQ(unit[size_t(da[i])], unit[size_t(da[0])]);
      }
      for (size_t i = 1; i < db.size(); ++i) ASSERT_EQ(db[i], db[i - 1] + 1);
      const int a_last = da.back(), b_first = db.front();
      ASSERT_EQ(unit[size_t(b_first)], unit[size_t(db.back())]);
      // Unless the pair fills the sequence, nothing was cut and A ends with its last document.
      const bool cut = sep2 == size_t(seq_len - 1);
      whole += !cut;
      if (a[k].label == 1) {
        ++positives;
        EXPECT_EQ(unit[size_t(b_first)], unit[size_t(a_last)]);
        if (cut) {
          EXPECT_GT(b_first, a_last);
        } else {
          EXPECT_EQ(b_first, a_last + 1);
        }
        if (seq_len == 1000) {  // B is the rest of the unit
          const size_t after = size_t(db.back()) + 1;
          EXPECT_TRUE(after == unit.size() || unit[after] != unit[size_t(b_first)]);
        }
      } else {
        ASSERT_EQ(a[k].label, 0);
        EXPECT_EQ(group[size_t(b_first)], group[size_t(a_last)]);
        EXPECT_TRUE(b_first < da[0] || b_first > a_last + 1) << "B starts inside A's chunk";
      }
      differ += a[k].ids != b[k].ids;
    }
    EXPECT_GT(whole, int64_t(a.size()) / 10) << seq_len;
    // About half positive (a group of one unit makes a few more), and another draw differs.
    EXPECT_NEAR(double(positives) / double(a.size()), 0.5, 0.08) << seq_len;
    EXPECT_GT(differ, int64_t(a.size()) / 3) << seq_len;
    gmlp::Rng again(1);
    EXPECT_EQ(next_sentence_pairs(docs, unit, group, seq_len, again), a);
  }

  // A unit's single last document is left out; a two-document unit always pairs.
  gmlp::Rng r(0);
  EXPECT_TRUE(next_sentence_pairs({{10}}, {0}, {0}, 8, r).empty());
  const auto two = next_sentence_pairs({{10}, {11}}, {0, 0}, {0, 0}, 8, r);
  ASSERT_EQ(two.size(), size_t(1));  // no other document in the group: always a positive
  EXPECT_EQ(two[0].ids, (std::vector<int32_t>{2, 10, 3, 11, 3, 0, 0, 0}));
  EXPECT_EQ(two[0].label, 1);

  expect_error([&] { next_sentence_pairs({{10}}, {0, 0}, {0}, 8, r); }, {"1 documents", "2 units"});
  expect_error([&] { next_sentence_pairs({{10}}, {0}, {0}, 4, r); }, {"length >= 5", "found 4"});
  expect_error(
      [&] {
        next_sentence_pairs({{10}, {4}}, {0, 0}, {0, 0}, 8, r);
      },
      {"document 1", "reserved id 4", "[MASK]"});
  expect_error([&] { next_sentence_pairs({{10}, {11}}, {0, 0}, {0, 1}, 8, r); }, {"unit 0 spans groups 0 and 1"});
}

// ---------------------------------------------------------------------------------------------
// Masking

TEST(MaskTokens, SelectsFifteenPercentSplitEightyTenTen) {
  constexpr int V = kTestVocab;
  gmlp::Rng data(11);
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < 4000; ++d) {
    std::vector<int32_t> doc(1 + data.below(50));
    for (auto& id : doc) id = data.below(50) == 0 ? Tokenizer::kUnk : 5 + int32_t(data.below(V - 5));
    docs.push_back(doc);
  }
  std::vector<int32_t> ids;
  for (const auto& s : pack_sequences(docs, 128)) ids.insert(ids.end(), s.begin(), s.end());
  const int64_t n = int64_t(ids.size());
  int64_t eligible = 0;
  for (int32_t id : ids) eligible += id >= Tokenizer::kNumReserved;
  ASSERT_GT(eligible, 90000);

  std::vector<int32_t> inputs(ids.size()), labels(ids.size());
  gmlp::Rng rng(12345);
  mask_tokens(ids.data(), inputs.data(), labels.data(), n, V, MaskConfig{}, rng);
  int64_t selected = 0, masked = 0, random = 0, unchanged = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids[size_t(i)], in = inputs[size_t(i)], lab = labels[size_t(i)];
    if (lab == kIgnoreLabel) {
      ASSERT_EQ(in, id) << i;  // not selected: input unchanged
      continue;
    }
    ASSERT_EQ(lab, id) << i;
    ASSERT_GE(id, Tokenizer::kNumReserved) << "a reserved id was selected at " << i;
    ++selected;
    if (in == Tokenizer::kMask) {
      ++masked;
    } else if (in == id) {
      ++unchanged;
    } else {
      ASSERT_GE(in, Tokenizer::kNumReserved);
      ASSERT_LT(in, V);
      ++random;
    }
  }
  // Every reserved position (PAD, UNK, CLS, SEP) keeps -100: counted, not just spot-checked.
  int64_t ignored = 0;
  for (int32_t l : labels) ignored += l == kIgnoreLabel;
  EXPECT_EQ(ignored, n - selected);
  EXPECT_TRUE(binomial_ok("selected", selected, eligible, 0.15));
  EXPECT_TRUE(binomial_ok("[MASK]", masked, selected, 0.8));
  // A random replacement equal to the original (1 in V - 5) counts as unchanged.
  const double same = 0.1 / (V - 5);
  EXPECT_TRUE(binomial_ok("random", random, selected, 0.1 - same));
  EXPECT_TRUE(binomial_ok("unchanged", unchanged, selected, 0.1 + same));
  std::printf("[ info     ] masking: %lld of %lld eligible selected (%.3f %%): %.3f / %.3f / %.3f\n",
              (long long)selected, (long long)eligible, 100.0 * double(selected) / double(eligible),
              double(masked) / double(selected), double(random) / double(selected),
              double(unchanged) / double(selected));

  // Deterministic, and in place gives the same.
  std::vector<int32_t> inputs2(ids.size()), labels2(ids.size()), inplace = ids;
  gmlp::Rng r2(12345), r3(12345);
  mask_tokens(ids.data(), inputs2.data(), labels2.data(), n, V, MaskConfig{}, r2);
  mask_tokens(inplace.data(), inplace.data(), labels2.data(), n, V, MaskConfig{}, r3);
  EXPECT_EQ(inputs2, inputs);
  EXPECT_EQ(labels2, labels);
  EXPECT_EQ(inplace, inputs);
}

TEST(MaskTokens, ExtremeSettingsAndBadArguments) {
  const std::vector<int32_t> ids = {2, 7, 8, 1, 9, 3, 10, 0, 0};
  std::vector<int32_t> in(ids.size()), lab(ids.size());
  gmlp::Rng rng(1);
  mask_tokens(ids.data(), in.data(), lab.data(), int64_t(ids.size()), 20, {1.0f, 1.0f, 0.0f}, rng);
  EXPECT_EQ(in, (std::vector<int32_t>{2, 4, 4, 1, 4, 3, 4, 0, 0}));
  EXPECT_EQ(lab, (std::vector<int32_t>{-100, 7, 8, -100, 9, -100, 10, -100, -100}));
  mask_tokens(ids.data(), in.data(), lab.data(), int64_t(ids.size()), 20, {1.0f, 0.0f, 0.0f}, rng);
  EXPECT_EQ(in, ids);
  EXPECT_EQ(lab, (std::vector<int32_t>{-100, 7, 8, -100, 9, -100, 10, -100, -100}));
  mask_tokens(ids.data(), in.data(), lab.data(), int64_t(ids.size()), 20, {0.0f, 0.8f, 0.1f}, rng);
  EXPECT_EQ(in, ids);
  EXPECT_EQ(lab, std::vector<int32_t>(ids.size(), kIgnoreLabel));
  // All random: every selected id lands in [5, vocab).
  std::vector<int32_t> many(5000, 7), min(5000), mlab(5000);
  mask_tokens(many.data(), min.data(), mlab.data(), 5000, 8, {1.0f, 0.0f, 1.0f}, rng);
  std::set<int32_t> seen(min.begin(), min.end());
  EXPECT_EQ(seen, (std::set<int32_t>{5, 6, 7}));

  auto call = [&](MaskConfig c, int vocab) {
    mask_tokens(ids.data(), in.data(), lab.data(), int64_t(ids.size()), vocab, c, rng);
  };
  expect_error([&] { call({1.5f, 0.8f, 0.1f}, 20); }, {"mask_prob 1.5"});
  expect_error([&] { call({0.15f, 0.8f, 0.3f}, 20); }, {"replace_random 0.3"});
  expect_error([&] { call({}, 5); }, {"found 5"});
  expect_error([&] { call({}, 10); }, {"id 10 at position 6"});
}

// ---------------------------------------------------------------------------------------------
// Finetuning tasks

TEST(KjvTasks, SegmentsAreLaidOutAndTruncatedLongestFirst) {
  EXPECT_EQ(single_segment({10, 11}, 6), (std::vector<int32_t>{2, 10, 11, 3, 0, 0}));
  EXPECT_EQ(single_segment({10, 11, 12, 13, 14}, 5), (std::vector<int32_t>{2, 10, 11, 12, 3}));
  EXPECT_EQ(segment_pair({10, 11}, {20}, 8), (std::vector<int32_t>{2, 10, 11, 3, 20, 3, 0, 0}));
  // 6 + 2 into room 5: a loses its tail first, then b when they are level.
  EXPECT_EQ(segment_pair({10, 11, 12, 13, 14, 15}, {20, 21}, 8), (std::vector<int32_t>{2, 10, 11, 12, 3, 20, 21, 3}));
  EXPECT_EQ(segment_pair({10, 11, 12}, {20, 21, 22, 23}, 7), (std::vector<int32_t>{2, 10, 11, 3, 20, 21, 3}));
  expect_error([] { single_segment({10}, 2); }, {"sequence length >= 3"});
  expect_error([] { segment_pair({10}, {11}, 4); }, {"sequence length >= 5"});
  EXPECT_EQ(parse_task("next-verse"), Task::next_verse);
  EXPECT_EQ(num_classes(Task::genre), 7);
  EXPECT_EQ(class_names(Task::ot_nt), (std::vector<std::string>{"Old Testament", "New Testament"}));
  expect_error([] { parse_task("nsp"); }, {"'nsp'", "'ot-nt', 'genre' or 'next-verse'"});
}

// Shape checks shared by every task: length, [CLS] first, [SEP] count, [PAD] only at the end,
// ids inside the vocabulary.
static void check_layout(const std::vector<Example>& ex, int seq_len, int seps, int classes) {
  for (const Example& e : ex) {
    ASSERT_EQ(e.ids.size(), size_t(seq_len));
    ASSERT_EQ(e.ids[0], Tokenizer::kCls);
    ASSERT_GE(e.label, 0);
    ASSERT_LT(e.label, classes);
    int sep = 0;
    bool pad = false;
    for (size_t i = 1; i < e.ids.size(); ++i) {
      const int32_t id = e.ids[i];
      ASSERT_GE(id, 0);
      ASSERT_LT(id, kTestVocab);
      ASSERT_NE(id, Tokenizer::kCls);
      ASSERT_NE(id, Tokenizer::kMask);
      if (pad) {
        ASSERT_EQ(id, Tokenizer::kPad);
      }
      pad = pad || id == Tokenizer::kPad;
      sep += id == Tokenizer::kSep;
    }
    ASSERT_EQ(sep, seps);
  }
}

TEST(KjvTasks, OldOrNewTestamentAndGenreLabels) {
  const auto& v = kjv();
  const Tokenizer& tok = trained().tok;
  const int seq_len = 64;
  const auto ex = ot_nt(v, tok, Split::test, seq_len);
  check_layout(ex, seq_len, 1, 2);
  int64_t ot = 0, nt = 0;
  for (const Verse& x : v)
    if (kjv_split(x.chapter_index) == Split::test) (x.book < 39 ? ot : nt)++;
  ASSERT_EQ(int64_t(ex.size()), ot + nt);
  int64_t label0 = 0;
  for (const Example& e : ex) label0 += e.label == 0;
  EXPECT_EQ(label0, ot);
  EXPECT_EQ(int64_t(ex.size()) - label0, nt);
  EXPECT_GT(nt, 0);
  // In Bible order: the first test example is Genesis 10:1, the first NT one Matthew 10:1.
  EXPECT_EQ(
      ex[0].ids,
      single_segment(
          tok.encode(v[size_t(std::find_if(v.begin(), v.end(), [](const Verse& x) { return x.chapter_index == 9; }) -
                              v.begin())]
                         .text),
          seq_len));

  const auto g = genre(v, tok, Split::test, seq_len);
  check_layout(g, seq_len, 1, 7);
  ASSERT_EQ(g.size(), ex.size());
  size_t k = 0;
  std::vector<int64_t> per(7, 0);
  for (const Verse& x : v) {
    if (kjv_split(x.chapter_index) != Split::test) continue;
    ASSERT_EQ(g[k].label, int(book(x.book).genre)) << x.text;
    ASSERT_EQ(g[k].ids, ex[k].ids);
    ++per[size_t(g[k].label)];
    ++k;
  }
  for (int c = 0; c < 7; ++c) EXPECT_GT(per[size_t(c)], 0) << genre_name(Genre(c));
  // Truncation: a short seq_len cuts long verses but keeps the closing [SEP].
  check_layout(ot_nt(v, tok, Split::dev, 8), 8, 1, 2);
}

// Every epoch trains on the same positives; a pair task's negatives are redrawn, the rest kept.
TEST(KjvTasks, TrainingExamplesDrawPairNegativesPerEpoch) {
  const auto& v = kjv();
  const Tokenizer& tok = trained().tok;
  for (const int64_t limit : {int64_t(0), int64_t(3000)}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    const auto e0 = training_examples(Task::next_verse, v, tok, 48, 7, 0, limit),
               e1 = training_examples(Task::next_verse, v, tok, 48, 7, 1, limit);
    EXPECT_EQ(e0.size(), limit ? size_t(limit) : build_task(Task::next_verse, v, tok, Split::train, 48, 7).size());
    ASSERT_EQ(e0.size(), e1.size());
    int64_t negatives = 0, same = 0;
    for (size_t i = 0; i < e0.size(); ++i) {
      ASSERT_EQ(e0[i].label, e1[i].label);
      if (e0[i].label == 1) {
        ASSERT_EQ(e0[i].ids, e1[i].ids);
      } else {
        ++negatives, same += e0[i].ids == e1[i].ids;
        // Same verse A: the ids up to the first [SEP] agree.
        const auto sep = std::find(e0[i].ids.begin(), e0[i].ids.end(), Tokenizer::kSep) - e0[i].ids.begin();
        ASSERT_TRUE(std::equal(e0[i].ids.begin(), e0[i].ids.begin() + sep / 2, e1[i].ids.begin()));
      }
    }
    EXPECT_GT(negatives, int64_t(e0.size()) / 3);
    EXPECT_LT(same, negatives / 20);
  }
  const auto g0 = training_examples(Task::ot_nt, v, tok, 48, 7, 0, 500),
             g1 = training_examples(Task::ot_nt, v, tok, 48, 7, 3, 500);
  ASSERT_EQ(g0.size(), 500u);
  for (size_t i = 0; i < g0.size(); ++i) ASSERT_EQ(g0[i].ids, g1[i].ids);
}

TEST(KjvTasks, NextVerseIsBalancedAndPositivesAreConsecutive) {
  const auto& v = kjv();
  const Tokenizer& tok = trained().tok;
  const int seq_len = 128;
  for (Split split : {Split::test, Split::dev}) {
    const auto ex = next_verse(v, tok, split, seq_len, 99);
    check_layout(ex, seq_len, 2, 2);
    // The verses A with a successor in their chapter, in order; every book has enough verses
    // in each split for a negative, so none is left out.
    std::vector<size_t> as;
    for (size_t i = 0; i + 1 < v.size(); ++i)
      if (kjv_split(v[i].chapter_index) == split && v[i + 1].chapter_index == v[i].chapter_index) as.push_back(i);
    ASSERT_EQ(ex.size(), 2 * as.size()) << split_name(split);
    int64_t pos = 0;
    for (const Example& e : ex) pos += e.label == 1;
    EXPECT_EQ(2 * pos, int64_t(ex.size()));

    std::map<size_t, std::vector<int32_t>> enc;
    auto ids = [&](size_t i) -> const std::vector<int32_t>& {
      auto it = enc.find(i);
      if (it == enc.end()) it = enc.emplace(i, tok.encode(v[i].text)).first;
      return it->second;
    };
    std::vector<std::vector<size_t>> pool(kNumBooks);
    for (size_t i = 0; i < v.size(); ++i)
      if (kjv_split(v[i].chapter_index) == split) pool[size_t(v[i].book)].push_back(i);
    for (size_t k = 0; k < as.size(); ++k) {
      const size_t a = as[k];
      const Example &p = ex[2 * k], &n = ex[2 * k + 1];
      ASSERT_EQ(p.label, 1);
      ASSERT_EQ(n.label, 0);
      ASSERT_EQ(v[a + 1].verse, v[a].verse + 1);
      ASSERT_EQ(p.ids, segment_pair(ids(a), ids(a + 1), seq_len)) << v[a].text;
      // The negative's B is some other verse of the same book and split: find it.
      bool found = false;
      for (size_t b : pool[size_t(v[a].book)]) {
        if (b == a || b == a + 1) continue;
        if (n.ids == segment_pair(ids(a), ids(b), seq_len)) {
          found = true;
          break;
        }
      }
      ASSERT_TRUE(found) << "negative for " << v[a].text << " is not a verse of the same book";
      ASSERT_NE(n.ids, p.ids);
    }
  }
  // Deterministic from the seed; another seed draws other negatives, same positives.
  const auto a = next_verse(v, tok, Split::dev, 32, 5), b = next_verse(v, tok, Split::dev, 32, 5),
             c = next_verse(v, tok, Split::dev, 32, 6);
  ASSERT_EQ(a.size(), c.size());
  int64_t same_neg = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].ids, b[i].ids);
    if (a[i].label == 1)
      ASSERT_EQ(a[i].ids, c[i].ids);
    else
      same_neg += a[i].ids == c[i].ids;
  }
  EXPECT_LT(same_neg, int64_t(a.size()) / 20);
  const auto via = build_task(Task::next_verse, v, tok, Split::dev, 32, 5);
  ASSERT_EQ(via.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(via[i].ids, a[i].ids);
}
