// The Jinja engine and chat templates. Semantics: each case's expected text is what Jinja2
// (python3-jinja2, in Hugging Face's chat-template environment) renders for it; the whole
// collected set of real templates is compared with Jinja2 by tools/reference/check_chat_templates.py
// (ctest chat_templates). Faults: every malformed or hostile template is a jinja::Error naming
// the problem, never a crash or a hang.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "test_helpers.h"

namespace strata {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* context;  // JSON
  const char* expected;
};

// Expected texts rendered by Jinja2 3.1.2 (python3-jinja2) with trim_blocks and lstrip_blocks.
const Case kCases[] = {
    {"scopes: a loop's set stays in its iteration; an if's does not",
     R"J({% set y = 0 %}{% for x in [1,2] %}{{ y }}{% set y = y + x %}{{ y }}{% endfor %}|{{ y }}{% if true %}{% set z = 5 %}{% endif %}{{ z }})J",
     R"J({})J",
     R"J(0102|05)J"},
    {"namespace carries a value out of a loop",
     R"J({% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m|length %}{% endfor %}{{ ns.n }})J",
     R"J({"messages": ["ab", "cde"]})J",
     R"J(5)J"},
    {"whitespace: trim_blocks, lstrip_blocks, - and +",
     R"J(a
  {% if true %}
  b
  {% endif %}
c {{- ' d ' -}} e
  {%+ if true %}f{% endif %}
{# note #}
g
)J",
     R"J({})J",
     R"J(a
  b
c d e
  fg)J"},
    {"python printing",
     R"J({{ none }}|{{ true }}|{{ 1.0 }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}|{{ 1e-5 }}|{{ [1, 'a', none, 2.5] }}|{{ {'k': [1, "it's"]} }}|{{ 7 / 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 2 ** 10 }})J",
     R"J({})J",
     R"J(None|True|1.0|1e+20|0.30000000000000004|1e-05|[1, 'a', None, 2.5]|{'k': [1, "it's"]}|3.5|-4|2|1024)J"},
    {"strings by code point and their methods",
     R"J({{ 'héllo'[1] }}{{ 'héllo'|length }}{{ 'abc'[::-1] }}|{{ '  x y  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'x</think>\n\ny'.split('</think>')[-1].lstrip('\n') }}|{{ 'Hello'.startswith(('He', 'x')) }}|{{ 'abc'.upper() ~ 'ABC'.lower() ~ 'hello world'.title() }}|{{ 'a-b-c'.replace('-', '+', 1) }})J",
     R"J({})J",
     R"J(é5cba|x y|['a', 'b', '', 'c']|['a', 'b']|y|True|ABCabcHello World|a+b-c)J"},
    {"loop variables and else",
     R"J({% for x in items if x != 'b' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.previtem|default('-') }}{{ loop.cycle('o', 'e') }};{% else %}none{% endfor %}{% for x in [] %}x{% else %}empty{% endfor %})J",
     R"J({"items": ["a", "b", "c", "d"]})J",
     R"J(10TrueFalse33-o;21FalseFalse32ae;32FalseTrue31co;empty)J"},
    {"break and continue",
     R"J({% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %})J",
     R"J({})J",
     R"J(0134)J"},
    {"filters",
     R"J({{ ' t '|trim }}|{{ x|default('d') }}|{{ ''|default('e', true) }}|{{ [3,1,2]|sort|join(',') }}|{{ ['a','A','b']|unique|list }}|{{ {'b': 1, 'a': 2}|dictsort }}|{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}|{{ msgs|rejectattr('role', 'equalto', 'user')|list|length }}|{{ 'a\nb'|indent(2, true) }}|{{ [1,2,3]|sum }}|{{ 3.7|int }}|{{ '42'|int + 1 }}|{{ [1,2]|last }}|{{ 'x'|upper }}|{{ {'a': 1}|items|list }})J",
     R"J({"msgs": [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}]})J",
     R"J(t|d|e|1,2,3|['a', 'b']|[('a', 2), ('b', 1)]|['u1', 'u2']|1|  a
  b|6|3|43|2|X|[('a', 1)])J"},
    {"tojson as Hugging Face's",
     R"J({{ t|tojson }}|{{ t|tojson(indent=2) }}|{{ 'é"\n'|tojson }}|{{ t|tojson(separators=(',', ':'), sort_keys=true) }})J",
     R"J({"t": {"z": 1, "a": [1.5, null, true, "é"], "m": {}}})J",
     R"J({"z": 1, "a": [1.5, null, true, "é"], "m": {}}|{
  "z": 1,
  "a": [
    1.5,
    null,
    true,
    "é"
  ],
  "m": {}
}|"é\"\n"|{"a":[1.5,null,true,"é"],"m":{},"z":1})J"},
    {"tests",
     R"J({{ x is defined }}{{ none is none }}{{ 1 is integer }}{{ true is number }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 3 is odd }}{{ 6 is divisibleby 3 }}{{ 'abc' is lower }}{{ 2 is gt(1) }}{{ 'b' is in('abc') }}{{ x is not defined }})J",
     R"J({})J",
     R"J(FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue)J"},
    {"operators",
     R"J({{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' < 'b' }}{{ 1 < 2 < 3 }}{{ 'x' in 'xyz' }}{{ 'q' not in ['a'] }}{{ 'k' in {'k': 1} }}{{ 1 if false else 2 }}{{ (1 if false) is defined }}{{ 0 or 'alt' }}{{ 'v' and 'w' }}{{ not 0 }}{{ -(3) }}{{ 'a' ~ 1 ~ none }}{{ [1] + [2] }}{{ 'ab' * 2 }})J",
     R"J({})J",
     R"J(TrueTrueTrueTrueTrueTrueTrue2FalsealtwTrue-3a1None[1, 2]abab)J"},
    {"attribute and item access",
     R"J({{ m.role }}{{ m['content'] }}{{ m.missing is defined }}{{ m.get('role') }}{{ m.get('nope', 'dflt') }}{{ l[-1] }}{{ l[5] is defined }}{{ l[1:] }}{{ l.0 }}{% for k, v in m.items() %}{{ k }}={{ v }};{% endfor %})J",
     R"J({"m": {"role": "user", "content": "hi"}, "l": [1, 2, 3]})J",
     R"J(userhiFalseuserdflt3False[2, 3]1role=user;content=hi;)J"},
    {"macros and set blocks",
     R"J({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }}{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]{% filter upper %}shout{% endfilter %})J",
     R"J({})J",
     R"J(Hi A! Hi B?[inner 2]SHOUT)J"},};

jinja::Dict context_of(const char* json) {
  return jinja::from_json(nlohmann::ordered_json::parse(json)).as_dict();
}

TEST(Jinja, RendersAsJinja2Does) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(jinja::Template(c.source).render(context_of(c.context)), c.expected);
  }
}

std::string parse_error(const std::string& source) {
  try {
    jinja::Template t(source);
  } catch (const jinja::Error& e) {
    return e.what();
  }
  return "";
}

std::string render_error(const std::string& source) {
  try {
    jinja::Template(source).render({});
  } catch (const jinja::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Jinja, MalformedTemplatesAreRefusedNamingTheProblemAndLine) {
  EXPECT_EQ(parse_error("a\n{% if x %}b\nc"), "line 2: the block opened here is never closed: expected endif");
  EXPECT_EQ(parse_error("{% for x in y %}"), "line 1: the block opened here is never closed: expected endfor");
  EXPECT_EQ(parse_error("\n\n{{ x | frobnicate }}"), "line 3: unknown filter 'frobnicate'");
  EXPECT_EQ(parse_error("{{ x is frobnicated }}"), "line 1: unknown test 'frobnicated'");
  EXPECT_EQ(parse_error("{% include 'x' %}"), "line 1: unsupported or unexpected tag 'include'");
  EXPECT_EQ(parse_error("{{ 'abc }}"), "line 1: a string is not closed");
  EXPECT_EQ(parse_error("{{ x "), "line 1: a tag is not closed");
  EXPECT_EQ(parse_error("{# x "), "line 1: a comment is not closed");
  EXPECT_EQ(parse_error("{{ (1 + }}"), "line 1: '(' is not closed");
  EXPECT_EQ(parse_error("{{ [1, 2) }}"), "line 1: expected ']', got ')'");
  EXPECT_EQ(parse_error("{{ a b }}"), "line 1: expected the end of the tag, got 'b'");
  EXPECT_EQ(parse_error("{{ 99999999999999999999 }}"), "line 1: integer 99999999999999999999 is too large");
  EXPECT_EQ(parse_error("{{ $ }}"), "line 1: unexpected character '$'");
  EXPECT_EQ(parse_error("{% endif %}"), "line 1: unsupported or unexpected tag 'endif'");
  EXPECT_EQ(parse_error("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"),
            "line 1: expression nested too deeply");
  std::string deep_blocks;
  for (int i = 0; i < 300; ++i) deep_blocks += "{% if x %}";
  EXPECT_EQ(parse_error(deep_blocks), "line 1: blocks nested too deeply");
}

TEST(Jinja, FailuresWhileRenderingNameTheirCause) {
  EXPECT_EQ(render_error("{{ 'a' + 1 }}"), "line 1: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("\n{{ x.y }}"), "line 2: 'x' is undefined");
  EXPECT_EQ(render_error("{{ 1 / 0 }}"), "line 1: division by zero");
  EXPECT_EQ(render_error("{{ none.x }}"), "");  // None.x is undefined, printing nothing
  EXPECT_EQ(render_error("{% for x in 5 %}{% endfor %}"), "line 1: 'int' object is not iterable");
  EXPECT_EQ(render_error("{{ [1]|tojson }}{{ x|tojson }}"),
            "line 1: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(render_error("{% set x = 1 %}{% set x.y = 2 %}"),
            "line 1: cannot assign attribute on non-namespace object");
  EXPECT_EQ(render_error("{% break %}"), "'break' or 'continue' outside a loop");
  try {
    jinja::Template("{{ raise_exception('no system role') }}").render({});
    ADD_FAILURE() << "raise_exception did not raise";
  } catch (const jinja::RaisedException& e) {
    EXPECT_EQ(e.message(), "no system role");
  }
}

// What a hostile template could use to exhaust memory or time ends in an error instead.
TEST(Jinja, RenderingIsBounded) {
  EXPECT_EQ(render_error("{{ range(100000000)|length }}"), "line 1: range too large");
  EXPECT_EQ(render_error("{{ 'x' * 1000000000 }}"), "line 1: a string longer than the template limit");
  EXPECT_EQ(render_error("{% for a in range(3000) %}{% for b in range(3000) %}{% endfor %}{% endfor %}"),
            "line 1: the template runs too long (over its budget of 2000000 steps)");
  EXPECT_EQ(render_error("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"), "line 1: macros nested too deeply");
  EXPECT_EQ(render_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                         "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            "line 1: a string longer than the template limit");
}

TEST(ChatTemplate, ModelsOwnTemplateBuiltinsAndFiles) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}};
  const ChatTemplate chatml = ChatTemplate::select("chatml", "", "<s>", "</s>");
  const ChatPrompt p = chatml.apply(m);
  EXPECT_EQ(p.text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n");
  EXPECT_EQ(p.stop, std::vector<std::string>{"<|im_end|>"});
  EXPECT_EQ(p.format, "chatml");
  EXPECT_EQ(chatml.apply(m, /*add_generation_prompt=*/false).text.find("assistant"), std::string::npos);

  // The model's own template when no override is given; the plain transcript without one.
  const ChatTemplate own = ChatTemplate::select("", "{{ messages[-1]['content'] }}!", "<s>", "</s>");
  EXPECT_EQ(own.name(), "gguf");
  EXPECT_EQ(own.apply(m).text, "Hi!");
  const ChatTemplate plain = ChatTemplate::select("", "", "<s>", "</s>");
  EXPECT_EQ(plain.name(), "plain");
  EXPECT_EQ(plain.apply(m).text, "System: Be brief.\nUser: Hi\nAssistant:");
  EXPECT_EQ(plain.apply(m).stop, std::vector<std::string>{"\nUser:"});

  const ChatTemplate llama3 = ChatTemplate::select("llama3", "", "<|begin_of_text|>", "<|end_of_text|>");
  EXPECT_EQ(llama3.apply(m).text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(llama3.apply(m).stop, std::vector<std::string>{"<|eot_id|>"});

  // A template's own refusal is a ChatTemplateRefusal carrying its message.
  const ChatTemplate gemma = ChatTemplate::select("gemma", "", "<bos>", "<eos>");
  try {
    gemma.apply(m);
    ADD_FAILURE() << "gemma accepted a system message";
  } catch (const ChatTemplateRefusal& e) {
    EXPECT_EQ(std::string(e.what()), "the chat template refused the messages: System role not supported");
  }
  for (const auto& name : ChatTemplate::builtin_names())
    EXPECT_NE(ChatTemplate::builtin_source(name), nullptr) << name;
}

std::string select_error(const std::string& spec, const std::string& model_template) {
  try {
    ChatTemplate::select(spec, model_template, "<s>", "</s>");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplate, ATemplateStrataCannotRunIsRefusedWhenChosen) {
  EXPECT_EQ(select_error("", "{% if %}"),
            "chat template 'gguf' cannot be used: line 1: expected an expression, got the end of the tag");
  EXPECT_EQ(select_error("", "{{ messages | shuffle }}"),
            "chat template 'gguf' cannot be used: line 1: unknown filter 'shuffle'");
  EXPECT_EQ(select_error("", "{{ functions + messages[0].content }}"),
            "chat template 'gguf' cannot render a user's message: line 1: 'functions' is undefined "
            "(--chat-template FILE or a built-in name replaces it)");
  EXPECT_EQ(select_error("/nonexistent/t.jinja", "").substr(0, 60),
            "--chat-template '/nonexistent/t.jinja' is neither a built-in");
  // A template that refuses the trial by its own raise_exception is accepted: that is its policy.
  EXPECT_EQ(select_error("", "{{ raise_exception('system message required') }}"), "");
}

// Reliability round 3 (issue 52): chat templates from a hostile model file (its
// tokenizer.chat_template runs at load and at every request). Each case hung a core, crashed
// or grew the process by gigabytes before its fix; each is now a one-line error naming the
// budget or limit, within the render budget's time.
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
  EXPECT_EQ(render_error("{{ range(100000)|unique|length }}"),
            "line 1: the template runs too long (over its budget of 2000000 steps)");
  EXPECT_EQ(render_error("{% set s = 'x' * 60000000 %}{% for i in range(1000) %}{{ s.find('y') }}{% endfor %}"),
            "line 1: the template runs too long (over its budget of 2000000 steps)");
  EXPECT_EQ(render("{{ [3, 1, 3, 2]|unique|list }}"), "[3, 1, 2]");
}

// A caller may lend a render less than the engine's budgets (the server: an eighth of its
// request memory; the fuzzer: fewer steps).
TEST(HostileTemplate, ACallersLimitsAreBelowTheBudgets) {
  jinja::RenderLimits limits;
  limits.max_steps = 100;
  try {
    jinja::Template("{% for i in range(1000) %}{% endfor %}").render({}, limits);
    ADD_FAILURE() << "rendered";
  } catch (const jinja::Error& e) {
    EXPECT_EQ(std::string(e.what()), "line 1: the template runs too long (over its budget of 100 steps)");
  }
  limits = {};
  limits.max_bytes = 1 << 20;
  try {
    jinja::Template("{{ 'x' * 2000000 }}").render({}, limits);
    ADD_FAILURE() << "rendered";
  } catch (const jinja::Error& e) {
    EXPECT_EQ(std::string(e.what()), "line 1: the template builds more than its budget of 1 MiB");
  }
  EXPECT_EQ(jinja::Template("{{ 'x' * 3 }}").render({}, limits), "xxx");
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
              "long (over its budget of 2000000 steps) (--chat-template FILE or a built-in name "
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
