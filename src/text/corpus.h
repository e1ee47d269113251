// Text corpora: the King James Bible (the Debian package bible-kjv, read through its `bible`
// program or from a file in the same format) with its book metadata and the deterministic
// chapter split, and a user's own plain-text corpus (one document or sentence per line).
//
// The split (both corpora): number the units in order from 0 (KJV: the 1,189 chapters in book
// order; plain text: the non-empty lines); index % 10 == 9 is test, index % 10 == 4 is dev,
// everything else train. For the KJV that is 118 test, 119 dev and 952 train chapters.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gmlp::text {

// ---------------------------------------------------------------------------------------------
// Splits

enum class Split { train, dev, test };

// The %10 rule above on a unit's index (>= 0).
Split split_of_index(int64_t index);
inline Split kjv_split(int chapter_index) { return split_of_index(chapter_index); }
inline Split line_split(int64_t line_index) { return split_of_index(line_index); }
const char* split_name(Split s);  // "train", "dev", "test"
// "train" / "dev" / "test"; anything else throws gmlp::Error naming the accepted values.
Split parse_split(std::string_view name);

// ---------------------------------------------------------------------------------------------
// The books of the (Protestant, 66-book) canon in canonical order

enum class Testament { old_testament, new_testament };
enum class Genre { law, history, wisdom, prophets, gospels_acts, epistles, revelation };
inline constexpr int kNumBooks = 66, kNumOldTestamentBooks = 39, kNumGenres = 7;
inline constexpr int kKjvChapters = 1189, kKjvVerses = 31102;

struct Book {
  const char* name;    // "Genesis", ..., "Song of Solomon", ..., "Revelation"
  const char* abbrev;  // as `bible` prints it: "Ge", "Exo", ..., "1Sm", ..., "Rev"
  int chapters;        // in the KJV
  Testament testament;
  Genre genre;
};

// Book b (0..65); throws gmlp::Error for any other b.
const Book& book(int b);
const std::array<Book, kNumBooks>& books();
// The index of `abbrev` (as `bible` prints it), or -1.
int book_from_abbrev(std::string_view abbrev);
// chapter_index of chapter 1 of book b (0..65); first_chapter_index(66) = 1189.
int first_chapter_index(int b);
const char* genre_name(Genre g);          // "law", "history", "wisdom", "prophets", "gospels and acts",
                                          // "epistles", "revelation"
const char* testament_name(Testament t);  // "Old Testament", "New Testament"

// ---------------------------------------------------------------------------------------------
// The KJV

struct Verse {
  int book;           // 0..65, canonical order
  int chapter;        // 1-based within the book
  int verse;          // 1-based within the chapter
  int chapter_index;  // 0..1188 over the whole Bible
  std::string text;   // the verse without its "BookC:V " prefix or trailing white space
};

// The command load_kjv() runs.
inline constexpr const char* kBibleCommand = "bible -f Gen1:1-Rev22:21";

// Runs kBibleCommand (popen) and parses its output. Throws a one-line gmlp::Error if the program
// is missing (install the Debian package bible-kjv), fails, or prints anything but the 31,102
// verses of the 66 books in order.
std::vector<Verse> load_kjv();

// The same from a file holding that output: one verse a line, "BookC:V text" (e.g.
// "Ge1:1 In the beginning God created the heaven and the earth."), every verse of every book in
// order. Throws a one-line gmlp::Error naming the file (and the line) if it is missing,
// unreadable or has the wrong shape or count.
std::vector<Verse> load_kjv_file(const std::string& path);

// The parser both use; `source` names the input in error messages.
std::vector<Verse> parse_kjv(std::string_view text, const std::string& source);

// The texts of the verses in split s, in order.
std::vector<std::string> verse_texts(const std::vector<Verse>& verses, Split s);
// The number of verses in split s.
int64_t count_verses(const std::vector<Verse>& verses, Split s);

// ---------------------------------------------------------------------------------------------
// Plain text

// The limits on a plain-text corpus, checked before it is read: SentencePiece learns its
// vocabulary from every line in memory, and each line costs a string besides its bytes.
inline constexpr int64_t kMaxCorpusBytes = int64_t{1} << 30;  // 1 GiB
inline constexpr int64_t kMaxCorpusLines = int64_t{1} << 24;  // 16,777,216
// The most `bible` may print: the KJV is 4.4 MB.
inline constexpr int64_t kMaxKjvBytes = int64_t{64} << 20;

// Checks, without reading it, that `path` is a regular file of at most kMaxCorpusBytes; throws a
// one-line gmlp::Error naming it otherwise.
void check_corpus_file(const std::string& path);

// The non-empty lines of a UTF-8 text file (one document or sentence per line; '\r' before '\n'
// and lines of only white space are dropped). Throws a one-line gmlp::Error naming the file if
// it is missing, unreadable, larger than kMaxCorpusBytes, has more than kMaxCorpusLines lines or
// holds no text.
std::vector<std::string> load_lines(const std::string& path);

// The lines whose index (in the vector) falls in split s.
std::vector<std::string> lines_in_split(const std::vector<std::string>& lines, Split s);

}  // namespace gmlp::text
