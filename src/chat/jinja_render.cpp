// The renderer: walks the tree with Jinja2's scoping (an `if` shares its scope; every loop
// iteration and macro call gets its own, so a `set` inside them does not leak out, which is why
// templates use namespace()).
#include <fmt/format.h>

#include <map>

#include "chat/jinja.h"
#include "chat/jinja_budget.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"

namespace strata::jinja {

namespace {

constexpr int kMaxCallDepth = 64;  // nested macro calls
// Expressions, blocks and macro calls inside each other while rendering: the parser bounds a
// tag's own depth, this bounds what macros stack up (and so the renderer's stack).
constexpr int kMaxRenderNesting = 1000;

struct Frame {
  std::map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

FramePtr child_of(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  Renderer(const Dict& context, const RenderLimits& limits)
      : root_(std::make_shared<Frame>()), budget_(limits) {
    const Dict globals = global_functions();
    for (const auto& [k, v] : globals.items()) root_->vars[k] = v;
    for (const auto& [k, v] : context.items()) root_->vars[k] = v;
    // namespace() through the renderer, which empties each one at the end: a namespace holding
    // itself (`set ns.x = ns`, or a list with it) would otherwise be a cycle that never frees.
    const Value make = root_->vars["namespace"];
    root_->vars["namespace"] = Value(Callable{"namespace", [this, make](const CallArgs& a) {
                                                Value ns = make.as_callable().call(a);
                                                namespaces_.push_back(ns);
                                                return ns;
                                              }});
  }
  ~Renderer() {
    for (const Value& ns : namespaces_) ns.namespace_attributes() = Dict();
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string run(const Body& body) {
    const RenderBudget::Scope scope(budget_);
    std::string out;
    if (render(body, child_of(root_), out) != Flow::Normal)
      throw Error("'break' or 'continue' outside a loop");
    return out;
  }

 private:
  void step(int line) {
    try {
      budget_.charge_steps(1);
    } catch (const Error& e) {
      throw Error(e.what(), line);
    }
  }

  // One level deeper in the renderer's own recursion, for the life of an eval or a node.
  struct Nesting {
    Nesting(Renderer& r, int line) : r_(r) {
      if (++r_.nesting_ > kMaxRenderNesting) {
        --r_.nesting_;
        throw Error(fmt::format("the template nests deeper than {} levels while rendering", kMaxRenderNesting), line);
      }
    }
    ~Nesting() { --r_.nesting_; }
    Renderer& r_;
  };

  static void append(std::string& out, const std::string& s, int line) {
    if (out.size() + s.size() > kMaxText) throw Error("the template's output is too long", line);
    charge_bytes(s.size());
    out += s;
  }

  Value lookup(const std::string& name, const FramePtr& frame) const {
    for (const Frame* f = frame.get(); f; f = f->parent.get()) {
      const auto it = f->vars.find(name);
      if (it != f->vars.end()) return it->second;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  CallArgs arguments(const Expr& e, const FramePtr& frame) {
    CallArgs a;
    const size_t n_positional = e.items.size() - e.keywords.size();
    for (size_t i = 0; i < e.items.size(); ++i) {
      Value v = eval(*e.items[i], frame);
      if (i < n_positional) a.positional.push_back(std::move(v));
      else a.keyword.emplace_back(e.keywords[i - n_positional], std::move(v));
    }
    return a;
  }

  Value eval(const Expr& e, const FramePtr& frame) {
    const Nesting nesting(*this, e.line);
    try {
      return eval_unchecked(e, frame);
    } catch (const RaisedException&) {
      throw;
    } catch (const Error& err) {
      if (err.line() > 0) throw;
      throw Error(err.what(), e.line);
    }
  }

  Value eval_unchecked(const Expr& e, const FramePtr& frame) {
    using EK = Expr::Kind;
    switch (e.kind) {
      case EK::Literal: return e.literal;
      case EK::Name: return lookup(e.name, frame);
      case EK::List:
      case EK::Tuple: {
        List l;
        for (const auto& item : e.items) l.push_back(eval(*item, frame));
        return e.kind == EK::Tuple ? Value::tuple(std::move(l)) : Value(std::move(l));
      }
      case EK::Dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value k = eval(*e.items[i], frame);
          if (!k.is_string()) throw Error("dict keys must be strings here, not " + k.type_name());
          d.set(k.as_string(), eval(*e.items[i + 1], frame));
        }
        return Value(std::move(d));
      }
      case EK::Attr: return get_attribute(eval(*e.a, frame), e.name);
      case EK::Item: return get_item(eval(*e.a, frame), eval(*e.b, frame));
      case EK::Slice: {
        const Value obj = eval(*e.a, frame);
        auto part = [&](size_t i) { return e.items[i] ? eval(*e.items[i], frame) : Value::none(); };
        return get_slice(obj, part(0), part(1), part(2));
      }
      case EK::Call: {
        const Value callee = eval(*e.a, frame);
        require_defined(callee);
        if (callee.kind() != Value::Kind::Callable)
          throw Error("'" + callee.type_name() + "' object is not callable");
        Value result = callee.as_callable().call(arguments(e, frame));
        charge_steps(work_units(result));  // what a method or global built, counted whole
        charge_bytes(built_bytes(result));
        return result;
      }
      case EK::Filter: return apply_filter(e.name, eval(*e.a, frame), arguments(e, frame));
      case EK::Test: return Value(apply_test(e.name, eval(*e.a, frame), arguments(e, frame)) != e.negated);
      case EK::Not: return Value(!eval(*e.a, frame).truthy());
      case EK::Neg:
      case EK::Pos: {
        const Value v = eval(*e.a, frame);
        require_defined(v);
        if (e.kind == EK::Pos && (v.is_number() || v.kind() == Value::Kind::Bool)) return v;
        if (v.is_int()) {
          if (v.as_int() == INT64_MIN) throw Error("integer overflow");
          return Value(-v.as_int());
        }
        if (v.kind() == Value::Kind::Bool) return Value(int64_t{v.as_bool() ? -1 : 0});
        if (v.kind() == Value::Kind::Float) return Value(-v.as_float());
        throw Error("bad operand type for unary " + std::string(e.kind == EK::Neg ? "-" : "+") +
                    ": '" + v.type_name() + "'");
      }
      case EK::Binary: return binary_op(e.name, eval(*e.a, frame), eval(*e.b, frame));
      case EK::Compare: {
        Value left = eval(*e.a, frame);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.items[i], frame);
          const std::string& op = e.ops[i];
          bool ok;
          if (op == "==") ok = equal(left, right);
          else if (op == "!=") ok = !equal(left, right);
          else if (op == "in" || op == "notin") ok = contains(right, left) == (op == "in");
          else {
            require_defined(left);
            require_defined(right);
            if (op == "<") ok = less(left, right);
            else if (op == ">") ok = less(right, left);
            else if (op == "<=") ok = !less(right, left);
            else ok = !less(left, right);
          }
          if (!ok) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case EK::And: {
        Value a = eval(*e.a, frame);
        return a.truthy() ? eval(*e.b, frame) : a;
      }
      case EK::Or: {
        Value a = eval(*e.a, frame);
        return a.truthy() ? a : eval(*e.b, frame);
      }
      case EK::Cond:
        if (eval(*e.b, frame).truthy()) return eval(*e.a, frame);
        return e.c ? eval(*e.c, frame) : Value::undefined("the condition was false and there is no else");
    }
    throw Error("an unknown expression");
  }

  void assign(const std::vector<std::string>& names, const Value& v, Frame& frame, int line) {
    if (names.size() == 1) {
      frame.vars[names[0]] = v;
      return;
    }
    const List items = iterate(v);
    if (items.size() != names.size())
      throw Error(fmt::format("cannot unpack {} values into {} names", items.size(), names.size()), line);
    for (size_t i = 0; i < names.size(); ++i) frame.vars[names[i]] = items[i];
  }

  Flow render(const Body& body, const FramePtr& frame, std::string& out) {
    for (const auto& node : body) {
      const Flow f = render(*node, frame, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow render(const Node& n, const FramePtr& frame, std::string& out) {
    const Nesting nesting(*this, n.line);
    try {
      return render_unchecked(n, frame, out);
    } catch (const RaisedException&) {
      throw;
    } catch (const Error& err) {
      if (err.line() > 0) throw;
      throw Error(err.what(), n.line);
    }
  }

  Flow render_unchecked(const Node& n, const FramePtr& frame, std::string& out) {
    step(n.line);
    using NK = Node::Kind;
    switch (n.kind) {
      case NK::Text: append(out, n.text, n.line); return Flow::Normal;
      case NK::Output: append(out, eval(*n.expr, frame).str(), n.line); return Flow::Normal;
      case NK::If:
        for (size_t i = 0; i < n.conditions.size(); ++i)
          if (eval(*n.conditions[i], frame).truthy()) return render(n.bodies[i], frame, out);
        return render(n.else_body, frame, out);
      case NK::For: return render_for(n, frame, out);
      case NK::Set: {
        const Value v = eval(*n.expr, frame);
        if (n.target_object) {
          const Value ns = eval(*n.target_object, frame);
          if (ns.kind() != Value::Kind::Namespace)
            throw Error("cannot assign attribute on non-namespace object", n.line);
          ns.namespace_attributes().set(n.attribute, v);
        } else {
          assign(n.targets, v, *frame, n.line);
        }
        return Flow::Normal;
      }
      case NK::SetBlock: {
        std::string captured;
        if (render(n.body, frame, captured) != Flow::Normal)
          throw Error("'break' or 'continue' inside a set block", n.line);
        frame->vars[n.targets[0]] = Value(std::move(captured));
        return Flow::Normal;
      }
      case NK::Macro: frame->vars[n.text] = macro(n, frame); return Flow::Normal;
      case NK::Break: return Flow::Break;
      case NK::Continue: return Flow::Continue;
      case NK::Generation: return render(n.body, frame, out);
      case NK::FilterBlock: {
        std::string captured;
        const Flow f = render(n.body, frame, captured);
        append(out, apply_filter(n.expr->name, Value(std::move(captured)), arguments(*n.expr, frame)).str(), n.line);
        return f;
      }
    }
    return Flow::Normal;
  }

  Flow render_for(const Node& n, const FramePtr& frame, std::string& out) {
    List items = iterate(eval(*n.expr, frame));
    if (n.filter) {
      List kept;
      for (const auto& item : items) {
        step(n.line);
        auto f = child_of(frame);
        assign(n.targets, item, *f, n.line);
        if (eval(*n.filter, f).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return render(n.else_body, frame, out);
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      step(n.line);
      auto f = child_of(frame);
      assign(n.targets, items[static_cast<size_t>(i)], *f, n.line);
      Dict loop;
      loop.set("index", Value(i + 1));
      loop.set("index0", Value(i));
      loop.set("revindex", Value(length - i));
      loop.set("revindex0", Value(length - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == length - 1));
      loop.set("length", Value(length));
      loop.set("depth", Value(1));
      loop.set("depth0", Value(0));
      if (i > 0) loop.set("previtem", items[static_cast<size_t>(i - 1)]);
      if (i + 1 < length) loop.set("nextitem", items[static_cast<size_t>(i + 1)]);
      loop.set("cycle", Value(Callable{"cycle", [i](const CallArgs& a) {
                          if (a.positional.empty()) throw Error("no items for cycling given");
                          return a.positional[static_cast<size_t>(i) % a.positional.size()];
                        }}));
      f->vars["loop"] = Value(std::move(loop));
      if (render(n.body, f, out) == Flow::Break) break;
    }
    return Flow::Normal;
  }

  // The macro holds its scope weakly: it is stored in that scope, and a strong reference would
  // be a cycle that outlives the render.
  Value macro(const Node& n, const FramePtr& scope) {
    return Value(Callable{n.text, [this, &n, weak = std::weak_ptr<Frame>(scope)](const CallArgs& a) {
                            const FramePtr defined_in = weak.lock();
                            if (!defined_in) throw Error(fmt::format("macro '{}' called after its scope ended", n.text), n.line);
                            if (a.positional.size() > n.targets.size())
                              throw Error(fmt::format("macro '{}' takes not more than {} argument(s)", n.text, n.targets.size()), n.line);
                            if (++depth_ > kMaxCallDepth) throw Error("macros nested too deeply", n.line);
                            auto f = child_of(defined_in);
                            for (size_t i = 0; i < n.targets.size(); ++i) {
                              const Value* given = a.get(i, n.targets[i]);
                              f->vars[n.targets[i]] = given ? *given
                                                      : n.defaults[i] ? eval(*n.defaults[i], f)
                                                                      : Value::undefined("'" + n.targets[i] + "' is undefined");
                            }
                            for (const auto& [k, v] : a.keyword) {
                              bool known = false;
                              for (const auto& t : n.targets) known = known || t == k;
                              if (!known) throw Error(fmt::format("macro '{}' takes no keyword argument '{}'", n.text, k), n.line);
                            }
                            std::string out;
                            if (render(n.body, f, out) != Flow::Normal)
                              throw Error("'break' or 'continue' outside a loop", n.line);
                            --depth_;
                            return Value(std::move(out));
                          }});
  }

  FramePtr root_;
  std::vector<Value> namespaces_;
  RenderBudget budget_;
  int depth_ = 0;    // macro calls
  int nesting_ = 0;  // evals and nodes
};

// Every filter and test a template names must exist: found when the template is chosen, not when
// a request first takes the branch that uses it.
void check_names(const Expr& e) {
  if (e.kind == Expr::Kind::Filter && !is_filter(e.name))
    throw Error("unknown filter '" + e.name + "'", e.line);
  if (e.kind == Expr::Kind::Test && !is_test(e.name))
    throw Error("unknown test '" + e.name + "'", e.line);
  for (const Expr* sub : {e.a.get(), e.b.get(), e.c.get()})
    if (sub) check_names(*sub);
  for (const auto& item : e.items)
    if (item) check_names(*item);
}

void check_names(const Body& body) {
  for (const auto& n : body) {
    for (const Expr* e : {n->expr.get(), n->filter.get(), n->target_object.get()})
      if (e) check_names(*e);
    for (const auto& e : n->defaults)
      if (e) check_names(*e);
    for (const auto& e : n->conditions) check_names(*e);
    for (const auto& b : n->bodies) check_names(b);
    check_names(n->body);
    check_names(n->else_body);
  }
}

}  // namespace

Template::Template(const std::string& source)
    : body_(std::make_shared<const Body>(parse(lex(source)))) {
  check_names(*body_);
}

std::string Template::render(const Dict& context, const RenderLimits& limits) const {
  return Renderer(context, limits).run(*body_);
}

}  // namespace strata::jinja
