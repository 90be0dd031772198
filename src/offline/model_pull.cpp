#include "offline/model_pull.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/sha256.h"

namespace strata {

namespace {

namespace fs = std::filesystem;

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; }

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

bool ends_with_gguf(const std::string& path) {
  return path.size() > 5 && upper(path.substr(path.size() - 5)) == ".GGUF";
}

// "-00001-of-00003.gguf": one part of a split model.
bool is_split_part(const std::string& name) {
  const size_t of = name.rfind("-of-");
  return of != std::string::npos && of >= 6 && name[of - 6] == '-' &&
         std::all_of(name.begin() + static_cast<long>(of) - 5, name.begin() + static_cast<long>(of), ::isdigit);
}

// The tag as a whole word of the name: not inside a longer one (Q4_K_M is not Q4_K_M_L's).
bool holds_tag(const std::string& name, const std::string& tag) {
  const std::string n = upper(name), t = upper(tag);
  for (size_t at = n.find(t); at != std::string::npos; at = n.find(t, at + 1)) {
    const bool before = at == 0 || !std::isalnum(static_cast<unsigned char>(n[at - 1]));
    const size_t end = at + t.size();
    const bool after = end == n.size() || n[end] == '.' || n[end] == '-';
    if (before && after) return true;
  }
  return false;
}

std::string listing(const std::vector<HubFile>& files) {
  std::string out;
  for (const auto& f : files) out += (out.empty() ? "" : ", ") + base_name(f.path);
  return out.empty() ? "none" : out;
}

uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

// The bytes of a .part already there, into the hash (a resumed download hashes the whole file).
void hash_file(const std::string& path, Sha256& hash) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!in) fail("cannot read '{}'", path);
  std::vector<uint8_t> buffer(1 << 20);
  for (size_t got; (got = std::fread(buffer.data(), 1, buffer.size(), in.get())) > 0;) hash.update(buffer.data(), got);
}

}  // namespace

PullSpec parse_pull_spec(const std::string& spec) {
  const size_t colon = spec.find(':');
  PullSpec p{spec.substr(0, colon), colon == std::string::npos ? "" : spec.substr(colon + 1)};
  const size_t slash = p.repo.find('/');
  const bool repo_ok = slash != std::string::npos && slash > 0 && slash + 1 < p.repo.size() &&
                       p.repo.find('/', slash + 1) == std::string::npos &&
                       std::all_of(p.repo.begin(), p.repo.end(), [](char c) { return c == '/' || is_name_char(c); });
  const bool tag_ok = (colon == std::string::npos || !p.tag.empty()) &&
                      std::all_of(p.tag.begin(), p.tag.end(), is_name_char);
  if (!repo_ok || !tag_ok)
    fail("'{}' is not user/repo[:quant] (for example bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M)", spec);
  return p;
}

std::vector<HubFile> parse_hub_tree(const nlohmann::json& tree) {
  if (!tree.is_array()) fail("the host's file list is not a JSON array");
  std::vector<HubFile> out;
  for (const auto& e : tree) {
    if (!e.is_object() || e.value("type", "") != "file" || !e.contains("path") || !e["path"].is_string()) continue;
    HubFile f;
    f.path = e["path"].get<std::string>();
    if (e.contains("size") && e["size"].is_number_unsigned()) f.size = e["size"].get<uint64_t>();
    if (e.contains("lfs") && e["lfs"].is_object()) {
      const auto& lfs = e["lfs"];
      if (lfs.contains("oid") && lfs["oid"].is_string()) f.sha256 = lfs["oid"].get<std::string>();
      if (lfs.contains("size") && lfs["size"].is_number_unsigned()) f.size = lfs["size"].get<uint64_t>();
    }
    out.push_back(std::move(f));
  }
  return out;
}

HubFile choose_gguf(const std::vector<HubFile>& files, const std::string& tag) {
  std::vector<HubFile> ggufs;
  for (const auto& f : files)
    if (ends_with_gguf(f.path) && upper(base_name(f.path)).find("MMPROJ") == std::string::npos) ggufs.push_back(f);
  if (ggufs.empty()) fail("the repository has no GGUF file (its files: {})", listing(files));
  std::vector<HubFile> fit;
  const std::string wanted = tag.empty() ? "Q4_K_M" : tag;
  for (const auto& f : ggufs)
    if (holds_tag(base_name(f.path), wanted)) fit.push_back(f);
  if (tag.empty() && fit.empty() && ggufs.size() == 1) fit = ggufs;
  if (fit.empty())
    fail("no GGUF file of the repository is {} (its GGUF files: {}); name one with user/repo:QUANT",
         tag.empty() ? "Q4_K_M, the default, and it has several" : "'" + tag + "'", listing(ggufs));
  if (is_split_part(base_name(fit.front().path)))
    fail("'{}' is split into parts; strata reads one-file GGUF models (llama-gguf-split --merge joins them)",
         base_name(fit.front().path));
  if (fit.size() > 1) fail("several GGUF files are '{}': {}; fetch the one you want and pass -m FILE", wanted, listing(fit));
  return fit.front();
}

std::string default_pull_cache() {
  if (const char* c = std::getenv("STRATA_CACHE"); c != nullptr && *c) return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x) return std::string(x) + "/strata";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h) return std::string(h) + "/.cache/strata";
  fail("no cache folder: set STRATA_CACHE (or HOME)");
}

std::string pulled_path(const std::string& cache, const std::string& repo, const std::string& file) {
  std::string name = repo + "_" + file;
  std::replace(name.begin(), name.end(), '/', '_');
  return cache + "/" + name;
}

std::string pull_model(const PullSpec& spec, const PullOptions& o) {
  httplib::Client cli(o.host);
  if (!cli.is_valid()) fail("'{}' is not an http:// or https:// address", o.host);
  cli.set_follow_location(true);
  cli.set_connection_timeout(30);
  cli.set_read_timeout(120);
  httplib::Headers headers = {{"User-Agent", "strata"}};
  const char* env_token = std::getenv("HF_TOKEN");
  const std::string token = !o.token.empty() ? o.token : env_token != nullptr ? env_token : "";
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);

  const auto listed = cli.Get(fmt::format("/api/models/{}/tree/{}?recursive=true", spec.repo, o.revision), headers);
  if (!listed) fail("cannot reach {}: {}", o.host, httplib::to_string(listed.error()));
  if (listed->status == 401 || listed->status == 403)
    fail("{} refuses '{}' ({}): a gated or private repository needs HF_TOKEN", o.host, spec.repo, listed->status);
  if (listed->status == 404) fail("{} has no repository '{}'", o.host, spec.repo);
  if (listed->status != 200) fail("{} answered {} to the file list of '{}'", o.host, listed->status, spec.repo);
  nlohmann::json tree;
  try {
    tree = nlohmann::json::parse(listed->body);
  } catch (const nlohmann::json::exception&) {
    fail("{} answered the file list of '{}' with something that is not JSON", o.host, spec.repo);
  }
  const HubFile file = choose_gguf(parse_hub_tree(tree), spec.tag);

  const std::string cache = o.cache.empty() ? default_pull_cache() : o.cache;
  std::error_code ec;
  fs::create_directories(cache, ec);
  if (ec) fail("cannot create the cache folder '{}': {}", cache, ec.message());
  const std::string dest = pulled_path(cache, spec.repo, file.path);
  if (fs::is_regular_file(dest) && file_bytes(dest) == file.size) return dest;  // checked when it came
  const std::string part = dest + ".part";
  uint64_t have = fs::is_regular_file(part) ? file_bytes(part) : 0;
  if (have > file.size) fs::remove(part), have = 0;
  Sha256 hash;
  if (have > 0) hash_file(part, hash);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(part.c_str(), have > 0 ? "ab" : "wb"), &std::fclose);
  if (!out) fail("cannot write '{}'", part);
  httplib::Headers get_headers = headers;
  if (have > 0) get_headers.emplace("Range", fmt::format("bytes={}-", have));
  int status = 0;
  bool write_failed = false;
  const auto got = cli.Get(
      fmt::format("/{}/resolve/{}/{}", spec.repo, o.revision, file.path), get_headers,
      [&](const httplib::Response& r) {
        status = r.status;
        if (have > 0 && r.status == 200) {  // the host ignored the range: from the start
          out.reset(std::fopen(part.c_str(), "wb"));
          hash = Sha256();
          have = 0;
        }
        return out != nullptr && (r.status == 200 || r.status == 206);
      },
      [&](const char* data, size_t n) {
        if (have + n > file.size || std::fwrite(data, 1, n, out.get()) != n) return !(write_failed = true);
        hash.update(reinterpret_cast<const uint8_t*>(data), n);
        have += n;
        if (o.progress) o.progress(have, file.size);
        return true;
      });
  out.reset();
  if (write_failed) fail("cannot write '{}' (disk full?), or the host sent more than {} bytes", part, file.size);
  if (status != 0 && status != 200 && status != 206) fail("{} answered {} to the download of '{}'", o.host, status, file.path);
  if (!got || have != file.size)
    fail("the download of '{}' stopped at {} of {} bytes{}; run the same command to resume", file.path, have,
         file.size, got ? "" : " (" + httplib::to_string(got.error()) + ")");
  const std::string digest = hash.hex();
  if (!file.sha256.empty() && digest != file.sha256) {
    fs::remove(part, ec);
    fail("'{}' arrived with SHA-256 {} where {} publishes {}; the download was removed", file.path, digest, o.host,
         file.sha256);
  }
  fs::rename(part, dest, ec);
  if (ec) fail("cannot move '{}' into place: {}", part, ec.message());
  return dest;
}

}  // namespace strata
