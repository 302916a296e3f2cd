// ui_seed_hub HUB_URI PROJECT [DIR]: fills a new hub with what the dashboard's browser tests look
// at (tests/ui/*.test.mjs) and prints the ids as one JSON object on stdout. Each view's part is
// a function of seed.h in its own file (seed_<view>.cpp); DIR (default: the current directory)
// is the test run's scratch directory, for files beside the hub.
#include <filesystem>
#include <iostream>

#include "seed.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: ui_seed_hub HUB_URI PROJECT [DIR]\n";
    return 2;
  }
  try {
    using namespace tensorhub::testing;
    tensorhub::Hub hub(argv[1], argv[2]);
    const std::filesystem::path dir = argc == 4 ? argv[3] : ".";
    tensorhub::Json ids = seed_tasks_and_models(hub);
    ids.update(seed_curves(hub, dir));
    ids.update(seed_try(hub, dir));
    ids.update(seed_searches(hub, dir));
    ids.update(seed_graph(hub, dir));
    ids.update(seed_projector(hub, dir));
    std::cout << ids.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "ui_seed_hub: " << e.what() << "\n";
    return 1;
  }
}
