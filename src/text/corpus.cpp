// KJV and plain-text corpora. The KJV parser is strict: every line must be "BookC:V text" with a
// known book abbreviation, the books must come in canonical order with every chapter (the
// chapter counts of the KJV are in the book table) and the verses of each chapter numbered
// 1, 2, 3, ..., and the total must be the 31,102 verses of the KJV; anything else is a one-line
// error naming the input, the line number and what was found.
#include "text/corpus.h"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::text {

namespace {

using G = Genre;
constexpr Testament OT = Testament::old_testament, NT = Testament::new_testament;

constexpr std::array<Book, kNumBooks> kBooks = {{
    {"Genesis", "Ge", 50, OT, G::law},
    {"Exodus", "Exo", 40, OT, G::law},
    {"Leviticus", "Lev", 27, OT, G::law},
    {"Numbers", "Num", 36, OT, G::law},
    {"Deuteronomy", "Deu", 34, OT, G::law},
    {"Joshua", "Josh", 24, OT, G::history},
    {"Judges", "Jdgs", 21, OT, G::history},
    {"Ruth", "Ruth", 4, OT, G::history},
    {"1 Samuel", "1Sm", 31, OT, G::history},
    {"2 Samuel", "2Sm", 24, OT, G::history},
    {"1 Kings", "1Ki", 22, OT, G::history},
    {"2 Kings", "2Ki", 25, OT, G::history},
    {"1 Chronicles", "1Chr", 29, OT, G::history},
    {"2 Chronicles", "2Chr", 36, OT, G::history},
    {"Ezra", "Ezra", 10, OT, G::history},
    {"Nehemiah", "Neh", 13, OT, G::history},
    {"Esther", "Est", 10, OT, G::history},
    {"Job", "Job", 42, OT, G::wisdom},
    {"Psalms", "Psa", 150, OT, G::wisdom},
    {"Proverbs", "Prv", 31, OT, G::wisdom},
    {"Ecclesiastes", "Eccl", 12, OT, G::wisdom},
    {"Song of Solomon", "SSol", 8, OT, G::wisdom},
    {"Isaiah", "Isa", 66, OT, G::prophets},
    {"Jeremiah", "Jer", 52, OT, G::prophets},
    {"Lamentations", "Lam", 5, OT, G::prophets},
    {"Ezekiel", "Eze", 48, OT, G::prophets},
    {"Daniel", "Dan", 12, OT, G::prophets},
    {"Hosea", "Hos", 14, OT, G::prophets},
    {"Joel", "Joel", 3, OT, G::prophets},
    {"Amos", "Amos", 9, OT, G::prophets},
    {"Obadiah", "Obad", 1, OT, G::prophets},
    {"Jonah", "Jonah", 4, OT, G::prophets},
    {"Micah", "Mic", 7, OT, G::prophets},
    {"Nahum", "Nahum", 3, OT, G::prophets},
    {"Habakkuk", "Hab", 3, OT, G::prophets},
    {"Zephaniah", "Zep", 3, OT, G::prophets},
    {"Haggai", "Hag", 2, OT, G::prophets},
    {"Zechariah", "Zec", 14, OT, G::prophets},
    {"Malachi", "Mal", 4, OT, G::prophets},
    {"Matthew", "Mat", 28, NT, G::gospels_acts},
    {"Mark", "Mark", 16, NT, G::gospels_acts},
    {"Luke", "Luke", 24, NT, G::gospels_acts},
    {"John", "John", 21, NT, G::gospels_acts},
    {"Acts", "Acts", 28, NT, G::gospels_acts},
    {"Romans", "Rom", 16, NT, G::epistles},
    {"1 Corinthians", "1Cor", 16, NT, G::epistles},
    {"2 Corinthians", "2Cor", 13, NT, G::epistles},
    {"Galatians", "Gal", 6, NT, G::epistles},
    {"Ephesians", "Eph", 6, NT, G::epistles},
    {"Philippians", "Phi", 4, NT, G::epistles},
    {"Colossians", "Col", 4, NT, G::epistles},
    {"1 Thessalonians", "1Th", 5, NT, G::epistles},
    {"2 Thessalonians", "2Th", 3, NT, G::epistles},
    {"1 Timothy", "1Tim", 6, NT, G::epistles},
    {"2 Timothy", "2Tim", 4, NT, G::epistles},
    {"Titus", "Titus", 3, NT, G::epistles},
    {"Philemon", "Phmn", 1, NT, G::epistles},
    {"Hebrews", "Heb", 13, NT, G::epistles},
    {"James", "Jas", 5, NT, G::epistles},
    {"1 Peter", "1Pet", 5, NT, G::epistles},
    {"2 Peter", "2Pet", 3, NT, G::epistles},
    {"1 John", "1Jn", 5, NT, G::epistles},
    {"2 John", "2Jn", 1, NT, G::epistles},
    {"3 John", "3Jn", 1, NT, G::epistles},
    {"Jude", "Jude", 1, NT, G::epistles},
    {"Revelation", "Rev", 22, NT, G::revelation},
}};

constexpr std::array<int, kNumBooks + 1> make_first_chapters() {
  std::array<int, kNumBooks + 1> first{};
  for (int b = 0; b < kNumBooks; ++b) first[b + 1] = first[b] + kBooks[b].chapters;
  return first;
}
constexpr std::array<int, kNumBooks + 1> kFirstChapter = make_first_chapters();
static_assert(kFirstChapter[kNumBooks] == kKjvChapters, "the KJV has 1,189 chapters");
static_assert(kBooks[kNumOldTestamentBooks - 1].testament == OT && kBooks[kNumOldTestamentBooks].testament == NT,
              "39 Old Testament books, then the New Testament");

// At most n characters of s, for error messages ("..." when cut).
std::string excerpt(std::string_view s, size_t n = 60) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n)) + "...";
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

// Parses a positive decimal number of at most 4 digits; -1 if s is not one.
int parse_small(std::string_view s) {
  if (s.empty() || s.size() > 4 || s[0] == '0') return -1;
  int v = 0;
  for (char c : s) {
    if (!is_digit(c)) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string where(const Verse& v) { return cat(kBooks[v.book].abbrev, v.chapter, ":", v.verse); }

}  // namespace

// ---------------------------------------------------------------------------------------------

Split split_of_index(int64_t index) {
  GMLP_CHECK(index >= 0);
  const int64_t r = index % 10;
  return r == 9 ? Split::test : r == 4 ? Split::dev : Split::train;
}

const char* split_name(Split s) {
  switch (s) {
    case Split::train: return "train";
    case Split::dev: return "dev";
    case Split::test: return "test";
  }
  return "?";
}

Split parse_split(std::string_view name) {
  if (name == "train") return Split::train;
  if (name == "dev") return Split::dev;
  if (name == "test") return Split::test;
  fail("unknown split '", name, "' (expected 'train', 'dev' or 'test')");
}

const Book& book(int b) {
  if (b < 0 || b >= kNumBooks) fail("book index ", b, " is out of range (expected 0..65)");
  return kBooks[b];
}

const std::array<Book, kNumBooks>& books() { return kBooks; }

int book_from_abbrev(std::string_view abbrev) {
  for (int b = 0; b < kNumBooks; ++b)
    if (abbrev == kBooks[b].abbrev) return b;
  return -1;
}

int first_chapter_index(int b) {
  if (b < 0 || b > kNumBooks) fail("book index ", b, " is out of range (expected 0..66)");
  return kFirstChapter[b];
}

const char* genre_name(Genre g) {
  switch (g) {
    case Genre::law: return "law";
    case Genre::history: return "history";
    case Genre::wisdom: return "wisdom";
    case Genre::prophets: return "prophets";
    case Genre::gospels_acts: return "gospels and acts";
    case Genre::epistles: return "epistles";
    case Genre::revelation: return "revelation";
  }
  return "?";
}

const char* testament_name(Testament t) { return t == Testament::old_testament ? "Old Testament" : "New Testament"; }

// ---------------------------------------------------------------------------------------------

std::vector<Verse> parse_kjv(std::string_view text, const std::string& source) {
  std::vector<Verse> verses;
  verses.reserve(kKjvVerses);
  const std::string expected_shape = "a verse 'BookC:V text' such as 'Ge1:1 In the beginning...'";
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    auto bad = [&](const std::string& expected) {
      fail("failed to load the KJV from ", source, ": line ", line_no, ": expected ", expected, ", found '",
           excerpt(line), "'");
    };
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty()) bad(expected_shape);

    // "BookC:V" up to the first space, then the text.
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) bad(expected_shape);
    const std::string_view ref = line.substr(0, space);
    std::string_view rest = line.substr(space + 1);
    while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
    const size_t colon = ref.find(':');
    if (colon == std::string_view::npos) bad(expected_shape);
    size_t digits = colon;
    while (digits > 0 && is_digit(ref[digits - 1])) --digits;
    const std::string_view abbrev = ref.substr(0, digits);
    const int b = book_from_abbrev(abbrev);
    const int chapter = parse_small(ref.substr(digits, colon - digits));
    const int verse = parse_small(ref.substr(colon + 1));
    if (chapter < 0 || verse < 0 || rest.empty()) bad(expected_shape);
    if (b < 0) bad(cat("a book abbreviation as `bible` prints it (Ge, Exo, ..., Rev), not '", abbrev, "'"));

    // Canonical order: the next verse, or verse 1 of the next chapter or book.
    std::string next;
    bool ok;
    if (verses.empty()) {
      ok = b == 0 && chapter == 1 && verse == 1;
      next = "Ge1:1 (the first verse)";
    } else {
      const Verse& p = verses.back();
      if (b == p.book && chapter == p.chapter) {
        ok = verse == p.verse + 1;
      } else if (b == p.book) {
        ok = chapter == p.chapter + 1 && verse == 1;
      } else {
        ok = b == p.book + 1 && p.chapter == kBooks[p.book].chapters && chapter == 1 && verse == 1;
      }
      if (!ok) {
        next = cat(kBooks[p.book].abbrev, p.chapter, ":", p.verse + 1);
        if (p.chapter < kBooks[p.book].chapters)
          next += cat(" or ", kBooks[p.book].abbrev, p.chapter + 1, ":1");
        else if (p.book + 1 < kNumBooks)
          next += cat(" or ", kBooks[p.book + 1].abbrev, "1:1");
        next += cat(" after ", where(p));
      }
    }
    if (!ok) bad(next);
    if (chapter > kBooks[b].chapters)
      bad(cat("at most ", kBooks[b].chapters, kBooks[b].chapters == 1 ? " chapter" : " chapters", " in ",
              kBooks[b].name));
    if (verses.size() >= size_t(kKjvVerses)) bad(cat("the end of the text after ", kKjvVerses, " verses"));
    verses.push_back({b, chapter, verse, kFirstChapter[b] + chapter - 1, std::string(rest)});
  }
  if (verses.empty()) fail("failed to load the KJV from ", source, ": expected ", kKjvVerses, " verses, found no text");
  const Verse& last = verses.back();
  if (last.book != kNumBooks - 1 || last.chapter != kBooks[kNumBooks - 1].chapters ||
      verses.size() != size_t(kKjvVerses))
    fail("failed to load the KJV from ", source, ": expected ", kKjvVerses, " verses ending with Rev22:21, found ",
         verses.size(), verses.size() == 1 ? " verse" : " verses", " ending with ", where(last));
  return verses;
}

std::vector<Verse> load_kjv() {
  const std::string source = cat("the output of '", kBibleCommand, "'");
  // 2>&1: the program's own complaints go into the text, and from there into our error.
  FILE* p = popen(cat(kBibleCommand, " 2>&1").c_str(), "r");
  if (!p) fail("failed to run '", kBibleCommand, "': ", std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0 && int64_t(out.size()) <= kMaxKjvBytes) out.append(buf, n);
  if (int64_t(out.size()) > kMaxKjvBytes) {
    pclose(p);  // the program gets SIGPIPE on its next write
    fail("failed to load the KJV from ", source, ": it printed more than ", kMaxKjvBytes >> 20,
         " MiB, expected the KJV's 4.4 MB");
  }
  const int status = pclose(p);
  if (status == -1) fail("failed to run '", kBibleCommand, "': ", std::strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    fail("failed to run '", kBibleCommand,
         "': the program 'bible' was not found (install the Debian package bible-kjv)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string first = out.substr(0, out.find('\n'));
    fail("failed to run '", kBibleCommand, "': it ",
         WIFEXITED(status) ? cat("exited with status ", WEXITSTATUS(status)) : std::string("was killed by a signal"),
         first.empty() ? std::string() : cat(" ('", excerpt(first, 100), "')"));
  }
  return parse_kjv(out, source);
}

std::vector<Verse> load_kjv_file(const std::string& path) {
  const std::string text = read_file(path, size_t(kMaxKjvBytes));
  return parse_kjv(text, cat("'", path, "'"));
}

std::vector<std::string> verse_texts(const std::vector<Verse>& verses, Split s) {
  std::vector<std::string> out;
  for (const Verse& v : verses)
    if (kjv_split(v.chapter_index) == s) out.push_back(v.text);
  return out;
}

int64_t count_verses(const std::vector<Verse>& verses, Split s) {
  int64_t n = 0;
  for (const Verse& v : verses) n += kjv_split(v.chapter_index) == s;
  return n;
}

// ---------------------------------------------------------------------------------------------

void check_corpus_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    fail("failed to read corpus '", path, "': ", ec ? ec.message() : "no such file");
  if (!std::filesystem::is_regular_file(status)) fail("failed to read corpus '", path, "': not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && int64_t(size) > kMaxCorpusBytes)
    fail("failed to read corpus '", path, "': the file is ", size, " bytes, more than the ", kMaxCorpusBytes >> 20,
         " MiB a corpus may have (SentencePiece learns from all of it in memory: train on a sample)");
}

std::vector<std::string> load_lines(const std::string& path) {
  const std::string text = read_file(path, size_t(kMaxCorpusBytes));
  const int64_t newlines = std::count(text.begin(), text.end(), '\n');
  if (newlines > kMaxCorpusLines)
    fail("failed to load '", path, "': ", newlines, " lines, more than the ", kMaxCorpusLines,
         " a corpus may have (one document or sentence per line)");
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    size_t e = end;
    if (e > pos && text[e - 1] == '\r') --e;
    bool blank = true;
    for (size_t i = pos; i < e && blank; ++i) blank = is_space(text[i]);
    if (!blank) lines.emplace_back(text, pos, e - pos);
    pos = end + 1;
  }
  if (lines.empty())
    fail("failed to load '", path, "': expected text, one document per line, found ",
         text.empty() ? "an empty file" : "only blank lines");
  return lines;
}

std::vector<std::string> lines_in_split(const std::vector<std::string>& lines, Split s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size(); ++i)
    if (line_split(int64_t(i)) == s) out.push_back(lines[i]);
  return out;
}

}  // namespace gmlp::text
