// Engine construction for the C++ tests: a failed create stops the test case with its status.
#pragma once

#include <memory>
#include <utility>

#include "check.hpp"
#include "vecgraph/engine.hpp"

namespace vecgraph_test {

inline std::unique_ptr<vecgraph::Engine> create_engine(const vecgraph::EngineConfig& config) {
    auto created = vecgraph::Engine::create(config);
    REQUIRE(created.ok());
    return std::move(created).value();
}

}  // namespace vecgraph_test
