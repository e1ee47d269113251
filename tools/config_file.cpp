// --config FILE.json on every subcommand: a JSON object of option values, keyed by the
// subcommand's long option names without dashes ({"epochs": 30, "random-erase": 0.25,
// "set": ["gate=additive"], "json": true}). Its entries become command-line arguments before
// CLI11 parses, except for options the command line gives itself: the command line wins.
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::cli {

namespace {

constexpr size_t kMaxConfigBytes = size_t{1} << 20;
// A config is an object of values and flat arrays; deeper nesting is refused while parsing, as
// the values are walked recursively (a 1 MiB file could nest half a million arrays).
constexpr int kMaxConfigDepth = 64;

bool given(const CLI::Option& opt, const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    for (const std::string& l : opt.get_lnames())
      if (a == "--" + l || a.rfind("--" + l + "=", 0) == 0) return true;
    for (const std::string& s : opt.get_snames())
      if (a.rfind("-" + s, 0) == 0) return true;
  }
  return false;
}

// A key as an error message shows it: 'epochs', or JSON-escaped ("\nope") when it holds a
// control character, so that the message stays one line.
std::string shown(const std::string& key) {
  for (const char c : key)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "'" + key + "'";
}

// One JSON value as the argument(s) of option `flag` (e.g. "--epochs").
void append(std::vector<std::string>& out, const std::string& flag, const CLI::Option& opt, const nlohmann::json& v,
            const std::string& path, const std::string& key) {
  const bool is_flag = opt.get_expected_min() == 0;
  if (v.is_array()) {
    for (const auto& e : v) append(out, flag, opt, e, path, key);
  } else if (v.is_boolean() && is_flag) {
    if (v.get<bool>()) out.push_back(flag);
  } else if (v.is_string()) {
    out.insert(out.end(), {flag, v.get<std::string>()});
  } else if (v.is_number() || v.is_boolean()) {
    out.insert(out.end(), {flag, v.dump()});
  } else {
    fail("failed to read config '", path, "': ", shown(key), " is ", v.type_name(),
         ", expected a number, a string, a boolean or an array of them");
  }
}

}  // namespace

void add_config_option(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({}))
    sub->add_option("--config",
                    "JSON file of options keyed by their long names, e.g. "
                    "{\"epochs\": 30, \"set\": [\"gate=additive\"]}; the command line wins")
        ->type_name("FILE")
        ->expected(1);
}

std::vector<std::string> expand_config(const CLI::App& app, std::vector<std::string> args) {
  const auto find = [&](const std::string& name) -> const CLI::App* {
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->check_name(name)) return sub;
    return nullptr;
  };
  size_t s = 0;  // the subcommand
  while (s < args.size() && !find(args[s])) ++s;
  if (s == args.size()) return args;
  const CLI::App* sub = find(args[s]);
  std::string path;
  for (size_t i = s + 1; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) path = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
  }
  if (path.empty()) return args;
  nlohmann::json config;
  try {
    const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
      if (depth >= kMaxConfigDepth &&
          (event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start))
        fail("failed to read config '", path, "': expected JSON nested at most ", kMaxConfigDepth,
             " levels deep, found deeper nesting");
      return true;
    };
    config = nlohmann::json::parse(read_file(path, kMaxConfigBytes), limit_depth);
  } catch (const nlohmann::json::exception& e) {
    fail("failed to read config '", path, "': not valid JSON (", e.what(), ")");
  }
  if (!config.is_object())
    fail("failed to read config '", path, "': expected a JSON object of options, found ", config.type_name());
  const std::vector<std::string> command_line(args.begin() + long(s) + 1, args.end());
  for (const auto& [key, value] : config.items()) {
    const std::string flag = "--" + key;
    const CLI::Option* opt = key == "config" ? nullptr : sub->get_option_no_throw(flag);
    if (!opt)
      fail("failed to read config '", path, "': ", shown(key), " is not an option of 'gmlp ", sub->get_name(),
           "' (its options: gmlp ", sub->get_name(), " --help)");
    if (!given(*opt, command_line)) append(args, flag, *opt, value, path, key);
  }
  return args;
}

}  // namespace gmlp::cli
