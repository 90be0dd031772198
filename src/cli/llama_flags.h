// llama.cpp's flags as its users type them: several letters after one dash (-ngl, -sys, -hf),
// which CLI11 would split into single letters (-sys as -s ys: a bad seed; -hf as -h: help), and
// the long flags strata has no option for. Each becomes strata's option, is dropped where strata
// already behaves so, or is refused naming the flag and what to use instead -- decided before
// CLI11 parses. And "did you mean" for a misspelled flag.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// args: the command line after the program name (args[0] the subcommand). has_option(name):
// whether that subcommand has the long option `name` ("--system"). Returns the arguments with
// llama.cpp's spellings replaced; throws Error naming the first that strata refuses here.
std::vector<std::string> with_strata_spellings(
    const std::vector<std::string>& args, const std::function<bool(std::string_view)>& has_option);

// The known name closest to `typed` ("--top_k" -> "--top-k", "--temprature" -> "--temp"), or
// "" when none is close: at most a third of the typed letters edited, else the typed flag a
// prefix of exactly one name, else the longest name the typed flag starts with.
std::string closest_flag(std::string_view typed, const std::vector<std::string>& names);

}  // namespace strata
