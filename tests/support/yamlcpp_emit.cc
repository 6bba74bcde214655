// The yaml-cpp side of tests/test_output_nighthawk_formats.py: reads a JSON document on stdin
// and writes it as Nighthawk's yaml output format does. Nighthawk calls Envoy's
// MessageUtil::getYamlStringFromMessage with block printing on, which loads the proto3 JSON
// text into a YAML::Node, sets every collection to block style and writes the node with a
// YAML::Emitter; this program does the same with the system's yaml-cpp, so the test can
// check nhbench's own emitter against the real library on any document.
#include <yaml-cpp/yaml.h>

#include <iostream>
#include <iterator>
#include <string>

namespace {

// Block style is set on the node and on every collection below it, as Envoy does.
void setBlockStyle(YAML::Node node) {
  node.SetStyle(YAML::EmitterStyle::Block);
  if (node.IsSequence()) {
    for (YAML::Node child : node) {
      setBlockStyle(child);
    }
  } else if (node.IsMap()) {
    for (auto entry : node) {
      setBlockStyle(entry.second);
    }
  }
}

}  // namespace

int main() {
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  YAML::Node node = YAML::Load(input);
  setBlockStyle(node);
  YAML::Emitter emitter;
  emitter << node;
  std::cout << emitter.c_str();
  return 0;
}
