// Reliability round 3 (issue 52): chat templates from a hostile model file (its
// tokenizer.chat_template runs at load and at every request). Each case hung a core, crashed
// or grew the process by gigabytes before its fix; each is now a one-line error naming the
// budget or limit, within the render budget's time.
#include <gtest/gtest.h>

#include <string>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "chat/jinja_budget.h"
#include "test_helpers.h"

namespace strata {
namespace {

std::string render_error(const std::string& source) {
  try {
    jinja::Template(source).render({});
  } catch (const jinja::Error& e) {
    return e.what();
  }
  return "";
}

std::string render(const std::string& source) { return jinja::Template(source).render({}); }

std::string repeated(const std::string& first, const std::string& link, int n) {
  std::string s = first;
  for (int i = 0; i < n; ++i) s += link;
  return s;
}

// Issue 52.4: `**` looped once per unit of the exponent (1 ** 9223372036854775807 for ever).
TEST(HostileTemplate, PowersAreComputedBySquaring) {
  EXPECT_EQ(render("{{ 1 ** 9223372036854775807 }}"), "1");
  EXPECT_EQ(render("{{ 0 ** 9223372036854775807 }}"), "0");
  EXPECT_EQ(render("{{ (-1) ** 9223372036854775807 }}"), "-1");
  EXPECT_EQ(render("{{ (-1) ** 9223372036854775806 }}"), "1");
  EXPECT_EQ(render("{{ 3 ** 5 }} {{ 2 ** 62 }} {{ 7 ** 0 }}"), "243 4611686018427387904 1");
  EXPECT_EQ(render_error("{{ 2 ** 63 }}"), "line 1: integer overflow");
}

// Issue 52.5: a list built around itself 60,000 times crashed on tojson, or when freed.
TEST(HostileTemplate, ValuesNestAtMostTheLimit) {
  const std::string deep =
      "{% set ns = namespace(l=[]) %}{% for i in range(60000) %}{% set ns.l = [ns.l] %}{% endfor %}"
      "{{ ns.l|tojson }}";
  EXPECT_EQ(render_error(deep), "line 1: values nest deeper than 256 levels");
  // A namespace holding itself: printing and JSON are bounded by depth, not by the cycle.
  EXPECT_EQ(render_error("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns|tojson }}"),
            "line 1: values nest deeper than 256 levels");
  EXPECT_EQ(render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "line 1: values nest deeper than 256 levels");
  EXPECT_EQ(render("{{ [[[1]]]|tojson }}"), "[[[1]]]");
}

// Issue 52.6: [60 MB string] * 1000 asked for 60 GB; indent() with a string pad checked its
// size only once built (2 GB).
TEST(HostileTemplate, WhatOperatorsAndFiltersBuildIsCountedBeforeItIsBuilt) {
  EXPECT_EQ(render_error("{% set s = 'x' * 60000000 %}{{ ([s] * 1000)|length }}"),
            "line 1: the template builds more than its budget of 512 MiB");
  EXPECT_EQ(render_error("{{ ('a' * 10000000) * 9223372036854775807 }}"),
            "line 1: a string longer than the template limit");
  EXPECT_EQ(render_error("{{ (['a'] * 1000) * 9223372036854775807 }}"),
            "line 1: a list longer than the template limit");
  EXPECT_EQ(render_error("{{ ('\\n' * 1000000)|indent('x' * 1000) }}"),
            "line 1: a string longer than the template limit");
  EXPECT_EQ(render("{{ 'a\\nb'|indent('> ') }}"), "a\n> b");
}

// Issue 52.11: the step budget did not charge work inside filters (range(1000000)|unique ran
// for an hour).
TEST(HostileTemplate, WorkInsideFiltersIsCharged) {
  EXPECT_EQ(render_error("{{ range(1000000)|unique|length }}"),
            "line 1: the template runs too long (over its budget of 5000000 steps)");
  EXPECT_EQ(render_error("{% set s = 'x' * 60000000 %}{% for i in range(1000) %}{{ s.find('y') }}{% endfor %}"),
            "line 1: the template runs too long (over its budget of 5000000 steps)");
  EXPECT_EQ(render("{{ [3, 1, 3, 2]|unique|list }}"), "[3, 1, 2]");
}

// Issue 52.14: long operator, filter or attribute chains crashed at load (the tree they build is
// as deep as they are long).
TEST(HostileTemplate, LongChainsCountAsNesting) {
  for (const std::string& chain :
       {repeated("{{ 1", " + 1", 20000) + " }}", repeated("{{ 'x'", "|length", 20000) + " }}",
        repeated("{{ a", ".b", 20000) + " }}", repeated("{{ 'a'", " ~ 'a'", 20000) + " }}",
        repeated("{{ x", "[0]", 20000) + " }}", repeated("{{ f", "()", 20000) + " }}",
        repeated("{{ 1", " and 1", 20000) + " }}"}) {
    try {
      jinja::Template t(chain);
      ADD_FAILURE() << chain.substr(0, 20) << " parsed";
    } catch (const jinja::Error& e) {
      EXPECT_EQ(std::string(e.what()).find("expression nested too deeply"), 8u) << e.what();
    }
  }
  EXPECT_EQ(render(repeated("{{ 1", " + 1", 150) + " }}"), "151");
}

// Issue 52.18: range() overflowed int64 (undefined behaviour); Python gives 2 items.
TEST(HostileTemplate, RangeAndSlicesNearInt64sEndsStop) {
  EXPECT_EQ(render("{{ range(9223372036854775799, 9223372036854775807, 5)|list }}"),
            "[9223372036854775799, 9223372036854775804]");
  EXPECT_EQ(render("{{ range(-9223372036854775807, -9223372036854775800, -5)|list }}"), "[]");
  EXPECT_EQ(render("{{ [1, 2, 3][::9223372036854775807] }}"), "[1]");
  EXPECT_EQ(render("{{ [1, 2, 3][::-9223372036854775807] }}"), "[3]");
}

// Issue 52.4/52.11 at load: a model whose template runs past the budget is refused at load with
// one line naming the budget and the way around it (was: `serve` "loading" for ever).
TEST(HostileTemplate, AModelsTemplatePastTheBudgetIsRefusedAtLoad) {
  try {
    ChatTemplate::select("", "{{ range(1000000)|unique|length }}", "<s>", "</s>");
    ADD_FAILURE() << "loaded";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              "chat template 'gguf' cannot render a user's message: line 1: the template runs too "
              "long (over its budget of 5000000 steps) (--chat-template FILE or a built-in name "
              "replaces it)");
  }
  // Issue 52.5: a template that failed only at the second message is found at load too.
  try {
    ChatTemplate::select("",
                         "{% set ns = namespace(l=[]) %}{% for m in messages %}{% if loop.index > 1 %}"
                         "{% for i in range(300) %}{% set ns.l = [ns.l] %}{% endfor %}{% endif %}{% endfor %}",
                         "<s>", "</s>");
    ADD_FAILURE() << "loaded";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cannot render a conversation: line 1: values nest deeper"),
              std::string::npos)
        << e.what();
  }
}

// Issue 52.20: --chat-template /dev/zero was read without a bound (1 GB, then out of memory).
TEST(HostileTemplate, TemplateFilesAreReadAsInputFilesAre) {
  for (const char* special : {"/dev/zero", "/dev/null", "/tmp"}) {
    try {
      ChatTemplate::select(special, "", "<s>", "</s>");
      ADD_FAILURE() << special;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("is neither a built-in template"), std::string::npos) << e.what();
    }
  }
  const std::string big = testing::temp_file("big_template.jinja");
  {
    FILE* f = std::fopen(big.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string chunk(1 << 16, ' ');
    for (int i = 0; i < 20; ++i) std::fwrite(chunk.data(), 1, chunk.size(), f);
    std::fclose(f);
  }
  try {
    ChatTemplate::select(big, "", "<s>", "</s>");
    ADD_FAILURE() << "a 1.25 MiB template was read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("more than the 1048576 bytes strata reads as chat template"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
