// maitre-sim-dev: runs one experiment until `maitre sim` is wired to the
// same entry point (RunExperimentFile).
//   maitre-sim-dev --config EXP.yaml --out DIR
#include <cstdio>
#include <cstring>
#include <string>

#include "sim/experiment.h"

int main(int argc, char** argv) {
  std::string config, out;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--config") == 0)
      config = argv[i + 1];
    else if (std::strcmp(argv[i], "--out") == 0)
      out = argv[i + 1];
  }
  if (config.empty() || out.empty() || argc != 5) {
    std::fprintf(stderr, "usage: %s --config EXPERIMENT.yaml --out DIR\n", argv[0]);
    return 2;
  }
  absl::Status status = maitre::sim::RunExperimentFile(config, out);
  if (!status.ok()) {
    std::fprintf(stderr, "maitre sim: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
