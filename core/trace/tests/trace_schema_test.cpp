// The C++ recorder (ddph::trace::TraceWriter) against the trace schema (core/trace/trace_schema.json):
// every line it writes is an event of the schema with the schema's fields and types, every event and
// field the schema says it writes ("producers": "cpp") appears, and the reader takes the trace back;
// the same for launch.json (the schema's "launch_record").
// The Python side: python/tests/test_trace_schema.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "ddph/trace/trace.h"
#include "ddph/trace/launch_record.h"
#include "ddph/trace/trace_writer.h"
#include "test_support.h"

namespace {
using nlohmann::json;
namespace trace = ddph::trace;

json loadSchema() {
  std::ifstream in(DDPH_TRACE_SCHEMA);
  EXPECT_TRUE(in) << "cannot read " << DDPH_TRACE_SCHEMA;
  return json::parse(in);
}

bool typeMatches(const std::string& type, const json& v) {
  const auto all = [&v](auto pred) {
    if (!v.is_array()) return false;
    for (const auto& x : v)
      if (!pred(x)) return false;
    return true;
  };
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "integer-list") return all([](const json& x) { return x.is_number_integer(); });
  if (type == "string-list") return all([](const json& x) { return x.is_string(); });
  if (type == "number-list") return all([](const json& x) { return x.is_number(); });
  if (type == "index-list") return v.is_array() || v.is_object();
  if (type == "object") return v.is_object();
  if (type == "object-list") return all([](const json& x) { return x.is_object(); });
  ADD_FAILURE() << "the schema names an unknown type " << type;
  return false;
}

bool writtenByCpp(const json& entry) {
  const auto& p = entry.at("producers");
  return std::find(p.begin(), p.end(), "cpp") != p.end();
}

// Every event the writer knows, each optional field set: the trace of a short DDP run.
void writeEveryEvent(const std::filesystem::path& dir) {
  trace::TraceWriter w(dir, 0, 2, "run", {"prog", "--flag"}, "test 1.0");
  const auto sampler = w.addSampler({"DistributedSampler", 8, "torch-distributed", 2, 0, 7, true,
                                     false});
  w.setEpoch(sampler, 0);
  const auto loader = w.addLoader({sampler, "Tensors", 8, 2, false, false, "samples:ab12"});
  w.startPass({loader, 0, 0, 7, 2, 0, 1, true, false, 8, {{0, "00ff"}}});
  const auto ddp = w.addDdp("Linear", 4);
  const std::vector<ddph::sampler::Index> indices{3, 5};
  w.batch(loader, 0, 0, 2, true, &indices);
  w.forward(ddp, 0, true, true);
  const auto seq = w.enterCollective({"all_reduce", "float32", 4, true, ddp, 0, 0});
  w.collectiveDone(seq);
  w.collectiveDone(w.enterCollective({"broadcast", "int64", 1}));
  w.endPass(loader, 0, 1);
  w.params(ddp, "00ff");
  w.error("RuntimeError", "late");
  w.end(1);
}

TEST(TraceSchema, EveryLineTheCppWriterWritesIsInTheSchema) {
  const json schema = loadSchema();
  std::map<std::string, json> events;
  for (const auto& e : schema.at("events")) events[e.at("name")] = e;
  ddph::test_support::TempDir dir("ddph-trace-schema");
  writeEveryEvent(dir.path());
  std::ifstream in(std::filesystem::path(dir.path()) / "rank-0.jsonl");
  std::map<std::string, std::set<std::string>> written;  // event -> its fields seen
  int lineNo = 0;
  for (std::string text; std::getline(in, text);) {
    const json line = json::parse(text);
    const std::string where = "line " + std::to_string(++lineNo) + ": " + text;
    const auto event = events.find(line.at("ev").get<std::string>());
    ASSERT_NE(event, events.end()) << where;
    std::map<std::string, json> fields;
    for (const auto& f : schema.at("common_fields")) fields[f.at("name")] = f;
    for (const auto& f : event->second.at("fields")) fields[f.at("name")] = f;
    for (const auto& [key, value] : line.items()) {
      const auto f = fields.find(key);
      ASSERT_NE(f, fields.end()) << "field " << key << " is not in the schema, " << where;
      EXPECT_TRUE(typeMatches(f->second.at("type"), value)) << key << ", " << where;
      EXPECT_TRUE(writtenByCpp(f->second)) << key << " is not marked cpp, " << where;
      written[event->first].insert(key);
    }
    for (const auto& [name, f] : fields) {
      if (f.at("required")) {
        EXPECT_TRUE(line.contains(name)) << name << " missing, " << where;
      }
    }
  }
  for (const auto& [name, e] : events) {
    if (!writtenByCpp(e)) continue;
    ASSERT_TRUE(written.count(name)) << "the schema says the C++ writer writes " << name;
    for (const auto& f : e.at("fields")) {
      if (writtenByCpp(f)) {
        EXPECT_TRUE(written[name].count(f.at("name"))) << name << "." << f.at("name");
      }
    }
  }
  // And the reader takes it back.
  const trace::RankTrace t = trace::readRankTrace(std::filesystem::path(dir.path()) / "rank-0.jsonl");
  EXPECT_TRUE(t.ended);
  EXPECT_EQ(t.passes.size(), 1u);
  EXPECT_EQ(t.collectives.at("0").size(), 2u);
}

// What in `object` disagrees with the schema's `fields` (nested entries too); the names written
// into `written` ("ranks.pid" for an entry's).
void expectSchemaFields(const json& fields, const json& object, const std::string& where,
                        std::set<std::string>& written, const std::string& prefix = "") {
  std::map<std::string, json> byName;
  for (const auto& f : fields) byName[f.at("name")] = f;
  for (const auto& [key, value] : object.items()) {
    const auto f = byName.find(key);
    ASSERT_NE(f, byName.end()) << "field " << key << " is not in the schema, " << where;
    EXPECT_TRUE(typeMatches(f->second.at("type"), value)) << key << ", " << where;
    EXPECT_TRUE(writtenByCpp(f->second)) << key << " is not marked cpp, " << where;
    written.insert(prefix + key);
    if (f->second.contains("entries")) {
      for (const auto& entry : value) {
        expectSchemaFields(f->second.at("entries"), entry, where + " " + key, written, key + ".");
      }
    }
  }
  for (const auto& [name, f] : byName) {
    if (f.at("required")) {
      EXPECT_TRUE(object.contains(name)) << name << " missing, " << where;
    }
  }
}

TEST(TraceSchema, LaunchJsonTheCppWriterWritesIsTheSchemas) {
  const json schema = loadSchema().at("launch_record");
  trace::LaunchRecord record;
  record.launcher = "ddp-sim launch";
  record.worldSize = 2;
  record.exitCode = 1;
  record.deadlineS = 30.0;
  record.ranks = {{0, 4711, "exited", 1, 0, false}, {1, 4712, "stopped", 0, 15, true}};
  record.command = {"/usr/bin/python3", "train.py"};
  record.cpu = true;
  record.gpus = 4;
  record.hashDependence = "train.py:32 calls hash()";
  ddph::test_support::TempDir dir("ddph-launch-schema");
  trace::writeLaunchRecord(dir.path(), record);
  const auto file = std::filesystem::path(dir.path()) / schema.at("file").get<std::string>();
  std::ifstream in(file);
  ASSERT_TRUE(in) << "the writer did not write " << file;
  std::set<std::string> written;
  expectSchemaFields(schema.at("fields"), json::parse(in), "launch.json", written);
  for (const auto& f : schema.at("fields")) {
    if (writtenByCpp(f)) {
      EXPECT_TRUE(written.count(f.at("name"))) << f.at("name");
    }
    for (const auto& e : f.value("entries", json::array())) {
      const std::string name = f.at("name").get<std::string>() + "." + e.at("name").get<std::string>();
      if (writtenByCpp(e)) {
        EXPECT_TRUE(written.count(name)) << name;
      }
    }
  }
  // And the reader takes it back.
  const auto back = trace::readLaunchRecord(file);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ranks.size(), 2u);
  EXPECT_TRUE(back->ranks[1].wasStopped);
  EXPECT_EQ(back->gpus, std::optional<int>(4));
  EXPECT_EQ(back->command, record.command);
}

}  // namespace
