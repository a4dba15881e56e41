#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"maitre: model-less inference serving"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
